/* runs.h: the code-interpreter workflow (docs/workflow.md): a run executes
 * code, and on an error repairs it (the rules first, then the fixer model)
 * and tries again, up to max_attempts; consults and updates the tenant's
 * failure memory, skipping retries of a failure known to be hopeless; and
 * when nothing works, takes the caller's degradation ladder (manual
 * handoff, the stateless tier, human review).
 *
 * A run lives on the node that runs it (in memory while it runs and for a
 * while after) and in Redis (P run:<id>, --run-ttl-s), so any node answers
 * GET /v1/runs/{id}. The flow is a chain of callbacks on the loop; every
 * step that waits (an execution, Redis, the fixer, the stateless tier)
 * carries a token that outlives the run if it must, so an answer that comes
 * after the run was freed (at exit) is dropped, never used. */
#ifndef CI_RUNS_H
#define CI_RUNS_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>

#include "config.h"
#include "err.h"

#define RUN_MAX_ATTEMPTS 10
#define RUN_DEFAULT_ATTEMPTS 3
#define RUN_MAX_LADDER 3
#define RUN_GOAL_MAX 8192

struct runs;
struct run;
struct manager;
struct store;
struct httpc;
struct stateless;
struct reviews;
struct audit;

enum run_mode { RUN_MODE_MANUAL, RUN_MODE_STATELESS, RUN_MODE_REVIEW };
const char *run_mode_name(enum run_mode m);

/* The fixer a run uses, resolved by the API (the daemon's default, or the
 * request's own within --fixer-allowed-urls). Owned strings; url NULL: no
 * fixer (the rules only). */
struct run_fixer {
	char *url, *model, *key;
};
/* Free what f holds (the key wiped first) and zero it. */
void run_fixer_clear(struct run_fixer *f);

/* POST /v1/sessions/{id}/runs and POST /v1/runs, typed.
 * Owns its strings (run_request_release). */
struct run_request {
	char *code;
	size_t len;
	char *goal; /* NULL when none */
	int max_attempts;
	int64_t timeout_s; /* per attempt; 0: the session's */
	bool fixer_set;    /* "fixer" was given: an object, or null for none */
	bool fixer_null;
	char *fixer_url, *fixer_model, *fixer_key_file;
	enum run_mode on_failure[RUN_MAX_LADDER];
	size_t n_on_failure;
	bool stream;
	/* Repair even a failure known to be hopeless (by class or by history):
	 * this request only, the memory is not changed. */
	bool retry_hopeless;
	char *image; /* POST /v1/runs only: NULL = the default profile */
	/* Set by the API from the tenant's quotas, never by the client: the
	 * stateless rung is not the tenant's (its "stateless" quota is false),
	 * and its cap of runs in that tier at once (0: none of its own). */
	bool stateless_denied;
	int64_t stateless_cap;
};
/* Parsed by api_parse_run_request (api_requests.c). */
void run_request_release(struct run_request *r);

/* What the engine drives. All borrowed; they outlive it. Any of httpc,
 * stateless, reviews, audit may be NULL (that part is unavailable). */
struct runs_deps {
	struct event_base *base;
	const struct config *cfg;
	struct manager *mgr;
	struct store *store;
	struct httpc *httpc;
	struct stateless *stateless;
	struct reviews *reviews;
	struct audit *audit;
	const char *node;
};
struct runs *runs_new(const struct runs_deps *deps);
/* Stop: nothing more runs, watchers are dropped without a call, answers
 * still on their way are dropped when they come. Then free (after the
 * manager and the store are freed). */
void runs_close(struct runs *rs);
void runs_free(struct runs *rs);

/* How a run stands: running, waiting for a reviewer, or done. */
enum run_state { RUN_RUNNING, RUN_REVIEW, RUN_DONE };

/* Someone waiting on a run: fn is called with "attempt" after each
 * attempt (if attempts is set) and with "settled" when the run stops
 * running (done, or waiting for a review), or with "done" only when
 * done_only is set. After "settled"/"done" the watch is over (freed by the
 * engine). run borrowed for the call. */
typedef void (*run_watch_fn)(struct run *run, const char *event, void *arg);
struct run_watch;
struct run_watch *run_watch(struct run *run, bool attempts, bool done_only, run_watch_fn fn,
			    void *arg);
/* The watch is over without its last call. NULL-safe. */
void run_unwatch(struct run_watch *w);

/* Start tenant's run of req (moved: req is left empty) in session
 * session_id, or in a fresh one-shot session of req->image when session_id
 * is NULL; fixer moved likewise. unavailable: the sandbox tier cannot take
 * the run (why: over a quota), which goes down its ladder at once, past the
 * stateless rung (a quota bounds that tier too). *out is
 * the run (borrowed: watch it now, before returning to the loop).
 * -1 when it cannot start (the session is not there, too many runs). */
int runs_start(struct runs *rs, const char *tenant, const char *key_id, const char *session_id,
	       struct run_request *req, struct run_fixer *fixer, const char *unavailable,
	       struct run **out, struct err **errp);

/* tenant's run id on this node, or NULL. */
struct run *runs_find(struct runs *rs, const char *tenant, const char *id);
enum run_state run_state(const struct run *run);
const char *run_id(const struct run *run);
/* The session the run uses ("" before a one-shot's is made). */
const char *run_session(const struct run *run);
/* Its executions' time so far. */
int64_t run_exec_ms(const struct run *run);
/* The run object of the API (docs/api.md); with type_first, {"type":"run",...}
 * for the last event of a stream. */
void run_to_json(const struct run *run, yajl_gen g, bool type_first);
/* The last attempt as {"type":"attempt",...}. */
void run_last_attempt_json(const struct run *run, yajl_gen g);

/* A run kept in Redis (another node's, or one evicted here): cb gets its
 * JSON (borrowed), or json NULL when tenant has no such run. */
typedef void (*runs_load_cb)(const struct err *e, const char *json, size_t len, bool done,
			     void *arg);
struct run_load;
struct run_load *runs_load(struct runs *rs, const char *tenant, const char *id, runs_load_cb cb,
			   void *arg);
/* l's callback will not run. NULL-safe; l must not have completed. */
void runs_load_cancel(struct run_load *l);

/* A reviewer decided a case of tenant's run run_id (store_reviews.h has
 * the record): approved, the code (an edit, or NULL: the last attempt's
 * code) runs and completes the run; rejected, the run ends failed with the
 * comment. Fire and forget: the run's record tells how it went. */
void runs_review_decided(struct runs *r, const char *tenant, const char *run_id,
			 const char *review_id, bool approved, const char *code, size_t code_len,
			 const char *comment);

/* For /metrics: runs started, and ended by status. */
struct runs_stats {
	uint64_t started, ok, failed, skipped, degraded;
	size_t active;
};
void runs_stats(const struct runs *rs, struct runs_stats *out);

#endif
