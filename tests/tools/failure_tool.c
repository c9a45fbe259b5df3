/* failure_tool.c: the failure memory's code run on real inputs, for
 * tests/integration/test_failures.py (not installed, not part of the
 * daemon). Until the run engine exists (issue 12's lead part), this is how
 * a test feeds a real session's exec result through failure_classify,
 * failure_signature and the rules, and how the Lua scripts of
 * store_failures.c meet a real Redis.
 *
 *   failure-tool [--redis URL --prefix P --tenant T [--ttl-s N]
 *                 [--note retried|fixed_rule|fixed_fixer]] < input.json
 *
 * input.json: {"result": <an exec result, as the API answers it>,
 *   "code": "...", "files": ["a.csv", ...], "image": "python",
 *   "timeout_at_max": bool, "memory_at_max": bool, "can_install": bool}
 *
 * Prints one JSON object: {"signature", "class", "ename", "message", "line",
 * "image", "rule": {"kind", "rule", "code", "note", "package"} or null}, and
 * with --redis also "record" (the entry after this sighting, and the note),
 * or "error". Exit 0, or 1 when the input or Redis failed. */
#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_result.h"
#include "failure_sig.h"
#include "fix_rules.h"
#include "json.h"
#include "store.h"
#include "store_failures.h"
#include "xalloc.h"

#define INPUT_MAX (8 << 20)

struct tool {
	struct event_base *base;
	struct store *st;
	const char *tenant, *note;
	int64_t ttl_s;
	char sig[FAILURE_SIG_HEX + 1];
	struct failure_desc desc;
	enum failure_class cls;
	yajl_gen g;
	int rc;
	bool started;
};

static enum exec_status status_of(const char *s)
{
	if (s && strcmp(s, "error") == 0)
		return EXEC_ERROR;
	if (s && strcmp(s, "timeout") == 0)
		return EXEC_TIMEOUT;
	if (s && strcmp(s, "killed") == 0)
		return EXEC_KILLED;
	return EXEC_OK;
}

/* The fields failure_sig.c and fix_rules.c read, from the API's JSON. */
static void result_from_json(yajl_val v, struct exec_result *r)
{
	r->status = status_of(json_get_str(v, "status"));
	const char *reason = json_get_str(v, "reason");
	r->reason = reason ? xstrdup(reason) : NULL;
	yajl_val e = json_get(v, "error");
	if (e && YAJL_IS_OBJECT(e)) {
		r->has_error = true;
		const char *ename = json_get_str(e, "ename"), *evalue = json_get_str(e, "evalue");
		r->ename = xstrdup(ename ? ename : "");
		r->evalue = xstrdup(evalue ? evalue : "");
		yajl_val tb = json_get(e, "traceback");
		size_t n = json_arr_len(tb);
		r->traceback = xcalloc(n ? n : 1, sizeof(char *));
		for (size_t i = 0; i < n; i++) {
			yajl_val t = json_arr_at(tb, i);
			if (YAJL_IS_STRING(t))
				r->traceback[r->n_traceback++] = xstrdup(YAJL_GET_STRING(t));
		}
	}
}

static void record_json(yajl_gen g, const struct failure_record *r)
{
	jg_obj(g);
	jg_kv_str(g, "signature", r->signature);
	jg_kv_str(g, "ename", r->ename);
	jg_kv_str(g, "message", r->message);
	jg_kv_str(g, "line", r->line);
	jg_kv_str(g, "image", r->image);
	jg_kv_str(g, "class", r->class_name);
	jg_kv_int(g, "seen", r->seen);
	jg_kv_int(g, "retried", r->retried);
	jg_kv_int(g, "fixed_rule", r->fixed_rule);
	jg_kv_int(g, "fixed_fixer", r->fixed_fixer);
	jg_kv_int(g, "first_ms", r->first_ms);
	jg_kv_int(g, "last_ms", r->last_ms);
	jg_kv_bool(g, "hopeless_after_3", failure_record_hopeless(r, 3));
	jg_obj_end(g);
}

static void listed(const struct err *e, const struct failure_record *recs, size_t n, void *arg)
{
	struct tool *t = arg;
	if (e) {
		jg_kv_str(t->g, "error", e->message);
		t->rc = 1;
	} else {
		for (size_t i = 0; i < n; i++)
			if (strcmp(recs[i].signature, t->sig) == 0) {
				jg_str(t->g, "noted");
				record_json(t->g, &recs[i]);
			}
	}
	event_base_loopbreak(t->base);
}

static void seen(const struct err *e, const struct failure_record *rec, void *arg)
{
	struct tool *t = arg;
	if (e) {
		jg_kv_str(t->g, "error", e->message);
		t->rc = 1;
		event_base_loopbreak(t->base);
		return;
	}
	jg_str(t->g, "record");
	record_json(t->g, rec);
	if (t->note == NULL) {
		event_base_loopbreak(t->base);
		return;
	}
	enum failure_outcome o = strcmp(t->note, "retried") == 0      ? FAILURE_RETRIED
				 : strcmp(t->note, "fixed_rule") == 0 ? FAILURE_FIXED_RULE
								      : FAILURE_FIXED_FIXER;
	store_failure_note(t->st, t->tenant, t->sig, o);
	/* the list goes after the note on the one connection: it sees it */
	store_failures_list(t->st, t->tenant, 1000, listed, t);
}

static void connected(void *arg)
{
	struct tool *t = arg;
	if (t->started)
		return;
	t->started = true;
	store_failure_seen(t->st, t->tenant, t->sig, &t->desc, t->cls, t->ttl_s, seen, t);
}

static void give_up(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tool *t = arg;
	jg_kv_str(t->g, "error", "redis did not answer in 20 s");
	t->rc = 1;
	event_base_loopbreak(t->base);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"redis", required_argument, NULL, 'r'},  {"prefix", required_argument, NULL, 'p'},
	    {"tenant", required_argument, NULL, 't'}, {"ttl-s", required_argument, NULL, 'T'},
	    {"note", required_argument, NULL, 'n'},   {NULL, 0, NULL, 0},
	};
	const char *redis = NULL, *prefix = "ci:";
	struct tool t = {.tenant = "default", .ttl_s = 604800};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': redis = optarg; break;
		case 'p': prefix = optarg; break;
		case 't': t.tenant = optarg; break;
		case 'T': t.ttl_s = strtoll(optarg, NULL, 10); break;
		case 'n': t.note = optarg; break;
		default: fprintf(stderr, "usage: see tests/tools/failure_tool.c\n"); return 2;
		}
	}
	char *in = xmalloc(INPUT_MAX + 1);
	size_t len = fread(in, 1, INPUT_MAX, stdin);
	in[len] = '\0';
	struct err *e = NULL;
	yajl_val doc = json_parse(in, len, &e);
	free(in);
	if (doc == NULL) {
		fprintf(stderr, "failure-tool: input: %s\n", e->message);
		err_free(e);
		return 1;
	}
	struct exec_result *r = exec_result_new(1024);
	result_from_json(json_get(doc, "result"), r);
	const char *code = json_get_str(doc, "code"), *image = json_get_str(doc, "image");
	bool tmax = false, mmax = false, inst = false;
	json_path_bool(doc, "timeout_at_max", &tmax);
	json_path_bool(doc, "memory_at_max", &mmax);
	json_path_bool(doc, "can_install", &inst);
	yajl_val files = json_get(doc, "files");
	size_t nf = json_arr_len(files);
	const char **fl = xcalloc(nf ? nf : 1, sizeof(char *));
	size_t n_files = 0;
	for (size_t i = 0; i < nf; i++)
		if (YAJL_IS_STRING(json_arr_at(files, i)))
			fl[n_files++] = YAJL_GET_STRING(json_arr_at(files, i));
	code = code ? code : "";
	struct failure_input fin = {.r = r,
				    .code = code,
				    .code_len = strlen(code),
				    .image = image ? image : "python",
				    .timeout_at_max = tmax,
				    .memory_at_max = mmax,
				    .can_install = inst};
	t.cls = failure_classify(&fin);
	failure_signature(&fin, t.sig, &t.desc);
	struct fix_rule_input rin = {
	    .r = r, .code = code, .code_len = strlen(code), .files = fl, .n_files = n_files};
	struct fix_rule_outcome o;
	fix_rules_apply(&rin, &o);

	t.g = json_gen_new();
	jg_obj(t.g);
	jg_kv_str(t.g, "signature", t.sig);
	jg_kv_str(t.g, "class", failure_class_name(t.cls));
	jg_kv_str(t.g, "ename", t.desc.ename);
	jg_kv_str(t.g, "message", t.desc.message);
	jg_kv_str(t.g, "line", t.desc.line);
	jg_kv_str(t.g, "image", t.desc.image);
	jg_str(t.g, "rule");
	if (o.kind == FIX_RULE_NONE) {
		jg_null(t.g);
	} else {
		jg_obj(t.g);
		jg_kv_str(t.g, "kind", o.kind == FIX_RULE_REPAIR ? "repair" : "report");
		jg_kv_str(t.g, "rule", o.rule);
		jg_kv_str(t.g, "code", o.code);
		jg_kv_str(t.g, "note", o.note);
		jg_kv_str(t.g, "package", o.package);
		jg_obj_end(t.g);
	}
	fix_rule_outcome_clear(&o);
	if (redis) {
		t.base = event_base_new();
		t.st = store_new(t.base, redis, prefix, "failure-tool", 60, &e);
		if (t.st == NULL) {
			jg_kv_str(t.g, "error", e->message);
			err_free(e);
			t.rc = 1;
		} else {
			store_set_connect_cb(t.st, connected, &t);
			struct event *timer = evtimer_new(t.base, give_up, &t);
			struct timeval tv = {20, 0};
			evtimer_add(timer, &tv);
			event_base_dispatch(t.base);
			event_free(timer);
			store_free(t.st);
		}
		event_base_free(t.base);
	}
	jg_obj_end(t.g);
	size_t olen;
	const char *text = jg_text(t.g, &olen);
	fwrite(text, 1, olen, stdout);
	fputc('\n', stdout);
	yajl_gen_free(t.g);
	failure_desc_clear(&t.desc);
	free(fl);
	json_free(doc);
	exec_result_free(r);
	return t.rc;
}
