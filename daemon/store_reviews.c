/* store_reviews.c: the human review queue in Redis (store_reviews.h has the
 * keys). Every call is one Lua script, so a decision is checked and written
 * in one step that no other daemon can interleave with: a case is decided
 * once. Scripts go by EVALSHA once their digest is known (SCRIPT LOAD on
 * first use), by EVAL before that and when a Redis answers NOSCRIPT, as in
 * store_quota.c.
 *
 * What Redis answers is checked like any outside input: a record whose
 * fields are not of the right type or shape is skipped (a list) or is no
 * record (a get), never trusted. */
#include "store_reviews.h"
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defer.h"
#include "log.h"
#include "xalloc.h"

/* A tenant keeps at most this many cases; queuing more drops the oldest. */
#define REVIEWS_KEEP_MAX 10000
/* A list looks at no more than this many ids (pending ones may be few). */
#define REVIEWS_SCAN_MAX 2000
/* One list answers about this much case text at most. */
#define REVIEWS_LIST_BYTES (16u << 20)
/* What one field of a record may hold: a case is a run with its attempts
 * (each attempt's code is capped by the API's body cap). */
#define REVIEW_CASE_MAX (8u << 20)
#define REVIEW_TEXT_MAX (4u << 20)
/* A Redis that takes this long is answered for (unavailable). */
#define REVIEW_OP_TIMEOUT_S 3

const char *review_state_name(enum review_state s)
{
	switch (s) {
	case REVIEW_PENDING: return "pending";
	case REVIEW_APPROVED: return "approved";
	case REVIEW_REJECTED: return "rejected";
	}
	return "pending";
}

static int review_state_parse(const char *s, size_t len, enum review_state *out)
{
	static const enum review_state all[] = {REVIEW_PENDING, REVIEW_APPROVED, REVIEW_REJECTED};
	for (size_t i = 0; i < 3; i++) {
		const char *n = review_state_name(all[i]);
		if (strlen(n) == len && memcmp(n, s, len) == 0) {
			*out = all[i];
			return 0;
		}
	}
	return -1;
}

void review_record_clear(struct review_record *r)
{
	if (r == NULL)
		return;
	free(r->case_json);
	free(r->code);
	free(r->comment);
	free(r->decided_by);
	memset(r, 0, sizeof(*r));
}

/* ---- the scripts ---- */

/* The fields every script answers a record with, in this order, after its
 * id. */
#define LUA_FIELDS \
	"'run', 'state', 'case', 'code', 'comment', 'decided_by', 'created_ms', 'decided_ms'"
#define REVIEW_NFIELDS 9 /* id and the eight */

#define LUA_NOW                          \
	"local t = redis.call('TIME')\n" \
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

/* KEYS: the case, the tenant's set. ARGV: id, run, case, ttl s, keep max,
 * prefix of a case's key (for the ones trimmed). */
static const char lua_put[] =
    LUA_NOW "redis.call('HSET', KEYS[1], 'run', ARGV[2], 'state', 'pending', 'case', ARGV[3],\n"
	    "  'created_ms', now)\n"
	    "local ttl = tonumber(ARGV[4])\n"
	    "redis.call('EXPIRE', KEYS[1], ttl)\n"
	    "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl * 1000)\n"
	    "redis.call('ZADD', KEYS[2], now, ARGV[1])\n"
	    "local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])\n"
	    "if over > 0 then\n"
	    "  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do\n"
	    "    redis.call('DEL', ARGV[6] .. m)\n"
	    "  end\n"
	    "  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)\n"
	    "end\n"
	    "redis.call('EXPIRE', KEYS[2], ttl)\n"
	    "return now\n";

/* KEYS: the tenant's set. ARGV: prefix of a case's key, pending only (1|0),
 * limit, scan max, byte budget. Newest first; ids whose case has expired
 * leave the set. The cases' text stops at the budget (at least one case is
 * answered), so that one answer stays of a size the daemon takes. */
static const char lua_list[] =
    "local out, gone, bytes = {}, {}, 0\n"
    "local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[5])\n"
    "for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[4]) - 1)) do\n"
    "  if #out >= limit then break end\n"
    "  local h = redis.call('HMGET', ARGV[1] .. id, " LUA_FIELDS ")\n"
    "  if not h[2] then table.insert(gone, id)\n"
    "  elseif ARGV[2] ~= '1' or h[2] == 'pending' then\n"
    "    bytes = bytes + #(h[3] or '') + #(h[4] or '') + #(h[5] or '')\n"
    "    if #out > 0 and bytes > budget then break end\n"
    "    table.insert(out, {id, h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]})\n"
    "  end\n"
    "end\n"
    "for _, id in ipairs(gone) do redis.call('ZREM', KEYS[1], id) end\n"
    "return out\n";

/* KEYS: the case. ARGV: id. {} when there is none. */
static const char lua_get[] =
    "local h = redis.call('HMGET', KEYS[1], " LUA_FIELDS ")\n"
    "if not h[2] then return {} end\n"
    "return {{ARGV[1], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]}}\n";

/* KEYS: the case. ARGV: id, new state, has code (1|0), code, comment,
 * decided_by. {0}: none; {1}: already decided; {2, record}: decided now. */
static const char lua_decide[] =
    LUA_NOW "local st = redis.call('HGET', KEYS[1], 'state')\n"
	    "if not st then return {0} end\n"
	    "if st ~= 'pending' then return {1} end\n"
	    "redis.call('HSET', KEYS[1], 'state', ARGV[2], 'decided_ms', now, 'decided_by', "
	    "ARGV[6])\n"
	    "if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'code', ARGV[4]) end\n"
	    "if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'comment', ARGV[5]) end\n"
	    "local h = redis.call('HMGET', KEYS[1], " LUA_FIELDS ")\n"
	    "return {2, {ARGV[1], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]}}\n";

static struct store_script s_put = {.text = lua_put};
static struct store_script s_list = {.text = lua_list};
static struct store_script s_get = {.text = lua_get};
static struct store_script s_decide = {.text = lua_decide};

/* ---- ops ---- */

enum op_kind { OP_PUT, OP_LIST, OP_DECIDE };

struct op {
	struct store *st;
	enum op_kind kind;
	struct store_cmd cmd;
	bool answered;
	store_done_cb done_cb;
	store_reviews_cb list_cb;
	store_review_decide_cb decide_cb;
	void *arg;
};

static void op_free(struct op *op)
{
	store_cmd_clear(&op->cmd);
	free(op);
}

static void op_arg(struct op *op, const char *s)
{
	store_cmd_arg(&op->cmd, s);
}

static struct op *op_new(struct store *st, enum op_kind kind, struct store_script *sc, void *arg)
{
	struct op *op = xmalloc(sizeof(*op));
	*op = (struct op){.st = st, .kind = kind, .arg = arg};
	store_cmd_init(&op->cmd, sc);
	return op;
}

static void deliver_error(struct op *op, enum err_code code, const char *why)
{
	struct err e = {.code = code, .message = (char *)why};
	if (op->answered)
		return;
	op->answered = true;
	switch (op->kind) {
	case OP_PUT: op->done_cb(&e, op->arg); break;
	case OP_LIST: op->list_cb(&e, NULL, 0, op->arg); break;
	case OP_DECIDE: op->decide_cb(&e, false, NULL, op->arg); break;
	}
}

static void unavailable_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct op *op = arg;
	deliver_error(op, ERR_UNAVAILABLE, "the review store (redis) is not reachable");
	op_free(op);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

static void op_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	/* The answer, when it comes, only frees op. */
	deliver_error(arg, ERR_UNAVAILABLE, "redis did not answer the review query in time");
}

static void op_start(struct op *op)
{
	if (op->st->ac == NULL || !op->st->connected) {
		defer_call(op->st->base, unavailable_deferred, op);
		return;
	}
	store_cmd_deadline(&op->cmd, op->st->base, REVIEW_OP_TIMEOUT_S, op_timeout_cb, op);
	if (store_cmd_send(op->st->ac, &op->cmd, on_reply, op) < 0)
		defer_call(op->st->base, unavailable_deferred, op);
}

/* ---- reading records ---- */

/* A string field into *out (malloc'd), NULL for a nil; -1 when of another
 * type or over max. */
static int field_str(const redisReply *el, size_t max, char **out, size_t *len)
{
	*out = NULL;
	if (len)
		*len = 0;
	if (el->type == REDIS_REPLY_NIL)
		return 0;
	if (el->type != REDIS_REPLY_STRING || el->len > max)
		return -1;
	*out = xmalloc(el->len + 1);
	memcpy(*out, el->str, el->len);
	(*out)[el->len] = '\0';
	if (len)
		*len = el->len;
	return 0;
}

static int field_ms(const redisReply *el, int64_t *out)
{
	*out = 0;
	if (el->type == REDIS_REPLY_NIL)
		return 0;
	if (el->type == REDIS_REPLY_INTEGER) {
		*out = el->integer;
		return 0;
	}
	if (el->type != REDIS_REPLY_STRING || el->len == 0 || el->len > 19)
		return -1;
	char *end = NULL;
	long long v = strtoll(el->str, &end, 10);
	if (end != el->str + el->len || v < 0)
		return -1;
	*out = v;
	return 0;
}

static int field_id(const redisReply *el, char out[SESSION_ID_LEN + 1])
{
	if (el->type != REDIS_REPLY_STRING || el->len != SESSION_ID_LEN)
		return -1;
	memcpy(out, el->str, SESSION_ID_LEN);
	out[SESSION_ID_LEN] = '\0';
	return session_id_valid(out) ? 0 : -1;
}

/* One record as the scripts answer it: {id, run, state, case, code,
 * comment, decided_by, created_ms, decided_ms}. -1 when malformed. */
static int record_parse(const redisReply *r, struct review_record *rec)
{
	memset(rec, 0, sizeof(*rec));
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != REVIEW_NFIELDS)
		return -1;
	redisReply *const *f = r->element;
	if (field_id(f[0], rec->id) < 0 || field_id(f[1], rec->run_id) < 0 ||
	    f[2]->type != REDIS_REPLY_STRING ||
	    review_state_parse(f[2]->str, f[2]->len, &rec->state) < 0)
		goto bad;
	if (field_str(f[3], REVIEW_CASE_MAX, &rec->case_json, &rec->case_len) < 0 ||
	    field_str(f[4], REVIEW_TEXT_MAX, &rec->code, NULL) < 0 ||
	    field_str(f[5], REVIEW_TEXT_MAX, &rec->comment, NULL) < 0 ||
	    field_str(f[6], 64, &rec->decided_by, NULL) < 0 ||
	    field_ms(f[7], &rec->created_ms) < 0 || field_ms(f[8], &rec->decided_ms) < 0)
		goto bad;
	if (rec->case_json == NULL) {
		rec->case_json = xstrdup("null");
		rec->case_len = 4;
	}
	return 0;
bad:
	review_record_clear(rec);
	return -1;
}

static void deliver_list(struct op *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY) {
		deliver_error(op, ERR_UNAVAILABLE,
			      "redis: the review script answered in an unexpected shape");
		return;
	}
	size_t n = 0;
	struct review_record *recs = xcalloc(r->elements ? r->elements : 1, sizeof(*recs));
	for (size_t i = 0; i < r->elements; i++) {
		if (record_parse(r->element[i], &recs[n]) == 0)
			n++;
		else
			log_warn("reviews: a stored case is malformed; skipped");
	}
	op->answered = true;
	op->list_cb(NULL, recs, n, op->arg);
	for (size_t i = 0; i < n; i++)
		review_record_clear(&recs[i]);
	free(recs);
}

static void deliver_decide(struct op *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER) {
		deliver_error(op, ERR_UNAVAILABLE,
			      "redis: the review script answered in an unexpected shape");
		return;
	}
	long long what = r->element[0]->integer;
	if (what == 0 || what == 1) {
		op->answered = true;
		op->decide_cb(NULL, what == 1, NULL, op->arg);
		return;
	}
	struct review_record rec;
	if (what != 2 || r->elements != 2 || record_parse(r->element[1], &rec) < 0) {
		deliver_error(op, ERR_UNAVAILABLE, "redis: the decided case is malformed");
		return;
	}
	op->answered = true;
	op->decide_cb(NULL, true, &rec, op->arg);
	review_record_clear(&rec);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct op *op = privdata;
	redisReply *r = reply;
	if (store_cmd_retry(op->st, ac, &op->cmd, &r, false, on_reply, op))
		return; /* r is NULL when nothing could be sent: a lost connection */
	if (op->answered) {
		op_free(op);
		return;
	}
	char msg[300];
	const char *why = store_reply_error(r, msg, sizeof(msg));
	if (why) {
		deliver_error(op, ERR_UNAVAILABLE, why);
	} else {
		switch (op->kind) {
		case OP_PUT:
			if (r->type != REDIS_REPLY_INTEGER) {
				deliver_error(
				    op, ERR_UNAVAILABLE,
				    "redis: the review script answered in an unexpected shape");
				break;
			}
			op->answered = true;
			op->done_cb(NULL, op->arg);
			break;
		case OP_LIST: deliver_list(op, r); break;
		case OP_DECIDE: deliver_decide(op, r); break;
		}
	}
	op_free(op);
}

/* ---- the calls ---- */

static void key_case(struct op *op, const char *tenant, const char *id)
{
	store_cmd_argf(&op->cmd, "%sreview:%s:%s", op->st->prefix, tenant, id);
}

void store_review_put(struct store *st, const char *tenant, const char *id, const char *run_id,
		      const char *case_json, size_t case_len, int64_t ttl_s, store_done_cb cb,
		      void *arg)
{
	struct op *op = op_new(st, OP_PUT, &s_put, arg);
	op->done_cb = cb;
	op_arg(op, "2");
	key_case(op, tenant, id);
	store_cmd_argf(&op->cmd, "%sreviews:%s", st->prefix, tenant);
	op_arg(op, id);
	op_arg(op, run_id);
	store_cmd_argn(&op->cmd, case_json, case_len);
	store_cmd_argf(&op->cmd, "%lld", (long long)(ttl_s > 0 ? ttl_s : 1));
	store_cmd_argf(&op->cmd, "%d", REVIEWS_KEEP_MAX);
	store_cmd_argf(&op->cmd, "%sreview:%s:", st->prefix, tenant);
	op_start(op);
}

void store_reviews_list(struct store *st, const char *tenant, bool pending_only, size_t limit,
			store_reviews_cb cb, void *arg)
{
	struct op *op = op_new(st, OP_LIST, &s_list, arg);
	op->list_cb = cb;
	op_arg(op, "1");
	store_cmd_argf(&op->cmd, "%sreviews:%s", st->prefix, tenant);
	store_cmd_argf(&op->cmd, "%sreview:%s:", st->prefix, tenant);
	op_arg(op, pending_only ? "1" : "0");
	store_cmd_argf(&op->cmd, "%zu", limit > 0 ? limit : 1);
	store_cmd_argf(&op->cmd, "%d", REVIEWS_SCAN_MAX);
	store_cmd_argf(&op->cmd, "%u", REVIEWS_LIST_BYTES);
	op_start(op);
}

void store_review_get(struct store *st, const char *tenant, const char *id, store_reviews_cb cb,
		      void *arg)
{
	struct op *op = op_new(st, OP_LIST, &s_get, arg);
	op->list_cb = cb;
	op_arg(op, "1");
	key_case(op, tenant, id);
	op_arg(op, id);
	op_start(op);
}

void store_review_decide(struct store *st, const char *tenant, const char *id, bool approve,
			 const char *code, size_t code_len, const char *comment,
			 const char *decided_by, store_review_decide_cb cb, void *arg)
{
	struct op *op = op_new(st, OP_DECIDE, &s_decide, arg);
	op->decide_cb = cb;
	op_arg(op, "1");
	key_case(op, tenant, id);
	op_arg(op, id);
	op_arg(op, approve ? "approved" : "rejected");
	op_arg(op, code ? "1" : "0");
	store_cmd_argn(&op->cmd, code ? code : "", code ? code_len : 0);
	op_arg(op, comment ? comment : "");
	op_arg(op, decided_by ? decided_by : "");
	op_start(op);
}
