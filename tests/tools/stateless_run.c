/* stateless_run.c: build/tools/stateless-run, the stateless tier driven from
 * the command line, for tests and the benchmark (the run engine, its real
 * user, is built apart).
 *
 *   stateless-run [--runs N] [--parallel N] [--timeout-s N] [--no-wait]
 *                 [--cancel-after-ms N] [daemon options...] < code
 *
 * Reads the code from stdin, waits (bounded) for the tier's start check,
 * then runs it --runs times one after the other, --parallel calls at once,
 * and prints one line per call: the exec result JSON (exec_result_to_json)
 * with "wall_ms" (the round trip seen here) added, or {"error": {"code",
 * "message"}} when nothing ran. --cancel-after-ms cancels the calls still
 * running then (stateless_cancel) and prints {"cancelled": N, "running":
 * R} once the tier has reaped them (R is 0 then), or after 10 s. Exit 0, or 2 on a usage error. The
 * daemon options (--stateless-*, --output-cap-bytes, --sandbox-uid-base...) are parsed by
 * config_load like the daemon's. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "json.h"
#include "stateless.h"
#include "xalloc.h"

struct tool {
	struct event_base *base;
	struct stateless *t;
	struct event *wait_ev, *cancel_ev;
	struct tool_call **calls; /* the ones still running, by start order */
	int64_t cancel_after_ms, cancel_deadline_ms;
	long cancelled;
	char *code;
	size_t len;
	long runs, parallel, started, finished;
	int64_t timeout_s, wait_until_ms;
};

struct tool_call {
	struct tool *tool;
	int64_t start_ms;
	long index;
	struct stateless_call *sc;
};

static void start_next(struct tool *tl);

static void print_line(const struct exec_result *r, const struct err *e, int64_t wall_ms)
{
	yajl_gen g = json_gen_new();
	if (r) {
		/* exec_result_to_json's object, plus wall_ms: re-open by hand. */
		yajl_gen g2 = json_gen_new();
		exec_result_to_json(r, g2);
		size_t n;
		const char *text = jg_text(g2, &n);
		printf("%.*s,\"wall_ms\":%lld}\n", (int)(n - 1), text, (long long)wall_ms);
		yajl_gen_free(g2);
	} else {
		jg_obj(g);
		jg_str(g, "error");
		jg_obj(g);
		jg_kv_str(g, "code", err_code_name(e->code));
		jg_kv_str(g, "message", e->message);
		jg_obj_end(g);
		jg_obj_end(g);
		size_t n;
		const char *text = jg_text(g, &n);
		printf("%.*s\n", (int)n, text);
	}
	fflush(stdout);
	yajl_gen_free(g);
}

static void done_cb(const struct exec_result *r, const struct err *e, void *arg)
{
	struct tool_call *c = arg;
	struct tool *tl = c->tool;
	print_line(r, e, clock_mono_ms() - c->start_ms);
	tl->calls[c->index] = NULL;
	free(c);
	tl->finished++;
	if (tl->started < tl->runs)
		start_next(tl);
	else if (tl->finished == tl->runs)
		event_base_loopexit(tl->base, NULL);
}

static void start_next(struct tool *tl)
{
	struct tool_call *c = xcalloc(1, sizeof(*c));
	c->tool = tl;
	c->start_ms = clock_mono_ms();
	c->index = tl->started++;
	struct err *e = NULL;
	tl->calls[c->index] = c;
	c->sc = stateless_run(tl->t, "tool", 0, tl->code, tl->len, tl->timeout_s, done_cb, c, &e);
	if (c->sc == NULL) {
		tl->calls[c->index] = NULL;
		print_line(NULL, e, 0);
		err_free(e);
		free(c);
		tl->finished++;
		if (tl->finished == tl->runs)
			event_base_loopexit(tl->base, NULL);
	}
}

/* Cancel what runs, then wait (bounded) for the tier to have reaped it. */
static void cancel_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tool *tl = arg;
	if (tl->cancel_deadline_ms == 0) {
		for (long i = 0; i < tl->started; i++)
			if (tl->calls[i]) {
				stateless_cancel(tl->calls[i]->sc);
				free(tl->calls[i]);
				tl->calls[i] = NULL;
				tl->cancelled++;
			}
		tl->cancel_deadline_ms = clock_mono_ms() + 10000;
	}
	if (stateless_running(tl->t) > 0 && clock_mono_ms() < tl->cancel_deadline_ms) {
		struct timeval tv = {.tv_usec = 10000};
		evtimer_add(tl->cancel_ev, &tv);
		return;
	}
	printf("{\"cancelled\":%ld,\"running\":%zu}\n", tl->cancelled, stateless_running(tl->t));
	fflush(stdout);
	event_base_loopexit(tl->base, NULL);
}

static void wait_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tool *tl = arg;
	if (!stateless_available(tl->t) && clock_mono_ms() < tl->wait_until_ms) {
		struct timeval tv = {.tv_usec = 10000};
		evtimer_add(tl->wait_ev, &tv);
		return;
	}
	if (!stateless_available(tl->t))
		fprintf(stderr, "stateless-run: the tier is not available (running anyway)\n");
	for (long i = 0; i < tl->parallel && tl->started < tl->runs; i++)
		start_next(tl);
	if (tl->cancel_after_ms > 0) {
		struct timeval tv = {.tv_sec = tl->cancel_after_ms / 1000,
				     .tv_usec = (tl->cancel_after_ms % 1000) * 1000};
		evtimer_add(tl->cancel_ev, &tv);
	}
}

static char *read_stdin(size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = xmalloc(cap);
	size_t got;
	while ((got = fread(buf + n, 1, cap - n, stdin)) > 0) {
		n += got;
		if (n == cap) {
			if (cap >= (64u << 20))
				break;
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
	}
	*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	struct tool tl = {.runs = 1, .parallel = 1};
	bool wait = true;
	/* Our flags first; the rest goes to config_load. */
	char **rest = xcalloc((size_t)argc + 1, sizeof(char *));
	int nrest = 0;
	rest[nrest++] = argv[0];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			tl.runs = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--parallel") && i + 1 < argc)
			tl.parallel = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--timeout-s") && i + 1 < argc)
			tl.timeout_s = strtoll(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--cancel-after-ms") && i + 1 < argc)
			tl.cancel_after_ms = strtoll(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--no-wait"))
			wait = false;
		else
			rest[nrest++] = argv[i];
	}
	if (tl.runs < 1 || tl.parallel < 1) {
		fprintf(stderr, "stateless-run: --runs and --parallel must be at least 1\n");
		return 2;
	}
	struct config cfg;
	struct err *e = NULL;
	char *noenv[] = {NULL};
	int rc = config_load(&cfg, nrest, rest, noenv, &e);
	free(rest);
	if (rc != 0) {
		if (e)
			fprintf(stderr, "stateless-run: %s\n", e->message);
		err_free(e);
		config_free(&cfg);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	tl.code = read_stdin(&tl.len);
	tl.base = event_base_new();
	tl.t = stateless_new(tl.base, &cfg, &e);
	if (tl.t == NULL) {
		fprintf(stderr, "stateless-run: %s\n", e->message);
		err_free(e);
		event_base_free(tl.base);
		config_free(&cfg);
		free(tl.code);
		return 2;
	}
	tl.wait_until_ms = clock_mono_ms() + (wait ? 15000 : 0);
	tl.calls = xcalloc((size_t)tl.runs, sizeof(*tl.calls));
	tl.wait_ev = evtimer_new(tl.base, wait_cb, &tl);
	tl.cancel_ev = evtimer_new(tl.base, cancel_cb, &tl);
	struct timeval now = {0};
	evtimer_add(tl.wait_ev, &now);
	event_base_dispatch(tl.base);
	event_free(tl.wait_ev);
	event_free(tl.cancel_ev);
	free(tl.calls);
	stateless_free(tl.t);
	event_base_free(tl.base);
	config_free(&cfg);
	free(tl.code);
	return 0;
}
