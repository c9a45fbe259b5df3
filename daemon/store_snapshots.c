/* store_snapshots.c: the snapshot index in Redis (store_snapshots.h has the
 * keys). Each call is one script, run by EVALSHA once its digest is known,
 * as in store_reviews.c; each answers an array of strings. */
#include "store_snapshots.h"
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defer.h"
#include "xalloc.h"

/* A Redis that takes this long is answered for (unavailable). */
#define SNAP_OP_TIMEOUT_S 3
/* One answer holds at most this much text (a list stops there). */
#define SNAP_LIST_BYTES (8u << 20)
#define SNAP_ANSWER_MAX 1000

/* KEYS: record, tenant set, workspace set, workspaces set, tenants set.
 * ARGV: id, workspace, created_ms, json, tenant. */
static const char lua_put[] =
    "redis.call('SET', KEYS[1], ARGV[4])\n"
    "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])\n"
    "redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])\n"
    "local old = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[2]) or '0')\n"
    "if tonumber(ARGV[3]) >= old then\n"
    "  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])\n"
    "end\n"
    "redis.call('SADD', KEYS[5], ARGV[5])\n"
    "return {}\n";

/* KEYS: record. */
static const char lua_get[] = "local v = redis.call('GET', KEYS[1])\n"
			      "if not v then return {} end\n"
			      "return {v}\n";

/* KEYS: the set to read (tenant's or one workspace's). ARGV: record key
 * prefix, limit, byte budget. Ids whose record is gone leave the set. */
static const char lua_list[] =
    "local out, gone, bytes = {}, {}, 0\n"
    "local limit, budget = tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, limit - 1)) do\n"
    "  local v = redis.call('GET', ARGV[1] .. id)\n"
    "  if not v then table.insert(gone, id)\n"
    "  else\n"
    "    bytes = bytes + #v\n"
    "    if #out > 0 and bytes > budget then break end\n"
    "    table.insert(out, v)\n"
    "  end\n"
    "end\n"
    "for _, id in ipairs(gone) do redis.call('ZREM', KEYS[1], id) end\n"
    "return out\n";

/* KEYS: record, tenant set, workspaces set. ARGV: id, workspace set key
 * prefix. The record names its workspace. */
static const char lua_delete[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if not v then return {} end\n"
    "redis.call('DEL', KEYS[1])\n"
    "redis.call('ZREM', KEYS[2], ARGV[1])\n"
    "local ok, rec = pcall(cjson.decode, v)\n"
    "if ok and type(rec) == 'table' and type(rec['workspace']) == 'string' then\n"
    "  local wk = ARGV[2] .. rec['workspace']\n"
    "  redis.call('ZREM', wk, ARGV[1])\n"
    "  local top = redis.call('ZREVRANGE', wk, 0, 0, 'WITHSCORES')\n"
    "  if #top == 0 then redis.call('ZREM', KEYS[3], rec['workspace'])\n"
    "  else redis.call('ZADD', KEYS[3], top[2], rec['workspace']) end\n"
    "end\n"
    "return {v}\n";

/* KEYS: workspaces set. ARGV: workspace set key prefix, record key prefix,
 * limit, byte budget. */
static const char lua_workspaces[] =
    "local out, bytes = {}, 0\n"
    "local budget = tonumber(ARGV[4])\n"
    "for _, name in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)) do\n"
    "  local ids = redis.call('ZREVRANGE', ARGV[1] .. name, 0, -1)\n"
    "  local total, latest, n = 0, nil, 0\n"
    "  for _, id in ipairs(ids) do\n"
    "    local v = redis.call('GET', ARGV[2] .. id)\n"
    "    if v then\n"
    "      n = n + 1\n"
    "      local ok, rec = pcall(cjson.decode, v)\n"
    "      if ok and type(rec) == 'table' and type(rec['size']) == 'number' then\n"
    "        total = total + rec['size']\n"
    "      end\n"
    "      if latest == nil and ok and type(rec) == 'table' then latest = v end\n"
    "    end\n"
    "  end\n"
    "  if n > 0 then\n"
    /* the record as stored (cjson would turn its empty arrays into {}) */
    "    local t = '{\"name\":' .. cjson.encode(name) .. ',\"snapshots\":' .. n ..\n"
    "      ',\"bytes\":' .. string.format('%d', total) .. ',\"latest\":' .. (latest or 'null') .. "
    "'}'\n"
    "    bytes = bytes + #t\n"
    "    if #out > 0 and bytes > budget then break end\n"
    "    table.insert(out, t)\n"
    "  end\n"
    "end\n"
    "return out\n";

/* KEYS: tenant set, workspaces set. ARGV: workspace set key prefix,
 * record key prefix, keep, cutoff_ms, limit. */
static const char lua_expired[] =
    "local out, seen = {}, {}\n"
    "local keep, limit = tonumber(ARGV[3]), tonumber(ARGV[5])\n"
    "local function add(id)\n"
    "  if #out >= limit or seen[id] then return end\n"
    "  seen[id] = true\n"
    "  local v = redis.call('GET', ARGV[2] .. id)\n"
    "  if v then table.insert(out, v) end\n"
    "end\n"
    "for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4], "
    "'LIMIT', 0, limit)) do add(id) end\n"
    "if keep > 0 then\n"
    "  for _, name in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do\n"
    "    for _, id in ipairs(redis.call('ZREVRANGE', ARGV[1] .. name, keep, keep + limit)) do\n"
    "      add(id)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return out\n";

/* KEYS: tenants set. ARGV: limit. */
static const char lua_tenants[] = "return redis.call('SRANDMEMBER', KEYS[1], tonumber(ARGV[1]))\n";

static struct store_script s_put = {.text = lua_put};
static struct store_script s_get = {.text = lua_get};
static struct store_script s_list = {.text = lua_list};
static struct store_script s_delete = {.text = lua_delete};
static struct store_script s_workspaces = {.text = lua_workspaces};
static struct store_script s_expired = {.text = lua_expired};
static struct store_script s_tenants = {.text = lua_tenants};

struct op {
	struct store *st;
	struct store_cmd cmd;
	bool answered;
	store_snapshots_cb cb;
	void *arg;
};

static struct op *op_new(struct store *st, struct store_script *sc, store_snapshots_cb cb,
			 void *arg)
{
	struct op *op = xmalloc(sizeof(*op));
	*op = (struct op){.st = st, .cb = cb, .arg = arg};
	store_cmd_init(&op->cmd, sc);
	return op;
}

static void op_free(struct op *op)
{
	store_cmd_clear(&op->cmd);
	free(op);
}

static void deliver_error(struct op *op, const char *why)
{
	if (op->answered)
		return;
	op->answered = true;
	struct err e = {.code = ERR_UNAVAILABLE, .message = (char *)why};
	if (op->cb)
		op->cb(&e, NULL, NULL, 0, op->arg);
}

static void unavailable_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct op *op = arg;
	deliver_error(op, "the snapshot index (redis) is not reachable");
	op_free(op);
}

static void op_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver_error(arg, "redis did not answer the snapshot index query in time");
}

static void deliver(struct op *op, const redisReply *r)
{
	if (op->cb == NULL) {
		op->answered = true;
		return;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements > SNAP_ANSWER_MAX) {
		deliver_error(op, "redis: the snapshot script answered in an unexpected shape");
		return;
	}
	size_t n = 0;
	const char **json = xcalloc(r->elements + 1, sizeof(char *));
	size_t *len = xcalloc(r->elements + 1, sizeof(size_t));
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *el = r->element[i];
		if (el->type != REDIS_REPLY_STRING || el->len > STORE_SNAPSHOT_RECORD_MAX * 4)
			continue; /* not ours: skipped, never trusted */
		json[n] = el->str;
		len[n++] = el->len;
	}
	op->answered = true;
	op->cb(NULL, json, len, n, op->arg);
	free(json);
	free(len);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct op *op = privdata;
	redisReply *r = reply;
	if (store_cmd_retry(op->st, ac, &op->cmd, &r, false, on_reply, op))
		return;
	if (!op->answered) {
		char msg[300];
		const char *why = store_reply_error(r, msg, sizeof(msg));
		if (why)
			deliver_error(op, why);
		else
			deliver(op, r);
	}
	op_free(op);
}

static void op_start(struct op *op)
{
	if (op->st->ac == NULL || !op->st->connected) {
		defer_call(op->st->base, unavailable_deferred, op);
		return;
	}
	store_cmd_deadline(&op->cmd, op->st->base, SNAP_OP_TIMEOUT_S, op_timeout_cb, op);
	if (store_cmd_send(op->st->ac, &op->cmd, on_reply, op) < 0)
		defer_call(op->st->base, unavailable_deferred, op);
}

#define P (op->st->prefix)

void store_snapshot_put(struct store *st, const char *tenant, const char *id, const char *ws,
			int64_t created_ms, const char *json, size_t len, store_snapshots_cb cb,
			void *arg)
{
	struct op *op = op_new(st, &s_put, cb, arg);
	store_cmd_arg(&op->cmd, "5");
	store_cmd_argf(&op->cmd, "%ssnap:%s:%s", P, tenant, id);
	store_cmd_argf(&op->cmd, "%ssnaps:%s", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnapws:%s:%s", P, tenant, ws);
	store_cmd_argf(&op->cmd, "%ssnapwss:%s", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnaptenants", P);
	store_cmd_arg(&op->cmd, id);
	store_cmd_arg(&op->cmd, ws);
	store_cmd_argf(&op->cmd, "%lld", (long long)created_ms);
	store_cmd_argn(&op->cmd, json, len);
	store_cmd_arg(&op->cmd, tenant);
	op_start(op);
}

void store_snapshot_get(struct store *st, const char *tenant, const char *id, store_snapshots_cb cb,
			void *arg)
{
	struct op *op = op_new(st, &s_get, cb, arg);
	store_cmd_arg(&op->cmd, "1");
	store_cmd_argf(&op->cmd, "%ssnap:%s:%s", P, tenant, id);
	op_start(op);
}

void store_snapshots_list(struct store *st, const char *tenant, const char *ws, size_t limit,
			  store_snapshots_cb cb, void *arg)
{
	struct op *op = op_new(st, &s_list, cb, arg);
	store_cmd_arg(&op->cmd, "1");
	if (ws)
		store_cmd_argf(&op->cmd, "%ssnapws:%s:%s", P, tenant, ws);
	else
		store_cmd_argf(&op->cmd, "%ssnaps:%s", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnap:%s:", P, tenant);
	store_cmd_argf(&op->cmd, "%zu", limit > 0 && limit <= SNAP_ANSWER_MAX ? limit : 100);
	store_cmd_argf(&op->cmd, "%u", SNAP_LIST_BYTES);
	op_start(op);
}

void store_snapshot_delete(struct store *st, const char *tenant, const char *id,
			   store_snapshots_cb cb, void *arg)
{
	struct op *op = op_new(st, &s_delete, cb, arg);
	store_cmd_arg(&op->cmd, "3");
	store_cmd_argf(&op->cmd, "%ssnap:%s:%s", P, tenant, id);
	store_cmd_argf(&op->cmd, "%ssnaps:%s", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnapwss:%s", P, tenant);
	store_cmd_arg(&op->cmd, id);
	store_cmd_argf(&op->cmd, "%ssnapws:%s:", P, tenant);
	op_start(op);
}

void store_snapshot_workspaces(struct store *st, const char *tenant, size_t limit,
			       store_snapshots_cb cb, void *arg)
{
	struct op *op = op_new(st, &s_workspaces, cb, arg);
	store_cmd_arg(&op->cmd, "1");
	store_cmd_argf(&op->cmd, "%ssnapwss:%s", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnapws:%s:", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnap:%s:", P, tenant);
	store_cmd_argf(&op->cmd, "%zu", limit > 0 && limit <= SNAP_ANSWER_MAX ? limit : 100);
	store_cmd_argf(&op->cmd, "%u", SNAP_LIST_BYTES);
	op_start(op);
}

void store_snapshots_expired(struct store *st, const char *tenant, int64_t keep, int64_t cutoff_ms,
			     size_t limit, store_snapshots_cb cb, void *arg)
{
	struct op *op = op_new(st, &s_expired, cb, arg);
	store_cmd_arg(&op->cmd, "2");
	store_cmd_argf(&op->cmd, "%ssnaps:%s", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnapwss:%s", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnapws:%s:", P, tenant);
	store_cmd_argf(&op->cmd, "%ssnap:%s:", P, tenant);
	store_cmd_argf(&op->cmd, "%lld", (long long)keep);
	store_cmd_argf(&op->cmd, "%lld", (long long)cutoff_ms);
	store_cmd_argf(&op->cmd, "%zu", limit > 0 && limit <= SNAP_ANSWER_MAX ? limit : 100);
	op_start(op);
}

void store_snapshot_tenants(struct store *st, size_t limit, store_snapshots_cb cb, void *arg)
{
	struct op *op = op_new(st, &s_tenants, cb, arg);
	store_cmd_arg(&op->cmd, "1");
	store_cmd_argf(&op->cmd, "%ssnaptenants", P);
	store_cmd_argf(&op->cmd, "%zu", limit > 0 && limit <= SNAP_ANSWER_MAX ? limit : 100);
	op_start(op);
}
