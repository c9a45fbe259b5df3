/* store_audit.h: the audit stream in Redis, P audit (audit.h says what goes
 * in it). Entries are written with XADD ... MAXLEN ~ N, fields flat (time,
 * action, tenant, session, outcome, and json: the whole entry) so that
 * readers can filter without parsing; read back with XRANGE/XREVRANGE. */
#ifndef CI_STORE_AUDIT_H
#define CI_STORE_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct store;

/* Writes in flight beyond this are dropped (and counted): a burst of
 * executions must not queue audit writes without bound. */
#define STORE_AUDIT_INFLIGHT_MAX 256

/* Entries one read may ask Redis for. */
#define STORE_AUDIT_READ_MAX 1000

/* The flat fields of an entry (borrowed; NULL is written as ""). */
struct store_audit_fields {
	int64_t time_ms;
	const char *action, *tenant, *session, *outcome;
};

/* Append an entry (json, the whole of it) and trim the stream to about
 * maxlen; fire and forget. Counted as dropped when Redis is not connected,
 * too many writes are in flight, or the write fails. */
void store_audit_add(struct store *st, int64_t maxlen, const struct store_audit_fields *f,
		     const char *json, size_t len);

/* Audit writes Redis did not get, since start. */
uint64_t store_audit_dropped(const struct store *st);

/* One entry read back; every string borrowed for the callback (never NULL,
 * "" when the field is missing). */
struct store_audit_item {
	const char *id; /* the stream id, "1764600000000-0" */
	const char *tenant, *action, *session;
	const char *json;
	size_t json_len;
};

/* The answer of a read: the entries in the order asked, or an error (n 0).
 * Runs once, never inside the call that started the read. */
typedef void (*store_audit_cb)(const struct err *e, const struct store_audit_item *items, size_t n,
			       void *arg);

struct store_audit_read;

/* Entries with ids from lo to hi (Redis range syntax: "-", "+", "ID",
 * "(ID" exclusive), oldest first, or newest first, at most count (capped at
 * STORE_AUDIT_READ_MAX). The handle is valid until the callback ran. */
struct store_audit_read *store_audit_range(struct store *st, const char *lo, const char *hi,
					   bool newest_first, size_t count, store_audit_cb cb,
					   void *arg);

/* The read's callback will not run (it must not have run yet). NULL-safe. */
void store_audit_cancel(struct store_audit_read *op);

#endif
