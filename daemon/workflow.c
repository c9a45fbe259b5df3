/* workflow.c: starting, reloading and stopping the workflow's parts
 * together (workflow.h). */
#include "workflow.h"

#include <stdlib.h>
#include <string.h>

#include "blobstore.h"
#include "fixer_target.h"
#include "http_api.h"
#include "httpc.h"
#include "log.h"
#include "reviews.h"
#include "snapshot.h"
#include "runs.h"
#include "stateless.h"
#include "webhook.h"

/* The webhook, when --review-webhook-url is set: its secret is read now
 * (and on SIGHUP), never while serving. */
static int webhook_start(struct workflow *w, struct event_base *base, const struct config *cfg,
			 struct err **errp)
{
	if (!cfg->review_webhook_url[0])
		return 0;
	char *secret = NULL;
	size_t len = 0;
	if (webhook_read_secret(cfg->review_webhook_secret_file, &secret, &len, errp) < 0)
		return -1;
	w->webhook = webhook_new(base, w->httpc, cfg->review_webhook_url, secret, len, errp);
	explicit_bzero(secret, len);
	free(secret);
	if (w->webhook == NULL)
		return -1;
	log_info("review webhook: %s", cfg->review_webhook_url);
	return 0;
}

/* The store (cfg->store "": a directory under the state dir) and the
 * snapshot engine on it. */
static int snapshots_start(struct workflow *w, struct event_base *base, const struct config *cfg,
			   struct manager *mgr, struct store *st, struct http_api *api,
			   struct err **errp)
{
	char url[4200];
	if (cfg->store && cfg->store[0])
		snprintf(url, sizeof(url), "%s", cfg->store);
	else
		snprintf(url, sizeof(url), "dir:%s/store", cfg->state_dir);
	struct blobstore_options o = {.url = url,
				      .endpoint = cfg->store_endpoint,
				      .region = cfg->store_region,
				      .credentials_file = cfg->store_credentials_file,
				      .timeout_ms = cfg->store_timeout_ms,
				      .retries = (int)cfg->store_retries};
	if ((w->blobs = blobstore_new(base, &o, errp)) == NULL)
		return -1;
	w->snapshots = snapshots_new(
	    &(struct snapshots_deps){
		.base = base, .cfg = cfg, .mgr = mgr, .store = st, .blobs = w->blobs},
	    errp);
	if (w->snapshots == NULL)
		return -1;
	http_api_set_snapshots(api, w->snapshots);
	log_info("snapshots: %s", blobstore_describe(w->blobs));
	return 0;
}

int workflow_start(struct workflow *w, struct event_base *base, const struct config *cfg,
		   struct manager *mgr, struct store *st, struct http_api *api, struct err **errp)
{
	memset(w, 0, sizeof(*w));
	w->httpc = httpc_new(base);
	if ((w->fixers = fixer_targets_new(cfg, errp)) == NULL)
		return -1;
	/* --stateless off: no tier at all (the ladder's rung says so). */
	if (strcmp(cfg->stateless, "off") == 0)
		log_info("stateless tier: off (--stateless off)");
	else if ((w->stateless = stateless_new(base, cfg, errp)) == NULL)
		return -1;
	if (webhook_start(w, base, cfg, errp) < 0)
		return -1;
	w->reviews = reviews_new(base, st, w->webhook, cfg->review_ttl_s);
	w->runs = runs_new(&(struct runs_deps){
	    .base = base,
	    .cfg = cfg,
	    .mgr = mgr,
	    .store = st,
	    .httpc = w->httpc,
	    .stateless = w->stateless,
	    .reviews = w->reviews,
	    .audit = http_api_audit(api),
	    .node = cfg->node,
	});
	if (snapshots_start(w, base, cfg, mgr, st, api, errp) < 0)
		return -1;
	http_api_set_runs(api, w->runs);
	http_api_set_fixers(api, w->fixers);
	http_api_set_webhook(api, w->webhook);
	return 0;
}

static void webhook_reload(struct workflow *w, const struct config *cfg)
{
	if (w->webhook == NULL)
		return;
	char *secret = NULL;
	size_t len = 0;
	struct err *e = NULL;
	if (webhook_read_secret(cfg->review_webhook_secret_file, &secret, &len, &e) < 0) {
		log_warn("SIGHUP: %s; the webhook keeps its previous secret", e->message);
		err_free(e);
		return;
	}
	webhook_set_secret(w->webhook, secret, len);
	explicit_bzero(secret, len);
	free(secret);
	log_info("SIGHUP: review webhook secret re-read");
}

void workflow_reload(struct workflow *w, const struct config *cfg, struct http_api *api)
{
	struct err *e = NULL;
	if (fixer_targets_reload(&w->fixers, cfg, &e) < 0) {
		log_warn("SIGHUP: %s; the fixer rules and keys stay as they were", e->message);
		err_free(e);
	}
	http_api_set_fixers(api, w->fixers);
	webhook_reload(w, cfg);
	if (w->blobs && blobstore_reload(w->blobs, &e) < 0) {
		log_warn("SIGHUP: snapshot store: %s; it keeps its previous credentials",
			 e->message);
		err_free(e);
	}
}

void workflow_close(struct workflow *w)
{
	runs_close(w->runs);
	snapshots_close(w->snapshots);
}

void workflow_free(struct workflow *w)
{
	reviews_free(w->reviews);
	webhook_free(w->webhook);
	stateless_free(w->stateless);
	httpc_free(w->httpc);
	fixer_targets_free(w->fixers);
	runs_free(w->runs);
	snapshots_free(w->snapshots);
	blobstore_free(w->blobs);
	memset(w, 0, sizeof(*w));
}
