/* store.c: hiredis async on the event loop; registry writes and tombstones. */
#include "store.h"
#include "store_internal.h"

#include <arpa/inet.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "defer.h"
#include "json.h"
#include "log.h"
#include "session_json.h"
#include "xalloc.h"

int store_parse_url(const char *url, char **host, int *port, char **path, int *db,
		    struct err **errp)
{
	*host = *path = NULL;
	*port = 6379;
	*db = 0;
	if (strncmp(url, "unix://", 7) == 0 || strncmp(url, "unix:", 5) == 0) {
		const char *p = url + (strncmp(url, "unix://", 7) == 0 ? 7 : 5);
		if (*p != '/')
			return err_set(errp, ERR_BAD_REQUEST,
				       "redis url %s: unix path must be absolute", url);
		*path = xstrdup(p);
		return 0;
	}
	if (strncmp(url, "redis://", 8) != 0)
		return err_set(errp, ERR_BAD_REQUEST,
			       "redis url %s: expected redis://HOST:PORT[/DB], unix:///PATH or "
			       "sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB]",
			       url);
	const char *h = url + 8, *slash = strchr(h, '/'), *end = slash ? slash : h + strlen(h);
	const char *colon = memchr(h, ':', (size_t)(end - h));
	if (colon) {
		char *e = NULL;
		long p = strtol(colon + 1, &e, 10);
		if (e != end || p < 1 || p > 65535)
			return err_set(errp, ERR_BAD_REQUEST, "redis url %s: bad port", url);
		*port = (int)p;
	} else
		colon = end;
	if (colon == h)
		return err_set(errp, ERR_BAD_REQUEST, "redis url %s: no host", url);
	if (slash && slash[1]) {
		char *e = NULL;
		long d = strtol(slash + 1, &e, 10);
		if (*e != '\0' || d < 0 || d > 1000)
			return err_set(errp, ERR_BAD_REQUEST, "redis url %s: bad database number",
				       url);
		*db = (int)d;
	}
	*host = xstrndup(h, (size_t)(colon - h));
	return 0;
}

static void store_connect(struct store *st);

static void schedule_reconnect(struct store *st)
{
	struct timeval tv = {st->backoff_ms / 1000, (st->backoff_ms % 1000) * 1000};
	evtimer_add(st->reconnect, &tv);
	st->backoff_ms = st->backoff_ms * 2 > 500 ? 500 : st->backoff_ms * 2;
}

void store_retry_later(struct store *st)
{
	schedule_reconnect(st);
}

/* Drop the master's connection now (not after its pending replies: a
 * stalled or demoted master would keep them), and ask the sentinels again
 * after the backoff. Pending commands get their NULL reply ("connection
 * lost"). Safe inside one of the context's callbacks: hiredis defers the
 * free to the callback's end. */
static void store_drop(struct store *st, const char *why, bool loud)
{
	redisAsyncContext *ac = st->ac;
	if (ac == NULL)
		return;
	if (loud)
		log_warn("redis: leaving %s:%d: %s", st->host, st->port, why);
	else
		log_debug("redis: leaving %s:%d: %s", st->host, st->port, why);
	st->ac = NULL;
	st->connected = false;
	ac->data = NULL; /* disconnect_cb: not ours any more */
	redisAsyncFree(ac);
	schedule_reconnect(st);
}

void store_master_changed(struct store *st, const char *why)
{
	if (st->ac) {
		store_drop(st, why, true);
		/* A new master is known to exist: ask now, not after the backoff. */
		struct timeval now = {0, 0};
		evtimer_add(st->reconnect, &now);
		return;
	}
	/* Between attempts: ask now rather than after the backoff. */
	if (evtimer_pending(st->reconnect, NULL)) {
		struct timeval now = {0, 0};
		st->backoff_ms = 100;
		evtimer_add(st->reconnect, &now);
	}
}

/* A ROLE answer: "master" first, or why not (for the log). */
static const char *role_problem(const redisReply *r)
{
	if (r == NULL)
		return "the connection was lost before ROLE answered";
	if (r->type == REDIS_REPLY_ERROR)
		return "ROLE answered an error";
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		return "ROLE answered garbage";
	if (strcmp(r->element[0]->str, "master") != 0)
		return "is not a master (ROLE)";
	return NULL;
}

/* The first ROLE on a new connection: only a master is used. */
static void role_first_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store *st = privdata;
	if (ac->data != st || ac != st->ac)
		return;
	const char *why = role_problem(reply);
	if (why) {
		store_sentinel_not_master(st->sentinel, st->host, st->port, why);
		if (reply) /* already logged, once, by the sentinel side */
			store_drop(st, why, false);
		return; /* NULL: the disconnect callback reconnects */
	}
	st->connected = true;
	st->backoff_ms = 100;
	st->role_pending = 0;
	uint64_t seen = store_sentinel_failovers(st->sentinel);
	store_sentinel_master_ok(st->sentinel, st->host, st->port);
	st->master_is_new = store_sentinel_failovers(st->sentinel) != seen;
	if (st->on_connect)
		st->on_connect(st->on_connect_arg);
	st->master_is_new = false;
}

static void connect_cb(const redisAsyncContext *ac, int status)
{
	struct store *st = ac->data;
	if (st == NULL)
		return;
	if (status != REDIS_OK) {
		if (st->sentinel) /* logged there, once until it changes */
			store_sentinel_not_master(st->sentinel, st->host, st->port, ac->errstr);
		else
			log_warn("redis: connect failed: %s", ac->errstr);
		st->ac = NULL; /* hiredis frees the context after this callback */
		st->connected = false;
		schedule_reconnect(st);
		return;
	}
	if (st->sentinel) {
		/* Connected is not ready: the sentinels may have named a
		 * replica (or lied); ROLE says. */
		redisAsyncCommand((redisAsyncContext *)ac, role_first_reply, st, "ROLE");
		return;
	}
	st->connected = true;
	st->backoff_ms = 100;
	log_info("redis: connected");
	if (st->on_connect)
		st->on_connect(st->on_connect_arg);
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct store *st = ac->data;
	if (st == NULL)
		return; /* store_free or store_drop in progress */
	st->ac = NULL;
	st->connected = false;
	if (status != REDIS_OK)
		log_warn("redis: connection lost: %s", ac->errstr);
	schedule_reconnect(st);
}

static void connect_now(struct store *st)
{
	redisAsyncContext *ac =
	    st->path ? redisAsyncConnectUnix(st->path) : redisAsyncConnect(st->host, st->port);
	if (ac == NULL)
		abort();
	if (ac->err) {
		log_warn("redis: %s", ac->errstr);
		redisAsyncFree(ac);
		schedule_reconnect(st);
		return;
	}
	ac->data = st;
	st->wait_ticks = 0;
	redisLibeventAttach(ac, st->base);
	redisAsyncSetConnectCallback(ac, connect_cb);
	redisAsyncSetDisconnectCallback(ac, disconnect_cb);
	st->ac = ac;
	if (st->db)
		redisAsyncCommand(ac, NULL, NULL, "SELECT %d", st->db);
}

void store_connect_addr(struct store *st, const char *host, int port)
{
	free(st->host);
	st->host = xstrdup(host);
	st->port = port;
	connect_now(st);
}

static void store_connect(struct store *st)
{
	if (st->sentinel)
		store_sentinel_resolve(st->sentinel); /* ends in store_connect_addr */
	else
		connect_now(st);
}

static void reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	store_connect(arg);
}

/* A READONLY or LOADING error: the master we hold was demoted (or is a
 * replica loading its data): ask the sentinels again. */
static void store_reply_seen(struct store *st, const redisReply *r)
{
	if (st->sentinel && r && r->type == REDIS_REPLY_ERROR &&
	    (strncmp(r->str, "READONLY", 8) == 0 || strncmp(r->str, "LOADING", 7) == 0))
		store_drop(st, r->str, true);
}

static void ping_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct store *st = privdata;
	redisReply *r = reply;
	if (r == NULL || r->type == REDIS_REPLY_ERROR)
		st->connected = false;
	else
		st->connected = true;
}

/* With sentinels, the second's check is ROLE: a master that was demoted
 * under us (a graceful failover, a partition healed) is left within a
 * second, and one that stopped answering after three. */
static void role_check_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store *st = privdata;
	if (ac->data != st || ac != st->ac || reply == NULL)
		return;
	if (st->role_pending)
		st->role_pending--;
	const char *why = role_problem(reply);
	if (why) {
		store_sentinel_not_master(st->sentinel, st->host, st->port, why);
		store_drop(st, why, true);
	}
}

/* A PING a second notices a Redis that accepts but no longer answers. */
static void ping_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct store *st = arg;
	if (st->ac == NULL)
		return;
	if (st->sentinel == NULL) {
		redisAsyncCommand(st->ac, ping_reply, st, "PING");
		return;
	}
	if (!st->connected) {
		/* A connect or a first ROLE that hangs (hiredis 0.14 has no
		 * timeout of its own): given up after 3 s. */
		if (++st->wait_ticks >= 3) {
			store_sentinel_not_master(st->sentinel, st->host, st->port,
						  "did not answer ROLE within 3 s");
			store_drop(st, "no answer to ROLE", false);
		}
		return;
	}
	if (st->role_pending >= 3) {
		store_sentinel_not_master(st->sentinel, st->host, st->port,
					  "stopped answering (3 ROLE checks)");
		store_drop(st, "the master stopped answering", true);
		return;
	}
	st->role_pending++;
	redisAsyncCommand(st->ac, role_check_reply, st, "ROLE");
}

struct store *store_new(struct event_base *base, const char *url, const char *prefix,
			const char *node, int64_t tombstone_ttl_s, struct err **errp)
{
	char *host = NULL, *path = NULL;
	int port = 0, db = 0;
	struct store_sentinel_url su = {0};
	bool sentinel = strncmp(url, "sentinel://", 11) == 0;
	if (sentinel ? store_sentinel_parse_url(url, &su, errp) < 0
		     : store_parse_url(url, &host, &port, &path, &db, errp) < 0)
		return NULL;
	struct store *st = xcalloc(1, sizeof(*st));
	st->base = base;
	if (sentinel) {
		db = su.db;
		st->sentinel = store_sentinel_new(st, &su);
	}
	st->host = host;
	st->path = path;
	st->port = port;
	st->db = db;
	st->prefix = xstrdup(prefix);
	st->node = xstrdup(node);
	st->tomb_ttl_s = tombstone_ttl_s;
	st->backoff_ms = 100;
	st->reconnect = evtimer_new(base, reconnect_cb, st);
	st->ping = event_new(base, -1, EV_PERSIST, ping_cb, st);
	struct timeval one = {1, 0};
	event_add(st->ping, &one);
	store_connect(st);
	return st;
}

void store_free(struct store *st)
{
	if (st == NULL)
		return;
	if (st->ac) {
		st->ac->data = NULL;
		redisAsyncFree(st->ac);
	}
	store_sentinel_free(st->sentinel);
	if (st->resolving)
		evdns_getaddrinfo_cancel(st->resolving);
	if (st->dns)
		evdns_base_free(st->dns, 0);
	event_free(st->reconnect);
	event_free(st->ping);
	free(st->host);
	free(st->path);
	free(st->prefix);
	free(st->node);
	free(st);
}

bool store_connected(const struct store *st)
{
	return st->connected && st->ac != NULL;
}

void store_set_sentinel_timeout(struct store *st, int ms)
{
	if (st->sentinel)
		store_sentinel_set_timeout(st->sentinel, ms);
}

const char *store_master(const struct store *st)
{
	return st->sentinel ? store_sentinel_master(st->sentinel) : NULL;
}

const char *store_master_name(const struct store *st)
{
	return st->sentinel ? store_sentinel_name(st->sentinel) : NULL;
}

bool store_resolving(const struct store *st)
{
	return st->sentinel && !store_connected(st);
}

const char *store_problem(const struct store *st)
{
	return st->sentinel ? store_sentinel_problem(st->sentinel) : NULL;
}

uint64_t store_failovers(const struct store *st)
{
	return st->sentinel ? store_sentinel_failovers(st->sentinel) : 0;
}

bool store_master_is_new(const struct store *st)
{
	return st->master_is_new;
}

/* A write in flight; store_cancel clears its callback (the reply, when it
 * comes, frees it). */
struct store_op {
	struct store *st;
	store_done_cb cb;
	store_tomb_cb tomb_cb;
	void *arg;
	char error[256];
};

static void op_fail_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct store_op *op = arg;
	struct err e = {.code = ERR_UNAVAILABLE, .message = op->error};
	if (op->cb)
		op->cb(&e, op->arg);
	if (op->tomb_cb)
		op->tomb_cb(false, NULL, 0, NULL, NULL, op->arg);
	free(op);
}

static struct store_op *op_new(struct store *st, store_done_cb cb, void *arg)
{
	struct store_op *op = xcalloc(1, sizeof(*op));
	op->st = st;
	op->cb = cb;
	op->arg = arg;
	return op;
}

/* When Redis is not connected, answer through the loop (never inline). */
static bool op_unavailable(struct store_op *op)
{
	if (op->st->ac != NULL && op->st->connected)
		return false;
	snprintf(op->error, sizeof(op->error), "redis is not reachable");
	defer_call(op->st->base, op_fail_deferred, op);
	return true;
}

static void exec_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_op *op = privdata;
	redisReply *r = reply;
	if (ac == op->st->ac)
		store_reply_seen(op->st, r);
	if (op->cb) {
		if (r == NULL || r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_NIL) {
			struct err e = {.code = ERR_UNAVAILABLE, .message = op->error};
			snprintf(op->error, sizeof(op->error), "redis: %s",
				 r ? (r->type == REDIS_REPLY_NIL ? "transaction aborted" : r->str)
				   : "connection lost");
			op->cb(&e, op->arg);
		} else {
			op->cb(NULL, op->arg);
		}
	}
	free(op);
}

static char *session_record(const struct session *s, size_t *len)
{
	AUTOGEN yajl_gen g = json_gen_new();
	session_to_json(s, g, true);
	const char *t = jg_text(g, len);
	return xstrndup(t, *len);
}

/* SET record + ZADD clock + SADD node set, in one MULTI so a reader never
 * sees one without the other. With cb NULL the reply is ignored. */
static void put_record(struct store *st, const struct session *s, struct store_op *op)
{
	size_t len;
	AUTOFREE char *rec = session_record(s, &len);
	int64_t ttl_ms = s->expires_at_ms - clock_now_ms();
	if (ttl_ms < 1)
		ttl_ms = 1;
	redisAsyncCommand(st->ac, NULL, NULL, "MULTI");
	redisAsyncCommand(st->ac, NULL, NULL, "SET %ssession:%s %b PX %lld", st->prefix, s->id, rec,
			  len, (long long)ttl_ms);
	redisAsyncCommand(st->ac, NULL, NULL, "ZADD %sexpiry:%s %lld %s", st->prefix, st->node,
			  (long long)s->expires_at_ms, s->id);
	redisAsyncCommand(st->ac, NULL, NULL, "SADD %snode:%s:sessions %s", st->prefix, st->node,
			  s->id);
	if (s->tenant && *s->tenant)
		store_quota_touch_cmds(st, s->tenant, s->id, s->expires_at_ms);
	redisAsyncCommand(st->ac, op ? exec_reply : NULL, op, "EXEC");
}

struct store_op *store_session_put(struct store *st, const struct session *s, store_done_cb cb,
				   void *arg)
{
	struct store_op *op = op_new(st, cb, arg);
	if (op_unavailable(op))
		return op;
	put_record(st, s, op);
	return op;
}

void store_cancel(struct store_op *op)
{
	if (op)
		op->cb = NULL;
}

void store_session_touch(struct store *st, const struct session *s)
{
	if (st->ac == NULL || !st->connected)
		return;
	int64_t ttl_ms = s->expires_at_ms - clock_now_ms();
	if (ttl_ms < 1)
		ttl_ms = 1;
	redisAsyncCommand(st->ac, NULL, NULL, "PEXPIRE %ssession:%s %lld", st->prefix, s->id,
			  (long long)ttl_ms);
	redisAsyncCommand(st->ac, NULL, NULL, "ZADD %sexpiry:%s %lld %s", st->prefix, st->node,
			  (long long)s->expires_at_ms, s->id);
	if (s->tenant && *s->tenant)
		store_quota_touch_cmds(st, s->tenant, s->id, s->expires_at_ms);
}

void store_session_end(struct store *st, const struct session *s, const char *reason,
		       store_done_cb cb, void *arg)
{
	struct store_op *op = op_new(st, cb, arg);
	if (op_unavailable(op))
		return;
	AUTOGEN yajl_gen g = json_gen_new();
	int64_t now = clock_now_ms();
	jg_obj(g);
	jg_kv_str(g, "id", s->id);
	jg_kv_str(g, "tenant", s->tenant);
	jg_kv_str(g, "state", session_state_name(s->state));
	jg_kv_str(g, "reason", reason);
	jg_kv_time(g, "ended_at", now);
	jg_kv_int(g, "ended_at_ms", now);
	jg_kv_str(g, "node", s->node);
	jg_obj_end(g);
	size_t len;
	const char *tomb = jg_text(g, &len);
	redisAsyncCommand(st->ac, NULL, NULL, "MULTI");
	redisAsyncCommand(st->ac, NULL, NULL, "DEL %ssession:%s", st->prefix, s->id);
	redisAsyncCommand(st->ac, NULL, NULL, "ZREM %sexpiry:%s %s", st->prefix, st->node, s->id);
	redisAsyncCommand(st->ac, NULL, NULL, "SREM %snode:%s:sessions %s", st->prefix, st->node,
			  s->id);
	redisAsyncCommand(st->ac, NULL, NULL, "SET %stomb:%s %b EX %lld", st->prefix, s->id, tomb,
			  len, (long long)st->tomb_ttl_s);
	if (s->tenant && *s->tenant)
		store_quota_end_cmds(st, s->tenant, s->id);
	redisAsyncCommand(st->ac, exec_reply, op, "EXEC");
}

static void tomb_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct store_op *op = privdata;
	redisReply *r = reply;
	yajl_val v = NULL;
	struct err *e = NULL;
	if (r && r->type == REDIS_REPLY_STRING)
		v = json_parse(r->str, r->len, &e);
	int64_t ended = 0;
	json_get_int(v, "ended_at_ms", &ended);
	const char *reason = json_get_str(v, "reason"), *tenant = json_get_str(v, "tenant");
	op->tomb_cb(v != NULL && reason != NULL, reason, ended, json_get_str(v, "state"),
		    tenant ? tenant : "default", op->arg);
	err_free(e);
	if (v)
		yajl_tree_free(v);
	free(op);
}

void store_tombstone_get(struct store *st, const char *id, store_tomb_cb cb, void *arg)
{
	struct store_op *op = op_new(st, NULL, arg);
	op->tomb_cb = cb;
	if (op_unavailable(op))
		return;
	redisAsyncCommand(st->ac, tomb_reply, op, "GET %stomb:%s", st->prefix, id);
}

void store_set_connect_cb(struct store *st, void (*cb)(void *arg), void *arg)
{
	st->on_connect = cb;
	st->on_connect_arg = arg;
}

struct records_op {
	struct store *st;
	store_records_cb cb;
	void *arg;
	char **ids;
	int64_t *scores;
	size_t n;
};

static void records_fail(struct records_op *op, const char *why)
{
	struct err e = {.code = ERR_UNAVAILABLE, .message = (char *)why};
	op->cb(&e, NULL, NULL, NULL, 0, op->arg);
}

static void records_free(struct records_op *op)
{
	for (size_t i = 0; i < op->n; i++)
		free(op->ids[i]);
	free(op->ids);
	free(op->scores);
	free(op);
}

static void mget_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct records_op *op = privdata;
	redisReply *r = reply;
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != op->n) {
		records_fail(op, "redis: MGET of the node's records failed");
		records_free(op);
		return;
	}
	const char **texts = xcalloc(op->n, sizeof(char *));
	size_t *lens = xcalloc(op->n, sizeof(size_t));
	int64_t *expires = xcalloc(op->n, sizeof(int64_t));
	size_t k = 0;
	for (size_t i = 0; i < op->n; i++) {
		redisReply *el = r->element[i];
		if (el->type == REDIS_REPLY_STRING) {
			texts[k] = el->str;
			expires[k] = op->scores ? op->scores[i] : 0;
			lens[k++] = el->len;
		} else if (op->st->ac) {
			/* Expired by its TTL: the id no longer belongs in the set. */
			redisAsyncCommand(op->st->ac, NULL, NULL, "SREM %snode:%s:sessions %s",
					  op->st->prefix, op->st->node, op->ids[i]);
		}
	}
	op->cb(NULL, texts, lens, expires, k, op->arg);
	free(texts);
	free(lens);
	free(expires);
	records_free(op);
}

/* The expiry set's scores, then the records themselves. */
static void zmscore_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct records_op *op = privdata;
	redisReply *r = reply;
	if (r == NULL) {
		records_fail(op, "redis: connection lost while reading the expiry set");
		records_free(op);
		return;
	}
	op->scores = xcalloc(op->n, sizeof(int64_t));
	if (r->type == REDIS_REPLY_ARRAY && r->elements == op->n)
		for (size_t i = 0; i < op->n; i++)
			if (r->element[i]->type == REDIS_REPLY_STRING)
				op->scores[i] = strtoll(r->element[i]->str, NULL, 10);
	const char **argv = xcalloc(op->n + 1, sizeof(char *));
	argv[0] = "MGET";
	for (size_t i = 0; i < op->n; i++) {
		char *key = NULL;
		if (asprintf(&key, "%ssession:%s", op->st->prefix, op->ids[i]) < 0)
			abort();
		argv[i + 1] = key;
	}
	redisAsyncCommandArgv(ac, mget_reply, op, (int)(op->n + 1), argv, NULL);
	for (size_t i = 1; i <= op->n; i++)
		free((char *)argv[i]);
	free(argv);
}

static void smembers_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct records_op *op = privdata;
	redisReply *r = reply;
	if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
		records_fail(op, "redis: SMEMBERS of the node's sessions failed");
		records_free(op);
		return;
	}
	if (r->elements == 0) {
		op->cb(NULL, NULL, NULL, NULL, 0, op->arg);
		records_free(op);
		return;
	}
	op->ids = xcalloc(r->elements, sizeof(char *));
	const char **argv = xcalloc(r->elements + 2, sizeof(char *));
	char *zkey = NULL;
	if (asprintf(&zkey, "%sexpiry:%s", op->st->prefix, op->st->node) < 0)
		abort();
	argv[0] = "ZMSCORE";
	argv[1] = zkey;
	for (size_t i = 0; i < r->elements; i++) {
		redisReply *el = r->element[i];
		op->ids[op->n++] = xstrndup(el->str, el->len);
		argv[i + 2] = op->ids[i];
	}
	redisAsyncCommandArgv(ac, zmscore_reply, op, (int)(op->n + 2), argv, NULL);
	free(zkey);
	free(argv);
}

void store_node_records(struct store *st, store_records_cb cb, void *arg)
{
	struct records_op *op = xcalloc(1, sizeof(*op));
	op->st = st;
	op->cb = cb;
	op->arg = arg;
	if (st->ac == NULL || !st->connected) {
		records_fail(op, "redis is not reachable");
		records_free(op);
		return;
	}
	redisAsyncCommand(st->ac, smembers_reply, op, "SMEMBERS %snode:%s:sessions", st->prefix,
			  st->node);
}
