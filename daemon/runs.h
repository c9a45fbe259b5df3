/* runs.h: the code-interpreter workflow (docs/workflow.md): a run executes
 * code, and on an error repairs it (the rules first, then the fixer model)
 * and tries again, up to max_attempts; consults and updates the tenant's
 * failure memory, skipping retries of a failure known to be hopeless; and
 * when nothing works, takes the caller's degradation ladder (manual
 * handoff, the stateless tier, human review).
 *
 * A run is kept on the node that runs it and in Redis (P run:<id>, JSON,
 * --run-ttl-s), so any node can answer GET /v1/runs/{id}. */
#ifndef CI_RUNS_H
#define CI_RUNS_H

#include <stdbool.h>
#include <stddef.h>

struct runs;

/* A reviewer decided a case of tenant's run run_id (store_reviews.h has
 * the record): approved, the code (an edit, or NULL: the last attempt's
 * code) runs and completes the run; rejected, the run ends failed with the
 * comment. Fire and forget: the run's record tells how it went. */
void runs_review_decided(struct runs *r, const char *tenant, const char *run_id,
			 const char *review_id, bool approved, const char *code, size_t code_len,
			 const char *comment);

#endif
