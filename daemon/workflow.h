/* workflow.h: the parts of the code-interpreter workflow (docs/workflow.md)
 * that main starts, reloads and stops together: the outgoing HTTP client
 * (the fixer, the review webhook), the fixer rules, the stateless tier, the
 * review queue and its webhook, and the run engine over them.
 *
 * The order matters at the end: workflow_close after http_api_free (the
 * API's waiting calls are answered then, and runs stop calling back), and
 * workflow_free after the manager and the store are freed (answers still on
 * their way to a run are dropped by its tokens, freed last). */
#ifndef CI_WORKFLOW_H
#define CI_WORKFLOW_H

#include <event2/event.h>

#include "config.h"
#include "err.h"

struct http_api;
struct manager;
struct store;
struct blobstore;
struct snapshots;

struct workflow {
	struct httpc *httpc;
	struct fixer_targets *fixers;
	struct stateless *stateless;
	struct webhook *webhook; /* NULL without --review-webhook-url */
	struct reviews *reviews;
	struct runs *runs;
	struct blobstore *blobs;     /* where snapshots go (blobstore.h) */
	struct snapshots *snapshots; /* durable workspaces (snapshot.h) */
};

/* Start them and hand them to api. -1 with *errp when an option or a file
 * they read at start is unusable (the daemon does not start). */
int workflow_start(struct workflow *w, struct event_base *base, const struct config *cfg,
		   struct manager *mgr, struct store *st, struct http_api *api, struct err **errp);

/* SIGHUP: the fixer's key files and the webhook's secret read again; what
 * cannot be read leaves the previous in use (logged). */
void workflow_reload(struct workflow *w, const struct config *cfg, struct http_api *api);

void workflow_close(struct workflow *w);
void workflow_free(struct workflow *w);

#endif
