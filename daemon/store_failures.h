/* store_failures.h: the failure memory, per tenant, in Redis.
 *
 * Keys (docs/operations.md):
 *   P fail:<tenant>:<sig>   hash: ename, message, line, image, class, seen,
 *                           retried, fixed_rule, fixed_fixer, first_ms, last_ms
 *   P fails:<tenant>        sorted set: sig -> last_ms
 * Updates are Lua scripts, atomic across daemons. Entries decay: each
 * sighting refreshes the entry's TTL (--failure-memory-ttl-s), so a pattern
 * not seen for that long is forgotten. */
#ifndef CI_STORE_FAILURES_H
#define CI_STORE_FAILURES_H

#include <stdbool.h>
#include <stdint.h>

#include "failure_sig.h"
#include "store.h"

struct failure_record {
	char signature[FAILURE_SIG_HEX + 1];
	char *ename, *message, *line, *image;
	char *class_name; /* failure_class_name, or NULL */
	int64_t seen, retried, fixed_rule, fixed_fixer;
	int64_t first_ms, last_ms;
};
void failure_record_clear(struct failure_record *r);

/* Known hopeless by history: repair was tried (a rule's or the fixer's code
 * ran: `retried`) at least min_repairs times and never fixed it. Sightings
 * alone never count: a pattern nobody tried to repair is not hopeless. */
bool failure_record_hopeless(const struct failure_record *r, int64_t min_repairs);

/* rec borrowed for the callback; NULL with e set when Redis failed. */
typedef void (*store_failure_cb)(const struct err *e, const struct failure_record *rec, void *arg);

/* One more sighting of sig for tenant (the entry made from desc and cls if
 * new); cb gets the entry as it is after this one. */
void store_failure_seen(struct store *st, const char *tenant, const char *sig,
			const struct failure_desc *desc, enum failure_class cls, int64_t ttl_s,
			store_failure_cb cb, void *arg);

enum failure_outcome { FAILURE_RETRIED, FAILURE_FIXED_RULE, FAILURE_FIXED_FIXER };
/* Count an outcome for sig; fire and forget. */
void store_failure_note(struct store *st, const char *tenant, const char *sig,
			enum failure_outcome o);

typedef void (*store_failures_cb)(const struct err *e, const struct failure_record *recs, size_t n,
				  void *arg);
/* tenant's entries, most recently seen first, at most limit. */
void store_failures_list(struct store *st, const char *tenant, size_t limit, store_failures_cb cb,
			 void *arg);

typedef void (*store_found_cb)(const struct err *e, bool found, void *arg);
void store_failure_delete(struct store *st, const char *tenant, const char *sig, store_found_cb cb,
			  void *arg);

#endif
