/* http_api.c: routing and JSON for the v1 API. */
#include "http_api.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "http_server.h"
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
	struct http_server *srv;
	uint64_t requests;
	uint64_t execs[4];
	uint64_t creates, create_failures;
};

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
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	if (docker_ok && redis_ok) {
		jg_kv_str(g, "status", "ready");
	} else {
		char msg[256];
		snprintf(msg, sizeof(msg), "not ready: %s%s%s",
			 docker_ok ? "" : "docker engine is not reachable",
			 !docker_ok && !redis_ok ? "; " : "", redis_ok ? "" : "redis is not reachable");
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
	if (!(docker_ok && redis_ok))
		http_req_add_header(req, "Retry-After", "1");
	reply_gen(req, docker_ok && redis_ok ? 200 : 503, g);
}

static void handle_metrics(struct http_api *api, struct http_req *req)
{
	char buf[2048];
	int n = snprintf(
		buf, sizeof(buf),
		"# HELP ci_sessions Sessions on this node.\n# TYPE ci_sessions gauge\nci_sessions %zu\n"
		"# HELP ci_http_requests_total HTTP requests served.\n# TYPE ci_http_requests_total counter\n"
		"ci_http_requests_total %" PRIu64 "\n"
		"# HELP ci_session_creates_total Session creates.\n# TYPE ci_session_creates_total counter\n"
		"ci_session_creates_total{result=\"ok\"} %" PRIu64 "\n"
		"ci_session_creates_total{result=\"error\"} %" PRIu64 "\n"
		"# HELP ci_execs_total Executions by status.\n# TYPE ci_execs_total counter\n"
		"ci_execs_total{status=\"ok\"} %" PRIu64 "\nci_execs_total{status=\"error\"} %" PRIu64 "\n"
		"ci_execs_total{status=\"timeout\"} %" PRIu64 "\nci_execs_total{status=\"killed\"} %" PRIu64 "\n"
		"# HELP ci_up Dependencies reachable (1) or not (0).\n# TYPE ci_up gauge\n"
		"ci_up{dependency=\"docker\"} %d\nci_up{dependency=\"redis\"} %d\n",
		manager_count(api->mgr), api->requests, api->creates, api->create_failures,
		api->execs[EXEC_OK], api->execs[EXEC_ERROR], api->execs[EXEC_TIMEOUT],
		api->execs[EXEC_KILLED], docker_reachable(api->docker) ? 1 : 0,
		store_connected(api->store) ? 1 : 0);
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
	if (!blank && (v = json_parse(body, len, &e)) == NULL) {
		reply_err(req, e);
		err_free(e);
		free(c);
		return;
	}
	if (manager_create(c->api->mgr, v, c->tenant, created_cb, c, &e) < 0) {
		reply_err(req, e);
		err_free(e);
		free(c);
	}
	if (v)
		yajl_tree_free(v);
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
	yajl_val v = json_parse(body, len, &e);
	const char *code = NULL;
	int64_t timeout_s = 0;
	if (v == NULL)
		goto fail;
	if (!YAJL_IS_OBJECT(v)) {
		err_set(&e, ERR_BAD_REQUEST, "body: expected a JSON object, got %s", json_type_name(v));
		goto fail;
	}
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		if (strcmp(k, "code") && strcmp(k, "timeout_s") && strcmp(k, "stream")) {
			err_set(&e, ERR_BAD_REQUEST, "unknown field '%.64s'", k);
			goto fail;
		}
	}
	yajl_val jcode = json_get(v, "code");
	if (jcode == NULL || !YAJL_IS_STRING(jcode)) {
		err_set(&e, ERR_BAD_REQUEST, "code: expected a string, got %s", json_type_name(jcode));
		goto fail;
	}
	code = jcode->u.string;
	yajl_val jt = json_get(v, "timeout_s");
	if (jt && !YAJL_IS_NULL(jt)) {
		if (!YAJL_IS_NUMBER(jt)) {
			err_set(&e, ERR_BAD_REQUEST, "timeout_s: expected a number, got %s",
				json_type_name(jt));
			goto fail;
		}
		double t = YAJL_IS_INTEGER(jt) ? (double)YAJL_GET_INTEGER(jt) : YAJL_GET_DOUBLE(jt);
		if (!(t >= 1 && t <= 86400)) {
			err_set(&e, ERR_BAD_REQUEST, "timeout_s: %g is outside 1..86400", t);
			goto fail;
		}
		timeout_s = (int64_t)(t + 0.999);
	}
	yajl_val js = json_get(v, "stream");
	if (js && !YAJL_IS_NULL(js)) {
		if (!YAJL_IS_TRUE(js) && !YAJL_IS_FALSE(js)) {
			err_set(&e, ERR_BAD_REQUEST, "stream: expected a boolean, got %s",
				json_type_name(js));
			goto fail;
		}
		c->stream = YAJL_IS_TRUE(js);
	}
	if (manager_exec(c->api->mgr, c->id, c->tenant, code, strlen(code), timeout_s,
			 c->stream ? exec_event_cb : NULL, exec_done_cb, c, &e) < 0) {
		if (e->code == ERR_NOT_FOUND) {
			err_free(e);
			yajl_tree_free(v);
			reply_missing(c);
			return;
		}
		goto fail;
	}
	if (c->stream)
		http_req_reply_start(req, 200, "application/x-ndjson");
	yajl_tree_free(v);
	return;
fail:
	reply_err(req, e);
	err_free(e);
	if (v)
		yajl_tree_free(v);
	free(c);
}

/* ---- routing ---- */

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
		reply_method(req, "GET, DELETE");
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
	if (strncmp(path, "/v1/sessions/", 13) == 0) {
		route_session(api, req, path + 13);
		return;
	}
	http_req_reply_error(req, ERR_NOT_FOUND, "no such route");
}

struct http_api *http_api_new(struct event_base *base, const struct config *cfg,
			      struct manager *mgr, struct docker *docker, struct store *store)
{
	struct http_api *api = xcalloc(1, sizeof(*api));
	api->base = base;
	api->cfg = cfg;
	api->mgr = mgr;
	api->docker = docker;
	api->store = store;
	api->srv = http_server_new(base, on_request, api);
	return api;
}

void http_api_free(struct http_api *api)
{
	if (api == NULL)
		return;
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
