/* api_events.c: GET /v1/events (session events as NDJSON, to each
 * watcher of the session's tenant) and /v1/admin (orphans, gc, drain). */
#include "api.h"

#include <string.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "xalloc.h"

/* A watcher that falls this far behind is cut off rather than buffered. */
#define WATCHER_BACKLOG (1u << 20)

/* A client of GET /v1/events; it owns its call. */
struct api_watcher {
	struct call *c;
	LIST_ENTRY(api_watcher) link;
};

static void watcher_end(struct api_watcher *w)
{
	LIST_REMOVE(w, link);
	http_req_reply_end(w->c->req);
	api_call_free(w->c);
	free(w);
}

static void watcher_gone(struct http_req *req, void *arg)
{
	(void)req;
	watcher_end(arg);
}

void api_events_on_session(const char *type, const struct session *s, const char *detail, void *arg)
{
	struct http_api *api = arg;
	if (LIST_EMPTY(&api->watchers))
		return;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "type", type);
	jg_kv_time(g, "at", clock_now_ms());
	jg_kv_str(g, "session", s->id);
	jg_kv_str(g, "tenant", s->tenant);
	jg_kv_str(g, "state", session_state_name(s->state));
	jg_kv_str(g, "detail", detail);
	jg_obj_end(g);
	size_t n;
	const char *text = jg_text(g, &n);
	struct api_watcher *w, *next;
	for (w = LIST_FIRST(&api->watchers); w; w = next) {
		next = LIST_NEXT(w, link);
		if (strcmp(s->tenant, w->c->tenant) != 0)
			continue;
		struct http_req *req = w->c->req;
		if (http_req_output_backlog(req) > WATCHER_BACKLOG) {
			log_warn("events: a watcher fell %u bytes behind; disconnecting it",
				 WATCHER_BACKLOG);
			http_req_set_close_cb(req, NULL, NULL);
			http_req_reply_abort(req);
			LIST_REMOVE(w, link);
			api_call_free(w->c);
			free(w);
			continue;
		}
		http_req_reply_chunk(req, text, n);
		http_req_reply_chunk(req, "\n", 1);
	}
}

void api_events_watch(struct call *c)
{
	if (c->sink) { /* not a subcall's: a stream has no sink */
		api_fail(c, ERR_BAD_REQUEST, "the event stream is not served here");
		return;
	}
	if (!api_load_stream_begin(c))
		return; /* over a cap: answered */
	struct api_watcher *w = xcalloc(1, sizeof(*w));
	w->c = c;
	LIST_INSERT_HEAD(&c->api->watchers, w, link);
	http_req_set_close_cb(c->req, watcher_gone, w);
	http_req_reply_start(c->req, 200, "application/x-ndjson", -1);
	/* One line at once, so a client knows the stream is live. */
	static const char hello[] = "{\"type\":\"hello\"}\n";
	http_req_reply_chunk(c->req, hello, sizeof(hello) - 1);
	/* A client of the stream reconnects: at the connection cap, one that
	 * has been silent long may be closed for a newcomer. */
	http_req_set_evictable(c->req);
}

void api_events_end_all(struct http_api *api)
{
	while (!LIST_EMPTY(&api->watchers)) {
		struct api_watcher *w = LIST_FIRST(&api->watchers);
		http_req_set_close_cb(w->c->req, NULL, NULL);
		watcher_end(w);
	}
}

/* ---- admin ---- */

static void orphans_cb(const struct err *e, const char *json, size_t len, void *arg)
{
	struct call *c = arg;
	if (e)
		api_reply(c, 0, NULL, e);
	else
		api_reply_body(c, 200, "application/json", json, len);
}

void api_admin_orphans(struct call *c)
{
	manager_orphans(c->api->mgr, false, orphans_cb, c);
}

static void gc_cb(const struct err *e, const char *json, size_t len, void *arg)
{
	api_audit(arg, "admin_gc", api_audit_outcome(e), NULL);
	orphans_cb(e, json, len, arg);
}

void api_admin_gc(struct call *c)
{
	manager_orphans(c->api->mgr, true, gc_cb, c);
}

void api_admin_drain(struct call *c)
{
	if (c->api->drain_fn)
		c->api->drain_fn(c->api->drain_arg);
	api_audit(c, "admin_drain", "ok", NULL);
	static const char body[] = "{\"status\":\"draining\"}";
	api_reply_body(c, 202, "application/json", body, sizeof(body) - 1);
}

void api_admin_unknown(struct call *c)
{
	api_fail(c, ERR_NOT_FOUND,
		 "no such admin route (GET orphans, POST gc, POST drain, GET audit, POST/GET keys, "
		 "DELETE keys/{id}, GET/PUT tenants/{tenant}/quota, GET tenants/{tenant}/usage)");
}
