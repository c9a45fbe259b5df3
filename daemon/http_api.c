/* http_api.c: routing and JSON for the v1 API. */
#include "http_api.h"

#include <inttypes.h>
#include <sys/queue.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "egress.h"
#include "fdbudget.h"
#include "files.h"
#include "api_requests.h"
#include "http_server.h"
#include "session_json.h"
#include "json.h"
#include "log.h"
#include "xalloc.h"

/* Live output beyond this much unsent data is dropped from the stream (the
 * final result still carries it, capped): a slow client must not make the
 * daemon buffer without bound. */
#define STREAM_BACKLOG_CAP (8u << 20)

struct http_api {
	struct event_base *base;
	const struct config *cfg;
	struct manager *mgr;
	struct docker *docker;
	struct store *store;
	struct egress *egress;
	struct http_server *srv;
	uint64_t requests;
	uint64_t execs[4];
	uint64_t creates, create_failures;
	void (*drain_fn)(void *arg);
	void *drain_arg;
	/* Loop lag: how late a 50 ms tick runs shows whether anything blocks
	 * the loop; the worst since the last scrape goes to /metrics. */
	struct event *tick;
	int64_t tick_due_us;
	int64_t lag_max_us;
	LIST_HEAD(, watcher) watchers;
};

/* A client of GET /v1/events. */
struct watcher {
	struct http_api *api;
	struct http_req *req;
	LIST_ENTRY(watcher) link;
};

/* A watcher that falls this far behind is cut off rather than buffered. */
#define WATCHER_BACKLOG (1u << 20)

/* One request being served, carried through its async steps. */
struct call {
	struct http_api *api;
	struct http_req *req;
	char id[SESSION_ID_LEN + 1];
	const char *tenant;
	bool stream;
	bool stream_dropping;
	int64_t started_us;
};

static const char *const DEFAULT_TENANT = "default";

static struct call *call_new(struct http_api *api, struct http_req *req)
{
	struct call *c = xcalloc(1, sizeof(*c));
	c->api = api;
	c->req = req;
	c->tenant = DEFAULT_TENANT;
	c->started_us = clock_mono_us();
	return c;
}

static void reply_gen(struct http_req *req, int status, yajl_gen g)
{
	size_t len;
	const char *text = jg_text(g, &len);
	http_req_reply(req, status, "application/json", text, len);
}

static void reply_err(struct http_req *req, const struct err *e)
{
	if (e->code == ERR_UNAVAILABLE)
		http_req_add_header(req, "Retry-After", "1");
	if (err_code_status(e->code) >= 500)
		log_warn("%s %s: %s", http_req_method(req), http_req_path(req), e->message);
	http_req_reply_error(req, e->code, e->message);
}

static void reply_session(struct http_req *req, int status, const struct session *s)
{
	AUTOGEN yajl_gen g = json_gen_new();
	session_to_json(s, g, false);
	reply_gen(req, status, g);
}

/* ---- /healthz, /readyz, /metrics ---- */

static void handle_healthz(struct http_api *api, struct http_req *req)
{
	(void)api;
	static const char body[] = "{\"status\":\"ok\"}";
	http_req_reply(req, 200, "application/json", body, sizeof(body) - 1);
}

static void handle_readyz(struct http_api *api, struct http_req *req)
{
	bool docker_ok = docker_reachable(api->docker), redis_ok = store_connected(api->store);
	bool draining = manager_is_draining(api->mgr);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	bool ready = docker_ok && redis_ok && !draining;
	if (ready) {
		jg_kv_str(g, "status", "ready");
	} else {
		char msg[256];
		snprintf(msg, sizeof(msg), "not ready: %s%s%s%s",
			 docker_ok ? "" : "docker engine is not reachable",
			 !docker_ok && !redis_ok ? "; " : "",
			 redis_ok ? "" : "redis is not reachable",
			 !draining ? "" : (docker_ok && redis_ok ? "draining" : "; draining"));
		jg_str(g, "error");
		jg_obj(g);
		jg_kv_str(g, "code", "unavailable");
		jg_kv_str(g, "message", msg);
		jg_obj_end(g);
	}
	jg_str(g, "checks");
	jg_obj(g);
	jg_kv_str(g, "docker", docker_ok ? "ok" : "down");
	jg_kv_str(g, "redis", redis_ok ? "ok" : "down");
	jg_obj_end(g);
	jg_obj_end(g);
	if (!ready)
		http_req_add_header(req, "Retry-After", "1");
	reply_gen(req, ready ? 200 : 503, g);
}

#define TICK_US 50000

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct http_api *api = arg;
	int64_t now = clock_mono_us(), lag = now - api->tick_due_us;
	if (lag > api->lag_max_us)
		api->lag_max_us = lag;
	api->tick_due_us = now + TICK_US;
}

static void handle_metrics(struct http_api *api, struct http_req *req)
{
	double lag_ms = (double)api->lag_max_us / 1000.0;
	api->lag_max_us = 0;
	const struct egress_stats *es = egress_get_stats(api->egress);
	size_t pool_ready;
	uint64_t pool_hits, pool_misses;
	manager_pool_stats(api->mgr, &pool_ready, &pool_hits, &pool_misses);
	char buf[8192];
	int n = snprintf(
	    buf, sizeof(buf),
	    "# HELP ci_sessions Sessions on this node.\n# TYPE ci_sessions gauge\nci_sessions %zu\n"
	    "# HELP ci_http_requests_total HTTP requests served.\n# TYPE ci_http_requests_total "
	    "counter\n"
	    "ci_http_requests_total %" PRIu64 "\n"
	    "# HELP ci_session_creates_total Session creates.\n# TYPE ci_session_creates_total "
	    "counter\n"
	    "ci_session_creates_total{result=\"ok\"} %" PRIu64 "\n"
	    "ci_session_creates_total{result=\"error\"} %" PRIu64 "\n"
	    "# HELP ci_execs_total Executions by status.\n# TYPE ci_execs_total counter\n"
	    "ci_execs_total{status=\"ok\"} %" PRIu64 "\nci_execs_total{status=\"error\"} %" PRIu64
	    "\n"
	    "ci_execs_total{status=\"timeout\"} %" PRIu64
	    "\nci_execs_total{status=\"killed\"} %" PRIu64 "\n"
	    "# HELP ci_up Dependencies reachable (1) or not (0).\n# TYPE ci_up gauge\n"
	    "ci_up{dependency=\"docker\"} %d\nci_up{dependency=\"redis\"} %d\n"
	    "# HELP ci_egress_decisions_total Egress proxy decisions.\n"
	    "# TYPE ci_egress_decisions_total counter\n"
	    "ci_egress_decisions_total{decision=\"allowed\"} %" PRIu64 "\n"
	    "ci_egress_decisions_total{decision=\"denied\"} %" PRIu64 "\n"
	    "ci_egress_decisions_total{decision=\"failed\"} %" PRIu64 "\n"
	    "# HELP ci_egress_closed_total Open proxy connections closed by a PATCH or a session's "
	    "end.\n# TYPE ci_egress_closed_total counter\nci_egress_closed_total %" PRIu64 "\n"
	    "# HELP ci_egress_dns_queries_total DNS queries the egress resolver sent.\n"
	    "# TYPE ci_egress_dns_queries_total counter\nci_egress_dns_queries_total %" PRIu64 "\n"
	    "# HELP ci_pool_size Warm sandboxes ready to be claimed.\n# TYPE ci_pool_size gauge\n"
	    "ci_pool_size %zu\n"
	    "# HELP ci_pool_hits_total Creates served from the warm pool.\n"
	    "# TYPE ci_pool_hits_total counter\nci_pool_hits_total %" PRIu64 "\n"
	    "# HELP ci_pool_misses_total Creates the pool could have served but was empty for.\n"
	    "# TYPE ci_pool_misses_total counter\nci_pool_misses_total %" PRIu64 "\n"
	    "# HELP ci_loop_lag_max_ms Worst event-loop lag since the last scrape.\n"
	    "# TYPE ci_loop_lag_max_ms gauge\nci_loop_lag_max_ms %.3f\n",
	    manager_count(api->mgr), api->requests, api->creates, api->create_failures,
	    api->execs[EXEC_OK], api->execs[EXEC_ERROR], api->execs[EXEC_TIMEOUT],
	    api->execs[EXEC_KILLED], docker_reachable(api->docker) ? 1 : 0,
	    store_connected(api->store) ? 1 : 0, es->allowed, es->denied, es->failed,
	    es->closed_by_policy, es->dns_queries, pool_ready, pool_hits, pool_misses, lag_ms);
	/* What the caps on clients and descriptors did (issue 9, findings 2, 3). */
	const struct http_server_stats *hs = http_server_get_stats(api->srv);
	const struct fdbudget *fb = &fdbudget_daemon;
	if (n > 0 && (size_t)n < sizeof(buf))
		n += snprintf(
		    buf + n, sizeof(buf) - (size_t)n,
		    "# HELP ci_http_refused_total API connections refused or closed by a cap.\n"
		    "# TYPE ci_http_refused_total counter\n"
		    "ci_http_refused_total{reason=\"per_peer\"} %" PRIu64 "\n"
		    "ci_http_refused_total{reason=\"full\"} %" PRIu64 "\n"
		    "ci_http_refused_total{reason=\"emfile\"} %" PRIu64 "\n"
		    "ci_http_refused_total{reason=\"evicted\"} %" PRIu64 "\n"
		    "ci_http_refused_total{reason=\"head_timeout\"} %" PRIu64 "\n"
		    "# HELP ci_fds File descriptors: the soft limit, and in use (estimate).\n"
		    "# TYPE ci_fds gauge\nci_fds{what=\"limit\"} %" PRId64 "\n"
		    "ci_fds{what=\"in_use\"} %" PRId64 "\n"
		    "# HELP ci_fd_refusals_total Work refused by the descriptor budget.\n"
		    "# TYPE ci_fd_refusals_total counter\n"
		    "ci_fd_refusals_total{kind=\"session\"} %" PRIu64 "\n"
		    "ci_fd_refusals_total{kind=\"tunnel\"} %" PRIu64 "\n"
		    "ci_fd_refusals_total{kind=\"http\"} %" PRIu64 "\n",
		    hs->refused_peer, hs->refused_full, hs->refused_emfile, hs->evicted,
		    hs->head_timeouts, fb->limit, fdbudget_in_use(fb), fb->refused[FDBUDGET_KINDS],
		    fb->refused[FDBUDGET_EGRESS], fb->refused[FDBUDGET_HTTP]);
	if (n < 0 || (size_t)n >= sizeof(buf)) {
		http_req_reply_error(req, ERR_INTERNAL, "metrics: the page outgrew its buffer");
		return;
	}
	http_req_reply(req, 200, "text/plain; version=0.0.4", buf, (size_t)n);
}

/* ---- sessions ---- */

static void created_cb(const struct session *s, const struct err *e, void *arg)
{
	struct call *c = arg;
	if (e) {
		c->api->create_failures++;
		reply_err(c->req, e);
	} else {
		c->api->creates++;
		char loc[64];
		snprintf(loc, sizeof(loc), "/v1/sessions/%s", s->id);
		http_req_add_header(c->req, "Location", loc);
		reply_session(c->req, 201, s);
	}
	free(c);
}

static void create_body_cb(struct http_req *req, const char *body, size_t len, void *arg)
{
	struct call *c = arg;
	if (body == NULL) { /* refused; already answered */
		free(c);
		return;
	}
	struct err *e = NULL;
	yajl_val v = NULL;
	bool blank = true;
	for (size_t i = 0; i < len; i++)
		if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t')
			blank = false;
	struct session_request sr;
	if ((!blank && (v = json_parse(body, len, &e)) == NULL) ||
	    api_parse_session_request(v, &sr, &e) < 0) {
		reply_err(req, e);
		err_free(e);
		free(c);
		if (v)
			yajl_tree_free(v);
		return;
	}
	if (v)
		yajl_tree_free(v);
	if (manager_create(c->api->mgr, &sr, c->tenant, created_cb, c, &e) < 0) {
		reply_err(req, e);
		err_free(e);
		free(c);
	}
	session_request_release(&sr);
}

static void list_one(const struct session *s, void *arg)
{
	session_to_json(s, arg, false);
}

static void handle_list(struct http_api *api, struct http_req *req)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "sessions");
	jg_arr(g);
	manager_foreach(api->mgr, DEFAULT_TENANT, list_one, g);
	jg_arr_end(g);
	jg_obj_end(g);
	reply_gen(req, 200, g);
}

static void missing_cb(const struct err *e, void *arg)
{
	struct call *c = arg;
	reply_err(c->req, e);
	free(c);
}

/* Answer for an id that is not live here: 410 with the tombstone, or 404. */
static void reply_missing(struct call *c)
{
	manager_explain_missing(c->api->mgr, c->id, missing_cb, c);
}

static void deleted_cb(const struct err *e, void *arg)
{
	struct call *c = arg;
	if (e)
		reply_err(c->req, e);
	else
		http_req_reply(c->req, 204, NULL, NULL, 0);
	free(c);
}

static void patch_body_cb(struct http_req *req, const char *body, size_t len, void *arg)
{
	struct call *c = arg;
	if (body == NULL) {
		free(c);
		return;
	}
	struct err *e = NULL;
	struct session_request sr = {0};
	yajl_val v = json_parse(body, len, &e);
	int rc = v ? api_parse_patch_request(v, &sr, &e) : -1;
	if (v)
		yajl_tree_free(v);
	if (rc == 0)
		rc = manager_patch(c->api->mgr, c->id, c->tenant, &sr, &e);
	session_request_release(&sr);
	if (rc < 0 && e->code == ERR_NOT_FOUND) {
		err_free(e);
		reply_missing(c);
		return;
	}
	if (rc < 0) {
		reply_err(req, e);
		err_free(e);
	} else {
		reply_session(req, 200, manager_get(c->api->mgr, c->id, c->tenant));
	}
	free(c);
}

/* ---- exec ---- */

static void exec_event_cb(const char *type, const char *data, size_t len, const char *extra,
			  void *arg)
{
	struct call *c = arg;
	if (http_req_client_gone(c->req))
		return;
	if (http_req_output_backlog(c->req) > STREAM_BACKLOG_CAP) {
		c->stream_dropping = true;
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "type", type);
	if (strcmp(type, "display") == 0) {
		jg_kv_str(g, "mime", extra);
		jg_str(g, "data");
		jg_strn(g, data, len);
	} else {
		jg_str(g, "text");
		jg_strn(g, data, len);
	}
	jg_obj_end(g);
	size_t n;
	const char *text = jg_text(g, &n);
	http_req_reply_chunk(c->req, text, n);
	http_req_reply_chunk(c->req, "\n", 1);
}

static void exec_done_cb(const struct exec_result *r, const struct err *e, void *arg)
{
	struct call *c = arg;
	if (r)
		c->api->execs[r->status]++;
	if (!c->stream) {
		if (e) {
			reply_err(c->req, e);
		} else {
			AUTOGEN yajl_gen g = json_gen_new();
			exec_result_to_json(r, g);
			reply_gen(c->req, 200, g);
		}
		free(c);
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	if (e) {
		jg_obj(g);
		jg_kv_str(g, "type", "error");
		jg_str(g, "error");
		jg_obj(g);
		jg_kv_str(g, "code", err_code_name(e->code));
		jg_kv_str(g, "message", e->message);
		jg_obj_end(g);
		jg_obj_end(g);
	} else {
		/* The result event is the exec result with a type member first. */
		exec_result_to_json(r, g);
	}
	size_t n;
	const char *text = jg_text(g, &n);
	if (!e && n > 1) {
		http_req_reply_chunk(c->req, "{\"type\":\"result\",", 17);
		http_req_reply_chunk(c->req, text + 1, n - 1);
	} else {
		http_req_reply_chunk(c->req, text, n);
	}
	http_req_reply_chunk(c->req, "\n", 1);
	http_req_reply_end(c->req);
	free(c);
}

static void exec_body_cb(struct http_req *req, const char *body, size_t len, void *arg)
{
	struct call *c = arg;
	if (body == NULL) { /* refused; already answered */
		free(c);
		return;
	}
	struct err *e = NULL;
	struct exec_request xr;
	if (api_parse_exec_request(body, len, false, &xr, &e) < 0)
		goto fail;
	c->stream = xr.stream;
	if (manager_exec(c->api->mgr, c->id, c->tenant, xr.code, xr.len, xr.timeout_s,
			 c->stream ? exec_event_cb : NULL, exec_done_cb, c, &e) < 0) {
		exec_request_release(&xr);
		if (e->code == ERR_NOT_FOUND) {
			err_free(e);
			reply_missing(c);
			return;
		}
		goto fail;
	}
	exec_request_release(&xr);
	if (c->stream)
		http_req_reply_start(req, 200, "application/x-ndjson", -1);
	return;
fail:
	reply_err(req, e);
	err_free(e);
	free(c);
}

static bool method_is(struct http_req *req, const char *m)
{
	return strcmp(http_req_method(req), m) == 0;
}

static void reply_method(struct http_req *req, const char *allowed)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "method %.16s is not allowed here; use %s", http_req_method(req),
		 allowed);
	http_req_add_header(req, "Allow", allowed);
	http_req_reply_error(req, ERR_BAD_REQUEST, msg);
}

/* ---- files ---- */

/* A files-API request in flight. Freed right after its single reply. */
struct xfer {
	struct http_api *api;
	struct http_req *req;
	struct file_op *op;
	char *path;
	int64_t limit;    /* PUT: the session's disk size */
	int64_t received; /* PUT */
	int64_t size;     /* GET: announced by the sandbox */
	int64_t sent;     /* GET */
	bool started;     /* GET: the 200 head is out */
};

#define DOWNLOAD_BACKLOG (1024 * 1024)

static void xfer_free(struct xfer *x)
{
	free(x->path);
	free(x);
}

static void xfer_client_gone(struct http_req *req, void *arg)
{
	struct xfer *x = arg;
	if (x->op)
		files_cancel(x->op);
	x->op = NULL;
	if (x->started)
		http_req_reply_abort(req);
	else
		http_req_reply_error(req, ERR_BAD_REQUEST, "client went away");
	xfer_free(x);
}

static void put_writable(void *arg)
{
	struct xfer *x = arg;
	http_req_resume_body(x->req);
}

static void put_done(const struct err *e, int64_t size, yajl_val answer, void *arg)
{
	(void)answer;
	struct xfer *x = arg;
	x->op = NULL;
	if (e) {
		reply_err(x->req, e);
	} else {
		AUTOGEN yajl_gen g = json_gen_new();
		jg_obj(g);
		jg_kv_str(g, "path", x->path);
		jg_kv_int(g, "size", size);
		jg_obj_end(g);
		reply_gen(x->req, 201, g);
	}
	xfer_free(x);
}

static void put_chunk(struct http_req *req, const char *data, size_t len,
		      enum http_body_state state, void *arg)
{
	struct xfer *x = arg;
	if (state == HTTP_BODY_FAILED) {
		if (x->op)
			files_cancel(x->op);
		xfer_free(x);
		return;
	}
	if (state == HTTP_BODY_END) {
		files_put_end(x->op);
		return;
	}
	x->received += (int64_t)len;
	if (x->received > x->limit) {
		files_cancel(x->op);
		x->op = NULL;
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "upload exceeds the session's disk of %lld MiB (disk_mb)",
			 (long long)(x->limit >> 20));
		http_req_reply_error(req, ERR_PAYLOAD_TOO_LARGE, msg);
		xfer_free(x);
		return;
	}
	if (files_put_data(x->op, data, len))
		http_req_pause_body(req);
}

static void get_drained(struct http_req *req, void *arg)
{
	(void)req;
	struct xfer *x = arg;
	if (x->op)
		files_get_pause(x->op, false);
}

static void get_meta(int64_t size, void *arg)
{
	struct xfer *x = arg;
	x->size = size < 0 ? 0 : size;
	x->started = true;
	http_req_reply_start(x->req, 200, "application/octet-stream", x->size);
	http_req_set_drain_cb(x->req, DOWNLOAD_BACKLOG / 2, get_drained, x);
}

static void get_data(const char *data, size_t len, void *arg)
{
	struct xfer *x = arg;
	/* Never more than announced: Content-Length is a promise. */
	if ((int64_t)len > x->size - x->sent)
		len = (size_t)(x->size - x->sent);
	http_req_reply_chunk(x->req, data, len);
	x->sent += (int64_t)len;
	if (http_req_output_backlog(x->req) > DOWNLOAD_BACKLOG)
		files_get_pause(x->op, true);
}

static void get_done(const struct err *e, int64_t size, yajl_val answer, void *arg)
{
	(void)size;
	(void)answer;
	struct xfer *x = arg;
	x->op = NULL;
	if (!x->started)
		reply_err(x->req, e);
	else if (e || x->sent != x->size)
		http_req_reply_abort(x->req);
	else
		http_req_reply_end(x->req);
	xfer_free(x);
}

static void list_done(const struct err *e, int64_t size, yajl_val answer, void *arg)
{
	(void)size;
	struct xfer *x = arg;
	x->op = NULL;
	if (e) {
		reply_err(x->req, e);
		xfer_free(x);
		return;
	}
	/* Re-serialise what the sandbox said, keeping only well-formed entries. */
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "files");
	jg_arr(g);
	yajl_val files = json_get(answer, "files");
	size_t n = files && YAJL_IS_ARRAY(files) ? files->u.array.len : 0;
	for (size_t i = 0; i < n && i < 10000; i++) {
		yajl_val f = files->u.array.values[i];
		const char *path = json_get_str(f, "path"), *mtime = json_get_str(f, "mtime"),
			   *type = json_get_str(f, "type");
		int64_t fsize = 0;
		if (path == NULL || !json_get_int(f, "size", &fsize))
			continue;
		jg_obj(g);
		jg_kv_str(g, "path", path);
		jg_kv_int(g, "size", fsize);
		jg_kv_str(g, "mtime", mtime);
		jg_kv_str(g, "type", type ? type : "file");
		jg_obj_end(g);
	}
	jg_arr_end(g);
	yajl_val tr = json_get(answer, "truncated");
	jg_kv_bool(g, "truncated", tr && YAJL_IS_TRUE(tr));
	jg_obj_end(g);
	reply_gen(x->req, 200, g);
	xfer_free(x);
}

static void delete_done(const struct err *e, int64_t size, yajl_val answer, void *arg)
{
	(void)size;
	(void)answer;
	struct xfer *x = arg;
	x->op = NULL;
	if (e)
		reply_err(x->req, e);
	else
		http_req_reply(x->req, 204, NULL, NULL, 0);
	xfer_free(x);
}

static const struct file_op_cbs put_cbs = {.writable = put_writable, .done = put_done};
static const struct file_op_cbs get_cbs = {.meta = get_meta, .data = get_data, .done = get_done};
static const struct file_op_cbs list_cbs = {.done = list_done};
static const struct file_op_cbs delete_cbs = {.done = delete_done};

/* /v1/sessions/{id}/files[/{path}] */
static void route_files(struct call *c, const char *raw_path)
{
	struct http_api *api = c->api;
	struct http_req *req = c->req;
	struct err *e = NULL;
	enum file_op_kind kind;
	const struct file_op_cbs *cbs;
	AUTOFREE char *path = NULL;
	if (raw_path == NULL) {
		if (!method_is(req, "GET")) {
			free(c);
			reply_method(req, "GET");
			return;
		}
		kind = FILE_LIST;
		cbs = &list_cbs;
	} else {
		path = http_percent_decode(raw_path, strlen(raw_path));
		if (path == NULL) {
			free(c);
			http_req_reply_error(
			    req, ERR_BAD_PATH,
			    "file path is not valid percent-encoding or has a NUL byte");
			return;
		}
		if (files_path_check(path, &e) < 0) {
			free(c);
			reply_err(req, e);
			err_free(e);
			return;
		}
		if (method_is(req, "PUT")) {
			kind = FILE_PUT;
			cbs = &put_cbs;
		} else if (method_is(req, "GET")) {
			kind = FILE_GET;
			cbs = &get_cbs;
		} else if (method_is(req, "DELETE")) {
			kind = FILE_DELETE;
			cbs = &delete_cbs;
		} else {
			free(c);
			reply_method(req, "PUT, GET, DELETE");
			return;
		}
	}
	const struct session *s = manager_get(api->mgr, c->id, c->tenant);
	if (s == NULL) {
		reply_missing(c);
		return;
	}
	struct xfer *x = xcalloc(1, sizeof(*x));
	x->api = api;
	x->req = req;
	x->path = path ? xstrdup(path) : NULL;
	x->limit = s->limits.disk_mb << 20;
	if (kind == FILE_PUT && http_req_content_length(req) > x->limit) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "upload of %lld bytes exceeds the session's disk of %lld MiB (disk_mb)",
			 (long long)http_req_content_length(req), (long long)s->limits.disk_mb);
		http_req_reply_error(req, ERR_PAYLOAD_TOO_LARGE, msg);
		xfer_free(x);
		free(c);
		return;
	}
	x->op = manager_file_start(api->mgr, c->id, c->tenant, kind, path, cbs, x, &e);
	if (x->op == NULL) {
		reply_err(req, e);
		err_free(e);
		xfer_free(x);
		free(c);
		return;
	}
	free(c);
	http_req_set_close_cb(req, xfer_client_gone, x);
	if (kind == FILE_PUT) {
		bool active = files_op_active(x->op);
		http_req_stream_body(req, put_chunk, x);
		if (!active)
			http_req_pause_body(req);
	}
}

/* ---- one-shot: POST /v1/exec ---- */

/* A fresh session for one execution, removed before the answer. */
struct oneshot {
	struct http_api *api;
	struct http_req *req;
	char id[SESSION_ID_LEN + 1];
	char *code;
	int64_t timeout_s;
	char *result_json;
	size_t result_len;
	struct err *error;
};

static void oneshot_free(struct oneshot *o)
{
	free(o->code);
	free(o->result_json);
	err_free(o->error);
	free(o);
}

static void oneshot_deleted(const struct err *e, void *arg)
{
	struct oneshot *o = arg;
	if (e)
		log_warn("one-shot session %s: delete failed: %s", o->id, e->message);
	if (o->error)
		reply_err(o->req, o->error);
	else
		http_req_reply(o->req, 200, "application/json", o->result_json, o->result_len);
	oneshot_free(o);
}

static void oneshot_finish(struct oneshot *o)
{
	struct err *e = NULL;
	if (manager_delete(o->api->mgr, o->id, DEFAULT_TENANT, oneshot_deleted, o, &e) < 0) {
		err_free(e);
		oneshot_deleted(NULL, o); /* already gone (expired under us) */
	}
}

static void oneshot_exec_done(const struct exec_result *r, const struct err *e, void *arg)
{
	struct oneshot *o = arg;
	if (r) {
		o->api->execs[r->status]++;
		AUTOGEN yajl_gen g = json_gen_new();
		exec_result_to_json(r, g);
		const char *t = jg_text(g, &o->result_len);
		o->result_json = xstrndup(t, o->result_len);
	} else {
		o->error = err_new(e->code, "%s", e->message);
	}
	oneshot_finish(o);
}

static void oneshot_created(const struct session *s, const struct err *e, void *arg)
{
	struct oneshot *o = arg;
	if (e) {
		o->api->create_failures++;
		reply_err(o->req, e);
		oneshot_free(o);
		return;
	}
	o->api->creates++;
	memcpy(o->id, s->id, sizeof(o->id));
	struct err *xe = NULL;
	if (manager_exec(o->api->mgr, o->id, DEFAULT_TENANT, o->code, strlen(o->code), o->timeout_s,
			 NULL, oneshot_exec_done, o, &xe) < 0) {
		o->error = xe;
		oneshot_finish(o);
	}
}

static void oneshot_body_cb(struct http_req *req, const char *body, size_t len, void *arg)
{
	struct http_api *api = arg;
	if (body == NULL)
		return;
	struct err *e = NULL;
	struct exec_request xr;
	if (api_parse_exec_request(body, len, true, &xr, &e) < 0) {
		reply_err(req, e);
		err_free(e);
		return;
	}
	struct session_request sr = {0};
	if (xr.image) {
		sr.image = xr.image; /* handed over */
		xr.image = NULL;
		sr.set |= SRQ_IMAGE;
	}
	struct oneshot *o = xcalloc(1, sizeof(*o));
	o->api = api;
	o->req = req;
	o->code = xr.code; /* handed over */
	xr.code = NULL;
	o->timeout_s = xr.timeout_s;
	if (manager_create(api->mgr, &sr, DEFAULT_TENANT, oneshot_created, o, &e) < 0) {
		reply_err(req, e);
		err_free(e);
		oneshot_free(o);
	}
	session_request_release(&sr);
	exec_request_release(&xr);
}

/* ---- events and admin ---- */

static void watcher_end(struct watcher *w)
{
	LIST_REMOVE(w, link);
	http_req_reply_end(w->req);
	free(w);
}

static void watcher_gone(struct http_req *req, void *arg)
{
	(void)req;
	watcher_end(arg);
}

static void on_session_event(const char *type, const struct session *s, const char *detail,
			     void *arg)
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
	struct watcher *w, *next;
	for (w = LIST_FIRST(&api->watchers); w; w = next) {
		next = LIST_NEXT(w, link);
		if (strcmp(s->tenant, DEFAULT_TENANT) != 0)
			continue;
		if (http_req_output_backlog(w->req) > WATCHER_BACKLOG) {
			log_warn("events: a watcher fell %u bytes behind; disconnecting it",
				 WATCHER_BACKLOG);
			http_req_set_close_cb(w->req, NULL, NULL);
			http_req_reply_abort(w->req);
			LIST_REMOVE(w, link);
			free(w);
			continue;
		}
		http_req_reply_chunk(w->req, text, n);
		http_req_reply_chunk(w->req, "\n", 1);
	}
}

static void handle_events(struct http_api *api, struct http_req *req)
{
	struct watcher *w = xcalloc(1, sizeof(*w));
	w->api = api;
	w->req = req;
	LIST_INSERT_HEAD(&api->watchers, w, link);
	http_req_set_close_cb(req, watcher_gone, w);
	http_req_reply_start(req, 200, "application/x-ndjson", -1);
	/* One line at once, so a client knows the stream is live. */
	static const char hello[] = "{\"type\":\"hello\"}\n";
	http_req_reply_chunk(req, hello, sizeof(hello) - 1);
}

static void orphans_cb(const struct err *e, const char *json, size_t len, void *arg)
{
	struct http_req *req = arg;
	if (e) {
		reply_err(req, e);
		return;
	}
	http_req_reply(req, 200, "application/json", json, len);
}

static void handle_admin(struct http_api *api, struct http_req *req, const char *what)
{
	if (strcmp(what, "orphans") == 0 && method_is(req, "GET")) {
		manager_orphans(api->mgr, false, orphans_cb, req);
	} else if (strcmp(what, "gc") == 0 && method_is(req, "POST")) {
		manager_orphans(api->mgr, true, orphans_cb, req);
	} else if (strcmp(what, "drain") == 0 && method_is(req, "POST")) {
		if (api->drain_fn)
			api->drain_fn(api->drain_arg);
		static const char body[] = "{\"status\":\"draining\"}";
		http_req_reply(req, 202, "application/json", body, sizeof(body) - 1);
	} else {
		http_req_reply_error(req, ERR_NOT_FOUND,
				     "no such admin route (GET orphans, POST gc, POST drain)");
	}
}

void http_api_end_streams(struct http_api *api)
{
	while (!LIST_EMPTY(&api->watchers)) {
		struct watcher *w = LIST_FIRST(&api->watchers);
		http_req_set_close_cb(w->req, NULL, NULL);
		watcher_end(w);
	}
}

void http_api_set_drain(struct http_api *api, void (*fn)(void *arg), void *arg)
{
	api->drain_fn = fn;
	api->drain_arg = arg;
}

/* ---- routing ---- */

static void route_session(struct http_api *api, struct http_req *req, const char *rest)
{
	/* rest: "<id>" or "<id>/<action>" */
	const char *slash = strchr(rest, '/');
	size_t idlen = slash ? (size_t)(slash - rest) : strlen(rest);
	char id[SESSION_ID_LEN + 1] = "";
	if (idlen == SESSION_ID_LEN)
		memcpy(id, rest, SESSION_ID_LEN);
	if (!session_id_valid(id)) {
		http_req_reply_error(req, ERR_NOT_FOUND, "no such session (malformed id)");
		return;
	}
	const char *action = slash ? slash + 1 : "";
	struct call *c = call_new(api, req);
	memcpy(c->id, id, sizeof(id));
	struct err *e = NULL;

	if (*action == '\0') {
		if (method_is(req, "GET")) {
			const struct session *s = manager_get(api->mgr, id, c->tenant);
			if (s) {
				reply_session(req, 200, s);
				free(c);
			} else {
				reply_missing(c);
			}
			return;
		}
		if (method_is(req, "PATCH")) {
			http_req_read_body(req, (size_t)api->cfg->max_body_bytes, patch_body_cb, c);
			return;
		}
		if (method_is(req, "DELETE")) {
			if (manager_delete(api->mgr, id, c->tenant, deleted_cb, c, &e) < 0) {
				if (e->code == ERR_NOT_FOUND)
					reply_missing(c);
				else {
					reply_err(req, e);
					free(c);
				}
				err_free(e);
			}
			return;
		}
		free(c);
		reply_method(req, "GET, PATCH, DELETE");
		return;
	}
	if (strcmp(action, "exec") == 0) {
		if (!method_is(req, "POST")) {
			free(c);
			reply_method(req, "POST");
			return;
		}
		http_req_read_body(req, (size_t)api->cfg->max_body_bytes, exec_body_cb, c);
		return;
	}
	if (strcmp(action, "files") == 0 || strncmp(action, "files/", 6) == 0) {
		route_files(c, action[5] == '/' ? action + 6 : NULL);
		return;
	}
	if (strcmp(action, "keepalive") == 0) {
		if (!method_is(req, "POST")) {
			free(c);
			reply_method(req, "POST");
			return;
		}
		if (manager_keepalive(api->mgr, id, c->tenant, &e) < 0) {
			err_free(e);
			reply_missing(c);
			return;
		}
		reply_session(req, 200, manager_get(api->mgr, id, c->tenant));
		free(c);
		return;
	}
	free(c);
	http_req_reply_error(req, ERR_NOT_FOUND, "no such route");
}

static void on_request(struct http_req *req, void *arg)
{
	struct http_api *api = arg;
	api->requests++;
	const char *path = http_req_path(req);
	if (strcmp(path, "/healthz") == 0) {
		method_is(req, "GET") ? handle_healthz(api, req) : reply_method(req, "GET");
		return;
	}
	if (strcmp(path, "/readyz") == 0) {
		method_is(req, "GET") ? handle_readyz(api, req) : reply_method(req, "GET");
		return;
	}
	if (strcmp(path, "/metrics") == 0) {
		method_is(req, "GET") ? handle_metrics(api, req) : reply_method(req, "GET");
		return;
	}
	if (strcmp(path, "/v1/sessions") == 0 || strcmp(path, "/v1/sessions/") == 0) {
		if (method_is(req, "GET")) {
			handle_list(api, req);
		} else if (method_is(req, "POST")) {
			http_req_read_body(req, (size_t)api->cfg->max_body_bytes, create_body_cb,
					   call_new(api, req));
		} else {
			reply_method(req, "GET, POST");
		}
		return;
	}
	if (strcmp(path, "/v1/events") == 0) {
		method_is(req, "GET") ? handle_events(api, req) : reply_method(req, "GET");
		return;
	}
	if (strncmp(path, "/v1/admin/", 10) == 0) {
		handle_admin(api, req, path + 10);
		return;
	}
	if (strcmp(path, "/v1/exec") == 0) {
		if (method_is(req, "POST"))
			http_req_read_body(req, (size_t)api->cfg->max_body_bytes, oneshot_body_cb,
					   api);
		else
			reply_method(req, "POST");
		return;
	}
	if (strncmp(path, "/v1/sessions/", 13) == 0) {
		route_session(api, req, path + 13);
		return;
	}
	http_req_reply_error(req, ERR_NOT_FOUND, "no such route");
}

struct http_api *http_api_new(struct event_base *base, const struct config *cfg,
			      struct manager *mgr, struct docker *docker, struct store *store,
			      struct egress *egress)
{
	struct http_api *api = xcalloc(1, sizeof(*api));
	api->base = base;
	api->cfg = cfg;
	api->mgr = mgr;
	api->docker = docker;
	api->store = store;
	api->egress = egress;
	LIST_INIT(&api->watchers);
	manager_set_listener(mgr, on_session_event, api);
	api->tick = event_new(base, -1, EV_PERSIST, tick_cb, api);
	struct timeval tv = {0, TICK_US};
	api->tick_due_us = clock_mono_us() + TICK_US;
	event_add(api->tick, &tv);
	api->srv = http_server_new(base, on_request, api);
	http_server_set_limits(api->srv, &(struct http_server_limits){
					     .head_timeout_s = (int)cfg->http_head_timeout_s,
					     .idle_timeout_s = (int)cfg->http_idle_timeout_s,
					     .max_conns = (int)cfg->max_connections,
					     .max_conns_per_peer = (int)cfg->max_conns_per_peer,
					 });
	return api;
}

void http_api_free(struct http_api *api)
{
	if (api == NULL)
		return;
	while (!LIST_EMPTY(&api->watchers)) {
		struct watcher *w = LIST_FIRST(&api->watchers);
		http_req_set_close_cb(w->req, NULL, NULL);
		watcher_end(w);
	}
	manager_set_listener(api->mgr, NULL, NULL);
	event_free(api->tick);
	http_server_free(api->srv);
	free(api);
}

int http_api_listen(struct http_api *api, struct err **errp)
{
	return http_server_listen(api->srv, api->cfg->listen, errp);
}

void http_api_stop(struct http_api *api)
{
	http_server_stop_accepting(api->srv);
}
