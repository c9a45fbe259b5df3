/* store_failures.c: the failure memory in Redis (store_failures.h has the
 * keys). Every call is one Lua script, so a sighting on two daemons at once
 * counts twice and makes one entry. Scripts go by EVALSHA once their digest
 * is known and whole (EVAL) before that or after NOSCRIPT, as in
 * store_quota.c.
 *
 * What comes back is checked like any outside input: a Redis that answers
 * a wrong shape, a count that is not a number, a class we do not know or a
 * text too long is an error (one entry) or an entry left out (a list), never
 * a crash. The tenant and the signature are checked before they go into a
 * key name. */
#include "store_failures.h"
#include "store_internal.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apikey.h"
#include "defer.h"
#include "log.h"
#include "xalloc.h"

/* How many signatures a tenant keeps: past this, the least recently seen
 * are forgotten first (the set and their hashes). */
#define FAILURES_PER_TENANT_MAX 10000
/* A list reads at most this many entries. */
#define FAILURES_LIST_MAX 1000
/* What of a text field is accepted back from Redis (ours are shorter). */
#define FAILURE_FIELD_MAX 4096

/* ---- the scripts ---- */

#define LUA_NOW                          \
	"local t = redis.call('TIME')\n" \
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

#define LUA_FIELDS                                                                     \
	"local F = {'ename', 'message', 'line', 'image', 'class', 'seen', 'retried', " \
	"'fixed_rule', 'fixed_fixer', 'first_ms', 'last_ms'}\n"

/* KEYS: the entry's hash, the tenant's set. ARGV: sig, ename, message, line,
 * image, class, ttl_s, max entries. Answers the entry's fields (F). */
static const char lua_seen[] = LUA_NOW LUA_FIELDS
    "local ttl = tonumber(ARGV[7])\n"
    "if redis.call('EXISTS', KEYS[1]) == 0 then\n"
    "  redis.call('HSET', KEYS[1], 'ename', ARGV[2], 'message', ARGV[3], 'line', ARGV[4],\n"
    "    'image', ARGV[5], 'class', ARGV[6], 'seen', 0, 'retried', 0, 'fixed_rule', 0,\n"
    "    'fixed_fixer', 0, 'first_ms', now)\n"
    "end\n"
    "redis.call('HINCRBY', KEYS[1], 'seen', 1)\n"
    "redis.call('HSET', KEYS[1], 'last_ms', now)\n"
    "redis.call('EXPIRE', KEYS[1], ttl)\n"
    "redis.call('ZADD', KEYS[2], now, ARGV[1])\n"
    /* entries not seen for ttl have decayed: their hash is gone, so is
     * their member */
    "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl * 1000)\n"
    "local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[8])\n"
    "if over > 0 then\n"
    "  local base = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[1])\n"
    "  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do\n"
    "    redis.call('DEL', base .. m)\n"
    "  end\n"
    "  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)\n"
    "end\n"
    "redis.call('EXPIRE', KEYS[2], ttl)\n"
    "return redis.call('HMGET', KEYS[1], unpack(F))\n";

/* KEYS: the entry's hash. ARGV: the counter. Only an entry that is there. */
static const char lua_note[] = "if redis.call('EXISTS', KEYS[1]) == 1 then\n"
			       "  return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)\n"
			       "end\n"
			       "return 0\n";

/* KEYS: the tenant's set. ARGV: the hash keys' prefix ("P fail:<tenant>:"),
 * limit. Answers sig then the fields (F) of each entry, most recently seen
 * first; members whose hash has expired are dropped on the way. */
static const char lua_list[] =
    LUA_FIELDS "local limit = tonumber(ARGV[2])\n"
	       "local out, n = {}, 0\n"
	       "local ms = redis.call('ZREVRANGE', KEYS[1], 0, limit + 99)\n"
	       "for _, m in ipairs(ms) do\n"
	       "  if n >= limit then break end\n"
	       "  local v = redis.call('HMGET', ARGV[1] .. m, unpack(F))\n"
	       "  if v[6] then\n"
	       "    out[#out + 1] = m\n"
	       "    for i = 1, #F do out[#out + 1] = v[i] or '' end\n"
	       "    n = n + 1\n"
	       "  else\n"
	       "    redis.call('ZREM', KEYS[1], m)\n"
	       "  end\n"
	       "end\n"
	       "return out\n";

/* KEYS: the entry's hash, the tenant's set. ARGV: sig. */
static const char lua_delete[] = "local n = redis.call('DEL', KEYS[1])\n"
				 "redis.call('ZREM', KEYS[2], ARGV[1])\n"
				 "return n\n";

static struct store_script s_seen = {.text = lua_seen};
static struct store_script s_note = {.text = lua_note};
static struct store_script s_list = {.text = lua_list};
static struct store_script s_delete = {.text = lua_delete};

/* ---- the replies ---- */

#define FIELDS 11 /* F: as the scripts answer them */

void failure_record_clear(struct failure_record *r)
{
	if (r == NULL)
		return;
	free(r->ename);
	free(r->message);
	free(r->line);
	free(r->image);
	free(r->class_name);
	memset(r, 0, sizeof(*r));
}

bool failure_record_hopeless(const struct failure_record *r, int64_t min_repairs)
{
	return r && min_repairs > 0 && r->retried >= min_repairs && r->fixed_rule == 0 &&
	       r->fixed_fixer == 0;
}

static const char *text_of(const redisReply *el)
{
	if (el == NULL || el->type != REDIS_REPLY_STRING || el->len > FAILURE_FIELD_MAX ||
	    strlen(el->str) != el->len)
		return NULL;
	return el->str;
}

static int count_of(const redisReply *el, int64_t *v)
{
	if (el && el->type == REDIS_REPLY_INTEGER) {
		*v = el->integer;
		return el->integer >= 0 ? 0 : -1;
	}
	const char *s = text_of(el);
	if (s == NULL || *s < '0' || *s > '9' || strlen(s) > 19)
		return -1;
	char *end = NULL;
	long long x = strtoll(s, &end, 10);
	if (*end != '\0' || x < 0)
		return -1;
	*v = x;
	return 0;
}

static const char *const class_names[] = {"egress_denied", "memory_at_max", "timeout_at_max",
					  "module_unavailable"};

int store_failure_record_parse(const char *sig, const redisReply *const *el,
			       struct failure_record *rec)
{
	memset(rec, 0, sizeof(*rec));
	if (!failure_sig_valid(sig))
		return -1;
	const char *t[5];
	for (int i = 0; i < 5; i++)
		if ((t[i] = text_of(el[i])) == NULL)
			return -1;
	const char *cls = NULL;
	for (size_t i = 0; i < sizeof(class_names) / sizeof(class_names[0]) && *t[4]; i++)
		if (strcmp(t[4], class_names[i]) == 0)
			cls = class_names[i];
	if (*t[4] && cls == NULL)
		return -1;
	int64_t *nums[] = {&rec->seen,        &rec->retried,  &rec->fixed_rule,
			   &rec->fixed_fixer, &rec->first_ms, &rec->last_ms};
	for (int i = 0; i < 6; i++)
		if (count_of(el[5 + i], nums[i]) < 0)
			return -1;
	memcpy(rec->signature, sig, FAILURE_SIG_HEX + 1);
	rec->ename = xstrdup(t[0]);
	rec->message = xstrdup(t[1]);
	rec->line = xstrdup(t[2]);
	rec->image = xstrdup(t[3]);
	rec->class_name = cls ? xstrdup(cls) : NULL;
	return 0;
}

/* ---- ops ---- */

enum op_kind { OP_SEEN, OP_NOTE, OP_LIST, OP_DELETE };

/* A Redis that takes longer is answered for (unavailable); the late answer
 * only frees the op. */
#define OP_TIMEOUT_S 2

struct fop {
	struct store *st;
	enum op_kind kind;
	struct store_cmd cmd;
	bool answered;
	store_failure_cb seen_cb;
	store_failures_cb list_cb;
	store_found_cb found_cb;
	void *arg;
	char sig[FAILURE_SIG_HEX + 1];
	struct err *early; /* an error known before anything was sent */
};

static void op_free(struct fop *op)
{
	store_cmd_clear(&op->cmd);
	err_free(op->early);
	free(op);
}

static void op_arg(struct fop *op, char *s)
{
	store_cmd_take(&op->cmd, s);
}

static void deliver_error(struct fop *op, const struct err *e)
{
	if (op->answered)
		return;
	op->answered = true;
	switch (op->kind) {
	case OP_SEEN:
		if (op->seen_cb)
			op->seen_cb(e, NULL, op->arg);
		break;
	case OP_NOTE: break;
	case OP_LIST: op->list_cb(e, NULL, 0, op->arg); break;
	case OP_DELETE: op->found_cb(e, false, op->arg); break;
	}
}

static void deliver_unavailable(struct fop *op, const char *why)
{
	deliver_error(op, &(struct err){.code = ERR_UNAVAILABLE, .message = (char *)why});
}

static void early_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct fop *op = arg;
	if (op->early)
		deliver_error(op, op->early);
	else
		deliver_unavailable(op, "the failure memory (redis) is not reachable");
	op_free(op);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver_unavailable(arg, "redis did not answer about the failure memory in time");
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

static struct fop *op_new(struct store *st, enum op_kind kind, struct store_script *sc, void *arg)
{
	struct fop *op = xmalloc(sizeof(*op));
	*op = (struct fop){.st = st, .kind = kind, .arg = arg};
	store_cmd_init(&op->cmd, sc);
	return op;
}

/* Send op, or answer it from the loop (Redis down, or op->early). */
static void op_start(struct fop *op)
{
	struct store *st = op->st;
	if (op->early == NULL && st->ac != NULL && st->connected) {
		if (store_cmd_send(st->ac, &op->cmd, on_reply, op) == 0) {
			if (op->kind != OP_NOTE)
				store_cmd_deadline(&op->cmd, st->base, OP_TIMEOUT_S, timeout_cb,
						   op);
			return;
		}
	}
	if (op->kind == OP_NOTE) {
		op_free(op);
		return;
	}
	defer_call(st->base, early_deferred, op);
}

/* The checks every call makes before a name goes into a key. */
static bool names_ok(struct fop *op, const char *tenant, const char *sig)
{
	if (!apikey_tenant_valid(tenant)) {
		err_set(&op->early, ERR_BAD_REQUEST, "failure memory: '%.64s' is not a tenant name",
			tenant ? tenant : "");
		return false;
	}
	if (sig && !failure_sig_valid(sig)) {
		err_set(&op->early, ERR_BAD_REQUEST,
			"failure memory: '%.32s' is not a signature (16 hex digits)", sig);
		return false;
	}
	return true;
}

static void deliver_seen(struct fop *op, const redisReply *r)
{
	struct failure_record rec;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != FIELDS ||
	    store_failure_record_parse(op->sig, (const redisReply *const *)r->element, &rec) < 0) {
		deliver_unavailable(op,
				    "redis: the failure script answered in an unexpected shape");
		return;
	}
	op->answered = true;
	if (op->seen_cb)
		op->seen_cb(NULL, &rec, op->arg);
	failure_record_clear(&rec);
}

static void deliver_list(struct fop *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements % (FIELDS + 1) != 0 ||
	    r->elements / (FIELDS + 1) > FAILURES_LIST_MAX) {
		deliver_unavailable(op, "redis: the failure list answered in an unexpected shape");
		return;
	}
	size_t n = r->elements / (FIELDS + 1), got = 0;
	struct failure_record *recs = xcalloc(n ? n : 1, sizeof(*recs));
	for (size_t i = 0; i < n; i++) {
		redisReply *const *el = r->element + i * (FIELDS + 1);
		const char *sig = text_of(el[0]);
		if (sig && store_failure_record_parse(sig, (const redisReply *const *)el + 1,
						      &recs[got]) == 0)
			got++;
		else
			log_warn("failure memory: a malformed entry in redis was left out");
	}
	op->answered = true;
	op->list_cb(NULL, recs, got, op->arg);
	for (size_t i = 0; i < got; i++)
		failure_record_clear(&recs[i]);
	free(recs);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct fop *op = privdata;
	redisReply *r = reply;
	/* The resend also loads the script again, for the next ops; r is
	 * NULL when nothing could be sent (a lost connection). */
	if (!op->answered && store_cmd_retry(op->st, ac, &op->cmd, &r, true, on_reply, op))
		return;
	if (op->answered || op->kind == OP_NOTE) {
		if (r && r->type == REDIS_REPLY_ERROR)
			log_warn("failure memory: redis: %s", r->str);
		op_free(op);
		return;
	}
	char msg[300];
	const char *why = store_reply_error(r, msg, sizeof(msg));
	if (why) {
		deliver_unavailable(op, why);
	} else {
		switch (op->kind) {
		case OP_SEEN: deliver_seen(op, r); break;
		case OP_LIST: deliver_list(op, r); break;
		case OP_DELETE:
			if (r->type != REDIS_REPLY_INTEGER) {
				deliver_unavailable(
				    op,
				    "redis: the failure delete answered in an unexpected shape");
				break;
			}
			op->answered = true;
			op->found_cb(NULL, r->integer > 0, op->arg);
			break;
		case OP_NOTE: break;
		}
	}
	op_free(op);
}

/* ---- the calls ---- */

void store_failure_seen(struct store *st, const char *tenant, const char *sig,
			const struct failure_desc *desc, enum failure_class cls, int64_t ttl_s,
			store_failure_cb cb, void *arg)
{
	struct fop *op = op_new(st, OP_SEEN, &s_seen, arg);
	op->seen_cb = cb;
	if (names_ok(op, tenant, sig) && desc) {
		const char *cn = failure_class_name(cls);
		snprintf(op->sig, sizeof(op->sig), "%s", sig);
		op_arg(op, xstrdup("2"));
		op_arg(op, xasprintf("%sfail:%s:%s", st->prefix, tenant, sig));
		op_arg(op, xasprintf("%sfails:%s", st->prefix, tenant));
		op_arg(op, xstrdup(sig));
		op_arg(op, xstrdup(desc->ename ? desc->ename : ""));
		op_arg(op, xstrdup(desc->message ? desc->message : ""));
		op_arg(op, xstrdup(desc->line ? desc->line : ""));
		op_arg(op, xstrdup(desc->image ? desc->image : ""));
		op_arg(op, xstrdup(cn ? cn : ""));
		op_arg(op, xasprintf("%lld", (long long)(ttl_s > 0 ? ttl_s : 1)));
		op_arg(op, xasprintf("%d", FAILURES_PER_TENANT_MAX));
	} else if (op->early == NULL) {
		err_set(&op->early, ERR_INTERNAL, "failure memory: a sighting without its parts");
	}
	op_start(op);
}

void store_failure_note(struct store *st, const char *tenant, const char *sig,
			enum failure_outcome o)
{
	struct fop *op = op_new(st, OP_NOTE, &s_note, NULL);
	if (!names_ok(op, tenant, sig)) {
		op_free(op);
		return;
	}
	op_arg(op, xstrdup("1"));
	op_arg(op, xasprintf("%sfail:%s:%s", st->prefix, tenant, sig));
	op_arg(op, xstrdup(o == FAILURE_RETRIED      ? "retried"
			   : o == FAILURE_FIXED_RULE ? "fixed_rule"
						     : "fixed_fixer"));
	op_start(op);
}

void store_failures_list(struct store *st, const char *tenant, size_t limit, store_failures_cb cb,
			 void *arg)
{
	struct fop *op = op_new(st, OP_LIST, &s_list, arg);
	op->list_cb = cb;
	if (names_ok(op, tenant, NULL)) {
		if (limit == 0)
			limit = 1;
		if (limit > FAILURES_LIST_MAX)
			limit = FAILURES_LIST_MAX;
		op_arg(op, xstrdup("1"));
		op_arg(op, xasprintf("%sfails:%s", st->prefix, tenant));
		op_arg(op, xasprintf("%sfail:%s:", st->prefix, tenant));
		op_arg(op, xasprintf("%zu", limit));
	}
	op_start(op);
}

void store_failure_delete(struct store *st, const char *tenant, const char *sig, store_found_cb cb,
			  void *arg)
{
	struct fop *op = op_new(st, OP_DELETE, &s_delete, arg);
	op->found_cb = cb;
	if (names_ok(op, tenant, sig)) {
		op_arg(op, xstrdup("2"));
		op_arg(op, xasprintf("%sfail:%s:%s", st->prefix, tenant, sig));
		op_arg(op, xasprintf("%sfails:%s", st->prefix, tenant));
		op_arg(op, xstrdup(sig));
	}
	op_start(op);
}
