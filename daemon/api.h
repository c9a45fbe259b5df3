/* api.h: what the API's files share (not for use outside daemon/api*.c;
 * the rest of the daemon sees http_api.h).
 *
 * api.c wires the server, holds the route table and dispatches; each
 * resource has its file: api_probes.c (health, readiness, metrics, loop lag),
 * api_access.c (the access log and request metrics), api_sessions.c,
 * api_exec.c (executions and the one-shot), api_files.c,
 * api_events.c (the event stream and admin). A handler gets a struct call,
 * owns it, and ends it with exactly one of api_reply, api_reply_body,
 * api_fail, api_fail_session or api_missing (each answers and frees), or,
 * once a streamed reply is over or the server answered itself,
 * api_call_free. */
#ifndef CI_API_H
#define CI_API_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <yajl/yajl_gen.h>

#include "api_route.h"
#include "http_api.h"
#include "quota.h"
#include "store_quota.h"
#include "http_server.h"

struct api_images;
struct api_cluster;
struct cluster;
struct forwarder;
struct api_keyring;
struct api_load;
struct audit;
struct api_audit_code;
struct api_audit_query;
struct api_wait;
struct api_watcher;
struct api_quota;
struct api_quota_hold;
struct api_quota_wait;
struct api_run_call;
struct run_request;
struct run_fixer;
struct call;
struct runs;
struct webhook;

/* A request body, whole (api_read_body). */
typedef void (*api_body_fn)(struct call *c, const char *body, size_t len);

struct http_api {
	struct event_base *base;
	const struct config *cfg;
	struct manager *mgr;
	struct docker *docker;
	struct store *store;
	struct egress *egress;
	struct http_server *srv;
	uint32_t id_prefix;     /* request ids: random per start ... */
	uint64_t requests_seen; /* ... and a count */
	/* Counters for /metrics (the by-route ones and histograms in metrics). */
	struct metrics *metrics;
	uint64_t execs[4]; /* by enum exec_status */
	uint64_t creates, create_failures;
	void (*drain_fn)(void *arg);
	void *drain_arg;
	/* Loop lag (api_probes.c): how late a 50 ms tick runs shows whether
	 * anything blocks the loop; the worst since the last scrape goes to
	 * /metrics. */
	struct event *tick;
	int64_t tick_due_us;
	int64_t lag_max_us;
	LIST_HEAD(, api_watcher) watchers; /* GET /v1/events clients (api_events.c) */
	struct api_keyring *auth; /* API keys (api_auth.c); NULL without --admin-key-file */
	struct audit *audit;      /* the audit trail (audit.h) */
	LIST_HEAD(, api_audit_query) audit_queries; /* GET /v1/audit in flight (api_audit.c) */
	LIST_HEAD(, api_wait) waits;                /* calls waiting on the store (api_wait.c) */
	unsigned audit_waiters;                     /* ... of them long-polling (wait_s) */
	struct api_quota *quota;                    /* tenants' quotas, cached (api_quota_gate.c) */
	struct runs *runs;                          /* the run engine (main's; runs.h) */
	const struct fixer_targets *fixers;         /* which fixers runs may use (fixer_target.h) */
	LIST_HEAD(, api_run_call) run_calls;        /* calls waiting on runs (api_runs.c) */
	struct webhook *webhook;     /* the review webhook (webhook.h), for /metrics; may be NULL */
	struct snapshots *snapshots; /* the snapshot engine (snapshot.h); NULL: off */
	struct api_images *images;   /* GET /v1/images's cache (api_images.c); NULL until asked */
	struct api_cluster *cluster; /* routing to the other nodes (api_cluster.c); NULL: alone */
	LIST_HEAD(, api_load) loads; /* tenants' calls and streams in flight (api_load.c) */
	unsigned n_streams;          /* GET /v1/events streams open */
};

/* One request being served, carried through its async steps. */
struct call {
	struct http_api *api;
	struct http_req *req;
	const char *tenant;            /* whom the caller acts for (api.c's seam); as long as c */
	char tenant_name[64];          /* a key's tenant, which c->tenant then points to */
	const struct api_route *route; /* the route being served */
	/* The key that authenticated the call: its id ("" without keys, and
	 * "admin" for the admin key); for the audit and the logs. */
	char key_id[24];
	bool admin; /* the admin key (or no keys at all): may call API_AUTH_ADMIN routes */
	/* The request's id: the client's X-Request-Id when it is a sane token,
	 * else ours; echoed in the answer, in the logs and the audit. */
	char request_id[72];
	char traceparent[64];            /* a valid W3C traceparent from the caller, or "" */
	char id[SESSION_ID_LEN + 1];     /* the route's {id}, checked; "" without one */
	char *path;                      /* the route's {path...}, decoded and checked; owned */
	char key[API_KEY_PARAM_MAX + 1]; /* the route's {key} (an API key id, unchecked); "" */
	bool stream;                     /* exec: NDJSON events */
	api_body_fn on_body;             /* api_read_body */
	int64_t started_us;              /* monotonic, when the head was complete: durations */
	int64_t op_start_us;             /* the create or the exec was started */
	bool pool_hit;                   /* create: a warm sandbox served it */
	bool done;                       /* its access line is written (api_access.c) */
	struct api_audit_code
	    *audit_code;       /* exec: the code's hash and head (api_audit.c); free() */
	char route_tenant[64]; /* the route's {tenant}, checked; "" without one */
	char signature[FAILURE_SIG_HEX + 1]; /* the route's {signature}, checked; "" */
	struct api_quota_hold *hold;         /* quota reservations held (api_quota_gate.c) */
	/* A call made inside the daemon (api_subcall: the MCP tools): its
	 * answer goes to sink instead of c->req (the MCP request's, borrowed:
	 * only headers are read from it), and api_read_body gives sink_body. */
	struct api_sink *sink;
	bool load_counted;   /* in its tenant's busy connections (api_load.c) */
	bool stream_counted; /* ... and its event streams */
};

/* api_subcall's answer: the status and the JSON body (an error is the
 * API's {"error":{...}} with its status), borrowed for the call. */
typedef void (*api_sink_fn)(int status, const char *body, size_t len, void *arg);
struct api_sink {
	api_sink_fn fn;
	void *arg;
	char *body; /* the request body to give api_read_body; owned */
	size_t len;
};
/* Serve method path (a v1 route, with its query-less path) with body
 * (len bytes, copied; NULL for none) as parent's caller (its tenant, key
 * and request id), in this process: the route's handler runs as for a
 * client, quotas and audit alike, and its answer goes to fn(arg) exactly
 * once, from the loop. No forwarding to another node: the route runs here.
 * Not for routes that stream (files, NDJSON). */
void api_subcall(struct call *parent, const char *method, const char *path, const char *body,
		 size_t len, api_sink_fn fn, void *arg);

/* api_wait.c: a call waiting on a store operation that cannot be
 * cancelled (its callback's argument): api_wait_done gives the call back,
 * or NULL when the daemon stopped and answered it meanwhile
 * (api_waits_stop, from http_api_free), and the caller's ctx (which the
 * callback still owns then). */
struct api_wait *api_wait_new(struct call *c, void *ctx);
struct call *api_wait_done(struct api_wait *w, void **ctx);
/* api_wait_done for a wait without ctx, which also answers e when the
 * store failed: the call to go on with, or NULL (answered already). */
struct call *api_wait_answered(struct api_wait *w, const struct err *e);
void api_waits_stop(struct http_api *api);

/* api_query.c: the query string (http_req_query). A parameter's decoded
 * value (NULL when absent or not decodable; caller frees); whether every
 * value decodes; a number within [min, max] or def when absent (-1 when it
 * is not one). */
char *api_query_param(const char *query, const char *name);
bool api_query_decodes(const char *query);
int api_query_num(const char *query, const char *name, long def, long min, long max, long *out);

/* Answer and free c: with e when it is set (its code's status; Retry-After
 * on unavailable; logged when 5xx), else with g's JSON (status), or with no
 * body when g is NULL (204). */
void api_reply(struct call *c, int status, yajl_gen g, const struct err *e);

/* Answer and free c with a body that is already text. */
void api_reply_body(struct call *c, int status, const char *content_type, const char *body,
		    size_t len);

/* Answer and free c with an error made here. */
void api_fail(struct call *c, enum err_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answer and free c for a c->id that is not live here: 410 with the
 * tombstone, or 404. */
void api_missing(struct call *c);

/* Read c's body, whole and capped (max_body_bytes), then call fn(c, body,
 * len) (body NUL-terminated). A body the server refused (too large,
 * malformed) it has answered itself; c is then freed and fn not called. */
void api_read_body(struct call *c, api_body_fn fn);

/* Answer and free c with e, an error of a manager call about c->id, and
 * free e: not_found (the session is not live here) is answered as
 * api_missing does. */
void api_fail_session(struct call *c, struct err *e);

/* api_load.c: a tenant's share of the node's connections. admit counts c
 * (a call of a known tenant) against max-conns-per-tenant, and
 * stream_begin an event stream against max-event-streams(-per-tenant);
 * false when refused (c answered: 429 or 503, the connection closes).
 * api_call_free releases what c held. */
bool api_load_admit(struct call *c);
bool api_load_stream_begin(struct call *c);
void api_load_release(struct call *c);
void api_load_free_all(struct http_api *api);

/* api_snapshots.c: snapshots and workspaces (snapshot.h). */
void api_snapshots_take(struct call *c);
void api_snapshots_list(struct call *c);
void api_snapshots_get(struct call *c);
void api_snapshots_delete(struct call *c);
void api_workspaces_list(struct call *c);
/* A create's restore into its new session s: c is answered (201 with
 * "restored", or the error, the session then discarded). -1 when it could
 * not start (c is still the caller's). */
int api_snapshots_restore(struct call *c, const struct session *s, const char *snap_id,
			  const char *workspace, struct err **errp);

/* api_packages.c: POST /v1/sessions/{id}/packages (install.h). */
void api_packages_install(struct call *c);

/* Free c without answering: its streamed reply is over, or the server has
 * answered (a refused body). */
void api_call_free(struct call *c);

/* ---- who the caller is (api_auth.c) ---- */

/* Read the admin key file (--admin-key-file) and turn keys on; without the
 * option, nothing (every caller is "default"). -1 when the file is
 * unusable: the daemon must not start. */
int api_auth_start(struct http_api *api, struct err **errp);
/* Answer the calls still waiting for a key lookup (503) and free it all. */
void api_auth_stop(struct http_api *api);
bool api_auth_enabled(const struct http_api *api);
/* Forget what the cache knows of key id (it was revoked here). */
void api_auth_forget(struct http_api *api, const char *id);

/* Whether c's caller may call a route of kind need. 1: yes, now
 * (c->tenant, c->key_id, c->admin are set). -1: no, and c has been
 * answered (401 with WWW-Authenticate, 403, or 503 when Redis cannot say)
 * and freed. 0: Redis is being asked; done(c) will run once, from the
 * loop, when the answer is yes, else c is answered and freed there. */
typedef void (*api_auth_done_fn)(struct call *c);
int api_auth_check(struct call *c, enum api_auth need, api_auth_done_fn done);

/* The route table, in matching order (exposed for the unit tests). */
extern const struct api_route api_routes[];
extern const size_t api_routes_count;

/* api_access.c: c's access line and request metrics when its reply ends. */
void api_access_begin(struct call *c);

/* Handlers, by file. */
void api_probes_healthz(struct call *c);
void api_probes_readyz(struct call *c);
void api_probes_metrics(struct call *c);
void api_probes_start(struct http_api *api);
void api_probes_stop(struct http_api *api);

void api_version_get(struct call *c);

/* api_mcp.c: the MCP endpoint (docs/mcp.md): POST one JSON-RPC message;
 * GET and DELETE are 405 (no server stream, no session to end). */
void api_mcp_post(struct call *c);
void api_mcp_refuse(struct call *c);

/* api_images.c: GET /v1/images (the profiles and what their images say of
 * themselves, cached); stop answers its waiting calls 503 and frees it. */
void api_images_list(struct call *c);
void api_images_stop(struct http_api *api);

void api_sessions_list(struct call *c);
void api_sessions_create(struct call *c);
void api_sessions_get(struct call *c);
void api_sessions_patch(struct call *c);
void api_sessions_delete(struct call *c);
void api_sessions_keepalive(struct call *c);

void api_exec_run(struct call *c);
/* A request's timeout_s (0: not given) against what it may be: the
 * session's limits.exec_timeout_s when s is given, else this node's
 * --max-exec-timeout-s. Above it: -1 and a bad_request naming the bound
 * (never a silently lower deadline). */
int api_timeout_check(const struct config *cfg, const struct session *s, int64_t timeout_s,
		      struct err **errp);
void api_exec_oneshot(struct call *c);
void api_exec_interrupt(struct call *c);

void api_files_list(struct call *c);
void api_files_put(struct call *c);
void api_files_get(struct call *c);
void api_files_delete(struct call *c);

void api_events_watch(struct call *c);
/* The manager's session events, to every watcher of the session's tenant. */
void api_events_on_session(const char *type, const struct session *s, const char *detail,
			   void *arg);
/* End every open event stream cleanly. */
void api_events_end_all(struct http_api *api);
void api_admin_orphans(struct call *c);

/* api_cluster.c: several nodes on one Redis (cluster.h, forward.h). The
 * route of a caller already admitted: here, or forwarded to the node that
 * owns the session (or has room for a new one); an api_handler. */
struct api_cluster *api_cluster_new(struct cluster *cl, struct forwarder *fwd);
void api_cluster_free(struct api_cluster *ac);
void api_cluster_route(struct call *c);
/* Whether c came from a peer node (the cluster secret): not counted again. */
bool api_cluster_from_peer(const struct call *c);
/* Whether c carries a cluster token that is not the secret (forward.h). */
bool api_cluster_forged(const struct call *c);
void api_cluster_nodes(struct call *c);
void api_cluster_forget(struct call *c);
/* Its series on /metrics (api_probes.c). */
struct buf;
int api_cluster_metrics(struct http_api *api, struct buf *b);
void api_admin_gc(struct call *c);
void api_admin_drain(struct call *c);
void api_admin_unknown(struct call *c);

void api_keys_create(struct call *c);
void api_keys_list(struct call *c);
void api_keys_revoke(struct call *c);
/* The audit trail (api_audit.c). Each hook records one entry for c: its
 * tenant, key, request id, traceparent, session (c->id unless given), and
 * the time since the request came. */
/* The outcome of an action that ended with e: "ok", or e's code name. */
const char *api_audit_outcome(const struct err *e);
/* An action on nothing more than c says (admin actions: the key created or
 * revoked, the tenant whose quota was set, go in target; NULL for none). */
void api_audit(struct call *c, const char *action, const char *outcome, const char *target);
/* A session create or delete: session is the new id (create) or NULL (c->id). */
void api_audit_session(struct call *c, const char *action, const char *session,
		       const struct err *e);
/* Keep what the entry of an execution needs of its code (hash and head)
 * before the request is released; api_audit_exec then records it. */
void api_audit_exec_code(struct call *c, const char *code, size_t len);
void api_audit_exec(struct call *c, const char *action, const struct exec_result *r,
		    const struct err *e);
/* A file written (size, -1 when it failed) or deleted: c->path. */
void api_audit_file(struct call *c, const char *action, int64_t size, const struct err *e);
/* GET /v1/audit (the caller's tenant) and GET /v1/admin/audit (any). */
void api_audit_list(struct call *c);
void api_admin_audit(struct call *c);
/* End every audit query in flight (their calls are answered). */
void api_audit_stop(struct http_api *api);
/* api_runs.c: the workflow's runs (runs.h). */
void api_runs_session(struct call *c);
void api_runs_oneshot(struct call *c);
void api_runs_get(struct call *c);
void api_runs_stop(struct http_api *api);
/* The fixer tenant's run may use: the request's own (within the allowed
 * URLs and the tenant's key files), or the daemon's default, or none; into
 * *out (owned). */
int api_runs_fixer(struct http_api *api, const char *tenant, const struct run_request *req,
		   struct run_fixer *out, struct err **errp);

/* api_failures.c: the tenant's failure memory. */
void api_failures_list(struct call *c);
void api_failures_delete(struct call *c);
/* api_reviews.c: the review queue and the reviewer's page. */
void api_reviews_list(struct call *c);
void api_reviews_get(struct call *c);
void api_reviews_approve(struct call *c);
void api_reviews_reject(struct call *c);
void api_reviews_page(struct call *c);
void api_reviews_page_js(struct call *c);
void api_reviews_page_css(struct call *c);
/* An approve (approve true) or reject body: *tree (free with json_free)
 * holds the code and comment it points to (NULL when absent); -1 with a
 * bad_request. Pure, for the fuzz target. */
int api_reviews_parse_decision(const char *body, size_t len, bool approve, yajl_val *tree,
			       const char **code, const char **comment, struct err **errp);
/* api_quota.c: the quota and usage routes. */
void api_quota_get(struct call *c);
void api_quota_put(struct call *c);
void api_quota_usage(struct call *c);
void api_quota_usage_own(struct call *c);

/* api_quota_gate.c: quotas on the way in. Every tenant's override is read
 * from Redis at most once a second per daemon (a PUT here applies at once;
 * one on another daemon within a second). */
void api_quota_start(struct http_api *api);
/* Cancel what waits on Redis; the calls waiting are freed unanswered. */
void api_quota_stop(struct http_api *api);
/* Run h(c) once c's tenant is within requests_per_second (else 429), and
 * count the request. */
void api_quota_gate(struct call *c, api_handler h);

/* What a call asks to reserve before it runs: a session of memory_mb and
 * disk_mb, an execution that may run exec_timeout_s, or both (the
 * one-shot). */
struct api_quota_ask {
	bool session;
	int64_t memory_mb, disk_mb;
	bool exec;
	int64_t exec_timeout_s;
};
typedef void (*api_quota_next)(struct call *c, void *ctx);
/* Reserve what ask says for c's tenant, then next(c, ctx) (from the loop).
 * Over a quota: 429 quota_exceeded with Retry-After and the quota's name;
 * Redis unreachable while a quota needs checking: 503. Either way c is
 * answered and freed, and ctx_free(ctx) called. What is reserved is held by
 * c (c->hold) and given back when c is freed, unless committed first. */
void api_quota_admit(struct call *c, const struct api_quota_ask *ask, api_quota_next next,
		     void *ctx, void (*ctx_free)(void *ctx));
/* The same, but over a quota refused(c, ctx, why) instead of the 429 (c
 * not answered; ctx its again): for a run, whose ladder answers then. */
typedef void (*api_quota_refused)(struct call *c, void *ctx, const char *why);
void api_quota_admit_or(struct call *c, const struct api_quota_ask *ask, api_quota_next next,
			api_quota_refused refused, void *ctx, void (*ctx_free)(void *ctx));
/* The same, at once, when nothing needs checking: an execution whose
 * tenant's quotas are known and have no executions or
 * exec_seconds_per_hour (it is counted for the usage without waiting, held
 * by c). false: use api_quota_admit. */
bool api_quota_admit_now(struct call *c, const struct api_quota_ask *ask);
/* The create c reserved for is session s: the reservation becomes s's
 * (released when s ends, store.c). */
void api_quota_session_created(struct call *c, const struct session *s);
/* The execution c reserved for ran duration_ms (counted when c is freed;
 * without this, the time since the admission is). */
void api_quota_exec_ran(struct call *c, int64_t duration_ms);
/* Give back what c holds (api_call_free). */
void api_quota_release(struct call *c);
/* c's tenant's effective quotas as known now (the cached override over the
 * flags; the flags alone for a tenant not read yet). */
void api_quota_effective(struct call *c, struct quota *out);

/* A call waiting on a Redis op of the quota routes, cancelled by
 * api_quota_stop (which frees ctx with ctx_free, and c): new (registered),
 * done (unregistered and freed; ctx is then its owner's again). */
struct api_quota_wait *api_quota_wait_new(struct call *c, void *ctx, void (*ctx_free)(void *ctx));
void api_quota_wait_set_op(struct api_quota_wait *w, struct store_quota_op *op);
struct call *api_quota_wait_done(struct api_quota_wait *w);
/* A tenant's override as this daemon now knows it (after a PUT). */
void api_quota_learn(struct http_api *api, const char *tenant, const struct quota_override *o);
/* 429 quota_exceeded for quota n, Retry-After retry_s. */
void api_quota_refuse(struct call *c, int n, int64_t retry_s);

#endif
