/* store_internal.h: what the store's files share (store.c: the connection,
 * the session registry, clocks and tombstones; other store_*.c files add
 * their own keys on the same connection). The only files that include
 * hiredis are these. */
#ifndef CI_STORE_INTERNAL_H
#define CI_STORE_INTERNAL_H

#include <event2/dns.h>
#include <event2/event.h>
#include <hiredis/async.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "store_failures.h"

struct store {
	struct event_base *base;
	redisAsyncContext *ac;
	struct event *reconnect;
	struct event *ping;
	char *host, *path;
	int port, db;
	char *prefix, *node;
	int64_t tomb_ttl_s;
	bool connected;
	int backoff_ms;
	struct evdns_base *dns;
	struct evdns_getaddrinfo_request *resolving;
	/* sentinel:// (store_sentinel.c): host and port are the master's, as
	 * the sentinels last gave it; ROLE is checked before connected. */
	struct store_sentinel *sentinel;
	unsigned role_pending; /* ROLE checks unanswered (a stalled master) */
	unsigned wait_ticks;   /* seconds a new connection has not been usable */
	bool master_is_new;    /* during on_connect: another master than before */
	void (*on_connect)(void *arg);
	void *on_connect_arg;
	/* The audit stream (store_audit.c): writes in flight, and the ones
	 * Redis never got. */
	unsigned audit_inflight;
	uint64_t audit_dropped;
};

/* store_sentinel.c: the master through Redis Sentinel. _new takes u's
 * strings (u is left empty). _resolve asks the sentinels and ends in
 * store_connect_addr (an address to try) or store_retry_later (none
 * answered), from the loop; a call while one runs is a no-op. store.c
 * reports the master it checked (_master_ok) or refused (_not_master). */
struct store_sentinel;
struct store_sentinel *store_sentinel_new(struct store *st, struct store_sentinel_url *u);
void store_sentinel_free(struct store_sentinel *ss);
void store_sentinel_set_timeout(struct store_sentinel *ss, int ms);
void store_sentinel_resolve(struct store_sentinel *ss);
void store_sentinel_master_ok(struct store_sentinel *ss, const char *host, int port);
void store_sentinel_not_master(struct store_sentinel *ss, const char *host, int port,
			       const char *why);
const char *store_sentinel_master(const struct store_sentinel *ss);
const char *store_sentinel_name(const struct store_sentinel *ss);
const char *store_sentinel_problem(const struct store_sentinel *ss);
bool store_sentinel_resolving(const struct store_sentinel *ss);
uint64_t store_sentinel_failovers(const struct store_sentinel *ss);

/* store.c, for store_sentinel.c: connect to this master (copied); try
 * again after the backoff; drop the connection to the master and ask again
 * (why is logged). */
void store_connect_addr(struct store *st, const char *host, int port);
void store_retry_later(struct store *st);
void store_master_changed(struct store *st, const char *why);

/* store_quota.c: a session's quota reservation, in store.c's MULTIs (the
 * reservation ends with the record, tombstone retries included, and moves
 * with its clock). */
void store_quota_end_cmds(struct store *st, const char *tenant, const char *id);
void store_quota_touch_cmds(struct store *st, const char *tenant, const char *id,
			    int64_t expires_at_ms);

/* store_failures.c: an entry from the fields its scripts answer (ename,
 * message, line, image, class, seen, retried, fixed_rule, fixed_fixer,
 * first_ms, last_ms: 11 elements at el), checked; -1 when any is not of its
 * shape. rec is the caller's to clear (failure_record_clear). Exposed for
 * the unit tests. */
int store_failure_record_parse(const char *sig, const redisReply *const *el,
			       struct failure_record *rec);

/* store_script.c: a command for Redis with its own copy of its arguments,
 * and the Lua scripts the store_*.c files run with it. A script goes by
 * EVALSHA once its digest is known (learned by SCRIPT LOAD on first use:
 * the digest of a text is the same on every Redis), whole by EVAL before
 * that, and again whole when a Redis answers NOSCRIPT (restarted, flushed,
 * another one). A file's scripts are statics: {.text = ...}. */
struct store_script {
	const char *text;
	char sha[41]; /* "" until SCRIPT LOAD answered */
	bool loading;
};

/* More than the longest fixed command of any store file. */
#define STORE_CMD_MAX_ARGS 16

struct store_cmd {
	struct store_script *sc; /* a script's command; NULL for a plain one */
	bool retried;            /* sent again whole after NOSCRIPT */
	int argc;
	char *argv[STORE_CMD_MAX_ARGS];
	size_t lens[STORE_CMD_MAX_ARGS];
	struct event *deadline; /* store_cmd_deadline's, when armed */
};

/* A script's command starts "EVAL <text>" (those two become EVALSHA and
 * the digest when it is known); a plain one starts empty. */
void store_cmd_init(struct store_cmd *c, struct store_script *sc);
/* Frees the arguments and the deadline. */
void store_cmd_clear(struct store_cmd *c);
/* Arguments: a copy of s; of s's first len bytes; formatted; s itself
 * (malloc'd, now the command's). A command longer than its file's fixed
 * ones is a bug (abort). */
void store_cmd_arg(struct store_cmd *c, const char *s);
void store_cmd_argn(struct store_cmd *c, const char *s, size_t len);
void store_cmd_argf(struct store_cmd *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void store_cmd_take(struct store_cmd *c, char *s);
/* Send c, its reply to fn(privdata): a script by EVALSHA when its digest
 * is known, else whole (and SCRIPT LOAD first, unless one is on its way).
 * 0, or -1 when hiredis took nothing (the context is going away). */
int store_cmd_send(redisAsyncContext *ac, struct store_cmd *c, redisCallbackFn *fn, void *privdata);
/* For a reply *rp to c on ac: when it is a NOSCRIPT for a script command
 * not yet retried, from st's current context, forget the digest and send c
 * again whole (after a SCRIPT LOAD when load) to fn(privdata). true when
 * sent (the reply to handle is the next one); false otherwise, *rp set to
 * NULL when nothing could be sent (as a lost connection). */
bool store_cmd_retry(struct store *st, redisAsyncContext *ac, struct store_cmd *c, redisReply **rp,
		     bool load, redisCallbackFn *fn, void *privdata);
/* Arm c's deadline: cb(arg) after seconds, unless c is cleared first. */
void store_cmd_deadline(struct store_cmd *c, struct event_base *base, int seconds,
			event_callback_fn cb, void *arg);
/* What a failed reply says, for the caller's "unavailable": NULL for an
 * answer (not an error); else "redis: connection lost" (r NULL) or
 * "redis: <error>" in buf. */
const char *store_reply_error(const redisReply *r, char *buf, size_t size);
/* SCRIPT LOAD sc, unless its digest is known or a load is on its way. */
void store_script_load(redisAsyncContext *ac, struct store_script *sc);

#endif
