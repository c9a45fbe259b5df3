/* reviews.h: opening review cases: the case goes to the tenant's queue in
 * Redis (store_reviews.h) and, when --review-webhook-url is set, to the
 * webhook as {"event":"review.pending","tenant","review","run",
 * "created_ms"}. Deciding is the API's (api_reviews.c), which hands the
 * decision to the run (runs_review_decided). */
#ifndef CI_REVIEWS_H
#define CI_REVIEWS_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct store;
struct webhook;
struct reviews;

/* wh may be NULL (no webhook). Borrowed; both outlive it. */
struct reviews *reviews_new(struct event_base *base, struct store *st, struct webhook *wh,
			    int64_t ttl_s);
void reviews_free(struct reviews *rv);

/* Queue a case for tenant's run run_id; case_json is the run as it stands.
 * cb gets the new case's id (borrowed), or an error (Redis). */
typedef void (*reviews_open_cb)(const struct err *e, const char *review_id, void *arg);
void reviews_open(struct reviews *rv, const char *tenant, const char *run_id, const char *case_json,
		  size_t case_len, reviews_open_cb cb, void *arg);

#endif
