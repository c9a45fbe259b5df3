/* runs.c: the run engine's table (runs.h): starting runs, finding them,
 * their watchers, the tokens that let an answer outlive its run, the
 * records in Redis, and reviewers' decisions. The flow itself is
 * run_flow.c (attempts) and run_ladder.c (the degradation ladder). */
#include "runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "clock.h"
#include "defer.h"
#include "digest.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "runs_internal.h"
#include "store_reviews.h"
#include "fixer.h"
#include "stateless.h"
#include "store_runs.h"
#include "xalloc.h"

/* A finished run stays in memory this long (GET without Redis), unless
 * the table is full and it is the oldest. */
#define RUN_KEEP_MS (10 * 60 * 1000)

const char *run_mode_name(enum run_mode m)
{
	switch (m) {
	case RUN_MODE_MANUAL: return "manual";
	case RUN_MODE_STATELESS: return "stateless";
	case RUN_MODE_REVIEW: return "review";
	}
	return "manual";
}

struct runs *runs_new(const struct runs_deps *deps)
{
	struct runs *rs = xcalloc(1, sizeof(*rs));
	rs->d = *deps;
	for (size_t i = 0; i < RUNS_BUCKETS; i++)
		LIST_INIT(&rs->buckets[i]);
	TAILQ_INIT(&rs->active);
	TAILQ_INIT(&rs->done);
	LIST_INIT(&rs->orphans);
	return rs;
}

static void persist_soon(struct run *run);

/* ---- tokens ---- */

struct run_token *run_token_new(struct run *run)
{
	struct run_token *t = xcalloc(1, sizeof(*t));
	t->run = run;
	LIST_INSERT_HEAD(&run->tokens, t, link);
	return t;
}

struct run *run_token_take(struct run_token *t)
{
	struct run *run = t->run;
	LIST_REMOVE(t, link);
	free(t);
	if (run && run->rs->closing)
		return NULL;
	return run;
}

/* ---- one run ---- */

static void attempt_clear(struct run_attempt *a)
{
	free(a->code);
	exec_result_free(a->result);
	free(a->error_message);
	free(a->note);
	free(a->repair_error);
}

/* A run id's bucket: ids are random (UUID v4), so their first hex digits
 * spread them. */
static size_t bucket_of(const char *id)
{
	return (size_t)strtoul((char[4]){id[0], id[1], id[2], 0}, NULL, 16) % RUNS_BUCKETS;
}

void run_fixer_clear(struct run_fixer *f)
{
	free(f->url);
	free(f->model);
	if (f->key) {
		explicit_bzero(f->key, strlen(f->key));
		free(f->key);
	}
	memset(f, 0, sizeof(*f));
}

static void run_free(struct run *run)
{
	struct runs *rs = run->rs;
	LIST_REMOVE(run, link);
	if (run->finished_ms)
		TAILQ_REMOVE(&rs->done, run, order_link);
	else
		TAILQ_REMOVE(&rs->active, run, order_link);
	rs->n_runs--;
	while (!LIST_EMPTY(&run->tokens)) { /* their answers are still to come */
		struct run_token *t = LIST_FIRST(&run->tokens);
		LIST_REMOVE(t, link);
		t->run = NULL;
		LIST_INSERT_HEAD(&rs->orphans, t, link);
	}
	while (!LIST_EMPTY(&run->watchers)) {
		struct run_watch *w = LIST_FIRST(&run->watchers);
		LIST_REMOVE(w, link);
		free(w);
	}
	stateless_cancel(run->sl);
	fixer_cancel(run->fx);
	if (run->evict)
		event_free(run->evict);
	if (run->persist_ev)
		event_free(run->persist_ev);
	if (run->review_poll)
		event_free(run->review_poll);
	for (size_t i = 0; i < run->n_att; i++)
		attempt_clear(&run->att[i]);
	run_request_release(&run->req);
	run_fixer_clear(&run->fixer);
	free(run->image);
	free(run->next_code);
	run_probe_clear(&run->probe);
	free(run->reason);
	free(run->failure_class);
	free(run->packages);
	free(run->unavailable);
	free(run->ladder_notes);
	exec_result_free(run->stateless_result);
	free(run->review_comment);
	free(run->unavailable_why);
	free(run);
}

enum run_state run_state(const struct run *run)
{
	return run->state;
}

const char *run_id(const struct run *run)
{
	return run->id;
}

const char *run_session(const struct run *run)
{
	return run->session;
}

int64_t run_exec_ms(const struct run *run)
{
	return run->exec_ms;
}

/* Over a quota: no session, no execution; the ladder, from the loop. */
static void unavailable_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct run *run = run_token_take(arg);
	if (run == NULL)
		return;
	const char *why = run->unavailable_why;
	run->unavailable_why = NULL;
	run_tier_unavailable(run, why);
	free((char *)why);
}

struct run *runs_find(struct runs *rs, const char *tenant, const char *id)
{
	if (!session_id_valid(id))
		return NULL;
	struct run *run;
	LIST_FOREACH (run, &rs->buckets[bucket_of(id)], link)
		if (strcmp(run->id, id) == 0)
			return strcmp(run->tenant, tenant) == 0 ? run : NULL;
	return NULL;
}

/* Room for one more: drop the oldest finished run (it stays in Redis). */
static bool make_room(struct runs *rs)
{
	int64_t max = rs->d.cfg->max_runs;
	if ((int64_t)rs->n_runs < max)
		return true;
	struct run *run;
	TAILQ_FOREACH (run, &rs->done, order_link)
		if (LIST_EMPTY(&run->tokens) && LIST_EMPTY(&run->watchers)) {
			run_free(run);
			return true;
		}
	/* Then the oldest waiting for a reviewer: its record stays in Redis;
	 * a later decision is kept in the queue, but nothing here runs it. */
	TAILQ_FOREACH (run, &rs->active, order_link)
		if (run->state == RUN_REVIEW && LIST_EMPTY(&run->tokens) &&
		    LIST_EMPTY(&run->watchers)) {
			log_warn("run %s: leaves memory while waiting for review %s (--max-runs "
				 "reached)",
				 run->id, run->review_id);
			run_free(run);
			return true;
		}
	return false;
}

static const char *status_name(enum run_status s)
{
	switch (s) {
	case RUN_STATUS_OK: return "ok";
	case RUN_STATUS_FAILED: return "failed";
	case RUN_STATUS_SKIPPED: return "skipped";
	case RUN_STATUS_DEGRADED: return "degraded";
	case RUN_STATUS_NONE: break;
	}
	return "running";
}

int runs_start(struct runs *rs, const char *tenant, const char *key_id, const char *session_id,
	       struct run_request *req, struct run_fixer *fixer, const char *unavailable,
	       struct run **out, struct err **errp)
{
	if (rs->closing)
		return err_set(errp, ERR_UNAVAILABLE, "the daemon is stopping");
	const struct config *cfg = rs->d.cfg;
	const struct session *s = NULL;
	if (session_id && !unavailable) {
		s = manager_get(rs->d.mgr, session_id, tenant);
		if (s == NULL)
			return err_set(errp, ERR_NOT_FOUND, "session %s not found", session_id);
	}
	size_t mine = 0;
	struct run *r;
	TAILQ_FOREACH (r, &rs->active, order_link)
		mine += strcmp(r->tenant, tenant) == 0;
	if ((int64_t)mine >= cfg->max_runs_per_tenant)
		return err_set(errp, ERR_QUOTA_EXCEEDED,
			       "tenant %s has %zu runs running or in review on this node "
			       "(--max-runs-per-tenant); retry when one ends",
			       tenant, mine);
	if (!make_room(rs))
		return err_set(errp, ERR_UNAVAILABLE,
			       "this node runs %lld runs already (--max-runs); retry shortly",
			       (long long)cfg->max_runs);
	struct run *run = xcalloc(1, sizeof(*run));
	run->rs = rs;
	session_new_id(run->id);
	snprintf(run->tenant, sizeof(run->tenant), "%s", tenant);
	snprintf(run->key_id, sizeof(run->key_id), "%s", key_id ? key_id : "");
	LIST_INIT(&run->watchers);
	LIST_INIT(&run->tokens);
	run->review_state = -1;
	run->created_ms = clock_now_ms();
	run->req = *req;
	memset(req, 0, sizeof(*req));
	run->fixer = *fixer;
	memset(fixer, 0, sizeof(*fixer));
	run->next_code = xstrndup(run->req.code, run->req.len);
	run->next_len = run->req.len;
	run->next_source = "submitted";
	run->next_fixer_ms = -1;
	if (s) {
		snprintf(run->session, sizeof(run->session), "%s", s->id);
		run->image = xstrdup(s->image);
		int64_t t = run->req.timeout_s ? run->req.timeout_s : s->limits.exec_timeout_s;
		run->timeout_at_max = t >= cfg->max_exec_timeout_s;
		run->memory_at_max = s->limits.memory_mb >= cfg->max_memory_mb;
	} else {
		run->oneshot = session_id == NULL;
		if (session_id)
			snprintf(run->session, sizeof(run->session), "%s", session_id);
		run->image = xstrdup(run->req.image ? run->req.image : cfg->image);
		int64_t t = run->req.timeout_s ? run->req.timeout_s : cfg->exec_timeout_s;
		run->timeout_at_max = t >= cfg->max_exec_timeout_s;
		run->memory_at_max = cfg->memory_mb >= cfg->max_memory_mb;
	}
	LIST_INSERT_HEAD(&rs->buckets[bucket_of(run->id)], run, link);
	TAILQ_INSERT_TAIL(&rs->active, run, order_link);
	rs->n_runs++;
	rs->stats.started++;
	if (unavailable) {
		run->over_quota = true;
		run->unavailable_why = xstrdup(unavailable);
		defer_call(rs->d.base, unavailable_cb, run_token_new(run));
	} else if (run_flow_begin(run, errp) < 0) {
		rs->stats.started--;
		run_free(run);
		return -1;
	}
	*out = run;
	persist_soon(run);
	return 0;
}

/* ---- watchers ---- */

struct run_watch *run_watch(struct run *run, bool attempts, bool done_only, run_watch_fn fn,
			    void *arg)
{
	struct run_watch *w = xcalloc(1, sizeof(*w));
	w->run = run;
	w->attempts = attempts;
	w->done_only = done_only;
	w->fn = fn;
	w->arg = arg;
	LIST_INSERT_HEAD(&run->watchers, w, link);
	return w;
}

void run_unwatch(struct run_watch *w)
{
	if (w == NULL)
		return;
	LIST_REMOVE(w, link);
	free(w);
}

/* Tell the watchers that want event. A final one ("settled" for the
 * watchers of the first answer, "done" for those of the end) ends the
 * watch: it is unlinked before its call and freed after it. A watcher may
 * unwatch itself from a call that is not final, and nothing else. */
static void notify(struct run *run, const char *event)
{
	bool attempt = strcmp(event, "attempt") == 0;
	bool settled = strcmp(event, "settled") == 0;
	bool done = strcmp(event, "done") == 0;
	struct run_watch *hits[64];
	size_t n = 0;
	struct run_watch *w;
	LIST_FOREACH (w, &run->watchers, link) {
		bool wants = attempt ? w->attempts && !w->done_only
			     : done  ? w->done_only
				     : !w->done_only; /* "session", "settled" */
		if (wants && n < sizeof(hits) / sizeof(hits[0]))
			hits[n++] = w;
	}
	bool final = settled || done;
	for (size_t i = 0; i < n; i++) {
		w = hits[i];
		if (final)
			LIST_REMOVE(w, link);
		w->fn(run, event, w->arg);
		if (final)
			free(w);
	}
}

/* While a run runs its record is written at most every RUN_PERSIST_MS (a
 * run that ends sooner is written once, when it settles): each write is the
 * whole run as JSON, and a short run would otherwise pay three. */
#define RUN_PERSIST_MS 250

static void persist_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	run_persist(arg);
}

static void persist_soon(struct run *run)
{
	if (run->persist_ev == NULL)
		run->persist_ev = evtimer_new(run->rs->d.base, persist_cb, run);
	if (evtimer_pending(run->persist_ev, NULL))
		return;
	struct timeval tv = {0, RUN_PERSIST_MS * 1000};
	evtimer_add(run->persist_ev, &tv);
}

void run_changed(struct run *run, const char *event)
{
	notify(run, event);
	persist_soon(run);
}

/* ---- the end ---- */

static void evict_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct run *run = arg;
	if (LIST_EMPTY(&run->tokens) && LIST_EMPTY(&run->watchers)) {
		run_free(run);
		return;
	}
	struct timeval again = {60, 0}; /* still answering someone */
	evtimer_add(run->evict, &again);
}

/* One audit entry per run, when it stops running the first time. */
static void run_audit(struct run *run)
{
	if (run->audited || run->rs->d.audit == NULL || run->rs->closing)
		return;
	run->audited = true;
	char sha[DIGEST_HEX_LEN + 1];
	digest_sha256_hex(run->req.code, run->req.len, sha);
	size_t head = audit_utf8_cut(run->req.code, run->req.len, AUDIT_CODE_HEAD_MAX);
	struct audit_entry e = {
	    .action = "run",
	    .tenant = run->tenant,
	    .key_id = run->key_id[0] ? run->key_id : NULL,
	    .session = run->session[0] ? run->session : NULL,
	    .code_sha256 = sha,
	    .code_head = run->req.code,
	    .code_head_len = head,
	    .size = -1,
	    .outcome = status_name(run->status),
	    .duration_ms = clock_now_ms() - run->created_ms,
	    .target = run->id,
	};
	audit_record(run->rs->d.audit, &e);
}

static void count_status(struct runs *rs, enum run_status s)
{
	switch (s) {
	case RUN_STATUS_OK: rs->stats.ok++; break;
	case RUN_STATUS_FAILED:
	case RUN_STATUS_NONE: rs->stats.failed++; break;
	case RUN_STATUS_SKIPPED: rs->stats.skipped++; break;
	case RUN_STATUS_DEGRADED: rs->stats.degraded++; break;
	}
}

void run_settle(struct run *run, enum run_state state)
{
	if (run->status == RUN_STATUS_NONE)
		run->status = RUN_STATUS_FAILED;
	bool first = run->settled_ms == 0;
	run->state = state;
	if (first) {
		run->settled_ms = clock_now_ms();
		run_audit(run);
	}
	if (state == RUN_DONE && run->finished_ms == 0) {
		TAILQ_REMOVE(&run->rs->active, run, order_link);
		TAILQ_INSERT_TAIL(&run->rs->done, run, order_link);
		run->finished_ms = clock_now_ms();
		count_status(run->rs, run->status);
		if (run->evict == NULL)
			run->evict = evtimer_new(run->rs->d.base, evict_cb, run);
		struct timeval keep = {RUN_KEEP_MS / 1000, 0};
		evtimer_add(run->evict, &keep);
	}
	if (state == RUN_REVIEW)
		review_poll_start(run);
	/* The answer first: the record's write is not on the caller's path. */
	notify(run, "settled");
	if (state == RUN_DONE)
		notify(run, "done");
	run_persist(run);
}

/* ---- records ---- */

void run_persist(struct run *run)
{
	struct runs *rs = run->rs;
	if (run->persist_ev)
		evtimer_del(run->persist_ev);
	if (rs->closing)
		return;
	AUTOGEN yajl_gen g = json_gen_new();
	run_to_json(run, g, false);
	size_t len;
	const char *text = jg_text(g, &len);
	store_run_put(rs->d.store, run->tenant, run->id, text, len, run->state == RUN_DONE,
		      rs->d.cfg->run_ttl_s);
}

struct run_load {
	runs_load_cb cb;
	void *arg;
	char tenant[64];
	char id[SESSION_ID_LEN + 1];
};

/* What Redis gave back is answered as is only when it is a run object with
 * this id (Redis is an outside input like any other). */
static bool record_is_run(const char *json, size_t len, const char *id)
{
	AUTOJSON yajl_val v = json_parse(json, len, NULL);
	const char *rid = YAJL_IS_OBJECT(v) ? json_get_str(v, "id") : NULL;
	return rid && strcmp(rid, id) == 0 && json_get_str(v, "status") &&
	       YAJL_IS_ARRAY(json_get(v, "attempts"));
}

static void load_done(const struct err *e, const char *tenant, const char *json, size_t len,
		      bool done, void *arg)
{
	struct run_load *l = arg;
	if (l->cb == NULL)
		;
	else if (e)
		l->cb(e, NULL, 0, false, l->arg);
	else if (json == NULL || tenant == NULL || strcmp(tenant, l->tenant) != 0)
		l->cb(NULL, NULL, 0, false, l->arg); /* another tenant's: as if none */
	else if (!record_is_run(json, len, l->id))
		l->cb(&(struct err){.code = ERR_INTERNAL,
				    .message = "the run's record in redis is not a run (broken or "
					       "tampered with)"},
		      NULL, 0, false, l->arg);
	else
		l->cb(NULL, json, len, done, l->arg);
	free(l);
}

struct run_load *runs_load(struct runs *rs, const char *tenant, const char *id, runs_load_cb cb,
			   void *arg)
{
	struct run_load *l = xcalloc(1, sizeof(*l));
	l->cb = cb;
	l->arg = arg;
	snprintf(l->tenant, sizeof(l->tenant), "%s", tenant);
	snprintf(l->id, sizeof(l->id), "%s", id);
	store_run_get(rs->d.store, id, load_done, l);
	return l;
}

void runs_load_cancel(struct run_load *l)
{
	if (l)
		l->cb = NULL;
}

/* ---- reviews ---- */

/* The decision, on the run: approved, its code runs as the last attempt;
 * rejected, the run ends. */
static void apply_decision(struct run *run, bool approved, const char *code, size_t code_len,
			   const char *comment)
{
	review_poll_stop(run);
	free(run->review_comment);
	run->review_comment = comment ? xstrdup(comment) : NULL;
	if (!approved) {
		run->review_state = REVIEW_REJECTED;
		run_settle(run, RUN_DONE);
		return;
	}
	run->review_state = REVIEW_APPROVED;
	const struct run_attempt *last = run->n_att ? &run->att[run->n_att - 1] : NULL;
	char *c = code   ? xstrndup(code, code_len)
		  : last ? xstrndup(last->code, last->len)
			 : xstrndup(run->req.code, run->req.len);
	size_t len = code ? code_len : last ? last->len : run->req.len;
	run->state = RUN_RUNNING;
	run_flow_review_attempt(run, c, len);
}

void runs_review_decided(struct runs *rs, const char *tenant, const char *run_id,
			 const char *review_id, bool approved, const char *code, size_t code_len,
			 const char *comment)
{
	if (rs == NULL || rs->closing)
		return;
	struct run *run = runs_find(rs, tenant, run_id);
	if (run == NULL || run->state != RUN_REVIEW || strcmp(run->review_id, review_id) != 0)
		return; /* another node's run: it reads the decision from the queue */
	apply_decision(run, approved, code, code_len, comment);
}

/* A run waiting for its review reads the case from the queue every
 * REVIEW_POLL_MS, so a decision taken on any node reaches it. */
#define REVIEW_POLL_MS 1000

static void review_read(const struct err *e, const struct review_record *recs, size_t n, void *arg)
{
	struct run *run = run_token_take(arg);
	if (run == NULL || run->state != RUN_REVIEW)
		return;
	if (e == NULL && n == 1 && recs[0].state != REVIEW_PENDING) {
		apply_decision(run, recs[0].state == REVIEW_APPROVED, recs[0].code,
			       recs[0].code ? strlen(recs[0].code) : 0, recs[0].comment);
		return;
	}
	review_poll_start(run);
}

static void review_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct run *run = arg;
	if (run->state != RUN_REVIEW || run->rs->closing)
		return;
	store_review_get(run->rs->d.store, run->tenant, run->review_id, review_read,
			 run_token_new(run));
}

void review_poll_start(struct run *run)
{
	if (run->review_poll == NULL)
		run->review_poll = evtimer_new(run->rs->d.base, review_poll_cb, run);
	struct timeval tv = {0, REVIEW_POLL_MS * 1000};
	evtimer_add(run->review_poll, &tv);
}

void review_poll_stop(struct run *run)
{
	if (run->review_poll)
		evtimer_del(run->review_poll);
}

/* ---- the engine ---- */

void runs_stats(const struct runs *rs, struct runs_stats *out)
{
	*out = rs->stats;
	out->active = 0;
	const struct run *run;
	TAILQ_FOREACH (run, &rs->active, order_link)
		out->active++;
}

/* Nothing more for run's watchers, and what can be cancelled is. */
static void runs_close_one(struct run *run)
{
	while (!LIST_EMPTY(&run->watchers)) {
		struct run_watch *w = LIST_FIRST(&run->watchers);
		LIST_REMOVE(w, link);
		free(w);
	}
	stateless_cancel(run->sl);
	run->sl = NULL;
	fixer_cancel(run->fx);
	run->fx = NULL;
}

void runs_close(struct runs *rs)
{
	if (rs == NULL)
		return;
	rs->closing = true;
	rs->d.audit = NULL; /* the API's, freed with it */
	for (size_t i = 0; i < RUNS_BUCKETS; i++) {
		struct run *run;
		LIST_FOREACH (run, &rs->buckets[i], link)
			runs_close_one(run);
	}
}

void runs_free(struct runs *rs)
{
	if (rs == NULL)
		return;
	rs->closing = true;
	for (size_t i = 0; i < RUNS_BUCKETS; i++)
		while (!LIST_EMPTY(&rs->buckets[i]))
			run_free(LIST_FIRST(&rs->buckets[i]));
	while (!LIST_EMPTY(&rs->orphans)) {
		struct run_token *t = LIST_FIRST(&rs->orphans);
		LIST_REMOVE(t, link);
		free(t);
	}
	free(rs);
}

const char *run_status_name(enum run_status s)
{
	return status_name(s);
}
