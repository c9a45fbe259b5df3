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
	void (*on_connect)(void *arg);
	void *on_connect_arg;
	/* The audit stream (store_audit.c): writes in flight, and the ones
	 * Redis never got. */
	unsigned audit_inflight;
	uint64_t audit_dropped;
};

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

#endif
