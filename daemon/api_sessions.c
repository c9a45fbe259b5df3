/* api_sessions.c: /v1/sessions: create, list, get, patch, delete and
 * keepalive. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>

#include "api_requests.h"
#include "clock.h"
#include "json.h"
#include "metrics.h"
#include "session_json.h"
#include "snapshot.h"
#include "xalloc.h"

static void reply_session(struct call *c, int status, const struct session *s)
{
	AUTOGEN yajl_gen g = json_gen_new();
	session_to_json(s, g, false);
	api_reply(c, status, g, NULL);
}

/* What a create carries to its end: a snapshot to restore, or a
 * workspace whose latest snapshot is restored. */
struct create_ctx {
	struct call *c;
	char *restore;
	char *workspace;
	bool durable;
};

static void create_ctx_free(struct create_ctx *x)
{
	free(x->restore);
	free(x->workspace);
	free(x);
}

static void discarded(const struct err *e, void *arg)
{
	(void)e;
	(void)arg;
}

static void created_cb(const struct session *s, const struct err *e, void *arg)
{
	struct create_ctx *x = arg;
	struct call *c = x->c;
	bool durable = x->durable;
	AUTOFREE char *restore = x->restore;
	AUTOFREE char *workspace = x->workspace;
	x->restore = x->workspace = NULL;
	create_ctx_free(x);
	api_audit_session(c, "session_create", s && !e ? s->id : NULL, e);
	if (e) {
		c->api->create_failures++;
		api_reply(c, 0, NULL, e);
		return;
	}
	c->api->creates++;
	api_quota_session_created(c, s);
	metrics_count_create(c->api->metrics, c->tenant,
			     c->pool_hit ? METRICS_CREATE_POOL_HIT : METRICS_CREATE_POOL_MISS,
			     (double)(clock_mono_us() - c->op_start_us) / 1e6);
	char loc[64];
	snprintf(loc, sizeof(loc), "/v1/sessions/%s", s->id);
	http_req_add_header(c->req, "Location", loc);
	if (durable) {
		struct err *re = NULL;
		if (api_snapshots_restore(c, s, restore, restore ? NULL : workspace, &re) == 0)
			return;
		struct err *de = NULL;
		if (manager_discard(c->api->mgr, s->id, c->tenant, discarded, NULL, &de) < 0)
			err_free(de);
		api_reply(c, 0, NULL, re);
		err_free(re);
		return;
	}
	reply_session(c, 201, s);
}

static void sr_free(void *arg)
{
	session_request_release(arg);
	free(arg);
}

/* Within the tenant's quotas (a slot reserved, api_quota_gate.c): create. */
static void create_admitted(struct call *c, void *arg)
{
	struct session_request *sr = arg;
	struct err *e = NULL;
	/* A create the warm pool serves counts a hit before manager_create
	 * returns: the cheapest way to label its latency. */
	size_t ready;
	uint64_t hits_before, hits_after, misses;
	manager_pool_stats(c->api->mgr, &ready, &hits_before, &misses);
	c->op_start_us = clock_mono_us();
	struct create_ctx *x = xcalloc(1, sizeof(*x));
	x->c = c;
	x->durable = (sr->set & (SRQ_RESTORE | SRQ_WORKSPACE)) != 0;
	x->restore = sr->restore ? xstrdup(sr->restore) : NULL;
	x->workspace = sr->workspace ? xstrdup(sr->workspace) : NULL;
	if (x->durable && c->api->snapshots == NULL) {
		create_ctx_free(x);
		api_fail(c, ERR_UNAVAILABLE, "snapshots are off on this node: no restore");
	} else if (sr->restore && !snapshot_id_valid(sr->restore)) {
		create_ctx_free(x);
		api_fail(c, ERR_BAD_REQUEST, "restore: '%.64s' is not a snapshot id", sr->restore);
	} else if (manager_create(c->api->mgr, sr, c->tenant, created_cb, x, &e) < 0) {
		create_ctx_free(x);
		api_audit_session(c, "session_create", NULL, e);
		api_reply(c, 0, NULL, e);
		err_free(e);
	} else {
		manager_pool_stats(c->api->mgr, &ready, &hits_after, &misses);
		c->pool_hit = hits_after != hits_before;
	}
	sr_free(sr);
}

static void create_body(struct call *c, const char *body, size_t len)
{
	struct err *e = NULL;
	struct session_request *sr = xcalloc(1, sizeof(*sr));
	if (api_parse_session_body(body, len, sr, &e) < 0) {
		api_reply(c, 0, NULL, e);
		err_free(e);
		sr_free(sr);
		return;
	}
	/* Reserved before the manager sees it: a refused create never touches
	 * the warm pool. */
	struct api_quota_ask ask = {
	    .session = true,
	    .memory_mb = sr->set & SRQ_MEMORY ? sr->limits.memory_mb : c->api->cfg->memory_mb,
	    .disk_mb = sr->set & SRQ_DISK ? sr->limits.disk_mb : c->api->cfg->disk_mb,
	};
	api_quota_admit(c, &ask, create_admitted, sr, sr_free);
}

void api_sessions_create(struct call *c)
{
	api_read_body(c, create_body);
}

static void list_one(const struct session *s, void *arg)
{
	session_to_json(s, arg, false);
}

void api_sessions_list(struct call *c)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "sessions");
	jg_arr(g);
	manager_foreach(c->api->mgr, c->tenant, list_one, g);
	jg_arr_end(g);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

void api_sessions_get(struct call *c)
{
	const struct session *s = manager_get(c->api->mgr, c->id, c->tenant);
	if (s)
		reply_session(c, 200, s);
	else
		api_missing(c);
}

static void patch_body(struct call *c, const char *body, size_t len)
{
	struct err *e = NULL;
	struct session_request sr;
	int rc = api_parse_patch_body(body, len, &sr, &e);
	if (rc == 0)
		rc = manager_patch(c->api->mgr, c->id, c->tenant, &sr, &e);
	session_request_release(&sr);
	if (rc < 0)
		api_fail_session(c, e);
	else
		reply_session(c, 200, manager_get(c->api->mgr, c->id, c->tenant));
}

void api_sessions_patch(struct call *c)
{
	api_read_body(c, patch_body);
}

static void deleted_cb(const struct err *e, void *arg)
{
	api_audit_session(arg, "session_delete", NULL, e);
	api_reply(arg, 204, NULL, e);
}

void api_sessions_delete(struct call *c)
{
	struct err *e = NULL;
	if (manager_delete(c->api->mgr, c->id, c->tenant, deleted_cb, c, &e) < 0) {
		api_audit_session(c, "session_delete", NULL, e);
		api_fail_session(c, e);
	}
}

void api_sessions_keepalive(struct call *c)
{
	struct err *e = NULL;
	if (manager_keepalive(c->api->mgr, c->id, c->tenant, &e) < 0) {
		err_free(e);
		api_missing(c);
		return;
	}
	reply_session(c, 200, manager_get(c->api->mgr, c->id, c->tenant));
}
