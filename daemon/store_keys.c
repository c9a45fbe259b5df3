/* store_keys.c: API keys in Redis (store.h has the layout): a hash per key
 * and a set of the ids. What Redis holds is checked like any outside
 * input: a key whose fields are not of the right shape is no key. */
#include "store.h"
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apikey.h"
#include "defer.h"
#include "xalloc.h"

/* ---- one key ---- */

struct store_key_op {
	struct store *st;
	store_key_cb cb; /* NULL once cancelled */
	void *arg;
	char id[APIKEY_ID_LEN + 1];
};

/* Redis is not connected: the reply callback gets what a lost connection
 * gives it (a NULL reply), from the loop. */
struct no_redis {
	redisCallbackFn *fn;
	void *privdata;
};

static void no_redis_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct no_redis *n = arg;
	n->fn(NULL, NULL, n->privdata);
	free(n);
}

static bool keys_unreachable(struct store *st, redisCallbackFn *fn, void *privdata)
{
	if (st->ac != NULL && st->connected)
		return false;
	struct no_redis *n = xcalloc(1, sizeof(*n));
	n->fn = fn;
	n->privdata = privdata;
	defer_call(st->base, no_redis_deferred, n);
	return true;
}

/* The fields tenant, sha256, created of HMGET, as a key; -1 when absent or
 * malformed. */
static int key_from_fields(const char *id, redisReply *r, struct store_key *k)
{
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3)
		return -1;
	for (size_t i = 0; i < 3; i++)
		if (r->element[i]->type != REDIS_REPLY_STRING || r->element[i]->len > 80)
			return -1;
	memset(k, 0, sizeof(*k));
	snprintf(k->id, sizeof(k->id), "%s", id);
	snprintf(k->tenant, sizeof(k->tenant), "%s", r->element[0]->str);
	snprintf(k->sha256, sizeof(k->sha256), "%s", r->element[1]->str);
	char *end = NULL;
	k->created = strtoll(r->element[2]->str, &end, 10);
	if (!apikey_tenant_valid(r->element[0]->str) || !apikey_sha256_valid(r->element[1]->str) ||
	    end == r->element[2]->str || *end != '\0')
		return -1;
	return 0;
}

static void key_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct store_key_op *op = privdata;
	redisReply *r = reply;
	if (op->cb) {
		struct store_key k;
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			char msg[160];
			snprintf(msg, sizeof(msg), "redis: %.120s",
				 r ? r->str : "not reachable (a key lookup)");
			op->cb(&(struct err){.code = ERR_UNAVAILABLE, .message = msg}, NULL,
			       op->arg);
		} else {
			op->cb(NULL, key_from_fields(op->id, r, &k) == 0 ? &k : NULL, op->arg);
		}
	}
	free(op);
}

struct store_key_op *store_key_get(struct store *st, const char *id, store_key_cb cb, void *arg)
{
	struct store_key_op *op = xcalloc(1, sizeof(*op));
	op->st = st;
	op->cb = cb;
	op->arg = arg;
	snprintf(op->id, sizeof(op->id), "%s", id);
	if (keys_unreachable(st, key_reply, op))
		return op;
	redisAsyncCommand(st->ac, key_reply, op, "HMGET %skey:%s tenant sha256 created", st->prefix,
			  id);
	return op;
}

void store_key_cancel(struct store_key_op *op)
{
	if (op)
		op->cb = NULL;
}

/* ---- writes ---- */

struct key_write {
	store_done_cb done;
	store_key_del_cb del;
	void *arg;
};

/* EXEC's reply: an array, whose first element says for a DEL whether the
 * key existed. */
static void write_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct key_write *w = privdata;
	redisReply *r = reply;
	bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1;
	char msg[160];
	snprintf(msg, sizeof(msg), "redis: %.120s",
		 r == NULL                      ? "connection lost"
		 : r->type == REDIS_REPLY_ERROR ? r->str
						: "transaction aborted");
	struct err e = {.code = ERR_UNAVAILABLE, .message = msg};
	if (w->done)
		w->done(ok ? NULL : &e, w->arg);
	else
		w->del(ok ? NULL : &e,
		       ok && r->element[0]->type == REDIS_REPLY_INTEGER &&
			   r->element[0]->integer > 0,
		       w->arg);
	free(w);
}

/* A write's MULTI begun, or NULL when Redis is not there (the callback
 * then runs from the loop). */
static struct key_write *write_begin(struct store *st, store_done_cb done, store_key_del_cb del,
				     void *arg)
{
	struct key_write *w = xcalloc(1, sizeof(*w));
	*w = (struct key_write){.done = done, .del = del, .arg = arg};
	if (keys_unreachable(st, write_reply, w))
		return NULL;
	redisAsyncCommand(st->ac, NULL, NULL, "MULTI");
	return w;
}

void store_key_put(struct store *st, const struct store_key *k, store_done_cb cb, void *arg)
{
	struct key_write *w = write_begin(st, cb, NULL, arg);
	if (w == NULL)
		return;
	redisAsyncCommand(st->ac, NULL, NULL, "HSET %skey:%s tenant %s sha256 %s created %lld",
			  st->prefix, k->id, k->tenant, k->sha256, (long long)k->created);
	redisAsyncCommand(st->ac, NULL, NULL, "SADD %skeys %s", st->prefix, k->id);
	redisAsyncCommand(st->ac, write_reply, w, "EXEC");
}

void store_key_del(struct store *st, const char *id, store_key_del_cb cb, void *arg)
{
	struct key_write *w = write_begin(st, NULL, cb, arg);
	if (w == NULL)
		return;
	redisAsyncCommand(st->ac, NULL, NULL, "DEL %skey:%s", st->prefix, id);
	redisAsyncCommand(st->ac, NULL, NULL, "SREM %skeys %s", st->prefix, id);
	redisAsyncCommand(st->ac, write_reply, w, "EXEC");
}

/* ---- the list ---- */

/* SMEMBERS, then one HMGET per id, pipelined; the last reply answers. */
struct list_op {
	struct store *st;
	store_keys_cb cb;
	void *arg;
	char *tenant; /* NULL: all */
	struct store_key *keys;
	size_t n, pending;
	bool failed;
	char why[160];
};

struct list_item {
	struct list_op *op;
	char id[APIKEY_ID_LEN + 1];
};

static int key_cmp(const void *a, const void *b)
{
	const struct store_key *x = a, *y = b;
	if (x->created != y->created)
		return x->created < y->created ? -1 : 1;
	return strcmp(x->id, y->id);
}

static void list_finish(struct list_op *op)
{
	if (op->failed) {
		op->cb(&(struct err){.code = ERR_UNAVAILABLE, .message = op->why}, NULL, 0,
		       op->arg);
	} else {
		if (op->n > 1) /* qsort may not be given NULL, even for 0 */
			qsort(op->keys, op->n, sizeof(*op->keys), key_cmp);
		op->cb(NULL, op->keys, op->n, op->arg);
	}
	free(op->keys);
	free(op->tenant);
	free(op);
}

static void list_item_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct list_item *it = privdata;
	struct list_op *op = it->op;
	(void)ac;
	redisReply *r = reply;
	struct store_key k;
	if (r == NULL || r->type == REDIS_REPLY_ERROR) {
		op->failed = true;
		snprintf(op->why, sizeof(op->why), "redis: %.120s",
			 r ? r->str : "connection lost while listing keys");
	} else if (key_from_fields(it->id, r, &k) == 0) {
		if (op->tenant == NULL || strcmp(op->tenant, k.tenant) == 0)
			op->keys[op->n++] = k;
	}
	free(it);
	if (--op->pending == 0)
		list_finish(op);
}

static void list_members_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct list_op *op = privdata;
	redisReply *r = reply;
	if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
		op->failed = true;
		snprintf(op->why, sizeof(op->why), "redis: %s",
			 r ? "SMEMBERS of the keys failed" : "not reachable");
		list_finish(op);
		return;
	}
	size_t want = 0;
	for (size_t i = 0; i < r->elements && want < STORE_KEYS_LIST_MAX; i++)
		if (r->element[i]->type == REDIS_REPLY_STRING &&
		    apikey_id_valid(r->element[i]->str))
			want++;
	if (want == 0) {
		list_finish(op);
		return;
	}
	op->keys = xcalloc(want, sizeof(*op->keys));
	op->pending = want;
	size_t sent = 0;
	for (size_t i = 0; i < r->elements && sent < want; i++) {
		redisReply *el = r->element[i];
		if (el->type != REDIS_REPLY_STRING || !apikey_id_valid(el->str))
			continue;
		struct list_item *it = xcalloc(1, sizeof(*it));
		it->op = op;
		snprintf(it->id, sizeof(it->id), "%s", el->str);
		redisAsyncCommand(ac, list_item_reply, it, "HMGET %skey:%s tenant sha256 created",
				  op->st->prefix, it->id);
		sent++;
	}
}

void store_key_list(struct store *st, const char *tenant, store_keys_cb cb, void *arg)
{
	struct list_op *op = xcalloc(1, sizeof(*op));
	op->st = st;
	op->cb = cb;
	op->arg = arg;
	op->tenant = tenant ? xstrdup(tenant) : NULL;
	if (keys_unreachable(st, list_members_reply, op))
		return;
	redisAsyncCommand(st->ac, list_members_reply, op, "SMEMBERS %skeys", st->prefix);
}
