/* store_quota.c: quotas and usage in Redis (store_quota.h). Each check and
 * its reservation is one Lua script, so two daemons admitting at once see
 * each other's reservations: a script runs alone in Redis. Scripts are sent
 * by EVALSHA once their digest is known (learned by SCRIPT LOAD on first
 * use: the digest of a text is the same on every Redis), and by EVAL before
 * that or when a Redis answers NOSCRIPT (restarted, flushed, another one). */
#include "store_quota.h"
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apikey.h"
#include "defer.h"
#include "json.h"
#include "log.h"
#include "xalloc.h"

/* ---- the scripts ---- */

#define LUA_NOW                          \
	"local t = redis.call('TIME')\n" \
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

/* Drop lapsed session reservations (KEYS[1] set, KEYS[2] memory, KEYS[3]
 * disk). */
#define LUA_SESSIONS_TRIM                                                              \
	"local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)\n"             \
	"for _, m in ipairs(gone) do\n"                                                \
	"  redis.call('HDEL', KEYS[2], m)\n"                                           \
	"  redis.call('HDEL', KEYS[3], m)\n"                                           \
	"end\n"                                                                        \
	"if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end\n" \
	"local function summed(key)\n"                                                 \
	"  local used = 0\n"                                                           \
	"  for _, v in ipairs(redis.call('HVALS', key)) do\n"                          \
	"    used = used + (tonumber(v) or 0)\n"                                       \
	"  end\n"                                                                      \
	"  return used\n"                                                              \
	"end\n"

/* The exec-seconds window: z the entries ("<ms>:<exec>" → end), s their
 * sum; entries that ended before now - window leave it. */
#define LUA_WINDOW_TRIM                                                                \
	"local function dur(m) return tonumber(string.match(m, '^(%d+):')) or 0 end\n" \
	"local function trim(z, s, now, window)\n"                                     \
	"  local cut = now - window\n"                                                 \
	"  local sum = tonumber(redis.call('GET', s) or '0') or 0\n"                   \
	"  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', cut)\n"                 \
	"  for _, m in ipairs(gone) do sum = sum - dur(m) end\n"                       \
	"  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', z, '-inf', cut) end\n"     \
	"  if sum < 0 or redis.call('ZCARD', z) == 0 then sum = 0 end\n"               \
	"  if sum > 0 then redis.call('SET', s, sum, 'PX', window + 60000)\n"          \
	"  else redis.call('DEL', s) end\n"                                            \
	"  return sum\n"                                                               \
	"end\n"

/* KEYS: sessions, memory, disk. ARGV: member, memory_mb, lapse_ms, max
 * sessions, max memory, disk_mb, max disk. */
static const char lua_session_admit[] = LUA_NOW LUA_SESSIONS_TRIM
    "local maxs, maxm, want = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[2])\n"
    "local disk, maxd = tonumber(ARGV[6]) or 0, tonumber(ARGV[7]) or 0\n"
    "if maxs > 0 and redis.call('ZCARD', KEYS[1]) >= maxs then return {'sessions', 0} end\n"
    "if maxm > 0 and summed(KEYS[2]) + want > maxm then return {'memory_mb', 0} end\n"
    "if maxd > 0 and summed(KEYS[3]) + disk > maxd then return {'disk_mb', 0} end\n"
    "redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])\n"
    "redis.call('HSET', KEYS[2], ARGV[1], want)\n"
    "redis.call('HSET', KEYS[3], ARGV[1], disk)\n"
    "return {'', 0}\n";

/* KEYS: execs, exec_seconds, exec_ms. ARGV: member, lapse_ms, max
 * executions, max exec ms, window ms. When the hour is used up, the wait is
 * until enough of its oldest entries have left it. */
static const char lua_exec_admit[] = LUA_NOW LUA_WINDOW_TRIM
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "local maxe = tonumber(ARGV[3])\n"
    "if maxe > 0 and redis.call('ZCARD', KEYS[1]) >= maxe then return {'executions', 0} end\n"
    "local maxms, window = tonumber(ARGV[4]), tonumber(ARGV[5])\n"
    "local sum = trim(KEYS[2], KEYS[3], now, window)\n"
    "if maxms > 0 and sum >= maxms then\n"
    "  local left, at = sum, now\n"
    "  local e = redis.call('ZRANGE', KEYS[2], 0, 9999, 'WITHSCORES')\n"
    "  for i = 1, #e, 2 do\n"
    "    left = left - dur(e[i])\n"
    "    at = tonumber(e[i + 1]) or now\n"
    "    if left < maxms then break end\n"
    "  end\n"
    "  return {'exec_seconds_per_hour', at + window - now}\n"
    "end\n"
    "redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])\n"
    "return {'', 0}\n";

/* KEYS: execs, exec_seconds, exec_ms. ARGV: member, duration ms, window. */
static const char lua_exec_end[] =
    LUA_NOW LUA_WINDOW_TRIM "redis.call('ZREM', KEYS[1], ARGV[1])\n"
			    "local d, window = tonumber(ARGV[2]) or 0, tonumber(ARGV[3])\n"
			    "if d <= 0 then return 0 end\n"
			    "local sum = trim(KEYS[2], KEYS[3], now, window)\n"
			    "redis.call('ZADD', KEYS[2], now, ARGV[2] .. ':' .. ARGV[1])\n"
			    "redis.call('PEXPIRE', KEYS[2], window + 60000)\n"
			    "redis.call('SET', KEYS[3], sum + d, 'PX', window + 60000)\n"
			    "return 0\n";

/* KEYS: requests. ARGV: rate (0: count only), burst, how many requests to
 * count (1 when absent; unlimited tenants' are counted in batches). The
 * bucket refills
 * continuously by Redis's clock; a refusal answers the tokens left (in
 * thousandths) for the Retry-After. */
static const char lua_request[] =
    "local t = redis.call('TIME')\n"
    "local sec = tonumber(t[1])\n"
    "local now = sec * 1000000 + tonumber(t[2])\n"
    "local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts', 'sec', 'n')\n"
    "local n = tonumber(h[4]) or 0\n"
    "if tonumber(h[3]) ~= sec then n = 0 end\n"
    "n = n + (tonumber(ARGV[3]) or 1)\n"
    "local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "if rate <= 0 then\n"
    "  redis.call('HSET', KEYS[1], 'sec', sec, 'n', n)\n"
    "  redis.call('PEXPIRE', KEYS[1], 2000)\n"
    "  return {'', 0}\n"
    "end\n"
    "local tokens = tonumber(h[1]) or burst\n"
    "local ts = tonumber(h[2]) or now\n"
    "if now > ts then tokens = tokens + (now - ts) * rate / 1000000 end\n"
    "if tokens > burst then tokens = burst end\n"
    "local ok = tokens >= 1\n"
    "if ok then tokens = tokens - 1 end\n"
    "redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now, 'sec', sec, 'n', n)\n"
    "redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 2000)\n"
    "if ok then return {'', 0} end\n"
    "return {'requests_per_second', math.floor(tokens * 1000)}\n";

/* KEYS: sessions, memory, disk, execs, exec_seconds, exec_ms, requests.
 * ARGV: window. */
static const char lua_usage[] = LUA_NOW LUA_SESSIONS_TRIM LUA_WINDOW_TRIM
    "redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)\n"
    "local sum = trim(KEYS[5], KEYS[6], now, tonumber(ARGV[1]))\n"
    "local h = redis.call('HMGET', KEYS[7], 'sec', 'n')\n"
    "local n = 0\n"
    "if tonumber(h[1]) == math.floor(now / 1000) then n = tonumber(h[2]) or 0 end\n"
    "return {redis.call('ZCARD', KEYS[1]), summed(KEYS[2]), redis.call('ZCARD', KEYS[4]), sum, "
    "n, summed(KEYS[3])}\n";

static struct store_script s_session_admit = {.text = lua_session_admit};
static struct store_script s_exec_admit = {.text = lua_exec_admit};
static struct store_script s_exec_end = {.text = lua_exec_end};
static struct store_script s_request = {.text = lua_request};
static struct store_script s_usage = {.text = lua_usage};

/* ---- ops ---- */

enum op_kind { OP_FIRE, OP_ADMIT, OP_USAGE, OP_GET, OP_PUT };

struct store_quota_op {
	struct store *st;
	enum op_kind kind;
	/* a script's or a plain command; its deadline: a Redis that takes
	 * this long is answered for */
	struct store_cmd cmd;
	bool cancelled;
	store_quota_admit_cb admit_cb;
	store_quota_usage_cb usage_cb;
	store_quota_get_cb get_cb;
	store_done_cb done_cb;
	void *arg;
	int64_t rate;    /* a request's: its bucket's rate, for the Retry-After */
	char tenant[64]; /* for a log line about a bad stored value */
};

static void op_free(struct store_quota_op *op)
{
	store_cmd_clear(&op->cmd);
	free(op);
}

static void op_arg(struct store_quota_op *op, const char *s)
{
	store_cmd_arg(&op->cmd, s);
}

static void op_key(struct store_quota_op *op, const char *tenant, const char *what)
{
	store_cmd_argf(&op->cmd, "%squota:%s:%s", op->st->prefix, tenant, what);
}

static void op_int(struct store_quota_op *op, int64_t v)
{
	store_cmd_argf(&op->cmd, "%lld", (long long)v);
}

/* A script's keys: their count, then each, the tenant's. */
static const char *const keys_sessions[] = {"sessions", "memory", "disk", NULL};
static const char *const keys_execs[] = {"execs", "exec_seconds", "exec_ms", NULL};
static const char *const keys_requests[] = {"requests", NULL};
static const char *const keys_usage[] = {"sessions",     "memory",  "disk",     "execs",
					 "exec_seconds", "exec_ms", "requests", NULL};

static void op_keys(struct store_quota_op *op, const char *tenant, const char *const *names)
{
	int n = 0;
	while (names[n])
		n++;
	op_int(op, n);
	for (int i = 0; i < n; i++)
		op_key(op, tenant, names[i]);
}

static struct store_quota_op *op_new(struct store *st, enum op_kind kind, struct store_script *sc,
				     void *arg)
{
	struct store_quota_op *op = xmalloc(sizeof(*op));
	*op = (struct store_quota_op){.st = st, .kind = kind, .arg = arg};
	store_cmd_init(&op->cmd, sc);
	return op;
}

static void deliver_error(struct store_quota_op *op, const char *why)
{
	struct err e = {.code = ERR_UNAVAILABLE, .message = (char *)why};
	if (op->cancelled)
		return;
	switch (op->kind) {
	case OP_FIRE: break;
	case OP_ADMIT: op->admit_cb(&e, -1, 0, op->arg); break;
	case OP_USAGE: op->usage_cb(&e, NULL, op->arg); break;
	case OP_GET: op->get_cb(&e, NULL, op->arg); break;
	case OP_PUT: op->done_cb(&e, op->arg); break;
	}
}

static void unavailable_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct store_quota_op *op = arg;
	deliver_error(op, "the quota store (redis) is not reachable");
	op_free(op);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* A Redis that accepts commands but does not answer (frozen, a network
 * that drops everything) must not hold a caller for longer than this: it
 * hears "unavailable", and the late answer is dropped. */
#define OP_TIMEOUT_S 2

static void op_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct store_quota_op *op = arg;
	if (op->cancelled)
		return;
	deliver_error(op, "redis did not answer the quota check in time");
	op->cancelled = true; /* the answer, if it comes, only frees op */
}

/* Start op, or (Redis down) answer it from the loop; a fire-and-forget op
 * is dropped. */
static struct store_quota_op *op_start(struct store_quota_op *op)
{
	if (op->st->ac == NULL || !op->st->connected) {
		if (op->kind == OP_FIRE) {
			op_free(op);
			return NULL;
		}
		defer_call(op->st->base, unavailable_deferred, op);
		return op;
	}
	if (op->kind != OP_FIRE)
		store_cmd_deadline(&op->cmd, op->st->base, OP_TIMEOUT_S, op_timeout_cb, op);
	if (store_cmd_send(op->st->ac, &op->cmd, on_reply, op) < 0) {
		if (op->kind == OP_FIRE) {
			op_free(op);
			return NULL;
		}
		defer_call(op->st->base, unavailable_deferred, op);
		return op;
	}
	return op->kind == OP_FIRE ? NULL : op;
}

/* An integer from a script's array reply, 0 when it is not one. */
static int64_t reply_int(const redisReply *r, size_t i)
{
	if (r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return 0;
	const redisReply *el = r->element[i];
	if (el->type == REDIS_REPLY_INTEGER)
		return el->integer;
	if (el->type == REDIS_REPLY_STRING)
		return strtoll(el->str, NULL, 10);
	return 0;
}

static void deliver_admit(struct store_quota_op *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING) {
		deliver_error(op, "redis: the quota script answered in an unexpected shape");
		return;
	}
	const redisReply *name = r->element[0];
	if (name->len == 0) {
		op->admit_cb(NULL, -1, 0, op->arg);
		return;
	}
	enum quota_name n;
	if (quota_lookup(name->str, name->len, &n) < 0) {
		deliver_error(op, "redis: the quota script named an unknown quota");
		return;
	}
	int64_t v = reply_int(r, 1), retry = 1;
	if (n == QUOTA_EXEC_SECONDS_PER_HOUR)
		retry = quota_retry_after_ms(v);
	else if (n == QUOTA_REQUESTS_PER_SECOND)
		retry = quota_retry_after_bucket(v, op->rate);
	op->admit_cb(NULL, (int)n, retry, op->arg);
}

static void deliver_usage(struct store_quota_op *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 6) {
		deliver_error(op, "redis: the usage script answered in an unexpected shape");
		return;
	}
	struct store_quota_usage u = {
	    .sessions = reply_int(r, 0),
	    .memory_mb = reply_int(r, 1),
	    .executions = reply_int(r, 2),
	    .exec_ms_last_hour = reply_int(r, 3),
	    .requests_last_second = reply_int(r, 4),
	    .disk_mb = reply_int(r, 5),
	};
	op->usage_cb(NULL, &u, op->arg);
}

static void deliver_get(struct store_quota_op *op, const redisReply *r)
{
	struct quota_override o = {0};
	if (r->type == REDIS_REPLY_STRING) {
		struct err *e = NULL;
		if (quota_override_parse(r->str, r->len, &o, &e) < 0) {
			log_warn(
			    "quota: the stored quota of tenant %s is not valid (%s); using the "
			    "server's defaults",
			    op->tenant, e->message);
			memset(&o, 0, sizeof(o));
		}
		err_free(e);
	}
	op->get_cb(NULL, &o, op->arg);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_quota_op *op = privdata;
	redisReply *r = reply;
	if (store_cmd_retry(op->st, ac, &op->cmd, &r, false, on_reply, op))
		return; /* r is NULL when nothing could be sent: a lost connection */
	if (op->cancelled || op->kind == OP_FIRE) {
		if (r && r->type == REDIS_REPLY_ERROR)
			log_warn("quota: redis: %s", r->str);
		op_free(op);
		return;
	}
	char msg[300];
	const char *why = store_reply_error(r, msg, sizeof(msg));
	if (why) {
		deliver_error(op, why);
	} else {
		switch (op->kind) {
		case OP_ADMIT: deliver_admit(op, r); break;
		case OP_USAGE: deliver_usage(op, r); break;
		case OP_GET: deliver_get(op, r); break;
		case OP_PUT: op->done_cb(NULL, op->arg); break;
		case OP_FIRE: break;
		}
	}
	op_free(op);
}

void store_quota_cancel(struct store_quota_op *op)
{
	if (op)
		op->cancelled = true;
}

/* ---- the calls ---- */

struct store_quota_op *store_quota_get(struct store *st, const char *tenant, store_quota_get_cb cb,
				       void *arg)
{
	struct store_quota_op *op = op_new(st, OP_GET, NULL, arg);
	op->get_cb = cb;
	snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
	op_arg(op, "GET");
	store_cmd_argf(&op->cmd, "%stenant:%s:quota", st->prefix, tenant);
	return op_start(op);
}

int store_quota_put(struct store *st, const char *tenant, const struct quota_override *o,
		    store_done_cb cb, void *arg, struct store_quota_op **opp, struct err **errp)
{
	if (!apikey_tenant_valid(tenant))
		return err_set(errp, ERR_BAD_REQUEST,
			       "tenant '%.64s' is not a tenant name ([a-z0-9][a-z0-9_-]{0,62})",
			       tenant ? tenant : "");
	struct store_quota_op *op = op_new(st, OP_PUT, NULL, arg);
	op->done_cb = cb;
	if (o->set == 0) {
		op_arg(op, "DEL");
		store_cmd_argf(&op->cmd, "%stenant:%s:quota", st->prefix, tenant);
	} else {
		AUTOGEN yajl_gen g = json_gen_new();
		quota_override_to_json(o, g);
		size_t len;
		op_arg(op, "SET");
		store_cmd_argf(&op->cmd, "%stenant:%s:quota", st->prefix, tenant);
		op_arg(op, jg_text(g, &len));
	}
	op = op_start(op);
	if (opp)
		*opp = op;
	return 0;
}

struct store_quota_op *store_quota_session_admit(struct store *st, const char *tenant,
						 const char *member, int64_t memory_mb,
						 int64_t disk_mb, int64_t lapse_ms,
						 const struct quota *q, store_quota_admit_cb cb,
						 void *arg)
{
	struct store_quota_op *op = op_new(st, cb ? OP_ADMIT : OP_FIRE, &s_session_admit, arg);
	op->admit_cb = cb;
	op_keys(op, tenant, keys_sessions);
	op_arg(op, member);
	op_int(op, memory_mb);
	op_int(op, lapse_ms);
	op_int(op, q->v[QUOTA_SESSIONS]);
	op_int(op, q->v[QUOTA_MEMORY_MB]);
	op_int(op, disk_mb);
	op_int(op, q->v[QUOTA_DISK_MB]);
	return op_start(op);
}

/* A MULTI of plain commands, fire and forget (a session's reservation
 * moved or given back). */
static void session_multi(struct store *st, const char *tenant, const char *drop, const char *id,
			  int64_t memory_mb, int64_t disk_mb, int64_t lapse_ms)
{
	if (st->ac == NULL || !st->connected)
		return;
	redisAsyncCommand(st->ac, NULL, NULL, "MULTI");
	redisAsyncCommand(st->ac, NULL, NULL, "ZREM %squota:%s:sessions %s", st->prefix, tenant,
			  drop);
	redisAsyncCommand(st->ac, NULL, NULL, "HDEL %squota:%s:memory %s", st->prefix, tenant,
			  drop);
	redisAsyncCommand(st->ac, NULL, NULL, "HDEL %squota:%s:disk %s", st->prefix, tenant, drop);
	if (id) {
		redisAsyncCommand(st->ac, NULL, NULL, "ZADD %squota:%s:sessions %lld %s",
				  st->prefix, tenant, (long long)lapse_ms, id);
		redisAsyncCommand(st->ac, NULL, NULL, "HSET %squota:%s:memory %s %lld", st->prefix,
				  tenant, id, (long long)memory_mb);
		redisAsyncCommand(st->ac, NULL, NULL, "HSET %squota:%s:disk %s %lld", st->prefix,
				  tenant, id, (long long)disk_mb);
	}
	redisAsyncCommand(st->ac, NULL, NULL, "EXEC");
}

void store_quota_session_commit(struct store *st, const char *tenant, const char *member,
				const char *id, int64_t memory_mb, int64_t disk_mb,
				int64_t lapse_ms)
{
	session_multi(st, tenant, member, id, memory_mb, disk_mb, lapse_ms);
}

void store_quota_session_release(struct store *st, const char *tenant, const char *member)
{
	session_multi(st, tenant, member, NULL, 0, 0, 0);
}

void store_quota_session_restore(struct store *st, const struct session *s)
{
	if (st->ac == NULL || !st->connected || s->tenant == NULL || !*s->tenant)
		return;
	/* NX: a reservation that is there (Redis kept it) stays as it is. */
	redisAsyncCommand(st->ac, NULL, NULL, "MULTI");
	redisAsyncCommand(st->ac, NULL, NULL, "ZADD %squota:%s:sessions NX %lld %s", st->prefix,
			  s->tenant, (long long)(s->expires_at_ms + QUOTA_GRACE_MS), s->id);
	redisAsyncCommand(st->ac, NULL, NULL, "HSETNX %squota:%s:memory %s %lld", st->prefix,
			  s->tenant, s->id, (long long)s->limits.memory_mb);
	redisAsyncCommand(st->ac, NULL, NULL, "HSETNX %squota:%s:disk %s %lld", st->prefix,
			  s->tenant, s->id, (long long)s->limits.disk_mb);
	redisAsyncCommand(st->ac, NULL, NULL, "EXEC");
}

void store_quota_end_cmds(struct store *st, const char *tenant, const char *id)
{
	redisAsyncCommand(st->ac, NULL, NULL, "ZREM %squota:%s:sessions %s", st->prefix, tenant,
			  id);
	redisAsyncCommand(st->ac, NULL, NULL, "HDEL %squota:%s:memory %s", st->prefix, tenant, id);
	redisAsyncCommand(st->ac, NULL, NULL, "HDEL %squota:%s:disk %s", st->prefix, tenant, id);
}

void store_quota_touch_cmds(struct store *st, const char *tenant, const char *id,
			    int64_t expires_at_ms)
{
	/* XX: only a reservation that exists moves; a create still pending
	 * holds its own until it commits. */
	redisAsyncCommand(st->ac, NULL, NULL, "ZADD %squota:%s:sessions XX %lld %s", st->prefix,
			  tenant, (long long)(expires_at_ms + QUOTA_GRACE_MS), id);
}

struct store_quota_op *store_quota_exec_admit(struct store *st, const char *tenant,
					      const char *member, int64_t lapse_ms,
					      const struct quota *q, store_quota_admit_cb cb,
					      void *arg)
{
	struct store_quota_op *op = op_new(st, cb ? OP_ADMIT : OP_FIRE, &s_exec_admit, arg);
	op->admit_cb = cb;
	op_keys(op, tenant, keys_execs);
	op_arg(op, member);
	op_int(op, lapse_ms);
	op_int(op, q->v[QUOTA_EXECUTIONS]);
	op_int(op, q->v[QUOTA_EXEC_SECONDS_PER_HOUR] * 1000);
	op_int(op, QUOTA_WINDOW_MS);
	return op_start(op);
}

void store_quota_exec_end(struct store *st, const char *tenant, const char *member,
			  int64_t duration_ms)
{
	struct store_quota_op *op = op_new(st, OP_FIRE, &s_exec_end, NULL);
	op_keys(op, tenant, keys_execs);
	op_arg(op, member);
	op_int(op, (duration_ms > 0 ? duration_ms : 0));
	op_int(op, QUOTA_WINDOW_MS);
	op_start(op);
}

/* The answer to a request's count: a Redis that lost the script makes the
 * next one go whole (that one request is not counted). */
static void counted(redisAsyncContext *ac, void *reply, void *privdata)
{
	(void)ac;
	struct store_script *sc = privdata;
	redisReply *r = reply;
	if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0)
		sc->sha[0] = '\0';
}

/* Counting only: without an op of ours (no copies, no timer), the command
 * formatted straight into hiredis's buffer. */
void store_quota_count(struct store *st, const char *tenant, int64_t n)
{
	struct store_script *sc = &s_request;
	if (st->ac == NULL || !st->connected || n <= 0)
		return;
	if (sc->sha[0]) {
		redisAsyncCommand(st->ac, counted, sc, "EVALSHA %s 1 %squota:%s:requests 0 1 %lld",
				  sc->sha, st->prefix, tenant, (long long)n);
		return;
	}
	store_script_load(st->ac, sc);
	redisAsyncCommand(st->ac, counted, sc, "EVAL %s 1 %squota:%s:requests 0 1 %lld", sc->text,
			  st->prefix, tenant, (long long)n);
}

struct store_quota_op *store_quota_request(struct store *st, const char *tenant, int64_t rate,
					   store_quota_admit_cb cb, void *arg)
{
	struct store_quota_op *op = op_new(st, cb ? OP_ADMIT : OP_FIRE, &s_request, arg);
	op->admit_cb = cb;
	op->rate = rate;
	op_keys(op, tenant, keys_requests);
	op_int(op, rate);
	op_int(op, quota_burst(rate));
	return op_start(op);
}

struct store_quota_op *store_quota_usage(struct store *st, const char *tenant,
					 store_quota_usage_cb cb, void *arg)
{
	struct store_quota_op *op = op_new(st, OP_USAGE, &s_usage, arg);
	op->usage_cb = cb;
	op_keys(op, tenant, keys_usage);
	op_int(op, QUOTA_WINDOW_MS);
	return op_start(op);
}
