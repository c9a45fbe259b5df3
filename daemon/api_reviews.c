/* api_reviews.c: the human review queue (docs/api.md, Reviews): listing a
 * tenant's cases, one case, approving (optionally with edited code) and
 * rejecting (with a comment); and the reviewer's web page, GET /review, its
 * script and its style, which are static and hold no data (the script asks
 * /v1/reviews with the key the reviewer pastes).
 *
 * Another tenant's case is answered exactly as one that never existed: the
 * store is asked under the caller's tenant, so it is never found. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "runs.h"
#include "store_reviews.h"
#include "xalloc.h"

#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 500
#define COMMENT_MAX 16384

/* The decision a wait carries: approve when its context is this. */
static const char approve_tag = 1;

/* ---- answers ---- */

static void gen_review(yajl_gen g, const struct review_record *r)
{
	jg_obj(g);
	jg_kv_str(g, "id", r->id);
	jg_kv_str(g, "run", r->run_id);
	jg_kv_str(g, "state", review_state_name(r->state));
	jg_kv_time(g, "created_at", r->created_ms);
	if (r->state == REVIEW_PENDING || r->decided_ms <= 0) {
		jg_str(g, "decided_at");
		jg_null(g);
	} else {
		jg_kv_time(g, "decided_at", r->decided_ms);
	}
	jg_kv_str(g, "comment", r->comment);
	jg_kv_str(g, "code", r->code);
	/* The run as it was queued; what Redis holds is parsed (capped depth)
	 * and written again, so the answer is valid JSON whatever it holds. */
	jg_str(g, "case");
	struct err *e = NULL;
	yajl_val v = json_parse(r->case_json, r->case_len, &e);
	if (v == NULL) {
		err_free(e);
		jg_null(g);
	} else {
		jg_value(g, v);
		json_free(v);
	}
	jg_obj_end(g);
}

/* 409 conflict: the error shape of docs/api.md with a code of its own
 * (err.h has none for a state conflict; busy means "running"). */
static void reply_conflict(struct call *c, const char *id)
{
	char msg[128];
	snprintf(msg, sizeof(msg), "review %s is already decided", id);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "error");
	jg_obj(g);
	jg_kv_str(g, "code", "conflict");
	jg_kv_str(g, "message", msg);
	jg_obj_end(g);
	jg_obj_end(g);
	size_t len;
	const char *text = jg_text(g, &len);
	api_reply_body(c, 409, "application/json", text, len);
}

static void reply_not_found(struct call *c)
{
	api_fail(c, ERR_NOT_FOUND, "no such review");
}

/* ---- GET /v1/reviews ---- */

static void reviews_listed(const struct err *e, const struct review_record *recs, size_t n,
			   void *arg)
{
	struct call *c = api_wait_answered(arg, e);
	if (c == NULL)
		return;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "reviews");
	jg_arr(g);
	for (size_t i = 0; i < n; i++)
		gen_review(g, &recs[i]);
	jg_arr_end(g);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

void api_reviews_list(struct call *c)
{
	const char *qs = http_req_query(c->req);
	bool pending_only = true;
	long limit = LIST_LIMIT_DEFAULT;
	if (!api_query_decodes(qs)) {
		api_fail(c, ERR_BAD_REQUEST,
			 "a query parameter is not valid percent-encoding or has a NUL byte");
		return;
	}
	AUTOFREE char *st = api_query_param(qs, "state");
	if (st && strcmp(st, "all") == 0) {
		pending_only = false;
	} else if (st && strcmp(st, "pending") != 0) {
		api_fail(c, ERR_BAD_REQUEST, "state: expected pending or all");
		return;
	}
	if (api_query_num(qs, "limit", LIST_LIMIT_DEFAULT, 1, LIST_LIMIT_MAX, &limit) < 0) {
		api_fail(c, ERR_BAD_REQUEST, "limit: expected an integer from 1 to %d",
			 LIST_LIMIT_MAX);
		return;
	}
	store_reviews_list(c->api->store, c->tenant, pending_only, (size_t)limit, reviews_listed,
			   api_wait_new(c, NULL));
}

/* ---- GET /v1/reviews/{id} ---- */

static void review_got(const struct err *e, const struct review_record *recs, size_t n, void *arg)
{
	struct call *c = api_wait_answered(arg, e);
	if (c == NULL)
		return;
	if (n == 0) {
		reply_not_found(c);
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	gen_review(g, &recs[0]);
	api_reply(c, 200, g, NULL);
}

void api_reviews_get(struct call *c)
{
	store_review_get(c->api->store, c->tenant, c->id, review_got, api_wait_new(c, NULL));
}

/* ---- POST /v1/reviews/{id}/approve and /reject ---- */

static void decided(const struct err *e, bool found, const struct review_record *rec, void *arg)
{
	void *tag;
	struct call *c = api_wait_done(arg, &tag);
	bool approve = tag == (void *)&approve_tag;
	if (c == NULL)
		return;
	if (e) {
		api_audit(c, "review", api_audit_outcome(e), c->id);
		api_reply(c, 0, NULL, e);
		return;
	}
	if (!found) {
		api_audit(c, "review", "not_found", c->id);
		reply_not_found(c);
		return;
	}
	if (rec == NULL) {
		api_audit(c, "review", "conflict", c->id);
		reply_conflict(c, c->id);
		return;
	}
	api_audit(c, "review", approve ? "approved" : "rejected", rec->id);
	log_info("review %s of tenant %s %s (run %s)", rec->id, c->tenant,
		 approve ? "approved" : "rejected", rec->run_id);
	if (c->api->runs)
		runs_review_decided(c->api->runs, c->tenant, rec->run_id, rec->id, approve,
				    rec->code, rec->code ? strlen(rec->code) : 0, rec->comment);
	AUTOGEN yajl_gen g = json_gen_new();
	gen_review(g, rec);
	api_reply(c, 200, g, NULL);
}

/* {"code": "...", "comment": "..."}: each optional for an approval; a
 * rejection needs a comment. Strings borrowed from v. */
static int parse_decision(yajl_val v, bool approve, const char **code, const char **comment,
			  struct err **errp)
{
	*code = *comment = NULL;
	if (v == NULL)
		goto check;
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "the body must be a JSON object");
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		yajl_val x = v->u.object.values[i];
		bool is_code = strcmp(k, "code") == 0;
		if (!(strcmp(k, "comment") == 0 || (approve && is_code)))
			return err_set(errp, ERR_BAD_REQUEST, "unknown field '%.64s'", k);
		if (YAJL_IS_NULL(x))
			continue;
		if (!YAJL_IS_STRING(x))
			return err_set(errp, ERR_BAD_REQUEST, "%s: expected a string, got %s", k,
				       json_type_name(x));
		if (is_code)
			*code = YAJL_GET_STRING(x);
		else
			*comment = YAJL_GET_STRING(x);
	}
check:
	if (*comment && strlen(*comment) > COMMENT_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "comment: at most %d bytes", COMMENT_MAX);
	if (*comment && **comment == '\0')
		*comment = NULL;
	if (!approve && *comment == NULL)
		return err_set(errp, ERR_BAD_REQUEST,
			       "comment: a rejection needs a non-empty comment");
	if (*code && **code == '\0')
		return err_set(errp, ERR_BAD_REQUEST, "code: must not be empty");
	return 0;
}

int api_reviews_parse_decision(const char *body, size_t len, bool approve, yajl_val *tree,
			       const char **code, const char **comment, struct err **errp)
{
	*tree = NULL;
	/* An approval may come without a body (or with an empty one). */
	size_t ws = 0;
	while (ws < len && strchr(" \t\r\n", body[ws]) && body[ws] != '\0')
		ws++;
	if (ws < len && (*tree = json_parse(body, len, errp)) == NULL) {
		(*errp)->code = ERR_BAD_REQUEST;
		return -1;
	}
	if (parse_decision(*tree, approve, code, comment, errp) < 0) {
		json_free(*tree);
		*tree = NULL;
		return -1;
	}
	return 0;
}

static void decide_body(struct call *c, const char *body, size_t len, bool approve)
{
	AUTOERR struct err *e = NULL;
	yajl_val v = NULL;
	const char *code, *comment;
	if (api_reviews_parse_decision(body, len, approve, &v, &code, &comment, &e) < 0) {
		api_reply(c, 0, NULL, e);
		return;
	}
	struct api_wait *w = api_wait_new(c, approve ? (void *)&approve_tag : NULL);
	store_review_decide(c->api->store, c->tenant, c->id, approve, code, code ? strlen(code) : 0,
			    comment, c->key_id[0] ? c->key_id : c->tenant, decided, w);
	json_free(v);
}

static void approve_body(struct call *c, const char *body, size_t len)
{
	decide_body(c, body, len, true);
}

static void reject_body(struct call *c, const char *body, size_t len)
{
	decide_body(c, body, len, false);
}

void api_reviews_approve(struct call *c)
{
	api_read_body(c, approve_body);
}

void api_reviews_reject(struct call *c)
{
	api_read_body(c, reject_body);
}

/* ---- the reviewer's page ---- */

/* build/gen/review_page.c, from daemon/review_page.{html,js,css}. */
extern const char review_page_html[], review_page_js[], review_page_css[];

/* Everything the page shows came from untrusted code and sandboxes: no
 * inline script or style, nothing from elsewhere, no framing, no sniffing. */
static void page_reply(struct call *c, const char *type, const char *body)
{
	http_req_add_header(c->req, "Content-Security-Policy",
			    "default-src 'none'; script-src 'self'; connect-src 'self'; "
			    "style-src 'self'");
	http_req_add_header(c->req, "X-Content-Type-Options", "nosniff");
	http_req_add_header(c->req, "X-Frame-Options", "DENY");
	http_req_add_header(c->req, "Referrer-Policy", "no-referrer");
	http_req_add_header(c->req, "Cache-Control", "no-store");
	api_reply_body(c, 200, type, body, strlen(body));
}

void api_reviews_page(struct call *c)
{
	page_reply(c, "text/html; charset=utf-8", review_page_html);
}

void api_reviews_page_js(struct call *c)
{
	page_reply(c, "text/javascript; charset=utf-8", review_page_js);
}

void api_reviews_page_css(struct call *c)
{
	page_reply(c, "text/css; charset=utf-8", review_page_css);
}
