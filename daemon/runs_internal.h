/* runs_internal.h: what the run engine's files share: runs.c (the table,
 * watchers, tokens, persistence, review decisions), run_flow.c (attempts:
 * execute, remember, repair), run_ladder.c (the degradation ladder) and
 * run_json.c (the API view). */
#ifndef CI_RUNS_INTERNAL_H
#define CI_RUNS_INTERNAL_H

#include <sys/queue.h>

#include "exec_result.h"
#include "failure_sig.h"
#include "runs.h"
#include "session.h"

/* The session's variables and files, for the fixer and the rules; a
 * DataFrame's columns, at most RUN_PROBE_COLS_MAX a frame and
 * RUN_PROBE_COLS_TOTAL in all. */
#define RUN_PROBE_MAX 200
#define RUN_PROBE_COLS_MAX 50
#define RUN_PROBE_COLS_TOTAL 400
struct run_probe_var {
	char *name, *type;
	char *shape, *dtype; /* NULL when not a DataFrame, Series or array */
	char **col_names, **col_types;
	size_t n_cols;
	int64_t cols_total;
};
struct run_probe {
	struct run_probe_var *vars;
	size_t n_vars;
	char **files;
	size_t n_files;
};

struct run_attempt {
	int n;
	char *code;
	size_t len;
	const char *source;         /* "submitted", "rule", "fixer", "review" (static) */
	const char *rule;           /* source "rule": its name (static) */
	int64_t fixer_ms;           /* source "fixer": how long the model took; else -1 */
	struct exec_result *result; /* NULL while it runs, or when nothing ran */
	char *error_message;        /* nothing ran: why (the sandbox's error) */
	char *note;                 /* what a rule found (a REPORT) */
	/* The repair of this attempt that failed (the fixer down, slow, or
	 * nonsense): no next attempt came of it. */
	char *repair_error;
	int64_t repair_ms;
	char signature[FAILURE_SIG_HEX + 1]; /* "" when it succeeded */
};

/* An async step in flight: its answer finds the run through the token,
 * which the run drops (run = NULL) when it is freed first. */
struct run_token {
	struct run *run;
	LIST_ENTRY(run_token) link; /* the run's, or the engine's orphans */
};

struct run_watch {
	LIST_ENTRY(run_watch) link;
	struct run *run;
	bool attempts, done_only;
	run_watch_fn fn;
	void *arg;
};

enum run_status {
	RUN_STATUS_NONE,
	RUN_STATUS_OK,
	RUN_STATUS_FAILED,
	RUN_STATUS_SKIPPED,
	RUN_STATUS_DEGRADED
};

struct run {
	LIST_ENTRY(run) link;        /* its bucket of the engine's table */
	TAILQ_ENTRY(run) order_link; /* the engine's active or done list, oldest first */
	struct runs *rs;
	char id[SESSION_ID_LEN + 1];
	char tenant[64];
	char key_id[24];
	char session[SESSION_ID_LEN + 1]; /* "" until a one-shot's is made */
	bool oneshot, session_made;
	char *image; /* the session's image profile */
	bool timeout_at_max, memory_at_max;
	struct run_request req; /* code: the submitted code */
	struct run_fixer fixer;
	struct run_attempt att[RUN_MAX_ATTEMPTS + 1]; /* + one a reviewer's */
	size_t n_att;
	/* The next attempt's code and where it came from. */
	char *next_code;
	size_t next_len;
	const char *next_source, *next_rule;
	int64_t next_fixer_ms;
	struct run_probe probe;
	int kernel_deaths; /* executions in a row that lost the kernel */
	enum run_state state;
	enum run_status status;
	/* failure: the last failure's signature and what the memory said */
	bool has_failure;
	char sig[FAILURE_SIG_HEX + 1];
	int64_t seen, retried, fixed;
	char *reason; /* why the run stopped retrying */
	char *failure_class;
	char *packages; /* a rule's REPORT of a missing package, for the handoff */
	/* degraded */
	bool degraded;
	enum run_mode mode;
	size_t ladder_next;    /* the next rung of req.on_failure */
	char *unavailable;     /* the sandbox tier was unavailable: why */
	char *unavailable_why; /* ... known at the start (a quota), until the loop */
	bool over_quota;       /* refused by a quota: the stateless rung is not taken */
	char *ladder_notes;    /* rungs tried that did not answer, and why */
	struct exec_result *stateless_result;
	char review_id[SESSION_ID_LEN + 1];
	int review_state; /* enum review_state; -1 before a case */
	char *review_comment;
	int64_t created_ms, settled_ms, finished_ms;
	int64_t exec_ms; /* executions' time in all, for the quota */
	LIST_HEAD(, run_watch) watchers;
	LIST_HEAD(, run_token) tokens;
	struct stateless_call *sl;
	struct fixer_call *fx;
	struct event *evict;       /* a finished run leaves memory after a while */
	struct event *persist_ev;  /* the record's next write while it runs */
	struct event *review_poll; /* in review: the next read of the case */
	bool audited;
	enum run_state ending; /* run_end's state, once the session is gone */
};

/* runs.c */
const char *run_status_name(enum run_status s);
#define RUNS_BUCKETS 4096
struct runs {
	struct runs_deps d;
	LIST_HEAD(, run) buckets[RUNS_BUCKETS]; /* by id */
	TAILQ_HEAD(, run) active;               /* running or in review, oldest first */
	TAILQ_HEAD(, run) done;                 /* finished and in memory, oldest first */
	LIST_HEAD(, run_token) orphans;         /* tokens of freed runs, answers to come */
	size_t n_runs;
	bool closing;
	struct runs_stats stats;
};
struct run_token *run_token_new(struct run *run);
/* The token's run (NULL: gone, drop the answer), and the token freed. */
struct run *run_token_take(struct run_token *t);
/* Something changed: tell watchers and write the record. */
void run_changed(struct run *run, const char *event);
/* The run stops running: settled (review) or done. */
void run_settle(struct run *run, enum run_state state);
/* In review: read the case from the queue now and then (a decision may be
 * taken on another node). */
void review_poll_start(struct run *run);
void review_poll_stop(struct run *run);
/* Write the record to Redis (fire and forget). */
void run_persist(struct run *run);

/* run_flow.c */
/* The first step (the one-shot's create, or the first execution), inside
 * runs_start: -1 when it cannot start (nothing was changed). */
int run_flow_begin(struct run *run, struct err **errp);
/* Stop using the session (a one-shot's is removed), then settle. */
void run_end(struct run *run, enum run_state state);
/* A reviewer's code (owned), run as the last attempt. */
void run_flow_review_attempt(struct run *run, char *code, size_t len);
void run_probe_clear(struct run_probe *p);

/* run_ladder.c: attempts are over (status set): the next rung, or done. */
void run_ladder_next(struct run *run);
/* The sandbox tier is unavailable (why): status degraded, then the ladder. */
void run_tier_unavailable(struct run *run, const char *why);

/* run_json.c */
void run_attempt_json(const struct run_attempt *a, yajl_gen g);
/* The packages code imports that are not the standard library's (a
 * guess from its import lines, for the manual handoff); caller frees,
 * comma-separated, "" when none. Pure. */
char *run_code_imports(const char *code, size_t len);

#endif
