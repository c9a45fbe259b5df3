/* api.c: the v1 API's wiring: the server, the route table, dispatch, the
 * caller's tenant, and the one way a call is answered and freed. The
 * handlers are in api_<resource>.c. */
#include "api.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "audit.h"
#include "defer.h"
#include "clock.h"
#include "files.h"
#include "http_guard.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "xalloc.h"

/* Every route, in matching order (api_route.h has the pattern syntax). The
 * order of a path's methods here is the order of its Allow header. */
const struct api_route api_routes[] = {
    {"GET", "/healthz", api_probes_healthz, API_AUTH_NONE},
    {"GET", "/readyz", api_probes_readyz, API_AUTH_NONE},
    {"GET", "/version", api_version_get, API_AUTH_NONE},
    {"POST", "/mcp", api_mcp_post, API_AUTH_TENANT},
    {"GET", "/mcp", api_mcp_refuse, API_AUTH_TENANT},
    {"DELETE", "/mcp", api_mcp_refuse, API_AUTH_TENANT},
    /* Per-tenant usage is on it: the operator's, not a tenant's. */
    {"GET", "/metrics", api_probes_metrics, API_AUTH_ADMIN},
    {"GET", "/v1/images/?", api_images_list, API_AUTH_TENANT},
    {"GET", "/v1/sessions/?", api_sessions_list, API_AUTH_TENANT},
    {"POST", "/v1/sessions/?", api_sessions_create, API_AUTH_TENANT},
    {"GET", "/v1/sessions/{id}/?", api_sessions_get, API_AUTH_TENANT},
    {"PATCH", "/v1/sessions/{id}/?", api_sessions_patch, API_AUTH_TENANT},
    {"DELETE", "/v1/sessions/{id}/?", api_sessions_delete, API_AUTH_TENANT},
    {"POST", "/v1/sessions/{id}/exec", api_exec_run, API_AUTH_TENANT},
    {"POST", "/v1/sessions/{id}/keepalive", api_sessions_keepalive, API_AUTH_TENANT},
    {"POST", "/v1/sessions/{id}/interrupt", api_exec_interrupt, API_AUTH_TENANT},
    {"POST", "/v1/sessions/{id}/packages", api_packages_install, API_AUTH_TENANT},
    {"POST", "/v1/sessions/{id}/snapshots", api_snapshots_take, API_AUTH_TENANT},
    {"GET", "/v1/snapshots/?", api_snapshots_list, API_AUTH_TENANT},
    {"GET", "/v1/snapshots/{id}/?", api_snapshots_get, API_AUTH_TENANT},
    {"DELETE", "/v1/snapshots/{id}/?", api_snapshots_delete, API_AUTH_TENANT},
    {"GET", "/v1/workspaces/?", api_workspaces_list, API_AUTH_TENANT},
    {"GET", "/v1/sessions/{id}/files", api_files_list, API_AUTH_TENANT},
    {"PUT", "/v1/sessions/{id}/files/{path...}", api_files_put, API_AUTH_TENANT},
    {"GET", "/v1/sessions/{id}/files/{path...}", api_files_get, API_AUTH_TENANT},
    {"DELETE", "/v1/sessions/{id}/files/{path...}", api_files_delete, API_AUTH_TENANT},
    {"POST", "/v1/sessions/{id}/runs", api_runs_session, API_AUTH_TENANT},
    {"POST", "/v1/exec", api_exec_oneshot, API_AUTH_TENANT},
    {"POST", "/v1/runs", api_runs_oneshot, API_AUTH_TENANT},
    {"GET", "/v1/runs/{id}", api_runs_get, API_AUTH_TENANT},
    {"GET", "/v1/events", api_events_watch, API_AUTH_TENANT},
    {"GET", "/v1/usage", api_quota_usage_own, API_AUTH_TENANT},
    {"GET", "/v1/audit", api_audit_list, API_AUTH_TENANT},
    {"GET", "/v1/failures/?", api_failures_list, API_AUTH_TENANT},
    {"DELETE", "/v1/failures/{signature}", api_failures_delete, API_AUTH_TENANT},
    {"GET", "/v1/reviews/?", api_reviews_list, API_AUTH_TENANT},
    {"GET", "/v1/reviews/{id}/?", api_reviews_get, API_AUTH_TENANT},
    {"POST", "/v1/reviews/{id}/approve", api_reviews_approve, API_AUTH_TENANT},
    {"POST", "/v1/reviews/{id}/reject", api_reviews_reject, API_AUTH_TENANT},
    /* The reviewer's page holds no data: its script asks with a key. */
    {"GET", "/review/?", api_reviews_page, API_AUTH_NONE},
    {"GET", "/review/app.js", api_reviews_page_js, API_AUTH_NONE},
    {"GET", "/review/app.css", api_reviews_page_css, API_AUTH_NONE},
    {"GET", "/v1/admin/orphans", api_admin_orphans, API_AUTH_ADMIN},
    {"GET", "/v1/admin/nodes", api_cluster_nodes, API_AUTH_ADMIN},
    {"DELETE", "/v1/admin/nodes", api_cluster_forget, API_AUTH_ADMIN},
    {"POST", "/v1/admin/gc", api_admin_gc, API_AUTH_ADMIN},
    {"POST", "/v1/admin/drain", api_admin_drain, API_AUTH_ADMIN},
    {"POST", "/v1/admin/keys", api_keys_create, API_AUTH_ADMIN},
    {"GET", "/v1/admin/keys", api_keys_list, API_AUTH_ADMIN},
    {"DELETE", "/v1/admin/keys/{key}", api_keys_revoke, API_AUTH_ADMIN},
    {"GET", "/v1/admin/audit", api_admin_audit, API_AUTH_ADMIN},
    {"GET", "/v1/admin/tenants/{tenant}/quota", api_quota_get, API_AUTH_ADMIN},
    {"PUT", "/v1/admin/tenants/{tenant}/quota", api_quota_put, API_AUTH_ADMIN},
    {"GET", "/v1/admin/tenants/{tenant}/usage", api_quota_usage, API_AUTH_ADMIN},
    /* An unknown admin name gets the list; a known one with another
     * method is a 405 like any path's (api_route.c). */
    {"*", "/v1/admin/{...}", api_admin_unknown, API_AUTH_ADMIN},
};
const size_t api_routes_count = sizeof(api_routes) / sizeof(api_routes[0]);

/* ---- the caller's tenant ---- */

/* The caller is known and may call c->route. Requests per second are a
 * tenant's: the probes and the admin routes are not counted against anyone. */
static void route_authorized(struct call *c)
{
	/* A client claiming to be a peer is refused before it costs anything;
	 * a peer's call was counted where it entered (api_cluster.c). */
	if (api_cluster_forged(c))
		api_fail(c, ERR_FORBIDDEN, "X-CI-Cluster-Token is not this cluster's secret");
	else if (c->route->auth == API_AUTH_TENANT && !api_load_admit(c))
		; /* over its share of the connections: answered */
	else if (c->route->auth == API_AUTH_TENANT && !api_cluster_from_peer(c))
		api_quota_gate(c, api_cluster_route);
	else if (c->route->auth == API_AUTH_TENANT)
		api_cluster_route(c);
	else
		c->route->handler(c);
}

/* Whom the request acts for, and whether it may call route: the one place
 * that decides it (api_auth.c knows the keys). A refused call has been
 * answered there; one whose key Redis is asked about goes on from the
 * lookup's callback. */
static void api_resolve_tenant(struct call *c, const struct api_route *route)
{
	c->route = route;
	if (api_auth_check(c, route->auth, route_authorized) == 1)
		route_authorized(c);
}

/* ---- answering ---- */

/* A client's X-Request-Id is kept when it is a plain token: it goes into
 * log lines and the audit, which must not carry what a client smuggles in. */
static bool request_id_ok(const char *v)
{
	size_t n = v ? strlen(v) : 0;
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)v[i]) || v[i] == '-' || v[i] == '_' || v[i] == '.'))
			return false;
	return true;
}

/* version-traceid-parentid-flags, lowercase hex, ids not all zero. */
static bool traceparent_ok(const char *v)
{
	static const char shape[] = "xx-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-xxxxxxxxxxxxxxxx-xx";
	if (v == NULL || strlen(v) != sizeof(shape) - 1 || strncmp(v, "ff", 2) == 0)
		return false;
	for (size_t i = 0; i < sizeof(shape) - 1; i++)
		if (shape[i] == '-'
			? v[i] != '-'
			: !isxdigit((unsigned char)v[i]) || isupper((unsigned char)v[i]))
			return false;
	return strncmp(v + 3, "00000000000000000000000000000000", 32) != 0 &&
	       strncmp(v + 36, "0000000000000000", 16) != 0;
}

static struct call *call_new(struct http_api *api, struct http_req *req)
{
	struct call *c = xcalloc(1, sizeof(*c));
	c->api = api;
	c->req = req;
	c->started_us = clock_mono_us();
	const char *rid = http_req_header(req, "X-Request-Id");
	if (request_id_ok(rid))
		snprintf(c->request_id, sizeof(c->request_id), "%s", rid);
	else
		snprintf(c->request_id, sizeof(c->request_id), "%08x%012llx", api->id_prefix,
			 (unsigned long long)++api->requests_seen);
	const char *tp = http_req_header(req, "traceparent");
	if (traceparent_ok(tp))
		snprintf(c->traceparent, sizeof(c->traceparent), "%s", tp);
	http_req_add_header(req, "X-Request-Id", c->request_id);
	api_access_begin(c);
	return c;
}

void api_call_free(struct call *c)
{
	if (c == NULL)
		return;
	/* A call freed before its reply ended (none should be) must not be
	 * reached by the reply's end: the request is alive until then. */
	if (!c->done && c->sink == NULL)
		http_req_set_done_cb(c->req, NULL, NULL);
	if (c->sink) {
		free(c->sink->body);
		free(c->sink);
	}
	api_quota_release(c);
	api_load_release(c);
	free(c->path);
	free(c->audit_code);
	free(c);
}

/* A subcall's answer, to its sink (the same JSON a client would get). */
static void sink_reply(struct call *c, int status, yajl_gen g, const struct err *e)
{
	AUTOGEN yajl_gen eg = NULL;
	if (e) {
		eg = json_gen_new();
		jg_obj(eg);
		jg_str(eg, "error");
		jg_obj(eg);
		jg_kv_str(eg, "code", err_code_name(e->code));
		jg_kv_str(eg, "message", e->message);
		jg_obj_end(eg);
		jg_obj_end(eg);
		g = eg;
		status = err_code_status(e->code);
	}
	size_t len = 0;
	const char *text = g ? jg_text(g, &len) : "";
	c->sink->fn(status, text, len, c->sink->arg);
	api_call_free(c);
}

void api_reply(struct call *c, int status, yajl_gen g, const struct err *e)
{
	struct http_req *req = c->req;
	if (c->sink) {
		if (e && err_code_status(e->code) >= 500)
			log_warn("subcall: %s", e->message);
		sink_reply(c, status, g, e);
		return;
	}
	if (e) {
		if (e->code == ERR_UNAVAILABLE)
			http_req_add_header(req, "Retry-After", "1");
		if (err_code_status(e->code) >= 500)
			log_warn("%s %s: %s", http_req_method(req), http_req_path(req), e->message);
		http_req_reply_error(req, e->code, e->message);
	} else if (g) {
		size_t len;
		const char *text = jg_text(g, &len);
		http_req_reply(req, status, "application/json", text, len);
	} else {
		http_req_reply(req, status, NULL, NULL, 0);
	}
	api_call_free(c);
}

void api_reply_body(struct call *c, int status, const char *content_type, const char *body,
		    size_t len)
{
	if (c->sink) {
		c->sink->fn(status, body, len, c->sink->arg);
		api_call_free(c);
		return;
	}
	http_req_reply(c->req, status, content_type, body, len);
	api_call_free(c);
}

void api_fail(struct call *c, enum err_code code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	api_reply(c, 0, NULL, &(struct err){.code = code, .message = msg});
}

static void body_cb(struct http_req *req, const char *body, size_t len, void *arg)
{
	(void)req;
	struct call *c = arg;
	if (body == NULL)
		api_call_free(c);
	else
		c->on_body(c, body, len);
}

/* A subcall's body, from the loop (a callback never runs inside the call
 * that registered it). */
static void sink_body_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct call *c = arg;
	c->on_body(c, c->sink->body ? c->sink->body : "", c->sink->len);
}

void api_read_body(struct call *c, api_body_fn fn)
{
	c->on_body = fn;
	if (c->sink) {
		defer_call(c->api->base, sink_body_cb, c);
		return;
	}
	http_req_read_body(c->req, (size_t)c->api->cfg->max_body_bytes, body_cb, c);
}

static void missing_cb(const struct err *e, void *arg)
{
	api_reply(arg, 0, NULL, e);
}

void api_missing(struct call *c)
{
	manager_explain_missing(c->api->mgr, c->id, c->tenant, missing_cb, c);
}

void api_fail_session(struct call *c, struct err *e)
{
	if (e->code == ERR_NOT_FOUND)
		api_missing(c);
	else
		api_reply(c, 0, NULL, e);
	err_free(e);
}

/* ---- dispatch ---- */

/* Whether a web page may have sent this request: refused (answered, false)
 * when its Origin is neither listed nor the daemon's own, or, without keys,
 * when its Host is not loopback (a DNS-rebound name). http_guard.h says
 * why. A unix socket's client is no browser: its Host is not checked. */
static bool request_from_here(struct call *c)
{
	const struct config *cfg = c->api->cfg;
	struct http_req *req = c->req;
	const char *origin = http_req_header(req, "Origin");
	const char *host = http_req_header(req, "Host");
	bool mcp = strcmp(http_req_path(req), "/mcp") == 0;
	if (origin && !http_guard_origin_listed(cfg->allowed_origins, origin) &&
	    !http_guard_origin_is_host(origin, host) &&
	    !(mcp && http_guard_origin_listed(cfg->mcp_allowed_origins, origin))) {
		api_fail(c, ERR_FORBIDDEN,
			 "Origin %.200s is not allowed (--allowed-origins%s): the API refuses "
			 "requests a web page of another origin sent",
			 origin, mcp ? ", --mcp-allowed-origins" : "");
		return false;
	}
	if (cfg->admin_key_file[0] == '\0' && host && !http_guard_host_is_loopback(host)) {
		char peer[64];
		http_req_peer(req, peer, sizeof(peer));
		if (strcmp(peer, "unix") != 0) {
			api_fail(
			    c, ERR_FORBIDDEN,
			    "Host %.200s is not loopback: without API keys (--admin-key-file) "
			    "the daemon answers only requests for 127.0.0.1, [::1] or localhost "
			    "(a DNS-rebound name is refused)",
			    host);
			return false;
		}
	}
	return true;
}

/* Every body the API reads is JSON but a file upload's: a request that
 * carries one must say application/json. A cross-site form or text/plain
 * POST is refused before anything runs. (A request without a body is not
 * judged by its Content-Type: libcurl says form-urlencoded on any POST; a
 * browser's empty one carries an Origin, judged above.) */
static bool media_type_ok(struct call *c, const struct api_route *route)
{
	if (route->handler == api_files_put)
		return true; /* raw bytes, any type */
	struct http_req *req = c->req;
	const char *ct = http_req_header(req, "Content-Type");
	bool has_body = http_req_content_length(req) != 0; /* -1: chunked */
	if (has_body && !http_guard_content_type_is_json(ct)) {
		api_fail(c, ERR_UNSUPPORTED_MEDIA_TYPE,
			 "Content-Type %.100s is not application/json: a request body of this "
			 "route is JSON, sent with Content-Type: application/json",
			 ct ? ct : "(none)");
		return false;
	}
	return true;
}

static void on_request(struct http_req *req, void *arg)
{
	struct http_api *api = arg;
	struct call *c = call_new(api, req);
	if (!request_from_here(c))
		return;
	struct api_match m;
	api_route_match(api_routes, api_routes_count, http_req_method(req), http_req_path(req), &m);
	/* Past max-connections the probes' reserve took it: the probes are
	 * answered, nothing else is. */
	if (http_req_on_reserve(req) &&
	    !(m.kind == API_MATCH_FOUND &&
	      (m.route->handler == api_probes_healthz || m.route->handler == api_probes_readyz))) {
		api_fail(c, ERR_UNAVAILABLE,
			 "the daemon serves as many connections as it may; retry shortly");
		return;
	}
	if (m.kind == API_MATCH_NONE) {
		api_fail(c, ERR_NOT_FOUND, "no such route");
		return;
	}
	if (m.kind == API_MATCH_BAD_ID) {
		if (strncmp(http_req_path(req), "/v1/snapshots/", 14) == 0)
			api_fail(c, ERR_BAD_REQUEST, "not a snapshot id (a UUID)");
		else
			api_fail(c, ERR_NOT_FOUND, "no such session (malformed id)");
		return;
	}
	if (m.kind == API_MATCH_BAD_SIGNATURE) {
		api_fail(c, ERR_BAD_REQUEST,
			 "malformed failure signature (signatures are 16 lowercase hex digits)");
		return;
	}
	if (m.kind == API_MATCH_BAD_TENANT) {
		api_fail(c, ERR_BAD_REQUEST,
			 "malformed tenant name (tenant names are [a-z0-9][a-z0-9_-]{0,62})");
		return;
	}
	memcpy(c->id, m.id, sizeof(c->id));
	memcpy(c->key, m.key, sizeof(c->key));
	memcpy(c->route_tenant, m.tenant, sizeof(c->route_tenant));
	memcpy(c->signature, m.signature, sizeof(c->signature));
	/* A file path is checked before the method, like the id. */
	if (m.path) {
		c->path = http_percent_decode(m.path, strlen(m.path));
		if (c->path == NULL) {
			api_fail(c, ERR_BAD_PATH,
				 "file path is not valid percent-encoding or has a NUL byte");
			return;
		}
		struct err *e = NULL;
		if (files_path_check(c->path, &e) < 0) {
			api_reply(c, 0, NULL, e);
			err_free(e);
			return;
		}
	}
	if (m.kind == API_MATCH_METHOD) {
		http_req_add_header(req, "Allow", m.allow);
		/* OPTIONS asks which methods the path has: the Allow header is
		 * the answer, not an error. */
		if (strcmp(http_req_method(req), "OPTIONS") == 0) {
			api_reply(c, 204, NULL, NULL);
			return;
		}
		api_fail(c, ERR_METHOD_NOT_ALLOWED,
			 "method %.16s is not allowed on %.200s; allowed: %s", http_req_method(req),
			 http_req_path(req), m.allow);
		return;
	}
	if (!media_type_ok(c, m.route))
		return;
	api_resolve_tenant(c, m.route);
}

/* ---- calls made inside the daemon ---- */

struct subcall_fail {
	api_sink_fn fn;
	void *arg;
	int status;
	char body[160];
};

static void subcall_fail_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct subcall_fail *f = arg;
	f->fn(f->status, f->body, strlen(f->body), f->arg);
	free(f);
}

void api_subcall(struct call *parent, const char *method, const char *path, const char *body,
		 size_t len, api_sink_fn fn, void *arg)
{
	struct api_match m;
	api_route_match(api_routes, api_routes_count, method, path, &m);
	if (m.kind != API_MATCH_FOUND || m.route->auth != API_AUTH_TENANT) {
		/* The tools build their paths: a miss is a bad id from the client. */
		struct subcall_fail *f = xcalloc(1, sizeof(*f));
		f->fn = fn;
		f->arg = arg;
		f->status = 404;
		snprintf(f->body, sizeof(f->body),
			 "{\"error\":{\"code\":\"not_found\",\"message\":\"no such %s\"}}",
			 m.kind == API_MATCH_BAD_ID ? "session (malformed id)" : "route");
		defer_call(parent->api->base, subcall_fail_cb, f);
		return;
	}
	struct call *c = xcalloc(1, sizeof(*c));
	c->api = parent->api;
	c->req = parent->req;
	c->started_us = clock_mono_us();
	memcpy(c->tenant_name, parent->tenant_name, sizeof(c->tenant_name));
	c->tenant = parent->tenant == parent->tenant_name ? c->tenant_name : parent->tenant;
	memcpy(c->key_id, parent->key_id, sizeof(c->key_id));
	c->admin = parent->admin;
	memcpy(c->request_id, parent->request_id, sizeof(c->request_id));
	memcpy(c->traceparent, parent->traceparent, sizeof(c->traceparent));
	memcpy(c->id, m.id, sizeof(c->id));
	c->route = m.route;
	c->done = true; /* the access line is the MCP request's */
	c->sink = xcalloc(1, sizeof(*c->sink));
	c->sink->fn = fn;
	c->sink->arg = arg;
	if (body) {
		c->sink->body = xmalloc(len + 1);
		memcpy(c->sink->body, body, len);
		c->sink->body[len] = 0;
		c->sink->len = len;
	}
	m.route->handler(c);
}

/* ---- the server ---- */

/* The server's limits from the configuration (at start, and after a
 * reload: they apply to what comes next). */
static void api_set_limits(struct http_api *api)
{
	const struct config *cfg = api->cfg;
	http_server_set_limits(api->srv, &(struct http_server_limits){
					     .head_timeout_s = (int)cfg->http_head_timeout_s,
					     .idle_timeout_s = (int)cfg->http_idle_timeout_s,
					     .max_conns = (int)cfg->max_connections,
					     .max_conns_per_peer = (int)cfg->max_conns_per_peer,
					     .reserved_conns = (int)cfg->http_reserved_conns,
					     .body_timeout_s = (int)cfg->http_body_timeout_s,
					     .body_min_rate = (int)cfg->http_body_min_rate,
					 });
}

struct http_api *http_api_new(struct event_base *base, const struct config *cfg,
			      struct manager *mgr, struct docker *docker, struct store *store,
			      struct egress *egress)
{
	struct http_api *api = xcalloc(1, sizeof(*api));
	/* Request ids: a random prefix per daemon start and a counter, so that
	 * ids from several nodes and restarts do not collide. */
	if (getrandom(&api->id_prefix, sizeof(api->id_prefix), 0) != sizeof(api->id_prefix))
		api->id_prefix = (uint32_t)getpid();
	api->base = base;
	api->cfg = cfg;
	api->mgr = mgr;
	api->docker = docker;
	api->store = store;
	api->egress = egress;
	api->metrics = metrics_new();
	LIST_INIT(&api->watchers);
	LIST_INIT(&api->audit_queries);
	LIST_INIT(&api->run_calls);
	LIST_INIT(&api->waits);
	LIST_INIT(&api->loads);
	api->audit = audit_new(base, store, cfg->node, cfg->audit_max_entries);
	api_quota_start(api);
	manager_set_listener(mgr, api_events_on_session, api);
	api_probes_start(api);
	api->srv = http_server_new(base, on_request, api);
	api_set_limits(api);
	return api;
}

void http_api_reload(struct http_api *api)
{
	api_set_limits(api);
}

void http_api_set_webhook(struct http_api *api, struct webhook *wh)
{
	api->webhook = wh;
}

void http_api_set_snapshots(struct http_api *api, struct snapshots *sn)
{
	api->snapshots = sn;
}

void http_api_set_cluster(struct http_api *api, struct cluster *cl, struct forwarder *fwd)
{
	api_cluster_free(api->cluster);
	api->cluster = cl ? api_cluster_new(cl, fwd) : NULL;
}

void http_api_set_tls(struct http_api *api, struct tls *tls)
{
	http_server_set_tls(api->srv, tls);
}

void http_api_free(struct http_api *api)
{
	if (api == NULL)
		return;
	api_events_end_all(api);
	api_runs_stop(api);
	api_auth_stop(api);
	api_audit_stop(api);
	api_waits_stop(api);
	api_quota_stop(api);
	api_images_stop(api);
	manager_set_listener(api->mgr, NULL, NULL);
	api_probes_stop(api);
	http_server_free(api->srv);
	api_cluster_free(api->cluster);
	audit_free(api->audit);
	metrics_free(api->metrics);
	api_load_free_all(api);
	free(api);
}

/* The admin key first: a daemon whose key file is unusable must not serve. */
int http_api_listen(struct http_api *api, struct err **errp)
{
	if (api->auth == NULL && api_auth_start(api, errp) < 0)
		return -1;
	return http_server_listen(api->srv, api->cfg->listen, errp);
}

void http_api_set_drain(struct http_api *api, void (*fn)(void *arg), void *arg)
{
	api->drain_fn = fn;
	api->drain_arg = arg;
}

void http_api_end_streams(struct http_api *api)
{
	api_events_end_all(api);
}

void http_api_set_runs(struct http_api *api, struct runs *runs)
{
	api->runs = runs;
}

void http_api_set_fixers(struct http_api *api, const struct fixer_targets *ft)
{
	api->fixers = ft;
}

struct audit *http_api_audit(struct http_api *api)
{
	return api->audit;
}

void http_api_stop(struct http_api *api)
{
	http_server_stop_accepting(api->srv);
}
