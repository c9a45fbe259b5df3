/* fixer_probe.c: build/tools/fixer-probe, a test tool that asks a fixer
 * once with the daemon's own code (fixer.c over httpc.c on a libevent
 * loop), for tests/integration/test_fixer.py until the run engine uses it.
 *
 * Reads one JSON object on stdin:
 *   {"url": "...", "model": "...", "key": "..." (optional), "timeout_ms": N,
 *    "prompt": {"goal", "code", "ename", "evalue", "traceback": [...],
 *               "stdout", "stderr", "vars": [{"name", "type"}], "files": [...],
 *               "attempt", "max_attempts"}}
 * and prints {"code": "..." or null, "error": "..." or null, "fixer_ms": N}.
 * Exits 0 when it printed an answer (code or error), 2 on bad input. */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fixer.h"
#include "httpc.h"
#include "json.h"
#include "xalloc.h"

#define PROBE_INPUT_MAX (16 << 20)

struct probe {
	struct event_base *base;
	bool done;
};

static void probe_done(const struct fixer_reply *r, void *arg)
{
	struct probe *p = arg;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "code");
	if (r->code)
		jg_strn(g, r->code, r->len);
	else
		jg_null(g);
	jg_str(g, "error");
	if (r->error)
		jg_str(g, r->error->message);
	else
		jg_null(g);
	jg_kv_int(g, "fixer_ms", r->fixer_ms);
	jg_obj_end(g);
	size_t n;
	const char *text = jg_text(g, &n);
	fwrite(text, 1, n, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	p->done = true;
	event_base_loopbreak(p->base);
}

/* The strings of a JSON array (borrowed from the tree; caller frees the
 * array itself). */
static const char **strings(yajl_val arr, size_t *n)
{
	*n = json_arr_len(arr);
	const char **out = xcalloc(*n + 1, sizeof(*out));
	for (size_t i = 0; i < *n; i++) {
		yajl_val s = json_arr_at(arr, i);
		out[i] = YAJL_IS_STRING(s) ? s->u.string : "";
	}
	return out;
}

int main(void)
{
	struct buf in;
	buf_init(&in, PROBE_INPUT_MAX);
	AUTOERR struct err *e = NULL;
	if (buf_read_file(&in, stdin, "stdin", &e) < 0) {
		fprintf(stderr, "fixer-probe: %s\n", e->message);
		return 2;
	}
	AUTOJSON yajl_val v = json_parse(in.data ? in.data : "", in.len, &e);
	buf_release(&in);
	if (v == NULL) {
		fprintf(stderr, "fixer-probe: %s\n", e->message);
		return 2;
	}
	struct fixer_target t = {.url = json_get_str(v, "url"),
				 .model = json_get_str(v, "model"),
				 .key = json_get_str(v, "key")};
	int64_t timeout_ms = 5000;
	json_get_int(v, "timeout_ms", &timeout_ms);
	yajl_val pv = json_get(v, "prompt");
	const char *code = json_get_str(pv, "code");
	size_t n_tb, n_files;
	AUTOFREE const char **tb = strings(json_get(pv, "traceback"), &n_tb);
	AUTOFREE const char **files = strings(json_get(pv, "files"), &n_files);
	yajl_val varr = json_get(pv, "vars");
	size_t n_vars = json_arr_len(varr);
	AUTOFREE struct fixer_var *vars = xcalloc(n_vars + 1, sizeof(*vars));
	for (size_t i = 0; i < n_vars; i++)
		vars[i] = (struct fixer_var){.name = json_get_str(json_arr_at(varr, i), "name"),
					     .type = json_get_str(json_arr_at(varr, i), "type")};
	int64_t attempt = 0, max_attempts = 0;
	json_get_int(pv, "attempt", &attempt);
	json_get_int(pv, "max_attempts", &max_attempts);
	struct fixer_prompt p = {.goal = json_get_str(pv, "goal"),
				 .code = code,
				 .code_len = code ? strlen(code) : 0,
				 .ename = json_get_str(pv, "ename"),
				 .evalue = json_get_str(pv, "evalue"),
				 .traceback = tb,
				 .n_traceback = n_tb,
				 .stdout_tail = json_get_str(pv, "stdout"),
				 .stderr_tail = json_get_str(pv, "stderr"),
				 .vars = vars,
				 .n_vars = n_vars,
				 .files = files,
				 .n_files = n_files,
				 .attempt = (int)attempt,
				 .max_attempts = (int)max_attempts};
	struct probe probe = {.base = event_base_new()};
	struct httpc *h = httpc_new(probe.base);
	struct fixer_call *c = fixer_ask(h, &t, &p, timeout_ms, probe_done, &probe, &e);
	if (c == NULL) {
		struct fixer_reply r = {.error = e};
		probe_done(&r, &probe);
	} else {
		while (!probe.done)
			event_base_loop(probe.base, EVLOOP_ONCE);
	}
	httpc_free(h);
	event_base_free(probe.base);
	return 0;
}
