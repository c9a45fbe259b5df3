/* api_exec.c: POST /v1/sessions/{id}/exec (one answer, or NDJSON events
 * as the code runs) and the one-shot POST /v1/exec, which the manager runs
 * (manager_oneshot). */
#include "api.h"

#include <stdlib.h>
#include <string.h>

#include "api_requests.h"
#include "clock.h"
#include "json.h"
#include "metrics.h"
#include "xalloc.h"

/* Live output beyond this much unsent data is dropped from the stream (the
 * final result still carries it, capped): a slow client must not make the
 * daemon buffer without bound. */
#define STREAM_BACKLOG_CAP (8u << 20)

static void exec_event_cb(const char *type, const char *data, size_t len,
			  const struct exec_display *display, void *arg)
{
	struct call *c = arg;
	if (http_req_client_gone(c->req) || http_req_output_backlog(c->req) > STREAM_BACKLOG_CAP)
		return;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "type", type);
	if (display != NULL) {
		exec_display_members(display, g);
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

/* The last line of a stream: the result event, or an error event. */
static void exec_stream_end(struct call *c, const struct exec_result *r, const struct err *e)
{
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
	api_call_free(c);
}

/* Count a result: by status, its latency and its tenant's usage. The
 * latency is ours from the request (microseconds), or, for the one-shot
 * whose request also created a session, the execution's own. */
static void count_result(struct call *c, const struct exec_result *r)
{
	c->api->execs[r->status]++;
	double seconds = c->op_start_us ? (double)(clock_mono_us() - c->op_start_us) / 1e6
					: (double)r->duration_ms / 1000.0;
	metrics_count_exec(c->api->metrics, c->tenant, seconds);
}

/* Count the result and answer with it (200), or with e. */
static void reply_result(struct call *c, const struct exec_result *r, const struct err *e)
{
	AUTOGEN yajl_gen g = NULL;
	if (r) {
		count_result(c, r);
		g = json_gen_new();
		exec_result_to_json(r, g);
	}
	api_reply(c, 200, g, e);
}

static void exec_done_cb(const struct exec_result *r, const struct err *e, void *arg)
{
	struct call *c = arg;
	api_audit_exec(c, "exec", r, e);
	api_quota_exec_ran(c, r ? r->duration_ms : -1);
	if (!c->stream) {
		reply_result(c, r, e);
		return;
	}
	if (r)
		count_result(c, r);
	exec_stream_end(c, r, e);
}

static void xr_free(void *arg)
{
	exec_request_release(arg);
	free(arg);
}

/* The body as an exec request (heap, xr_free), or NULL with c answered.
 * The audit keeps the code's hash and head from here on. */
static struct exec_request *parse_exec(struct call *c, const char *body, size_t len, bool oneshot)
{
	struct err *e = NULL;
	struct exec_request *xr = xcalloc(1, sizeof(*xr));
	if (api_parse_exec_request(body, len, oneshot, xr, &e) < 0) {
		api_reply(c, 0, NULL, e);
		err_free(e);
		xr_free(xr);
		return NULL;
	}
	api_audit_exec_code(c, xr->code, xr->len);
	return xr;
}

/* Within the tenant's quotas (a slot reserved, api_quota_gate.c): run. */
static void exec_admitted(struct call *c, void *arg)
{
	struct exec_request *xr = arg;
	struct err *e = NULL;
	c->op_start_us = clock_mono_us();
	int rc =
	    manager_exec_lang(c->api->mgr, c->id, c->tenant, xr->language, xr->code, xr->len,
			      xr->timeout_s, c->stream ? exec_event_cb : NULL, exec_done_cb, c, &e);
	xr_free(xr);
	if (rc == 0) {
		if (c->stream)
			http_req_reply_start(c->req, 200, "application/x-ndjson", -1);
		return;
	}
	api_audit_exec(c, "exec", NULL, e);
	api_fail_session(c, e);
}

int api_timeout_check(const struct config *cfg, const struct session *s, int64_t timeout_s,
		      struct err **errp)
{
	if (s && timeout_s > s->limits.exec_timeout_s)
		return err_set(errp, ERR_BAD_REQUEST,
			       "timeout_s %lld is above this session's limit %lld "
			       "(limits.exec_timeout_s, at most --max-exec-timeout-s %lld on this "
			       "node)",
			       (long long)timeout_s, (long long)s->limits.exec_timeout_s,
			       (long long)cfg->max_exec_timeout_s);
	if (timeout_s > cfg->max_exec_timeout_s)
		return err_set(
		    errp, ERR_BAD_REQUEST,
		    "timeout_s %lld is above this node's maximum %lld (--max-exec-timeout-s)",
		    (long long)timeout_s, (long long)cfg->max_exec_timeout_s);
	return 0;
}

static void exec_body(struct call *c, const char *body, size_t len)
{
	struct exec_request *xr = parse_exec(c, body, len, false);
	if (xr == NULL)
		return;
	c->stream = xr->stream;
	const struct session *s = manager_get(c->api->mgr, c->id, c->tenant);
	if (s == NULL) { /* nothing to reserve for: the manager answers why */
		exec_admitted(c, xr);
		return;
	}
	struct err *e = NULL;
	if (api_timeout_check(c->api->cfg, s, xr->timeout_s, &e) < 0) {
		api_reply(c, 0, NULL, e);
		err_free(e);
		xr_free(xr);
		return;
	}
	struct api_quota_ask ask = {
	    .exec = true,
	    .exec_timeout_s = xr->timeout_s ? xr->timeout_s : s->limits.exec_timeout_s,
	};
	if (api_quota_admit_now(c, &ask))
		exec_admitted(c, xr);
	else
		api_quota_admit(c, &ask, exec_admitted, xr, xr_free);
}

void api_exec_run(struct call *c)
{
	api_read_body(c, exec_body);
}

/* POST /v1/sessions/{id}/interrupt: Ctrl-C for the running execution (its
 * own request gets the result); 200 {"interrupted": whether one ran}. */
void api_exec_interrupt(struct call *c)
{
	struct err *e = NULL;
	bool interrupted;
	if (manager_interrupt(c->api->mgr, c->id, c->tenant, &interrupted, &e) < 0) {
		api_audit(c, "exec_interrupt", api_audit_outcome(e), NULL);
		api_fail_session(c, e);
		return;
	}
	api_audit(c, "exec_interrupt", interrupted ? "ok" : "nothing_running", NULL);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_bool(g, "interrupted", interrupted);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

/* ---- one-shot ---- */

static void oneshot_done(const struct exec_result *r, const struct err *e, bool created, void *arg)
{
	struct call *c = arg;
	api_audit_exec(c, "exec_oneshot", r, e);
	api_quota_exec_ran(c, r ? r->duration_ms : -1);
	if (created) {
		c->api->creates++;
		metrics_count_tenant_session(c->api->metrics, c->tenant);
	} else {
		c->api->create_failures++;
	}
	reply_result(c, r, e);
}

static void oneshot_admitted(struct call *c, void *arg)
{
	struct exec_request *xr = arg;
	struct err *e = NULL;
	if (manager_oneshot(c->api->mgr, c->tenant, xr, oneshot_done, c, &e) < 0) {
		api_audit_exec(c, "exec_oneshot", NULL, e);
		api_reply(c, 0, NULL, e);
		err_free(e);
	}
	xr_free(xr);
}

static void oneshot_body(struct call *c, const char *body, size_t len)
{
	struct exec_request *xr = parse_exec(c, body, len, true);
	if (xr == NULL)
		return;
	/* A session and an execution at once, both reserved first. */
	const struct config *cfg = c->api->cfg;
	struct err *e = NULL;
	if (api_timeout_check(cfg, NULL, xr->timeout_s, &e) < 0) {
		api_reply(c, 0, NULL, e);
		err_free(e);
		xr_free(xr);
		return;
	}
	struct api_quota_ask ask = {
	    .session = true,
	    .memory_mb = cfg->memory_mb,
	    .disk_mb = cfg->disk_mb,
	    .exec = true,
	    .exec_timeout_s = xr->timeout_s ? xr->timeout_s : cfg->exec_timeout_s,
	};
	api_quota_admit(c, &ask, oneshot_admitted, xr, xr_free);
}

void api_exec_oneshot(struct call *c)
{
	api_read_body(c, oneshot_body);
}
