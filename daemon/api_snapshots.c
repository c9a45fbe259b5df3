/* api_snapshots.c: durable workspaces (docs/api.md, Snapshots):
 * POST /v1/sessions/{id}/snapshots, GET /v1/snapshots, GET and DELETE
 * /v1/snapshots/{id}, GET /v1/workspaces; and the restore step of a
 * session create (api_sessions.c calls api_snapshots_restore).
 *
 * The records come from Redis: each is parsed and written again, so an
 * answer is valid JSON whatever Redis holds, and a record that is not an
 * object is skipped. Another tenant's snapshot is answered as one that
 * never existed: the index is asked under the caller's tenant. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_requests.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "session_json.h"
#include "snapshot.h"
#include "xalloc.h"

#define LIST_LIMIT_DEFAULT 100
#define LIST_LIMIT_MAX 1000

static bool snapshots_on(struct call *c)
{
	if (c->api->snapshots)
		return true;
	api_fail(c, ERR_UNAVAILABLE, "snapshots are off on this node");
	return false;
}

/* Each text parsed and written again; one that is not an object is skipped. */
static void gen_records(yajl_gen g, const char *const *json, const size_t *len, size_t n)
{
	jg_arr(g);
	for (size_t i = 0; i < n; i++) {
		AUTOJSON yajl_val v = json_parse(json[i], len[i], NULL);
		if (v && YAJL_IS_OBJECT(v))
			jg_value(g, v);
		else
			log_warn("snapshots: a malformed record in the index; skipped");
	}
	jg_arr_end(g);
}

/* ---- POST /v1/sessions/{id}/snapshots ---- */

static void taken(const struct err *e, int status, const char *json, size_t len, void *arg)
{
	struct call *c = arg;
	if (e) {
		api_fail_session(c, err_new(e->code, "%s", e->message));
		return;
	}
	api_reply_body(c, status, "application/json", json, len);
}

struct take_body {
	char **paths;
	size_t n_paths;
	bool variables;
	char *workspace;
};

static void take_body_clear(struct take_body *b)
{
	for (size_t i = 0; i < b->n_paths; i++)
		free(b->paths[i]);
	free(b->paths);
	free(b->workspace);
}

/* {"paths": [...] | null, "variables": bool, "workspace": "name"}, all optional. */
static int parse_take(const char *body, size_t len, struct take_body *b, struct err **errp)
{
	memset(b, 0, sizeof(*b));
	b->variables = true;
	size_t i = 0;
	while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
		i++;
	if (i == len)
		return 0;
	if (api_body_has_nul(body, len))
		return err_set(errp, ERR_BAD_REQUEST,
			       "body: holds a NUL character (\\u0000), which no field may");
	AUTOJSON yajl_val v = json_parse(body, len, errp);
	if (v == NULL)
		return -1;
	if (YAJL_IS_NULL(v))
		return 0;
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "expected a JSON object, got %s",
			       json_type_name(v));
	for (size_t k = 0; k < v->u.object.len; k++) {
		const char *key = v->u.object.keys[k];
		if (strcmp(key, "paths") && strcmp(key, "variables") && strcmp(key, "workspace"))
			return err_set(
			    errp, ERR_BAD_REQUEST,
			    "unknown field \"%.64s\" (expected paths, variables, workspace)", key);
	}
	if (api_parse_globs(json_get(v, "paths"), "paths", &b->paths, &b->n_paths, errp) < 0)
		return -1;
	yajl_val var = json_get(v, "variables");
	if (var && !YAJL_IS_NULL(var)) {
		if (!YAJL_IS_TRUE(var) && !YAJL_IS_FALSE(var))
			return err_set(errp, ERR_BAD_REQUEST, "variables: expected true or false");
		b->variables = YAJL_IS_TRUE(var);
	}
	yajl_val ws = json_get(v, "workspace");
	if (ws && !YAJL_IS_NULL(ws)) {
		if (!YAJL_IS_STRING(ws) || !session_workspace_valid(ws->u.string))
			return err_set(
			    errp, ERR_BAD_REQUEST,
			    "workspace: a name of 1 to %d letters, digits, '.', '_' or '-' "
			    "(not starting with '.')",
			    SESSION_WORKSPACE_MAX);
		b->workspace = xstrdup(ws->u.string);
	}
	return 0;
}

static void take_body_read(struct call *c, const char *body, size_t len)
{
	struct take_body b;
	struct err *e = NULL;
	int rc = parse_take(body, len, &b, &e);
	if (rc == 0) {
		struct snapshot_options o = {
		    .paths = b.paths,
		    .n_paths = b.n_paths,
		    .variables = b.variables,
		    .workspace = b.workspace,
		};
		rc = snapshot_take(c->api->snapshots, c->id, c->tenant, &o, taken, c, &e);
	}
	take_body_clear(&b);
	if (rc < 0)
		api_fail_session(c, e);
}

void api_snapshots_take(struct call *c)
{
	if (!snapshots_on(c))
		return;
	if (manager_get(c->api->mgr, c->id, c->tenant) == NULL) {
		api_missing(c);
		return;
	}
	api_read_body(c, take_body_read);
}

/* ---- GET /v1/snapshots, /v1/snapshots/{id}, /v1/workspaces ---- */

/* Answer c with {"<key>": [records]}, or e. */
static void reply_records(struct call *c, const char *key, const struct err *e,
			  const char *const *json, const size_t *len, size_t n)
{
	if (e) {
		api_reply(c, 0, NULL, e);
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, key);
	gen_records(g, json, len, n);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

static void listed(const struct err *e, const char *const *json, const size_t *len, size_t n,
		   void *arg)
{
	reply_records(arg, "snapshots", e, json, len, n);
}

void api_snapshots_list(struct call *c)
{
	if (!snapshots_on(c))
		return;
	const char *qs = http_req_query(c->req);
	if (!api_query_decodes(qs)) {
		api_fail(c, ERR_BAD_REQUEST,
			 "a query parameter is not valid percent-encoding or has a NUL byte");
		return;
	}
	long limit = LIST_LIMIT_DEFAULT;
	if (api_query_num(qs, "limit", LIST_LIMIT_DEFAULT, 1, LIST_LIMIT_MAX, &limit) < 0) {
		api_fail(c, ERR_BAD_REQUEST, "limit: expected a whole number from 1 to %d",
			 LIST_LIMIT_MAX);
		return;
	}
	AUTOFREE char *ws = api_query_param(qs, "workspace");
	if (ws && !session_workspace_valid(ws)) {
		api_fail(c, ERR_BAD_REQUEST, "workspace: not a workspace name");
		return;
	}
	snapshot_list(c->api->snapshots, c->tenant, ws, (size_t)limit, listed, c);
}

static void got_one(const struct err *e, const char *const *json, const size_t *len, size_t n,
		    void *arg)
{
	struct call *c = arg;
	if (e) {
		api_reply(c, 0, NULL, e);
		return;
	}
	AUTOJSON yajl_val v = n ? json_parse(json[0], len[0], NULL) : NULL;
	if (v == NULL || !YAJL_IS_OBJECT(v)) {
		if (n)
			log_warn("snapshot %s: a malformed record in the index", c->id);
		api_fail(c, ERR_NOT_FOUND, "no snapshot %s", c->id);
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	jg_value(g, v);
	api_reply(c, 200, g, NULL);
}

void api_snapshots_get(struct call *c)
{
	if (!snapshots_on(c))
		return;
	snapshot_get(c->api->snapshots, c->tenant, c->id, got_one, c);
}

static void deleted(const struct err *e, const char *const *json, const size_t *len, size_t n,
		    void *arg)
{
	(void)json;
	(void)len;
	struct call *c = arg;
	if (e) {
		api_reply(c, 0, NULL, e);
		return;
	}
	if (n == 0) {
		api_fail(c, ERR_NOT_FOUND, "no snapshot %s", c->id);
		return;
	}
	api_reply_body(c, 204, NULL, NULL, 0);
}

void api_snapshots_delete(struct call *c)
{
	if (!snapshots_on(c))
		return;
	snapshot_delete(c->api->snapshots, c->tenant, c->id, deleted, c);
}

static void workspaces_listed(const struct err *e, const char *const *json, const size_t *len,
			      size_t n, void *arg)
{
	reply_records(arg, "workspaces", e, json, len, n);
}

void api_workspaces_list(struct call *c)
{
	if (!snapshots_on(c))
		return;
	snapshot_workspaces(c->api->snapshots, c->tenant, workspaces_listed, c);
}

/* ---- a create's restore ---- */

struct restore_ctx {
	struct call *c;
	char id[SESSION_ID_LEN + 1];
};

/* The session as the create answers it, with "restored" (json) added. */
static void reply_created(struct call *c, const struct session *s, const char *restored,
			  size_t rlen)
{
	AUTOGEN yajl_gen g = json_gen_new();
	session_to_json(s, g, false);
	size_t len;
	const char *text = jg_text(g, &len);
	AUTOJSON yajl_val rv = json_parse(restored, rlen, NULL);
	AUTOGEN yajl_gen out = json_gen_new();
	AUTOJSON yajl_val sv = json_parse(text, len, NULL);
	jg_obj(out);
	for (size_t i = 0; sv && YAJL_IS_OBJECT(sv) && i < sv->u.object.len; i++) {
		jg_str(out, sv->u.object.keys[i]);
		jg_value(out, sv->u.object.values[i]);
	}
	jg_str(out, "restored");
	if (rv)
		jg_value(out, rv);
	else
		jg_null(out);
	jg_obj_end(out);
	api_reply(c, 201, out, NULL);
}

/* The undo's end: nothing to do, and nothing to free, so a daemon that stops
 * before the delete answers (the callback never comes) leaks nothing. */
static void restore_undone(const struct err *e, void *arg)
{
	(void)e;
	(void)arg;
}

static void restored(const struct err *e, int status, const char *json, size_t len, void *arg)
{
	(void)status;
	struct restore_ctx *x = arg;
	struct call *c = x->c;
	struct manager *mgr = c->api->mgr;
	if (e) {
		/* Nothing was applied; the session goes, so that the client
		 * is not left with an empty one it did not ask for. */
		struct err *de = NULL;
		if (manager_delete(mgr, x->id, c->tenant, restore_undone, NULL, &de) < 0)
			err_free(de);
		api_reply(c, 0, NULL, e);
		free(x);
		return;
	}
	AUTOJSON yajl_val rv = json_parse(json, len, NULL);
	const char *ws = json_get_str(rv, "workspace");
	if (ws)
		manager_set_workspace(mgr, x->id, c->tenant, ws);
	const struct session *s = manager_get(mgr, x->id, c->tenant);
	if (s == NULL)
		api_missing(c);
	else
		reply_created(c, s, json, len);
	free(x);
}

int api_snapshots_restore(struct call *c, const struct session *s, const char *snap_id,
			  const char *workspace, struct err **errp)
{
	if (c->api->snapshots == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "snapshots are off on this node");
	struct restore_ctx *x = xcalloc(1, sizeof(*x));
	x->c = c;
	memcpy(x->id, s->id, sizeof(x->id));
	if (snapshot_restore(c->api->snapshots, s->id, c->tenant, snap_id, workspace, restored, x,
			     errp) < 0) {
		free(x);
		return -1;
	}
	return 0;
}
