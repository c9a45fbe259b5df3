/* store_reviews.h: the human review queue, per tenant, in Redis.
 *
 * Keys (docs/operations.md):
 *   P review:<tenant>:<id>  hash: run, state (pending|approved|rejected),
 *                           case (the run as JSON when it was queued),
 *                           code (an approver's edit), comment, created_ms,
 *                           decided_ms, decided_by
 *   P reviews:<tenant>      sorted set: id -> created_ms
 * A decision is a Lua script: only a pending case can be decided, once,
 * whichever daemon is asked. Entries expire (--review-ttl-s). */
#ifndef CI_STORE_REVIEWS_H
#define CI_STORE_REVIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "session.h"
#include "store.h"

enum review_state { REVIEW_PENDING, REVIEW_APPROVED, REVIEW_REJECTED };
const char *review_state_name(enum review_state s);

struct review_record {
	char id[SESSION_ID_LEN + 1];
	char run_id[SESSION_ID_LEN + 1];
	enum review_state state;
	char *case_json; /* the run when it was queued (its attempts) */
	size_t case_len;
	char *code;       /* approved with an edit: the code; else NULL */
	char *comment;    /* NULL when none */
	char *decided_by; /* the key id that decided; NULL while pending */
	int64_t created_ms, decided_ms;
};
void review_record_clear(struct review_record *r);

/* Queue a case for tenant; id and run_id are UUIDs. */
void store_review_put(struct store *st, const char *tenant, const char *id, const char *run_id,
		      const char *case_json, size_t case_len, int64_t ttl_s, store_done_cb cb,
		      void *arg);

typedef void (*store_reviews_cb)(const struct err *e, const struct review_record *recs, size_t n,
				 void *arg);
/* tenant's cases, newest first, at most limit; pending_only filters. */
void store_reviews_list(struct store *st, const char *tenant, bool pending_only, size_t limit,
			store_reviews_cb cb, void *arg);

/* One case: n is 0 when tenant has none with this id. */
void store_review_get(struct store *st, const char *tenant, const char *id, store_reviews_cb cb,
		      void *arg);

/* Decide a pending case: approve (code NULL: as it stands) or reject.
 * cb gets the case after the decision (n 1), or n 0 and found false when
 * there is none, or found true and n 0 when it was already decided. */
typedef void (*store_review_decide_cb)(const struct err *e, bool found,
				       const struct review_record *rec, void *arg);
void store_review_decide(struct store *st, const char *tenant, const char *id, bool approve,
			 const char *code, size_t code_len, const char *comment,
			 const char *decided_by, store_review_decide_cb cb, void *arg);

#endif
