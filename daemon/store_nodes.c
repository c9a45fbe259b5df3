/* store_nodes.c: heartbeats, the node view, session owners and node_lost
 * tombstones in Redis (store_nodes.h). What Redis answers is checked like
 * any outside input. */
#include "store_nodes.h"
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "defer.h"
#include "json.h"
#include "xalloc.h"

/* A session record is a few KiB; a bigger one is not ours. */
#define RECORD_MAX (1u << 20)

/* KEYS: heartbeat:<node>, nodes, lost:<node>. ARGV: heartbeat, ttl ms, now
 * ms, node, prefix, max nodes. The heartbeat goes first: a node_lost
 * script that runs after this one sees it and writes nothing, and every
 * tomb written before is in lost:<node>, read here. */
static const char lua_beat[] =
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])\n"
    "local p, node = ARGV[5], ARGV[4]\n"
    "local out = {}\n"
    "for _, id in ipairs(redis.call('SMEMBERS', KEYS[3])) do\n"
    "  local t = redis.call('GET', p .. 'tomb:' .. id)\n"
    "  local ten = nil\n"
    "  if t then\n"
    "    local ok, v = pcall(cjson.decode, t)\n"
    "    if ok and type(v) == 'table' and type(v.tenant) == 'string' then ten = v.tenant end\n"
    "  end\n"
    "  redis.call('DEL', p .. 'session:' .. id)\n"
    "  redis.call('ZREM', p .. 'expiry:' .. node, id)\n"
    "  redis.call('SREM', p .. 'node:' .. node .. ':sessions', id)\n"
    "  if ten and ten ~= '' then\n"
    "    redis.call('ZREM', p .. 'quota:' .. ten .. ':sessions', id)\n"
    "    redis.call('HDEL', p .. 'quota:' .. ten .. ':memory', id)\n"
    "    redis.call('HDEL', p .. 'quota:' .. ten .. ':disk', id)\n"
    "  end\n"
    "  out[#out + 1] = id\n"
    "  out[#out + 1] = t or ''\n"
    "end\n"
    "redis.call('DEL', KEYS[3])\n"
    "local names = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[6]) - 1, 'WITHSCORES')\n"
    "local keys = {}\n"
    "for i = 1, #names, 2 do keys[#keys + 1] = p .. 'heartbeat:' .. names[i] end\n"
    "local hbs = {}\n"
    "if #keys > 0 then hbs = redis.call('MGET', unpack(keys)) end\n"
    "return {out, names, hbs}\n";

/* KEYS: heartbeat:<node>, tomb:<id>, lost:<node>. ARGV: tomb, ttl s, id.
 * The check and the write in one script: once a tomb says node_lost, the
 * node's next heartbeat finds it in lost:<node>. */
static const char lua_lost[] = "if redis.call('EXISTS', KEYS[1]) == 1 then return {1, ''} end\n"
			       "local t = redis.call('GET', KEYS[2])\n"
			       "if t then return {0, t} end\n"
			       "redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])\n"
			       "redis.call('SADD', KEYS[3], ARGV[3])\n"
			       "return {0, ARGV[1]}\n";

/* ARGV: prefix, self, tenant, max records, max ids looked at. */
static const char lua_list[] =
    "local p, out, scanned, cut = ARGV[1], {}, 0, 0\n"
    "local maxr, maxs = tonumber(ARGV[4]), tonumber(ARGV[5])\n"
    "for _, n in ipairs(redis.call('ZRANGE', p .. 'nodes', 0, -1)) do\n"
    "  if n ~= ARGV[2] and redis.call('EXISTS', p .. 'heartbeat:' .. n) == 1 then\n"
    "    for _, id in ipairs(redis.call('SMEMBERS', p .. 'node:' .. n .. ':sessions')) do\n"
    "      scanned = scanned + 1\n"
    "      if scanned > maxs or #out >= maxr then cut = 1 break end\n"
    "      local r = redis.call('GET', p .. 'session:' .. id)\n"
    "      if r then\n"
    "        local ok, v = pcall(cjson.decode, r)\n"
    "        if ok and type(v) == 'table' and v.tenant == ARGV[3] then out[#out + 1] = r end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if cut == 1 then break end\n"
    "end\n"
    "return {cut, out}\n";

/* KEYS: heartbeat:<node>, nodes, expiry:<node>, node:<node>:sessions,
 * lost:<node>. ARGV: node, prefix, tomb reason, ttl s, now ms, ended_at. */
static const char lua_forget[] =
    "if redis.call('EXISTS', KEYS[1]) == 1 then return {1, 0} end\n"
    "if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return {2, 0} end\n"
    "local p, n = ARGV[2], 0\n"
    "for _, id in ipairs(redis.call('SMEMBERS', KEYS[4])) do\n"
    "  local r = redis.call('GET', p .. 'session:' .. id)\n"
    "  if r then\n"
    "    local ok, v = pcall(cjson.decode, r)\n"
    "    local ten = (ok and type(v) == 'table' and type(v.tenant) == 'string') and v.tenant or "
    "''\n"
    "    local t = cjson.encode({id = id, tenant = ten, state = 'dead', reason = ARGV[3],\n"
    "      ended_at = ARGV[6], ended_at_ms = tonumber(ARGV[5]), node = ARGV[1]})\n"
    "    redis.call('SET', p .. 'tomb:' .. id, t, 'EX', ARGV[4], 'NX')\n"
    "    redis.call('DEL', p .. 'session:' .. id)\n"
    "    if ten ~= '' then\n"
    "      redis.call('ZREM', p .. 'quota:' .. ten .. ':sessions', id)\n"
    "      redis.call('HDEL', p .. 'quota:' .. ten .. ':memory', id)\n"
    "      redis.call('HDEL', p .. 'quota:' .. ten .. ':disk', id)\n"
    "    end\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])\n"
    "redis.call('ZREM', KEYS[2], ARGV[1])\n"
    "return {0, n}\n";

static struct store_script s_beat = {.text = lua_beat};
static struct store_script s_forget = {.text = lua_forget};
static struct store_script s_list = {.text = lua_list};
static struct store_script s_lost = {.text = lua_lost};

enum op_kind { OP_BEAT, OP_OWNER, OP_LOST, OP_LIST, OP_FORGET };

struct store_nodes_op {
	struct store *st;
	enum op_kind kind;
	struct store_cmd cmd;
	bool cancelled; /* the callback ran (a timeout) or will not */
	store_beat_cb beat_cb;
	store_owner_cb owner_cb;
	store_lost_cb lost_cb;
	store_list_cb list_cb;
	store_forget_cb forget_cb;
	void *arg;
};

/* A Redis that takes commands but does not answer must not hold a caller
 * (or the heartbeat) longer than this. */
#define OP_TIMEOUT_S 2

static void op_free(struct store_nodes_op *op)
{
	store_cmd_clear(&op->cmd);
	free(op);
}

static void deliver_error(struct store_nodes_op *op, const char *why)
{
	if (op->cancelled)
		return;
	op->cancelled = true;
	struct err e = {.code = ERR_UNAVAILABLE, .message = (char *)why};
	switch (op->kind) {
	case OP_BEAT: op->beat_cb(&e, NULL, op->arg); break;
	case OP_OWNER: op->owner_cb(&e, NULL, NULL, op->arg); break;
	case OP_LOST: op->lost_cb(&e, false, NULL, 0, op->arg); break;
	case OP_LIST: op->list_cb(&e, NULL, NULL, 0, false, op->arg); break;
	case OP_FORGET: op->forget_cb(&e, 0, 0, op->arg); break;
	}
}

static void unavailable_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct store_nodes_op *op = arg;
	deliver_error(op, "the registry (redis) is not reachable");
	op_free(op);
}

static void op_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver_error(arg, "redis did not answer in time"); /* the late answer only frees op */
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

static struct store_nodes_op *op_new(struct store *st, enum op_kind kind, struct store_script *sc,
				     void *arg)
{
	struct store_nodes_op *op = xcalloc(1, sizeof(*op));
	op->st = st;
	op->kind = kind;
	op->arg = arg;
	store_cmd_init(&op->cmd, sc);
	return op;
}

static struct store_nodes_op *op_start(struct store_nodes_op *op)
{
	if (op->st->ac == NULL || !op->st->connected ||
	    (store_cmd_deadline(&op->cmd, op->st->base, OP_TIMEOUT_S, op_timeout_cb, op),
	     store_cmd_send(op->st->ac, &op->cmd, on_reply, op) < 0)) {
		if (op->cmd.deadline) {
			event_free(op->cmd.deadline);
			op->cmd.deadline = NULL;
		}
		defer_call(op->st->base, unavailable_deferred, op);
	}
	return op;
}

void store_nodes_cancel(struct store_nodes_op *op)
{
	if (op)
		op->cancelled = true;
}

/* ---- answers ---- */

static bool is_str(const redisReply *r)
{
	return r->type == REDIS_REPLY_STRING;
}

static void deliver_beat(struct store_nodes_op *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_ARRAY || r->element[1]->type != REDIS_REPLY_ARRAY ||
	    r->element[2]->type != REDIS_REPLY_ARRAY || r->element[0]->elements % 2 ||
	    r->element[1]->elements % 2 || r->element[2]->elements != r->element[1]->elements / 2) {
		deliver_error(op, "redis: the heartbeat script answered in an unexpected shape");
		return;
	}
	const redisReply *lost = r->element[0], *names = r->element[1], *hbs = r->element[2];
	size_t nl = lost->elements / 2, n = names->elements / 2;
	AUTOFREE const char **ids = xcalloc(nl + 1, sizeof(*ids));
	AUTOFREE const char **tombs = xcalloc(nl + 1, sizeof(*tombs));
	AUTOFREE const char **nm = xcalloc(n + 1, sizeof(*nm));
	AUTOFREE const char **hb = xcalloc(n + 1, sizeof(*hb));
	AUTOFREE size_t *hl = xcalloc(n + 1, sizeof(*hl));
	AUTOFREE int64_t *sc = xcalloc(n + 1, sizeof(*sc));
	size_t k = 0;
	for (size_t i = 0; i < nl; i++) {
		const redisReply *id = lost->element[2 * i], *t = lost->element[2 * i + 1];
		if (!is_str(id) || !is_str(t) || !session_id_valid(id->str))
			continue;
		ids[k] = id->str;
		tombs[k++] = t->str;
	}
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		const redisReply *name = names->element[2 * i], *score = names->element[2 * i + 1];
		const redisReply *h = hbs->element[i];
		if (!is_str(name) || !is_str(score) || name->len == 0 ||
		    name->len > CLUSTER_NODE_NAME_MAX)
			continue;
		nm[m] = name->str;
		sc[m] = strtoll(score->str, NULL, 10);
		hb[m] = is_str(h) ? h->str : NULL;
		hl[m++] = is_str(h) ? h->len : 0;
	}
	struct store_beat b = {.lost_ids = ids,
			       .lost_tombs = tombs,
			       .n_lost = k,
			       .names = nm,
			       .scores = sc,
			       .hbs = hb,
			       .hb_lens = hl,
			       .n = m};
	op->beat_cb(NULL, &b, op->arg);
}

static void deliver_owner(struct store_nodes_op *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_STRING || r->len > RECORD_MAX) {
		op->owner_cb(NULL, NULL, NULL, op->arg);
		return;
	}
	AUTOJSON yajl_val v = json_parse(r->str, r->len, NULL);
	const char *node = json_get_str(v, "node"), *tenant = json_get_str(v, "tenant");
	if (node && (node[0] == '\0' || strlen(node) > CLUSTER_NODE_NAME_MAX))
		node = NULL;
	op->owner_cb(NULL, node, node ? tenant : NULL, op->arg);
}

static void deliver_lost(struct store_nodes_op *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER || !is_str(r->element[1])) {
		deliver_error(op, "redis: the node_lost script answered in an unexpected shape");
		return;
	}
	if (r->element[0]->integer == 1) {
		op->lost_cb(NULL, true, NULL, 0, op->arg);
		return;
	}
	const redisReply *t = r->element[1];
	AUTOJSON yajl_val v = json_parse(t->str, t->len, NULL);
	int64_t at = 0;
	json_get_int(v, "ended_at_ms", &at);
	const char *reason = json_get_str(v, "reason");
	op->lost_cb(NULL, false, reason ? reason : "ended", at, op->arg);
}

static void deliver_list(struct store_nodes_op *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_ARRAY) {
		deliver_error(op, "redis: the list script answered in an unexpected shape");
		return;
	}
	const redisReply *recs = r->element[1];
	AUTOFREE const char **out = xcalloc(recs->elements + 1, sizeof(*out));
	AUTOFREE size_t *lens = xcalloc(recs->elements + 1, sizeof(*lens));
	size_t n = 0;
	for (size_t i = 0; i < recs->elements; i++) {
		if (!is_str(recs->element[i]) || recs->element[i]->len > RECORD_MAX)
			continue;
		out[n] = recs->element[i]->str;
		lens[n++] = recs->element[i]->len;
	}
	op->list_cb(NULL, out, lens, n, r->element[0]->integer != 0, op->arg);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_nodes_op *op = privdata;
	redisReply *r = reply;
	if (store_cmd_retry(op->st, ac, &op->cmd, &r, false, on_reply, op))
		return;
	if (op->cancelled) {
		op_free(op);
		return;
	}
	char msg[300];
	const char *why = store_reply_error(r, msg, sizeof(msg));
	if (why) {
		deliver_error(op, why);
		op_free(op);
		return;
	}
	switch (op->kind) {
	case OP_BEAT: deliver_beat(op, r); break;
	case OP_OWNER: deliver_owner(op, r); break;
	case OP_LOST: deliver_lost(op, r); break;
	case OP_LIST: deliver_list(op, r); break;
	case OP_FORGET:
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
		    r->element[0]->type == REDIS_REPLY_INTEGER &&
		    r->element[1]->type == REDIS_REPLY_INTEGER)
			op->forget_cb(NULL, (int)r->element[0]->integer, r->element[1]->integer,
				      op->arg);
		else
			deliver_error(op,
				      "redis: the forget script answered in an unexpected shape");
		break;
	}
	op_free(op);
}

/* ---- requests ---- */

struct store_nodes_op *store_nodes_beat(struct store *st, const char *node, const char *hb,
					size_t len, int64_t ttl_ms, int64_t now_ms,
					size_t max_nodes, store_beat_cb cb, void *arg)
{
	struct store_nodes_op *op = op_new(st, OP_BEAT, &s_beat, arg);
	op->beat_cb = cb;
	store_cmd_arg(&op->cmd, "3");
	store_cmd_argf(&op->cmd, "%sheartbeat:%s", st->prefix, node);
	store_cmd_argf(&op->cmd, "%snodes", st->prefix);
	store_cmd_argf(&op->cmd, "%slost:%s", st->prefix, node);
	store_cmd_argn(&op->cmd, hb, len);
	store_cmd_argf(&op->cmd, "%lld", (long long)ttl_ms);
	store_cmd_argf(&op->cmd, "%lld", (long long)now_ms);
	store_cmd_arg(&op->cmd, node);
	store_cmd_arg(&op->cmd, st->prefix);
	store_cmd_argf(&op->cmd, "%zu", max_nodes);
	return op_start(op);
}

struct store_nodes_op *store_session_owner(struct store *st, const char *id, store_owner_cb cb,
					   void *arg)
{
	struct store_nodes_op *op = op_new(st, OP_OWNER, NULL, arg);
	op->owner_cb = cb;
	store_cmd_arg(&op->cmd, "GET");
	store_cmd_argf(&op->cmd, "%ssession:%s", st->prefix, id);
	return op_start(op);
}

struct store_nodes_op *store_node_lost(struct store *st, const char *id, const char *node,
				       const char *tenant, const char *reason, store_lost_cb cb,
				       void *arg)
{
	struct store_nodes_op *op = op_new(st, OP_LOST, &s_lost, arg);
	op->lost_cb = cb;
	AUTOGEN yajl_gen g = json_gen_new();
	int64_t now = clock_now_ms();
	jg_obj(g);
	jg_kv_str(g, "id", id);
	jg_kv_str(g, "tenant", tenant);
	jg_kv_str(g, "state", "dead");
	jg_kv_str(g, "reason", reason);
	jg_kv_time(g, "ended_at", now);
	jg_kv_int(g, "ended_at_ms", now);
	jg_kv_str(g, "node", node);
	jg_obj_end(g);
	size_t len;
	const char *tomb = jg_text(g, &len);
	store_cmd_arg(&op->cmd, "3");
	store_cmd_argf(&op->cmd, "%sheartbeat:%s", st->prefix, node);
	store_cmd_argf(&op->cmd, "%stomb:%s", st->prefix, id);
	store_cmd_argf(&op->cmd, "%slost:%s", st->prefix, node);
	store_cmd_argn(&op->cmd, tomb, len);
	store_cmd_argf(&op->cmd, "%lld", (long long)st->tomb_ttl_s);
	store_cmd_arg(&op->cmd, id);
	return op_start(op);
}

struct store_nodes_op *store_nodes_list(struct store *st, const char *self, const char *tenant,
					size_t max_records, size_t max_scanned, store_list_cb cb,
					void *arg)
{
	struct store_nodes_op *op = op_new(st, OP_LIST, &s_list, arg);
	op->list_cb = cb;
	store_cmd_arg(&op->cmd, "0");
	store_cmd_arg(&op->cmd, st->prefix);
	store_cmd_arg(&op->cmd, self);
	store_cmd_arg(&op->cmd, tenant);
	store_cmd_argf(&op->cmd, "%zu", max_records);
	store_cmd_argf(&op->cmd, "%zu", max_scanned);
	return op_start(op);
}

struct store_nodes_op *store_node_forget(struct store *st, const char *node, const char *reason,
					 store_forget_cb cb, void *arg)
{
	struct store_nodes_op *op = op_new(st, OP_FORGET, &s_forget, arg);
	op->forget_cb = cb;
	int64_t now = clock_now_ms();
	char when[32];
	store_cmd_arg(&op->cmd, "5");
	store_cmd_argf(&op->cmd, "%sheartbeat:%s", st->prefix, node);
	store_cmd_argf(&op->cmd, "%snodes", st->prefix);
	store_cmd_argf(&op->cmd, "%sexpiry:%s", st->prefix, node);
	store_cmd_argf(&op->cmd, "%snode:%s:sessions", st->prefix, node);
	store_cmd_argf(&op->cmd, "%slost:%s", st->prefix, node);
	store_cmd_arg(&op->cmd, node);
	store_cmd_arg(&op->cmd, st->prefix);
	store_cmd_arg(&op->cmd, reason);
	store_cmd_argf(&op->cmd, "%lld", (long long)st->tomb_ttl_s);
	store_cmd_argf(&op->cmd, "%lld", (long long)now);
	store_cmd_arg(&op->cmd, clock_format_rfc3339(now, when, sizeof(when)));
	return op_start(op);
}
