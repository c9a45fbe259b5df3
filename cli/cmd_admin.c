/*
 * cmd_admin.c: operator commands: gc (orphan containers), drain, events.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cli.h"
#include "client.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

/* One event is a few hundred bytes; anything this long is not one. */
#define EVENTS_LINE_MAX ((size_t)64 << 10)

/* ---- gc -------------------------------------------------------------- */

enum {
	GC_FORCE = CLI_OPT_FIRST_COMMAND,
};

static const struct option gc_options[] = {
    {"force", no_argument, NULL, GC_FORCE},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* The other kinds of leftovers: state directories and workspace images of
 * sessions that are gone, and sandbox networks (with their firewall chains)
 * that nothing uses. */
static void print_leftovers(yajl_val doc, int force)
{
	yajl_val dirs = json_path_arr(doc, "state_dirs"), nets = json_path_arr(doc, "networks");
	size_t nd = json_arr_len(dirs), nn = json_arr_len(nets), i;

	for (i = 0; i < nn; i++) {
		yajl_val o = json_arr_at(nets, i);
		const char *name = json_path_str(o, "network"), *chain = json_path_str(o, "chain");

		printf("%s unused sandbox network %s%s%s\n", force ? "removed" : "found",
		       name ? name : "-", chain ? " and firewall chain " : "", chain ? chain : "");
	}
	if (nd > 0) {
		printf("%s %zu stale state director%s:", force ? "removed" : "found", nd,
		       nd == 1 ? "y" : "ies");
		for (i = 0; i < nd; i++) {
			yajl_val v = json_arr_at(dirs, i);

			printf(" %s", YAJL_IS_STRING(v) ? v->u.string : "?");
		}
		printf("\n");
	}
	yajl_val ws = json_path_arr(doc, "workspaces");
	size_t nw = json_arr_len(ws);
	if (nw > 0) {
		printf("%s %zu stale workspace image%s:", force ? "removed" : "found", nw,
		       nw == 1 ? "" : "s");
		for (i = 0; i < nw; i++) {
			yajl_val v = json_arr_at(ws, i);

			printf(" %s", YAJL_IS_STRING(v) ? v->u.string : "?");
		}
		printf("\n");
	}
}

static int gc_run(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = {"CONTAINER", "SESSION", "STATE"};
	struct client_resp resp = {0};
	yajl_val doc = NULL, list;
	struct table *t = NULL;
	int force = 0, c, rc;
	size_t i, n;

	while ((c = cli_getopt(ctx, argc, argv, ":h", gc_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: return ctx->rc;
		case GC_FORCE: force = 1; break;
		default: break;
		}
	}
	if ((rc = cli_want_args(ctx, argc - optind, 0, 0)) != 0)
		return rc;
	rc = cli_call_doc(ctx,
			  &(struct client_req){.method = force ? "POST" : "GET",
					       .path = force ? "/v1/admin/gc" : "/v1/admin/orphans",
					       .timeout_s = 60},
			  &resp, &doc);
	if (rc != CLI_EXIT_OK || doc == NULL)
		goto out;
	rc = CLI_EXIT_API;
	list = json_path_arr(doc, "orphans");
	if (list == NULL) {
		output_note("%s: the server's answer has no orphans list\n", CLI_PROG);
		goto out;
	}
	n = json_arr_len(list);
	rc = CLI_EXIT_OK;
	print_leftovers(doc, force);
	if (n == 0) {
		printf("no orphan containers\n");
		goto out;
	}
	if (force)
		printf("removed %zu orphan container%s\n", n, n == 1 ? "" : "s");
	t = table_new(3, headers);
	for (i = 0; i < n; i++) {
		yajl_val o = json_arr_at(list, i);
		const char *cid = json_path_str(o, "container");
		char shortid[13];

		/* Docker's own short form: the first 12 hex digits. */
		if (cid != NULL)
			snprintf(shortid, sizeof(shortid), "%s", cid);
		table_add(t,
			  (const char *const[]){cid ? shortid : NULL, json_path_str(o, "session"),
						json_path_str(o, "state")});
	}
	table_print(t, stdout);
out:
	table_free(t);
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

const struct cli_cmd cmd_gc = {
    .name = "gc",
    .usage = "[--force]",
    .summary = "List what no live session owns (containers, state directories, networks); "
	       "--force removes it.",
    .help = "Orphans are containers of this daemon (its node and key prefix) that no live\n"
	    "session owns, e.g. left by a crash.  The daemon finds them with Docker.  It also\n"
	    "lists the session directories in its state directory that belong to no session\n"
	    "(a warm sandbox's, after a kill -9), and its sandbox network with its firewall\n"
	    "chain when no session uses them.\n"
	    "\n"
	    "Options:\n"
	    "  --force  remove them (POST /v1/admin/gc) instead of only listing them\n"
	    "           (GET /v1/admin/orphans)\n"
	    "\n"
	    "Prints a table: CONTAINER (short id), SESSION ('-' when unlabelled) and STATE,\n"
	    "or 'no orphan containers'; with --force, 'removed N orphan containers' first.\n"
	    "--json prints the answer: {\"orphans\":[{\"container\":...,\"session\":...,\n"
	    "\"state\":...}],\"state_dirs\":[...],\"workspaces\":[...],\"networks\":[{\"network\":."
	    "..,\"bridge\":...,\n"
	    "\"chain\":...}]}.\n",
    .run = gc_run,
};

/* ---- drain ----------------------------------------------------------- */

static int drain_run(struct cli_ctx *ctx, int argc, char **argv)
{
	struct client_resp resp = {0};
	int rc;

	if (cli_operands(ctx, argc, argv, 0, 0, 0) < 0)
		return ctx->rc;
	rc = cli_call(
	    ctx, &(struct client_req){.method = "POST", .path = "/v1/admin/drain", .timeout_s = 60},
	    &resp, NULL);
	if (rc == CLI_EXIT_OK) {
		if (ctx->json)
			output_json_doc(resp.body, resp.len);
		else
			printf("draining: no new sessions or executions; running ones may finish, "
			       "then the daemon exits\n");
	}
	client_resp_release(&resp);
	return rc;
}

const struct cli_cmd cmd_drain = {
    .name = "drain",
    .usage = "",
    .summary = "Make the daemon drain and exit (as on SIGTERM).",
    .help = "POST /v1/admin/drain.  The daemon refuses new sessions and executions at once,\n"
	    "lets running executions finish (up to its drain-timeout-s), then exits.  Live\n"
	    "sessions' containers keep running for the next daemon to adopt, unless it runs\n"
	    "with remove-on-exit.  --json prints the answer: {\"status\":\"draining\"}.\n",
    .run = drain_run,
};

/* ---- events ---------------------------------------------------------- */

/* Set by SIGINT: the stream stops and events exits 0. */
static volatile sig_atomic_t events_interrupted;

static void events_on_sigint(int sig)
{
	(void)sig;
	events_interrupted = 1;
}

struct events_stream {
	struct cli_ctx *ctx;
	struct buf line; /* bytes of the line being received */
	int write_failed;
};

/* Prints one event as a line: AT TYPE SESSION STATE DETAIL. */
static void events_print(yajl_val ev, const char *type)
{
	const char *fields[] = {json_path_str(ev, "at"), type, json_path_str(ev, "session"),
				json_path_str(ev, "state"), json_path_str(ev, "detail")};
	char *f[5];
	size_t i;

	/* The detail may quote a reason the sandbox influenced. */
	for (i = 0; i < 5; i++)
		f[i] = output_clean(fields[i] != NULL ? fields[i] : "-");
	printf("%s %-7s %s %-7s %s\n", f[0], f[1], f[2], f[3], f[4]);
	for (i = 0; i < 5; i++)
		free(f[i]);
}

/* Handles one NDJSON line of the event stream. */
static int events_line(void *arg, const char *line, size_t len, struct err **err)
{
	struct events_stream *st = arg;
	struct err *e = NULL;
	const char *type;
	yajl_val ev;

	if (strspn(line, " \t\r") == len)
		return 0;
	ev = json_parse(line, strlen(line), &e);
	if (ev == NULL || !YAJL_IS_OBJECT(ev)) {
		err_set(err, ERR_UNAVAILABLE, "bad event in the event stream: %s",
			e ? e->message : "not a JSON object");
		err_free(e);
		json_free(ev);
		return -1;
	}
	type = json_path_str(ev, "type");
	if (st->ctx->json)
		output_json_doc(line, len);
	if ((type != NULL && strcmp(type, "error") == 0) ||
	    (type == NULL && json_path_obj(ev, "error") != NULL)) {
		/* The daemon gave up on the stream: an API error, in the stream. */
		const char *code = json_path_str(ev, "error.code");
		const char *msg = json_path_str(ev, "error.message");

		cli_stream_error(err, code, msg ? msg : "error in the event stream");
		json_free(ev);
		return -1;
	}
	/* "hello" only says the stream is live; newer types print as they are. */
	if (!st->ctx->json && (type == NULL || strcmp(type, "hello") != 0))
		events_print(ev, type);
	json_free(ev);
	/* Each event is worth seeing now, not when a buffer fills. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		st->write_failed = 1;
		err_set(err, ERR_INTERNAL, "writing output failed");
		return -1;
	}
	return 0;
}

static int events_data(const char *data, size_t len, void *arg, struct err **err)
{
	struct events_stream *st = arg;

	return cli_lines_feed(&st->line, data, len, "event line", events_line, st, err);
}

static int events_run(struct cli_ctx *ctx, int argc, char **argv)
{
	struct events_stream st = {.ctx = ctx};
	struct sigaction sa, old_sa;
	struct client_resp resp = {0};
	struct client *client;
	struct err *e = NULL;
	int rc, failed;

	if (cli_operands(ctx, argc, argv, 0, 0, 0) < 0)
		return ctx->rc;
	client = cli_client(ctx);
	if (client == NULL)
		return CLI_EXIT_USAGE;
	buf_init(&st.line, EVENTS_LINE_MAX);

	/* Ctrl-C is how a watch ends: stop the transfer and exit 0.  No
	 * SA_RESTART, so a wait is cut short; the client polls the flag.  An
	 * ignored SIGINT (started with & by a script) stays ignored. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = events_on_sigint;
	sigemptyset(&sa.sa_mask);
	events_interrupted = 0;
	sigaction(SIGINT, NULL, &old_sa);
	if (old_sa.sa_handler != SIG_IGN)
		sigaction(SIGINT, &sa, NULL);
	failed = client_do(client,
			   &(struct client_req){.method = "GET",
						.path = "/v1/events",
						.accept = "application/x-ndjson",
						.on_data = events_data,
						.arg = &st,
						.timeout_s = CLIENT_ENDLESS,
						.cancel = &events_interrupted},
			   &resp, &e);
	sigaction(SIGINT, &old_sa, NULL);

	if (events_interrupted) {
		rc = CLI_EXIT_OK;
	} else if (failed < 0 && st.write_failed) {
		rc = CLI_EXIT_FAIL; /* main says "writing output failed" */
	} else if (failed < 0) {
		rc = cli_report(ctx, e, &resp, NULL);
	} else if (st.line.len > 0 && events_line(&st, st.line.data, st.line.len, &e) < 0) {
		/* A last line without its newline still counts. */
		rc = st.write_failed ? CLI_EXIT_FAIL : cli_report(ctx, e, NULL, NULL);
	} else {
		if (!ctx->json)
			output_note("%s: the daemon closed the event stream\n", CLI_PROG);
		rc = CLI_EXIT_OK;
	}
	buf_release(&st.line);
	client_resp_release(&resp);
	err_free(e);
	return rc;
}

const struct cli_cmd cmd_events = {
    .name = "events",
    .usage = "",
    .summary = "Watch session events as they happen (GET /v1/events).",
    .help = "Prints one line per event as it arrives:\n"
	    "  AT TYPE SESSION STATE DETAIL\n"
	    "TYPE is ready, exec, ended, expired, removed or adopted; STATE the session's\n"
	    "state after it; DETAIL the daemon's explanation, or '-'.  Runs until the daemon\n"
	    "closes the stream or Ctrl-C (exit 0).  --json prints the NDJSON lines as\n"
	    "received, the first {\"type\":\"hello\"} included.\n"
	    "\n"
	    "There is no overall time limit and no limit on quiet periods; connecting still\n"
	    "gives up after 5 s.  One event line is capped at 64 KiB.\n"
	    "\n"
	    "Exit status: 0 the stream ended or Ctrl-C; 1 output could not be written; 5 the\n"
	    "daemon could not be reached, refused, or the connection broke.\n",
    .run = events_run,
};
