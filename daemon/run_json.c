/* run_json.c: the run object of the API (docs/api.md, docs/workflow.md),
 * and the manual handoff's guess at the packages code needs. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "runs_internal.h"
#include "store_reviews.h"
#include "xalloc.h"

static void error_json(yajl_gen g, const struct run_attempt *a)
{
	const struct exec_result *r = a->result;
	jg_str(g, "error");
	if (r == NULL && a->error_message == NULL) {
		jg_null(g);
		return;
	}
	if (r && r->status == EXEC_OK && !r->has_error) {
		jg_null(g);
		return;
	}
	jg_obj(g);
	if (r && r->has_error) {
		jg_kv_str(g, "ename", r->ename);
		jg_kv_str(g, "evalue", r->evalue);
		jg_str(g, "traceback");
		jg_arr(g);
		for (size_t i = 0; i < r->n_traceback; i++)
			jg_str(g, r->traceback[i]);
		jg_arr_end(g);
		exec_cell_line_json(r, g);
	} else { /* a timeout, a kill, or nothing ran: no exception, a reason */
		jg_kv_str(g, "ename", NULL);
		jg_kv_str(g, "evalue", r ? r->reason : a->error_message);
		jg_str(g, "traceback");
		jg_arr(g);
		jg_arr_end(g);
		jg_kv_str(g, "cell_line", NULL);
	}
	jg_obj_end(g);
}

void run_attempt_json(const struct run_attempt *a, yajl_gen g)
{
	jg_obj(g);
	jg_kv_int(g, "n", a->n);
	jg_str(g, "code");
	jg_strn(g, a->code ? a->code : "", a->code ? a->len : 0);
	jg_kv_str(g, "status",
		  a->result          ? exec_status_name(a->result->status)
		  : a->error_message ? "unavailable"
				     : "running");
	error_json(g, a);
	jg_str(g, "duration_ms");
	if (a->result)
		jg_int(g, a->result->duration_ms);
	else
		jg_null(g);
	jg_kv_str(g, "source", a->source);
	jg_str(g, "fixer_ms");
	if (a->fixer_ms >= 0)
		jg_int(g, a->fixer_ms);
	else
		jg_null(g);
	if (a->rule)
		jg_kv_str(g, "rule", a->rule);
	if (a->note)
		jg_kv_str(g, "note", a->note);
	if (a->signature[0])
		jg_kv_str(g, "signature", a->signature);
	if (a->repair_error) {
		jg_str(g, "repair_error");
		jg_obj(g);
		jg_kv_str(g, "source", "fixer");
		jg_kv_str(g, "message", a->repair_error);
		jg_kv_int(g, "fixer_ms", a->repair_ms);
		jg_obj_end(g);
	}
	jg_obj_end(g);
}

void run_last_attempt_json(const struct run *run, yajl_gen g)
{
	jg_obj(g);
	jg_kv_str(g, "type", "attempt");
	jg_kv_str(g, "run", run->id);
	jg_str(g, "attempt");
	if (run->n_att)
		run_attempt_json(&run->att[run->n_att - 1], g);
	else
		jg_null(g);
	jg_obj_end(g);
}

/* ---- the manual handoff ---- */

/* Top-level modules of the standard library that code commonly imports
 * (enough to leave them out of "packages"; a guess, said so). */
static const char *const stdlib_modules[] = {
    "__future__",  "abc",        "argparse",
    "array",       "ast",        "asyncio",
    "base64",      "bisect",     "calendar",
    "collections", "concurrent", "contextlib",
    "copy",        "csv",        "dataclasses",
    "datetime",    "decimal",    "difflib",
    "enum",        "fractions",  "functools",
    "glob",        "gzip",       "hashlib",
    "heapq",       "html",       "http",
    "io",          "itertools",  "json",
    "logging",     "math",       "multiprocessing",
    "operator",    "os",         "pathlib",
    "pickle",      "pprint",     "queue",
    "random",      "re",         "shutil",
    "signal",      "socket",     "sqlite3",
    "statistics",  "string",     "struct",
    "subprocess",  "sys",        "tempfile",
    "textwrap",    "threading",  "time",
    "timeit",      "traceback",  "typing",
    "unicodedata", "unittest",   "urllib",
    "uuid",        "warnings",   "xml",
    "zipfile",     "zlib",
};

/* Import names people use that are not their package's name. */
static const char *package_of(const char *module)
{
	static const char *const map[][2] = {
	    {"sklearn", "scikit-learn"}, {"cv2", "opencv-python"},  {"PIL", "pillow"},
	    {"yaml", "pyyaml"},          {"bs4", "beautifulsoup4"}, {"dateutil", "python-dateutil"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i][0], module) == 0)
			return map[i][1];
	return module;
}

static bool is_stdlib(const char *m)
{
	for (size_t i = 0; i < sizeof(stdlib_modules) / sizeof(stdlib_modules[0]); i++)
		if (strcmp(stdlib_modules[i], m) == 0)
			return true;
	return false;
}

/* Add the top-level name at s (len n) to out, once. */
static void add_module(char *out, size_t cap, const char *s, size_t n)
{
	char m[64];
	if (n == 0 || n >= sizeof(m))
		return;
	memcpy(m, s, n);
	m[n] = '\0';
	if (is_stdlib(m))
		return;
	const char *pkg = package_of(m);
	size_t pl = strlen(pkg);
	for (const char *p = out; (p = strstr(p, pkg)) != NULL; p += pl)
		if ((p == out || p[-1] == ',') && (p[pl] == ',' || p[pl] == '\0'))
			return;
	size_t used = strlen(out);
	if (used + pl + 2 > cap)
		return;
	if (used)
		out[used++] = ',';
	memcpy(out + used, pkg, pl + 1);
}

static size_t ident_len(const char *s, const char *end)
{
	size_t n = 0;
	while (s + n < end && (isalnum((unsigned char)s[n]) || s[n] == '_'))
		n++;
	return n;
}

char *run_code_imports(const char *code, size_t len)
{
	char out[1024] = "";
	const char *end = code + len;
	for (const char *line = code; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *le = nl ? nl : end;
		const char *p = line;
		while (p < le && (*p == ' ' || *p == '\t'))
			p++;
		if ((size_t)(le - p) > 7 && strncmp(p, "import ", 7) == 0) {
			/* import a.b as c, d */
			for (p += 7; p < le;) {
				while (p < le && (*p == ' ' || *p == ','))
					p++;
				size_t n = ident_len(p, le);
				add_module(out, sizeof(out), p, n);
				const char *comma = memchr(p, ',', (size_t)(le - p));
				if (n == 0 || comma == NULL)
					break;
				p = comma + 1;
			}
		} else if ((size_t)(le - p) > 5 && strncmp(p, "from ", 5) == 0 && p[5] != '.') {
			p += 5;
			while (p < le && *p == ' ')
				p++;
			add_module(out, sizeof(out), p, ident_len(p, le));
		}
		line = nl ? nl + 1 : end;
	}
	return xstrdup(out);
}

static void strings_csv(yajl_gen g, const char *csv)
{
	jg_arr(g);
	for (const char *p = csv; p && *p;) {
		const char *c = strchr(p, ',');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		if (n)
			jg_strn(g, p, n);
		p = c ? c + 1 : NULL;
	}
	jg_arr_end(g);
}

static void handoff_json(const struct run *run, yajl_gen g)
{
	const char *code = run->n_att ? run->att[run->n_att - 1].code : run->req.code;
	size_t len = run->n_att ? run->att[run->n_att - 1].len : run->req.len;
	AUTOFREE char *pkgs = run_code_imports(code, len);
	if (run->packages && !strstr(pkgs, run->packages)) {
		char *more = NULL;
		if (asprintf(&more, "%s%s%s", pkgs, pkgs[0] ? "," : "", run->packages) >= 0) {
			free(pkgs);
			pkgs = more;
		}
	}
	jg_str(g, "handoff");
	jg_obj(g);
	jg_str(g, "code");
	jg_strn(g, code, len);
	jg_str(g, "failures");
	jg_arr(g);
	for (size_t i = 0; i < run->n_att; i++) {
		const struct run_attempt *a = &run->att[i];
		const struct exec_result *r = a->result;
		if (r && r->status == EXEC_OK && !r->has_error)
			continue;
		jg_obj(g);
		jg_kv_int(g, "attempt", a->n);
		jg_kv_str(g, "ename", r && r->has_error ? r->ename : NULL);
		jg_kv_str(g, "evalue",
			  r && r->has_error ? r->evalue
			  : r               ? r->reason
					    : a->error_message);
		if (a->signature[0])
			jg_kv_str(g, "signature", a->signature);
		jg_obj_end(g);
	}
	jg_arr_end(g);
	jg_str(g, "packages");
	strings_csv(g, pkgs);
	char how[1400];
	snprintf(how, sizeof(how), "Save the code as main.py, then: python3 main.py");
	if (pkgs[0]) {
		char list[1100];
		snprintf(list, sizeof(list), "%s", pkgs);
		for (char *c = list; *c; c++)
			if (*c == ',')
				*c = ' ';
		snprintf(how, sizeof(how),
			 "Save the code as main.py, then: python3 -m venv .venv && . "
			 ".venv/bin/activate && pip install %s && python3 main.py",
			 list);
	}
	jg_kv_str(g, "how_to_run", how);
	jg_obj_end(g);
}

static void degraded_json(const struct run *run, yajl_gen g)
{
	jg_str(g, "degraded");
	if (!run->degraded) {
		jg_null(g);
		return;
	}
	jg_obj(g);
	jg_kv_str(g, "mode", run_mode_name(run->mode));
	jg_kv_str(g, "reason", run->reason);
	jg_kv_bool(g, "sandbox_unavailable", run->unavailable != NULL);
	jg_kv_str(g, "tried", run->ladder_notes);
	switch (run->mode) {
	case RUN_MODE_MANUAL: handoff_json(run, g); break;
	case RUN_MODE_STATELESS: /* its result is the run's "result" */ break;
	case RUN_MODE_REVIEW:
		jg_kv_str(g, "review", run->review_id);
		jg_kv_str(g, "state",
			  run->review_state >= 0
			      ? review_state_name((enum review_state)run->review_state)
			      : NULL);
		jg_kv_str(g, "comment", run->review_comment);
		break;
	}
	jg_obj_end(g);
}

static void failure_json(const struct run *run, yajl_gen g)
{
	jg_str(g, "failure");
	if (!run->has_failure) {
		jg_null(g);
		return;
	}
	jg_obj(g);
	jg_kv_str(g, "signature", run->sig);
	jg_str(g, "seen");
	if (run->seen >= 0)
		jg_int(g, run->seen);
	else
		jg_null(g); /* the memory was not reachable */
	jg_str(g, "retried");
	if (run->seen >= 0)
		jg_int(g, run->retried);
	else
		jg_null(g);
	jg_kv_int(g, "fixed", run->fixed);
	jg_kv_str(g, "reason", run->status == RUN_STATUS_OK ? NULL : run->reason);
	jg_kv_str(g, "class", run->failure_class);
	jg_obj_end(g);
}

static const char *state_name(enum run_state s)
{
	return s == RUN_RUNNING ? "running" : s == RUN_REVIEW ? "review" : "done";
}

void run_to_json(const struct run *run, yajl_gen g, bool type_first)
{
	jg_obj(g);
	if (type_first)
		jg_kv_str(g, "type", "run");
	jg_kv_str(g, "id", run->id);
	jg_kv_str(g, "status",
		  run->state == RUN_RUNNING && run->status == RUN_STATUS_NONE
		      ? "running"
		      : run_status_name(run->status));
	jg_kv_str(g, "state", state_name(run->state));
	jg_kv_str(g, "session", run->session[0] ? run->session : NULL);
	jg_kv_bool(g, "oneshot", run->oneshot);
	jg_kv_str(g, "goal", run->req.goal);
	jg_kv_int(g, "max_attempts", run->req.max_attempts);
	jg_str(g, "attempts");
	jg_arr(g);
	for (size_t i = 0; i < run->n_att; i++)
		run_attempt_json(&run->att[i], g);
	jg_arr_end(g);
	/* The last execution's result: the stateless tier's when the ladder ran
	 * the code there, else the last attempt's. */
	jg_str(g, "result");
	const struct run_attempt *last = run->n_att ? &run->att[run->n_att - 1] : NULL;
	if (run->degraded && run->mode == RUN_MODE_STATELESS && run->stateless_result)
		exec_result_to_json(run->stateless_result, g);
	else if (last && last->result)
		exec_result_to_json(last->result, g);
	else
		jg_null(g);
	failure_json(run, g);
	degraded_json(run, g);
	jg_kv_time(g, "created_at", run->created_ms);
	if (run->state == RUN_DONE && run->finished_ms)
		jg_kv_time(g, "finished_at", run->finished_ms);
	else
		jg_kv_str(g, "finished_at", NULL);
	jg_obj_end(g);
}
