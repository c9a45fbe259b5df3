/* reviews.c: opening review cases (reviews.h): a new id, the case in the
 * tenant's queue (store_reviews.h), then, when a webhook is configured, a
 * review.pending event with the time the store recorded. */
#include "reviews.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "session.h"
#include "store_reviews.h"
#include "webhook.h"
#include "xalloc.h"

struct open_op;

struct reviews {
	struct event_base *base;
	struct store *st;
	struct webhook *wh;
	int64_t ttl_s;
	LIST_HEAD(, open_op) ops; /* in flight: told when rv goes first */
};

struct reviews *reviews_new(struct event_base *base, struct store *st, struct webhook *wh,
			    int64_t ttl_s)
{
	struct reviews *rv = xcalloc(1, sizeof(*rv));
	rv->base = base;
	rv->st = st;
	rv->wh = wh;
	rv->ttl_s = ttl_s;
	LIST_INIT(&rv->ops);
	return rv;
}

/* An op whose Redis call is in flight when rv is freed stays until its
 * callback (the store answers every call, a lost connection included),
 * which then only frees it. */
struct open_op {
	LIST_ENTRY(open_op) link;
	struct reviews *rv; /* NULL once rv is freed */
	char tenant[64];
	char id[SESSION_ID_LEN + 1];
	char run_id[SESSION_ID_LEN + 1];
	reviews_open_cb cb;
	void *arg;
};

void reviews_free(struct reviews *rv)
{
	if (rv == NULL)
		return;
	struct open_op *op;
	while ((op = LIST_FIRST(&rv->ops)) != NULL) {
		LIST_REMOVE(op, link);
		op->rv = NULL;
	}
	free(rv);
}

static void op_free(struct open_op *op)
{
	if (op->rv)
		LIST_REMOVE(op, link);
	free(op);
}

static void notify(struct open_op *op, int64_t created_ms)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "event", "review.pending");
	jg_kv_str(g, "tenant", op->tenant);
	jg_kv_str(g, "review", op->id);
	jg_kv_str(g, "run", op->run_id);
	jg_kv_int(g, "created_ms", created_ms);
	jg_obj_end(g);
	size_t len;
	const char *text = jg_text(g, &len);
	webhook_send(op->rv->wh, text, len);
}

/* The stored case, read back for its created_ms (Redis's clock, which
 * every node shares); the event goes out either way. */
static void read_back(const struct err *e, const struct review_record *recs, size_t n, void *arg)
{
	struct open_op *op = arg;
	if (op->rv)
		notify(op, e == NULL && n == 1 ? recs[0].created_ms : clock_now_ms());
	op_free(op);
}

static void stored(const struct err *e, void *arg)
{
	struct open_op *op = arg;
	if (op->rv == NULL) {
		op_free(op);
		return;
	}
	if (e) {
		struct err *w = err_new(e->code, "review queue: %s", e->message);
		op->cb(w, NULL, op->arg);
		err_free(w);
		op_free(op);
		return;
	}
	log_info("review %s opened for run %s of tenant %s", op->id, op->run_id, op->tenant);
	op->cb(NULL, op->id, op->arg);
	if (op->rv == NULL || op->rv->wh == NULL) {
		op_free(op); /* (rv freed from cb: op is off its list already) */
		return;
	}
	store_review_get(op->rv->st, op->tenant, op->id, read_back, op);
}

void reviews_open(struct reviews *rv, const char *tenant, const char *run_id, const char *case_json,
		  size_t case_len, reviews_open_cb cb, void *arg)
{
	struct open_op *op = xcalloc(1, sizeof(*op));
	op->rv = rv;
	snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
	snprintf(op->run_id, sizeof(op->run_id), "%s", run_id);
	session_new_id(op->id);
	op->cb = cb;
	op->arg = arg;
	LIST_INSERT_HEAD(&rv->ops, op, link);
	store_review_put(rv->st, tenant, op->id, run_id, case_json, case_len, rv->ttl_s, stored,
			 op);
}
