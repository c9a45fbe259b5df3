/* api_runs.c: runs (docs/workflow.md): POST /v1/sessions/{id}/runs, the
 * one-shot POST /v1/runs (one answer when the run stops running, or with
 * "stream": NDJSON, an event per attempt and the run last), and
 * GET /v1/runs/{id} (?wait_s= waits for the end). The engine is runs.c. */
#include "api.h"

#include <stdlib.h>
#include <string.h>

#include "api_requests.h"
#include "clock.h"
#include "fixer_target.h"
#include "json.h"
#include "runs.h"
#include "session.h"
#include "xalloc.h"

/* GET's longest wait, and how often a run of another node is read again. */
#define RUN_WAIT_MAX_S 300
#define RUN_POLL_MS 250
/* Stream lines beyond this much unsent data are dropped (the last line,
 * the run, is always sent). */
#define RUN_STREAM_BACKLOG_CAP (8u << 20)

/* One call waiting on a run: a POST until the run settles, or a GET's
 * long poll. Listed in api->run_calls, so that a stop ends them. */
struct api_run_call {
	LIST_ENTRY(api_run_call) link;
	struct call *c;
	struct run_watch *watch;
	struct run_load *load;
	struct event *timer;
	int64_t deadline_ms;
	bool oneshot;
	struct run_request req; /* POST: until the run starts */
	struct run_fixer fixer;
};

static struct api_run_call *rc_new(struct call *c)
{
	struct api_run_call *rc = xcalloc(1, sizeof(*rc));
	rc->c = c;
	LIST_INSERT_HEAD(&c->api->run_calls, rc, link);
	return rc;
}

static void rc_free(struct api_run_call *rc)
{
	LIST_REMOVE(rc, link);
	run_unwatch(rc->watch);
	runs_load_cancel(rc->load);
	if (rc->timer)
		event_free(rc->timer);
	run_request_release(&rc->req);
	run_fixer_clear(&rc->fixer);
	free(rc);
}

static void rc_free_ctx(void *arg)
{
	rc_free(arg);
}

void api_runs_stop(struct http_api *api)
{
	while (!LIST_EMPTY(&api->run_calls)) {
		struct api_run_call *rc = LIST_FIRST(&api->run_calls);
		struct call *c = rc->c;
		bool streaming = c->stream && rc->watch == NULL && rc->load == NULL;
		rc_free(rc);
		if (streaming) {
			http_req_reply_end(c->req);
			api_call_free(c);
		} else {
			api_fail(c, ERR_UNAVAILABLE, "the daemon is shutting down");
		}
	}
}

/* ---- the fixer ---- */

int api_runs_fixer(struct http_api *api, const char *tenant, const struct run_request *req,
		   struct run_fixer *out, struct err **errp)
{
	memset(out, 0, sizeof(*out));
	if (req->fixer_null || api->fixers == NULL)
		return 0; /* "fixer": null: the rules only */
	struct fixer_target t = {0};
	int rc = fixer_targets_resolve(api->fixers, tenant, req->fixer_url, req->fixer_model,
				       req->fixer_key_file, &t, errp);
	if (rc < 0)
		return -1;
	if (rc == FIXER_OK) {
		out->url = t.url ? xstrdup(t.url) : NULL;
		out->model = t.model ? xstrdup(t.model) : NULL;
		out->key = t.key ? xstrdup(t.key) : NULL;
	}
	fixer_target_clear(&t);
	return 0;
}

/* ---- answering with a run ---- */

static void reply_run(struct call *c, struct run *run)
{
	AUTOGEN yajl_gen g = json_gen_new();
	run_to_json(run, g, false);
	api_reply(c, 200, g, NULL);
}

static void stream_line(struct call *c, yajl_gen g)
{
	size_t n;
	const char *text = jg_text(g, &n);
	http_req_reply_chunk(c->req, text, n);
	http_req_reply_chunk(c->req, "\n", 1);
}

/* The POST's watch: attempts (streamed), the one-shot's session (its quota
 * reservation moves to it), and the end of the first answer. */
static void post_watch(struct run *run, const char *event, void *arg)
{
	struct api_run_call *rc = arg;
	struct call *c = rc->c;
	if (strcmp(event, "session") == 0) {
		const struct session *s = manager_get(c->api->mgr, run_session(run), c->tenant);
		if (s)
			api_quota_session_created(c, s);
		return;
	}
	if (strcmp(event, "attempt") == 0) {
		if (http_req_client_gone(c->req) ||
		    http_req_output_backlog(c->req) > RUN_STREAM_BACKLOG_CAP)
			return;
		AUTOGEN yajl_gen g = json_gen_new();
		run_last_attempt_json(run, g);
		stream_line(c, g);
		return;
	}
	if (strcmp(event, "settled") != 0)
		return;
	rc->watch = NULL; /* the engine frees the watch of a final event */
	api_quota_exec_ran(c, run_exec_ms(run));
	rc_free(rc);
	if (c->stream) {
		AUTOGEN yajl_gen g = json_gen_new();
		run_to_json(run, g, true);
		stream_line(c, g);
		http_req_reply_end(c->req);
		api_call_free(c);
		return;
	}
	reply_run(c, run);
}

/* Start the run; unavailable: the sandbox tier cannot take it (over a
 * quota), the ladder answers. */
static void run_begin(struct call *c, struct api_run_call *rc, const char *unavailable)
{
	struct err *e = NULL;
	struct run *run = NULL;
	/* The stateless rung's quotas go with the run (its ladder reads them). */
	struct quota q;
	api_quota_effective(c, &q);
	rc->req.stateless_denied = q.v[QUOTA_STATELESS] == 0;
	rc->req.stateless_cap = q.v[QUOTA_STATELESS_RUNS];
	if (runs_start(c->api->runs, c->tenant, c->key_id, rc->oneshot ? NULL : c->id, &rc->req,
		       &rc->fixer, unavailable, &run, &e) < 0) {
		rc_free(rc);
		api_fail_session(c, e);
		return;
	}
	rc->watch = run_watch(run, c->stream, false, post_watch, rc);
	if (!c->stream)
		return;
	/* The first line names the run, so a client can GET it later. */
	http_req_reply_start(c->req, 200, "application/x-ndjson", -1);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "type", "started");
	jg_kv_str(g, "run", run_id(run));
	jg_obj_end(g);
	stream_line(c, g);
}

static void run_admitted(struct call *c, void *arg)
{
	run_begin(c, arg, NULL);
}

static void run_refused(struct call *c, void *arg, const char *why)
{
	run_begin(c, arg, why);
}

static void run_body(struct call *c, const char *body, size_t len, bool oneshot)
{
	struct err *e = NULL;
	if (c->api->runs == NULL) {
		api_fail(c, ERR_UNAVAILABLE, "runs are not available on this node");
		return;
	}
	struct api_run_call *rc = rc_new(c);
	rc->oneshot = oneshot;
	if (api_parse_run_request(body, len, oneshot, &rc->req, &e) < 0 ||
	    api_runs_fixer(c->api, c->tenant, &rc->req, &rc->fixer, &e) < 0) {
		rc_free(rc);
		api_reply(c, 0, NULL, e);
		err_free(e);
		return;
	}
	c->stream = rc->req.stream;
	api_audit_exec_code(c, rc->req.code, rc->req.len);
	const struct config *cfg = c->api->cfg;
	int64_t per = rc->req.timeout_s ? rc->req.timeout_s : cfg->exec_timeout_s;
	if (!oneshot) {
		const struct session *s = manager_get(c->api->mgr, c->id, c->tenant);
		if (s == NULL) { /* the engine answers why */
			run_begin(c, rc, NULL);
			return;
		}
		if (!rc->req.timeout_s)
			per = s->limits.exec_timeout_s;
	}
	struct err *te = NULL;
	if (api_timeout_check(cfg, oneshot ? NULL : manager_get(c->api->mgr, c->id, c->tenant),
			      rc->req.timeout_s, &te) < 0) {
		rc_free(rc);
		api_reply(c, 0, NULL, te);
		err_free(te);
		return;
	}
	/* One execution slot for the whole run: its attempts run one at a time,
	 * the fixer's time between them, and the stateless rung after them (the
	 * tier counts against the tenant's executions like the sandbox). */
	int64_t held = rc->req.max_attempts * (per + cfg->fixer_timeout_ms / 1000 + 1);
	for (size_t i = 0; i < rc->req.n_on_failure; i++)
		if (rc->req.on_failure[i] == RUN_MODE_STATELESS)
			held += cfg->stateless_timeout_s + 1;
	struct api_quota_ask ask = {
	    .session = oneshot,
	    .memory_mb = cfg->memory_mb,
	    .disk_mb = cfg->disk_mb,
	    .exec = true,
	    .exec_timeout_s = held,
	};
	if (!oneshot && api_quota_admit_now(c, &ask))
		run_begin(c, rc, NULL);
	else
		api_quota_admit_or(c, &ask, run_admitted, run_refused, rc, rc_free_ctx);
}

static void session_run_body(struct call *c, const char *body, size_t len)
{
	run_body(c, body, len, false);
}

static void oneshot_run_body(struct call *c, const char *body, size_t len)
{
	run_body(c, body, len, true);
}

void api_runs_session(struct call *c)
{
	api_read_body(c, session_run_body);
}

void api_runs_oneshot(struct call *c)
{
	api_read_body(c, oneshot_run_body);
}

/* ---- GET /v1/runs/{id} ---- */

static void get_watch(struct run *run, const char *event, void *arg)
{
	struct api_run_call *rc = arg;
	if (strcmp(event, "done") != 0)
		return;
	struct call *c = rc->c;
	rc->watch = NULL;
	rc_free(rc);
	reply_run(c, run);
}

static void get_timeout(evutil_socket_t fd, short what, void *arg);

static void loaded(const struct err *e, const char *json, size_t len, bool done, void *arg)
{
	struct api_run_call *rc = arg;
	struct call *c = rc->c;
	rc->load = NULL;
	if (e) {
		rc_free(rc);
		api_reply(c, 0, NULL, e);
		return;
	}
	if (json == NULL) {
		rc_free(rc);
		api_fail(c, ERR_NOT_FOUND, "run %s not found", c->id);
		return;
	}
	if (done || clock_mono_ms() + RUN_POLL_MS > rc->deadline_ms) {
		rc_free(rc);
		api_reply_body(c, 200, "application/json", json, len);
		return;
	}
	if (rc->timer == NULL)
		rc->timer = evtimer_new(c->api->base, get_timeout, rc);
	struct timeval again = {0, RUN_POLL_MS * 1000};
	evtimer_add(rc->timer, &again);
}

static void get_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct api_run_call *rc = arg;
	struct call *c = rc->c;
	struct run *run = runs_find(c->api->runs, c->tenant, c->id);
	if (rc->watch || run) { /* a local run's wait is over: as it stands */
		rc_free(rc);
		if (run)
			reply_run(c, run);
		else
			api_fail(c, ERR_NOT_FOUND, "run %s not found", c->id);
		return;
	}
	rc->load = runs_load(c->api->runs, c->tenant, c->id, loaded, rc);
}

void api_runs_get(struct call *c)
{
	const char *qs = http_req_query(c->req);
	long wait_s;
	if (!api_query_decodes(qs) ||
	    api_query_num(qs, "wait_s", 0, 0, RUN_WAIT_MAX_S, &wait_s) < 0) {
		api_fail(c, ERR_BAD_REQUEST, "wait_s must be an integer from 0 to %d",
			 RUN_WAIT_MAX_S);
		return;
	}
	if (c->api->runs == NULL) {
		api_fail(c, ERR_UNAVAILABLE, "runs are not available on this node");
		return;
	}
	struct run *run = runs_find(c->api->runs, c->tenant, c->id);
	if (run && (wait_s == 0 || run_state(run) == RUN_DONE)) {
		reply_run(c, run);
		return;
	}
	struct api_run_call *rc = rc_new(c);
	rc->deadline_ms = clock_mono_ms() + wait_s * 1000;
	if (run) {
		rc->watch = run_watch(run, false, true, get_watch, rc);
		rc->timer = evtimer_new(c->api->base, get_timeout, rc);
		struct timeval tv = {wait_s, 0};
		evtimer_add(rc->timer, &tv);
		return;
	}
	rc->load = runs_load(c->api->runs, c->tenant, c->id, loaded, rc);
}
