/* run_ladder.c: the degradation ladder (docs/workflow.md). When the
 * attempts are over without success, or the sandbox tier is unavailable,
 * the caller's on_failure rungs are tried in order until one answers:
 *   manual     the answer carries a handoff (code, failures, packages,
 *              how to run it) and the run is done;
 *   stateless  the last code runs once in the stateless tier; its result
 *              answers when it succeeds, else the next rung. Not taken by
 *              a run a quota refused (the tier counts against the quotas
 *              too: the run's execution reservation covers it, and its
 *              time is the run's), nor by a tenant whose "stateless" quota
 *              is false, nor past its "stateless_runs" on this node;
 *   review     a case goes to the tenant's review queue; the run waits for
 *              the reviewer (runs_review_decided).
 * A rung that cannot answer (no tier, no queue) says why in
 * degraded.tried, and the next one is tried. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "reviews.h"
#include "runs_internal.h"
#include "stateless.h"
#include "store_reviews.h"
#include "xalloc.h"

static void note(struct run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct run *run, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *line = NULL;
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (line == NULL)
		return;
	if (run->ladder_notes == NULL) {
		run->ladder_notes = line;
		return;
	}
	char *both = NULL;
	if (asprintf(&both, "%s; %s", run->ladder_notes, line) >= 0) {
		free(run->ladder_notes);
		run->ladder_notes = both;
	}
	free(line);
}

/* The code a rung works on: the last attempt's, or the submitted code
 * when nothing ran. */
static void last_code(const struct run *run, const char **code, size_t *len)
{
	if (run->n_att) {
		*code = run->att[run->n_att - 1].code;
		*len = run->att[run->n_att - 1].len;
	} else {
		*code = run->req.code;
		*len = run->req.len;
	}
}

static void answered_by(struct run *run, enum run_mode mode)
{
	run->degraded = true;
	run->mode = mode;
	if (run->unavailable)
		run->status = RUN_STATUS_DEGRADED;
}

static void stateless_done(const struct exec_result *r, const struct err *e, void *arg)
{
	struct run *run = run_token_take(arg);
	if (run == NULL)
		return;
	run->sl = NULL;
	if (r)
		run->exec_ms += r->duration_ms; /* exec_seconds_per_hour counts it */
	if (r == NULL) {
		note(run, "stateless: %s", e ? e->message : "no result");
		run_ladder_next(run);
		return;
	}
	exec_result_free(run->stateless_result);
	run->stateless_result = exec_result_dup(r);
	if (r->status == EXEC_OK && !r->has_error) {
		answered_by(run, RUN_MODE_STATELESS);
		run->status = RUN_STATUS_DEGRADED;
		run_end(run, RUN_DONE);
		return;
	}
	if (r->has_error)
		note(run, "stateless: the code failed there too (%s: %.200s)", r->ename,
		     r->evalue ? r->evalue : "");
	else
		note(run, "stateless: the code failed there too (%s)", exec_status_name(r->status));
	if (run->ladder_next < run->req.n_on_failure) {
		run_ladder_next(run);
		return;
	}
	answered_by(run, RUN_MODE_STATELESS); /* the last rung: its result is the answer */
	run_end(run, RUN_DONE);
}

static void review_opened(const struct err *e, const char *review_id, void *arg)
{
	struct run *run = run_token_take(arg);
	if (run == NULL)
		return;
	if (e) {
		note(run, "review: the queue is not available (%s)", e->message);
		run_ladder_next(run);
		return;
	}
	snprintf(run->review_id, sizeof(run->review_id), "%s", review_id);
	run->review_state = REVIEW_PENDING;
	answered_by(run, RUN_MODE_REVIEW);
	run_end(run, RUN_REVIEW);
}

/* One rung; false when it cannot answer (noted) and the next is due. */
static bool try_rung(struct run *run, enum run_mode mode)
{
	const struct runs_deps *d = &run->rs->d;
	const char *code;
	size_t len;
	last_code(run, &code, &len);
	switch (mode) {
	case RUN_MODE_MANUAL:
		answered_by(run, RUN_MODE_MANUAL);
		run_end(run, RUN_DONE);
		return true;
	case RUN_MODE_STATELESS: {
		if (run->over_quota) {
			note(run, "stateless: not taken: the tenant is over a quota, and the "
				  "stateless tier counts against its quotas too");
			return false;
		}
		if (run->req.stateless_denied) {
			note(run,
			     "stateless: not taken: the tenant's \"stateless\" quota is false");
			return false;
		}
		if (d->stateless == NULL) {
			note(run, "stateless: the tier is off on this node");
			return false;
		}
		if (!stateless_available(d->stateless)) {
			note(run, "stateless: the tier is not available on this node");
			return false;
		}
		struct err *e = NULL;
		struct run_token *t = run_token_new(run);
		run->sl = stateless_run(d->stateless, run->tenant, run->req.stateless_cap, code,
					len, 0, stateless_done, t, &e);
		if (run->sl)
			return true;
		run_token_take(t);
		note(run, "stateless: %s", e ? e->message : "cannot start");
		err_free(e);
		return false;
	}
	case RUN_MODE_REVIEW: {
		if (d->reviews == NULL) {
			note(run, "review: no review queue on this node");
			return false;
		}
		AUTOGEN yajl_gen g = json_gen_new();
		run_to_json(run, g, false);
		size_t n;
		const char *text = jg_text(g, &n);
		reviews_open(d->reviews, run->tenant, run->id, text, n, review_opened,
			     run_token_new(run));
		return true;
	}
	}
	return false;
}

void run_ladder_next(struct run *run)
{
	while (run->ladder_next < run->req.n_on_failure) {
		enum run_mode mode = run->req.on_failure[run->ladder_next++];
		if (try_rung(run, mode))
			return;
	}
	run_end(run, RUN_DONE);
}

void run_tier_unavailable(struct run *run, const char *why)
{
	free(run->unavailable);
	run->unavailable = xstrdup(why);
	free(run->reason);
	run->reason = NULL;
	if (asprintf(&run->reason, "the sandbox tier is unavailable: %s", why) < 0)
		run->reason = NULL;
	run->status = RUN_STATUS_FAILED;
	run_changed(run, "state");
	run_ladder_next(run);
}
