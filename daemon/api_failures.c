/* api_failures.c: GET /v1/failures and DELETE /v1/failures/{signature}:
 * the caller's tenant's failure memory (store_failures.h). A tenant sees and
 * forgets only its own: the tenant is the call's, never a parameter. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "store_failures.h"
#include "xalloc.h"

#define FAILURES_LIMIT_DEFAULT 100
#define FAILURES_LIMIT_MAX 1000

/* ---- GET /v1/failures[?limit=N] ---- */

static void record_to_json(yajl_gen g, const struct failure_record *r)
{
	jg_obj(g);
	jg_kv_str(g, "signature", r->signature);
	jg_kv_str(g, "ename", r->ename);
	jg_kv_str(g, "message", r->message);
	jg_kv_str(g, "line", r->line);
	jg_kv_str(g, "image", r->image);
	jg_kv_str(g, "class", r->class_name); /* null when none */
	jg_kv_int(g, "seen", r->seen);
	jg_kv_int(g, "retried", r->retried);
	jg_str(g, "fixed");
	jg_obj(g);
	jg_kv_int(g, "rule", r->fixed_rule);
	jg_kv_int(g, "fixer", r->fixed_fixer);
	jg_obj_end(g);
	jg_kv_time(g, "first_seen", r->first_ms);
	jg_kv_time(g, "last_seen", r->last_ms);
	jg_obj_end(g);
}

static void listed(const struct err *e, const struct failure_record *recs, size_t n, void *arg)
{
	struct call *c = api_wait_answered(arg, e);
	if (c == NULL)
		return;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "failures");
	jg_arr(g);
	for (size_t i = 0; i < n; i++)
		record_to_json(g, &recs[i]);
	jg_arr_end(g);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

/* limit=N from the query (1 .. FAILURES_LIMIT_MAX), the default when
 * absent; -1 when it is there and not that. Any other parameter is
 * refused too: a filter we do not have must not read as "all". */
static int query_limit(const char *q, long *limit)
{
	*limit = FAILURES_LIMIT_DEFAULT;
	for (const char *p = q; p && *p;) {
		size_t n = strcspn(p, "&");
		if (n > 6 && strncmp(p, "limit=", 6) == 0) {
			AUTOFREE char *v = xstrndup(p + 6, n - 6);
			char *end = NULL;
			long x = strtol(v, &end, 10);
			if (*v < '0' || *v > '9' || *end != '\0' || x < 1 || x > FAILURES_LIMIT_MAX)
				return -1;
			*limit = x;
		} else if (n > 0) {
			return -1;
		}
		p += n;
		p += *p == '&';
	}
	return 0;
}

void api_failures_list(struct call *c)
{
	long limit;
	if (query_limit(http_req_query(c->req), &limit) < 0) {
		api_fail(c, ERR_BAD_REQUEST,
			 "the only parameter is limit, an integer from 1 to %d (default %d)",
			 FAILURES_LIMIT_MAX, FAILURES_LIMIT_DEFAULT);
		return;
	}
	store_failures_list(c->api->store, c->tenant, (size_t)limit, listed, api_wait_new(c, NULL));
}

/* ---- DELETE /v1/failures/{signature} ---- */

static void deleted(const struct err *e, bool found, void *arg)
{
	struct call *c = api_wait_done(arg, NULL);
	if (c == NULL)
		return;
	char target[48];
	snprintf(target, sizeof(target), "failure %s", c->signature);
	api_audit(c, "failure_delete",
		  e       ? api_audit_outcome(e)
		  : found ? "ok"
			  : "not_found",
		  target);
	if (e)
		api_reply(c, 0, NULL, e);
	else if (!found)
		api_fail(c, ERR_NOT_FOUND, "no failure %s", c->signature);
	else
		api_reply(c, 204, NULL, NULL);
}

void api_failures_delete(struct call *c)
{
	/* c->signature was checked by the route matcher */
	store_failure_delete(c->api->store, c->tenant, c->signature, deleted,
			     api_wait_new(c, NULL));
}
