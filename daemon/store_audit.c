/* store_audit.c: the audit stream's writes and reads (store_audit.h), on
 * the store's hiredis connection; nothing here waits. */
#include "store_audit.h"
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defer.h"
#include "xalloc.h"

/* The write's privdata is the store itself: it outlives the connection
 * (store_free frees the context, which answers pending writes with NULL,
 * before the store), so nothing here can point at a freed object. */
static void add_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct store *st = privdata;
	redisReply *r = reply;
	if (st->audit_inflight > 0)
		st->audit_inflight--;
	if (r == NULL || r->type == REDIS_REPLY_ERROR)
		st->audit_dropped++;
}

void store_audit_add(struct store *st, int64_t maxlen, const struct store_audit_fields *f,
		     const char *json, size_t len)
{
	if (st->ac == NULL || !st->connected || st->audit_inflight >= STORE_AUDIT_INFLIGHT_MAX) {
		st->audit_dropped++;
		return;
	}
	char key[256], max[24], time[24];
	snprintf(key, sizeof(key), "%saudit", st->prefix);
	snprintf(max, sizeof(max), "%" PRId64, maxlen);
	snprintf(time, sizeof(time), "%" PRId64, f->time_ms);
	const char *argv[] = {"XADD",    key,
			      "MAXLEN",  "~",
			      max,       "*",
			      "time",    time,
			      "action",  f->action ? f->action : "",
			      "tenant",  f->tenant ? f->tenant : "",
			      "session", f->session ? f->session : "",
			      "outcome", f->outcome ? f->outcome : "",
			      "json",    json};
	size_t n = sizeof(argv) / sizeof(argv[0]);
	size_t lens[sizeof(argv) / sizeof(argv[0])];
	for (size_t i = 0; i < n; i++)
		lens[i] = i == n - 1 ? len : strlen(argv[i]);
	if (redisAsyncCommandArgv(st->ac, add_reply, st, (int)n, argv, lens) != REDIS_OK) {
		st->audit_dropped++;
		return;
	}
	st->audit_inflight++;
}

uint64_t store_audit_dropped(const struct store *st)
{
	return st->audit_dropped;
}

/* ---- reads ---- */

/* Freed by range_reply, which the reply (or the deferred failure) runs. */
struct store_audit_read {
	const char *not_sent; /* why it failed before it was sent, or NULL */
	store_audit_cb cb;    /* NULL once cancelled */
	void *arg;
	char error[128];
};

static void range_reply(redisAsyncContext *ac, void *reply, void *privdata);

static void read_not_sent(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	range_reply(NULL, NULL, arg);
}

/* The string value of field name in a flat [f1, v1, f2, v2, ...] reply,
 * or "" (a reply from Redis is outside input: every type is checked). */
static const char *field(const redisReply *kv, const char *name, size_t *len)
{
	for (size_t i = 0; i + 1 < kv->elements; i += 2) {
		const redisReply *k = kv->element[i], *v = kv->element[i + 1];
		if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
		    strcmp(k->str, name) == 0) {
			if (len)
				*len = v->len;
			return v->str;
		}
	}
	if (len)
		*len = 0;
	return "";
}

static void range_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct store_audit_read *op = privdata;
	redisReply *r = reply;
	if (op->cb == NULL) {
		free(op);
		return;
	}
	if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
		snprintf(op->error, sizeof(op->error), "redis: reading the audit stream: %s",
			 op->not_sent                   ? op->not_sent
			 : r == NULL                    ? "connection lost"
			 : r->type == REDIS_REPLY_ERROR ? r->str
							: "unexpected reply");
		op->cb(&(struct err){.code = ERR_UNAVAILABLE, .message = op->error}, NULL, 0,
		       op->arg);
		free(op);
		return;
	}
	struct store_audit_item *items = xcalloc(r->elements + 1, sizeof(*items));
	size_t n = 0;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *el = r->element[i];
		if (el->type != REDIS_REPLY_ARRAY || el->elements != 2 ||
		    el->element[0]->type != REDIS_REPLY_STRING ||
		    el->element[1]->type != REDIS_REPLY_ARRAY)
			continue;
		const redisReply *kv = el->element[1];
		struct store_audit_item *it = &items[n++];
		it->id = el->element[0]->str;
		it->tenant = field(kv, "tenant", NULL);
		it->action = field(kv, "action", NULL);
		it->session = field(kv, "session", NULL);
		it->json = field(kv, "json", &it->json_len);
	}
	op->cb(NULL, items, n, op->arg);
	free(items);
	free(op);
}

struct store_audit_read *store_audit_range(struct store *st, const char *lo, const char *hi,
					   bool newest_first, size_t count, store_audit_cb cb,
					   void *arg)
{
	struct store_audit_read *op = xcalloc(1, sizeof(*op));
	op->cb = cb;
	op->arg = arg;
	if (st->ac == NULL || !st->connected) {
		op->not_sent = "redis is not reachable";
		defer_call(st->base, read_not_sent, op);
		return op;
	}
	if (count == 0 || count > STORE_AUDIT_READ_MAX)
		count = STORE_AUDIT_READ_MAX;
	char key[256], cnt[24];
	snprintf(key, sizeof(key), "%saudit", st->prefix);
	snprintf(cnt, sizeof(cnt), "%zu", count);
	const char *argv[] = {newest_first ? "XREVRANGE" : "XRANGE",
			      key,
			      newest_first ? hi : lo,
			      newest_first ? lo : hi,
			      "COUNT",
			      cnt};
	if (redisAsyncCommandArgv(st->ac, range_reply, op, 6, argv, NULL) != REDIS_OK) {
		op->not_sent = "could not send the read";
		defer_call(st->base, read_not_sent, op);
	}
	return op;
}

void store_audit_cancel(struct store_audit_read *op)
{
	if (op)
		op->cb = NULL;
}
