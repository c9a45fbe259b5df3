/* run_flow.c: a run's attempts (runs.h): execute, and on a failure ask the
 * failure memory, then repair (a rule, else the fixer) and execute again,
 * until it works, the attempts are spent, or the failure is known to be
 * hopeless; then the ladder (run_ladder.c).
 *
 *   begin ── (one-shot: create) ── attempt ── exec ─┬─ ok ───────────── end
 *                                     ▲              └─ failed ── memory ─┬─ hopeless/spent ──
 * ladder └── rule | fixer ◄── probe ◄────────┘
 *
 * Every wait carries a token (runs_internal.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capbuf.h"
#include "fix_rules.h"
#include "fixer.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "runs_internal.h"
#include "store_failures.h"
#include "xalloc.h"

/* How long the variables-and-files probe may take, and the marker its
 * line starts with (the user's own output comes before it). */
#define PROBE_TIMEOUT_S 10
#define PROBE_MARK \
	"\x1e"     \
	"CI-PROBE "
#define PROBE_MAX_BYTES (256u << 10)
/* The tails of the output the fixer sees. */
#define FIXER_TAIL_BYTES 4096

/* The probe lists the session's variables (names and types, not values;
 * for a pandas DataFrame its shape and its first columns with their dtypes,
 * for a Series or a numpy array its shape and dtype) and its files, and
 * leaves nothing behind: no name, no value for `_`. It imports neither
 * pandas nor numpy: a variable can only be one if its module is loaded.
 * Column names go as repr() (quotes and case show), cut to 60 characters;
 * at most 50 columns a frame and 400 in all. */
static const char probe_code[] =
    "def __ci_probe():\n"
    "    import json as _j, os as _o, sys as _s\n"
    "    pd, np = _s.modules.get('pandas'), _s.modules.get('numpy')\n"
    "    budget = [400]\n"
    "    def cut(x, n):\n"
    "        x = str(x)\n"
    "        return x if len(x) <= n else x[:n] + '...'\n"
    "    def info(v):\n"
    "        try:\n"
    "            if pd is not None and isinstance(v, pd.DataFrame):\n"
    "                n = min(50, budget[0])\n"
    "                budget[0] -= n\n"
    "                cols = [[cut(repr(c), 60), cut(t, 40)]\n"
    "                        for c, t in zip(v.columns[:n], v.dtypes.iloc[:n])]\n"
    "                return {'shape': cut(tuple(v.shape), 60), 'columns': cols,\n"
    "                        'ncols': int(v.shape[1])}\n"
    "            if pd is not None and isinstance(v, pd.Series):\n"
    "                return {'shape': cut(tuple(v.shape), 60), 'dtype': cut(v.dtype, 40)}\n"
    "            if np is not None and isinstance(v, np.ndarray):\n"
    "                return {'shape': cut(tuple(v.shape), 60), 'dtype': cut(v.dtype, 40)}\n"
    "        except Exception:\n"
    "            pass\n"
    "        return None\n"
    "    vs = []\n"
    "    for k, v in list(globals().items()):\n"
    "        if k.startswith('_') or k in ('In', 'Out', 'exit', 'quit', 'get_ipython'):\n"
    "            continue\n"
    "        d = info(v)\n"
    "        vs.append([k[:100], type(v).__name__[:100]] + ([d] if d else []))\n"
    "        if len(vs) >= 200:\n"
    "            break\n"
    "    fs = []\n"
    "    for root, dirs, files in _o.walk('/workspace'):\n"
    "        dirs[:] = sorted(d for d in dirs if not d.startswith('.'))[:50]\n"
    "        for f in sorted(files):\n"
    "            fs.append(_o.path.relpath(_o.path.join(root, f), '/workspace')[:300])\n"
    "            if len(fs) >= 200:\n"
    "                break\n"
    "        if len(fs) >= 200:\n"
    "            break\n"
    "    print('\\x1eCI-PROBE ' + _j.dumps({'vars': vs, 'files': fs}), flush=True)\n"
    "__ci_probe()\n"
    "del __ci_probe\n";

static void attempt_start(struct run *run);

void run_probe_clear(struct run_probe *p)
{
	for (size_t i = 0; i < p->n_vars; i++) {
		struct run_probe_var *v = &p->vars[i];
		free(v->name);
		free(v->type);
		free(v->shape);
		free(v->dtype);
		for (size_t j = 0; j < v->n_cols; j++) {
			free(v->col_names[j]);
			free(v->col_types[j]);
		}
		free(v->col_names);
		free(v->col_types);
	}
	free(p->vars);
	for (size_t i = 0; i < p->n_files; i++)
		free(p->files[i]);
	free(p->files);
	memset(p, 0, sizeof(*p));
}

static struct run_attempt *last_attempt(struct run *run)
{
	return run->n_att ? &run->att[run->n_att - 1] : NULL;
}

static bool succeeded(const struct exec_result *r)
{
	return r && r->status == EXEC_OK && !r->has_error;
}

static void set_reason(struct run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(struct run *run, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	free(run->reason);
	if (vasprintf(&run->reason, fmt, ap) < 0)
		run->reason = NULL;
	va_end(ap);
}

/* Attempts are over without success: why, then the ladder. */
static void give_up(struct run *run, enum run_status status)
{
	run->status = status;
	run_changed(run, "state");
	run_ladder_next(run);
}

/* ---- the end of a run's use of its session ---- */

static void session_deleted(const struct err *e, void *arg)
{
	struct run_token *t = arg;
	struct run *run = run_token_take(t);
	if (run == NULL)
		return;
	if (e)
		log_warn("run %s: its one-shot session %s: %s", run->id, run->session, e->message);
	run->session_made = false;
	run_settle(run, run->ending);
}

void run_end(struct run *run, enum run_state state)
{
	run->ending = state;
	if (run->oneshot && run->session_made) {
		struct err *e = NULL;
		struct run_token *t = run_token_new(run);
		if (manager_delete(run->rs->d.mgr, run->session, run->tenant, session_deleted, t,
				   &e) == 0)
			return;
		run_token_take(t);
		log_warn("run %s: its one-shot session %s: %s", run->id, run->session, e->message);
		err_free(e);
		run->session_made = false;
	}
	run_settle(run, state);
}

/* ---- beginning ---- */

static void oneshot_created(const struct session *s, const struct err *e, void *arg)
{
	struct run *run = run_token_take(arg);
	if (run == NULL)
		return;
	if (e) {
		run_tier_unavailable(run, e->message);
		return;
	}
	snprintf(run->session, sizeof(run->session), "%s", s->id);
	run->session_made = true;
	run_changed(run, "session");
	attempt_start(run);
}

static int create_oneshot(struct run *run, struct err **errp)
{
	struct session_request sr = {0};
	if (run->image) {
		sr.image = run->image; /* borrowed: manager_create copies what it keeps */
		sr.set |= SRQ_IMAGE;
	}
	/* Its attempts' deadline is the session's limit, not lowered to the
	 * default (the API checked it against --max-exec-timeout-s). */
	if (run->req.timeout_s > 0) {
		sr.limits.exec_timeout_s = run->req.timeout_s;
		sr.set |= SRQ_EXEC_TIMEOUT;
	}
	struct run_token *t = run_token_new(run);
	if (manager_create(run->rs->d.mgr, &sr, run->tenant, oneshot_created, t, errp) < 0) {
		run_token_take(t);
		return -1;
	}
	return 0;
}

static void exec_done(const struct exec_result *r, const struct err *e, void *arg);

/* The next attempt's execution; -1 when it cannot start (the run's state
 * is unchanged then). */
static int exec_start(struct run *run, struct err **errp)
{
	if (run->n_att >= sizeof(run->att) / sizeof(run->att[0]))
		return err_set(errp, ERR_INTERNAL, "run %s: no room for another attempt", run->id);
	struct run_token *t = run_token_new(run);
	struct run_attempt *a = &run->att[run->n_att];
	if (manager_exec(run->rs->d.mgr, run->session, run->tenant, run->next_code, run->next_len,
			 run->req.timeout_s, NULL, exec_done, t, errp) < 0) {
		run_token_take(t);
		return -1;
	}
	/* The attempt before keeps its error, not its output: the answer
	 * shows only the last attempt's full result. */
	if (run->n_att)
		exec_result_drop_outputs(run->att[run->n_att - 1].result);
	memset(a, 0, sizeof(*a));
	a->n = (int)run->n_att + 1;
	a->code = run->next_code;
	a->len = run->next_len;
	a->source = run->next_source;
	a->rule = run->next_rule;
	a->fixer_ms = run->next_fixer_ms;
	run->next_code = NULL;
	run->next_len = 0;
	run->next_rule = NULL;
	run->next_fixer_ms = -1;
	run->n_att++;
	return 0;
}

int run_flow_begin(struct run *run, struct err **errp)
{
	if (run->oneshot)
		return create_oneshot(run, errp);
	return exec_start(run, errp);
}

/* The next attempt, from a callback: a failure to start is the tier's. */
static void attempt_start(struct run *run)
{
	struct err *e = NULL;
	if (exec_start(run, &e) == 0)
		return;
	run_tier_unavailable(run, e->message);
	err_free(e);
}

/* ---- after an execution ---- */

static void remember(struct run *run, struct run_attempt *a);

static void fixed_by(struct run *run, const struct run_attempt *a)
{
	const struct run_attempt *prev = a->n >= 2 ? &run->att[a->n - 2] : NULL;
	if (prev == NULL || !prev->signature[0])
		return;
	if (strcmp(a->source, "rule") == 0)
		store_failure_note(run->rs->d.store, run->tenant, prev->signature,
				   FAILURE_FIXED_RULE);
	else if (strcmp(a->source, "fixer") == 0)
		store_failure_note(run->rs->d.store, run->tenant, prev->signature,
				   FAILURE_FIXED_FIXER);
	else
		return;
	run->fixed++;
}

static void exec_done(const struct exec_result *r, const struct err *e, void *arg)
{
	struct run *run = run_token_take(arg);
	if (run == NULL)
		return;
	struct run_attempt *a = last_attempt(run);
	if (r == NULL) {
		a->error_message = xstrdup(e->message);
		run_changed(run, "attempt");
		run_tier_unavailable(run, e->message);
		return;
	}
	a->result = exec_result_dup(r);
	run->exec_ms += r->duration_ms;
	run_changed(run, "attempt");
	if (succeeded(r)) {
		fixed_by(run, a);
		run->status = RUN_STATUS_OK;
		run_end(run, RUN_DONE);
		return;
	}
	if (strcmp(a->source, "review") == 0) { /* a reviewer's code: no more repairs */
		set_reason(run, "the reviewer's code failed too");
		run->status = RUN_STATUS_FAILED;
		run_end(run, RUN_DONE);
		return;
	}
	if (r->status == EXEC_KILLED && r->kernel_restarted) {
		if (++run->kernel_deaths >= 2) {
			run_tier_unavailable(
			    run, "the sandbox's kernel died in two executions in a row");
			return;
		}
	} else {
		run->kernel_deaths = 0;
	}
	remember(run, a);
}

/* ---- the failure memory ---- */

static void probe_start(struct run *run);

static void seen_done(const struct err *e, const struct failure_record *rec, void *arg)
{
	struct run *run = run_token_take(arg);
	if (run == NULL)
		return;
	if (rec) {
		run->seen = rec->seen;
		run->retried = rec->retried;
		run->fixed = rec->fixed_rule + rec->fixed_fixer;
	} else {
		run->seen = -1;
		log_warn("run %s: the failure memory is not available: %s", run->id,
			 e ? e->message : "no entry");
	}
	/* Spent: no retry is skipped, whatever the pattern. */
	if ((int)run->n_att >= run->req.max_attempts) {
		set_reason(run, "%d attempt%s failed", run->req.max_attempts,
			   run->req.max_attempts == 1 ? "" : "s");
		give_up(run, RUN_STATUS_FAILED);
		return;
	}
	/* Hopeless (by class or by history) skips the repairs, unless this
	 * request asked to repair anyway. */
	if (run->req.retry_hopeless) {
		probe_start(run);
		return;
	}
	if (run->failure_class) {
		set_reason(run,
			   "%s: no retry can fix this (%s); to try a repair anyway, send "
			   "\"retry_hopeless\": true with the run",
			   run->failure_class,
			   strcmp(run->failure_class, "egress_denied") == 0
			       ? "the network policy refused the host"
			   : strcmp(run->failure_class, "memory_at_max") == 0
			       ? "out of memory at the server's maximum"
			   : strcmp(run->failure_class, "timeout_at_max") == 0
			       ? "timed out at the server's maximum"
			       : "the module is not in the image and cannot be installed");
		give_up(run, RUN_STATUS_SKIPPED);
		return;
	}
	int64_t after = run->rs->d.cfg->failure_hopeless_after;
	if (rec && failure_record_hopeless(rec, after)) {
		set_reason(run,
			   "known hopeless: repairs of this failure (by a rule or the fixer) were "
			   "tried %lld times for this tenant and never fixed it; to try again "
			   "anyway, send \"retry_hopeless\": true with the run, or forget the "
			   "pattern (DELETE /v1/failures/%s)",
			   (long long)rec->retried, run->sig);
		give_up(run, RUN_STATUS_SKIPPED);
		return;
	}
	probe_start(run);
}

static void remember(struct run *run, struct run_attempt *a)
{
	struct failure_input in = {
	    .r = a->result,
	    .code = a->code,
	    .code_len = a->len,
	    .image = run->image,
	    .timeout_at_max = run->timeout_at_max,
	    .memory_at_max = run->memory_at_max,
	    .can_install = false,
	};
	struct failure_desc desc = {0};
	enum failure_class cls = failure_classify(&in);
	failure_signature(&in, a->signature, &desc);
	run->has_failure = true;
	snprintf(run->sig, sizeof(run->sig), "%s", a->signature);
	free(run->failure_class);
	run->failure_class = failure_class_name(cls) ? xstrdup(failure_class_name(cls)) : NULL;
	store_failure_seen(run->rs->d.store, run->tenant, a->signature, &desc, cls,
			   run->rs->d.cfg->failure_memory_ttl_s, seen_done, run_token_new(run));
	failure_desc_clear(&desc);
}

/* ---- what the session holds ---- */

static void repair(struct run *run);

/* A DataFrame's, Series' or array's details (the probe's third member),
 * each part checked and cut: it came from the sandbox. */
static void probe_var_info(struct run_probe_var *pv, yajl_val info, size_t *budget)
{
	if (!YAJL_IS_OBJECT(info))
		return;
	const char *shape = json_get_str(info, "shape"), *dtype = json_get_str(info, "dtype");
	pv->shape = shape ? xstrndup(shape, 64) : NULL;
	pv->dtype = dtype ? xstrndup(dtype, 64) : NULL;
	int64_t total = 0;
	if (json_get_int(info, "ncols", &total) && total > 0)
		pv->cols_total = total;
	yajl_val cols = json_get(info, "columns");
	size_t nc = YAJL_IS_ARRAY(cols) ? cols->u.array.len : 0;
	if (nc > RUN_PROBE_COLS_MAX)
		nc = RUN_PROBE_COLS_MAX;
	if (nc > *budget)
		nc = *budget;
	if (nc == 0)
		return;
	pv->col_names = xcalloc(nc, sizeof(char *));
	pv->col_types = xcalloc(nc, sizeof(char *));
	for (size_t j = 0; j < nc; j++) {
		yajl_val pair = cols->u.array.values[j];
		yajl_val cn = json_arr_at(pair, 0), ct = json_arr_at(pair, 1);
		if (!YAJL_IS_STRING(cn) || !YAJL_IS_STRING(ct))
			continue;
		pv->col_names[pv->n_cols] = xstrndup(cn->u.string, 100);
		pv->col_types[pv->n_cols++] = xstrndup(ct->u.string, 64);
	}
	*budget -= pv->n_cols;
}

static void probe_parse(struct run_probe *p, const char *text, size_t len)
{
	const char *mark = memmem(text, len, PROBE_MARK, strlen(PROBE_MARK));
	if (mark == NULL)
		return;
	const char *js = mark + strlen(PROBE_MARK);
	AUTOJSON yajl_val v = json_parse(js, len - (size_t)(js - text), NULL);
	yajl_val vars = json_get(v, "vars"), files = json_get(v, "files");
	size_t nv = YAJL_IS_ARRAY(vars) ? vars->u.array.len : 0;
	size_t nf = YAJL_IS_ARRAY(files) ? files->u.array.len : 0;
	nv = nv > RUN_PROBE_MAX ? RUN_PROBE_MAX : nv;
	nf = nf > RUN_PROBE_MAX ? RUN_PROBE_MAX : nf;
	p->vars = xcalloc(nv + 1, sizeof(*p->vars));
	size_t budget = RUN_PROBE_COLS_TOTAL;
	for (size_t i = 0; i < nv; i++) {
		yajl_val pair = vars->u.array.values[i];
		yajl_val k = json_arr_at(pair, 0), t = json_arr_at(pair, 1);
		if (!YAJL_IS_STRING(k) || !YAJL_IS_STRING(t))
			continue;
		struct run_probe_var *pv = &p->vars[p->n_vars++];
		pv->name = xstrndup(k->u.string, 100);
		pv->type = xstrndup(t->u.string, 100);
		probe_var_info(pv, json_arr_at(pair, 2), &budget);
	}
	p->files = xcalloc(nf + 1, sizeof(char *));
	for (size_t i = 0; i < nf; i++) {
		yajl_val f = files->u.array.values[i];
		if (YAJL_IS_STRING(f))
			p->files[p->n_files++] = xstrndup(f->u.string, 300);
	}
}

static void probe_done(const struct exec_result *r, const struct err *e, void *arg)
{
	(void)e;
	struct run *run = run_token_take(arg);
	if (run == NULL)
		return;
	run_probe_clear(&run->probe);
	if (r) {
		size_t len;
		char *out = capbuf_render(&r->out, &len);
		if (out && len <= PROBE_MAX_BYTES)
			probe_parse(&run->probe, out, len);
		free(out);
	}
	repair(run);
}

static void probe_start(struct run *run)
{
	struct err *e = NULL;
	struct run_token *t = run_token_new(run);
	if (manager_exec(run->rs->d.mgr, run->session, run->tenant, probe_code,
			 sizeof(probe_code) - 1, PROBE_TIMEOUT_S, NULL, probe_done, t, &e) < 0) {
		run_token_take(t);
		log_debug("run %s: no probe: %s", run->id, e->message);
		err_free(e);
		run_probe_clear(&run->probe);
		repair(run);
	}
}

/* ---- repairs ---- */

static bool rule_used(const struct run *run, const char *rule)
{
	for (size_t i = 0; i < run->n_att; i++)
		if (run->att[i].rule && strcmp(run->att[i].rule, rule) == 0)
			return true;
	return false;
}

static void next_attempt(struct run *run, char *code, size_t len, const char *source,
			 const char *rule, int64_t fixer_ms)
{
	free(run->next_code);
	run->next_code = code;
	run->next_len = len;
	run->next_source = source;
	run->next_rule = rule;
	run->next_fixer_ms = fixer_ms;
	/* A repair that runs: what the history's hopeless rule counts. */
	store_failure_note(run->rs->d.store, run->tenant, run->sig, FAILURE_RETRIED);
	run->retried++;
	attempt_start(run);
}

static void fixer_done(const struct fixer_reply *reply, void *arg)
{
	struct run *run = run_token_take((struct run_token *)arg);
	if (run == NULL)
		return;
	run->fx = NULL;
	struct run_attempt *a = last_attempt(run);
	if (reply->error || reply->code == NULL) {
		a->repair_error = xstrdup(reply->error ? reply->error->message : "no code");
		a->repair_ms = reply->fixer_ms;
		set_reason(run, "the fixer gave no fix: %s", a->repair_error);
		give_up(run, RUN_STATUS_FAILED);
		return;
	}
	if (reply->len == a->len && memcmp(reply->code, a->code, a->len) == 0) {
		a->repair_error = xstrdup("the fixer answered with the same code");
		a->repair_ms = reply->fixer_ms;
		set_reason(run, "the fixer gave no fix: %s", a->repair_error);
		give_up(run, RUN_STATUS_FAILED);
		return;
	}
	next_attempt(run, xstrndup(reply->code, reply->len), reply->len, "fixer", NULL,
		     reply->fixer_ms);
}

/* The last len bytes at most of an output, for the prompt. */
static char *tail_of(const struct capbuf *cb)
{
	size_t len;
	char *all = capbuf_render(cb, &len);
	if (all == NULL || len <= FIXER_TAIL_BYTES)
		return all;
	char *t = xstrndup(all + len - FIXER_TAIL_BYTES, FIXER_TAIL_BYTES);
	free(all);
	return t;
}

static void ask_fixer(struct run *run, struct run_attempt *a)
{
	const struct exec_result *r = a->result;
	AUTOFREE char *out = tail_of(&r->out);
	AUTOFREE char *errout = tail_of(&r->err);
	struct fixer_var vars[RUN_PROBE_MAX];
	for (size_t i = 0; i < run->probe.n_vars; i++) {
		const struct run_probe_var *pv = &run->probe.vars[i];
		vars[i] = (struct fixer_var){
		    .name = pv->name,
		    .type = pv->type,
		    .shape = pv->shape,
		    .dtype = pv->dtype,
		    .col_names = (const char *const *)pv->col_names,
		    .col_types = (const char *const *)pv->col_types,
		    .n_cols = pv->n_cols,
		    .cols_total = pv->cols_total,
		};
	}
	struct fixer_prompt p = {
	    .goal = run->req.goal,
	    .code = a->code,
	    .code_len = a->len,
	    .ename = r->has_error ? r->ename : exec_status_name(r->status),
	    .evalue = r->has_error ? r->evalue : r->reason,
	    .traceback = (const char *const *)r->traceback,
	    .n_traceback = r->n_traceback,
	    .stdout_tail = out,
	    .stderr_tail = errout,
	    .vars = vars,
	    .n_vars = run->probe.n_vars,
	    .files = (const char *const *)run->probe.files,
	    .n_files = run->probe.n_files,
	    .attempt = a->n,
	    .max_attempts = run->req.max_attempts,
	};
	struct fixer_target target = {run->fixer.url, run->fixer.model, run->fixer.key};
	struct err *e = NULL;
	struct run_token *t = run_token_new(run);
	run->fx = fixer_ask(run->rs->d.httpc, &target, &p, run->rs->d.cfg->fixer_timeout_ms,
			    fixer_done, t, &e);
	if (run->fx)
		return;
	run_token_take(t);
	a->repair_error = xstrdup(e->message);
	err_free(e);
	set_reason(run, "the fixer gave no fix: %s", a->repair_error);
	give_up(run, RUN_STATUS_FAILED);
}

static void repair(struct run *run)
{
	struct run_attempt *a = last_attempt(run);
	struct fix_rule_input in = {
	    .r = a->result,
	    .code = a->code,
	    .code_len = a->len,
	    .files = (const char *const *)run->probe.files,
	    .n_files = run->probe.n_files,
	};
	struct fix_rule_outcome o = {0};
	fix_rules_apply(&in, &o);
	if (o.kind == FIX_RULE_REPAIR && o.rule && !rule_used(run, o.rule)) {
		free(a->note);
		a->note = o.note;
		o.note = NULL;
		char *code = o.code;
		size_t len = o.code_len;
		o.code = NULL;
		const char *rule = o.rule;
		fix_rule_outcome_clear(&o);
		next_attempt(run, code, len, "rule", rule, -1);
		return;
	}
	if (o.kind == FIX_RULE_REPORT) {
		free(a->note);
		a->note = o.note;
		o.note = NULL;
		if (o.package) {
			free(run->packages);
			run->packages = o.package;
			o.package = NULL;
		}
	}
	fix_rule_outcome_clear(&o);
	if (run->fixer.url == NULL || run->rs->d.httpc == NULL) {
		set_reason(run, "no rule applies and no fixer is configured (--fixer-url, or the "
				"request's \"fixer\")");
		give_up(run, RUN_STATUS_FAILED);
		return;
	}
	ask_fixer(run, a);
}

/* ---- a reviewer's code ---- */

void run_flow_review_attempt(struct run *run, char *code, size_t len)
{
	free(run->next_code);
	run->next_code = code;
	run->next_len = len;
	run->next_source = "review";
	run->next_rule = NULL;
	run->next_fixer_ms = -1;
	run_changed(run, "state");
	if (!run->oneshot && manager_get(run->rs->d.mgr, run->session, run->tenant)) {
		attempt_start(run);
		return;
	}
	/* The session is gone (a one-shot's ends at the review): a fresh one. */
	run->oneshot = true;
	struct err *e = NULL;
	if (create_oneshot(run, &e) < 0) {
		run_tier_unavailable(run, e->message);
		err_free(e);
	}
}
