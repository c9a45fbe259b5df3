/*
 * cmd_run.c: run and runs: the workflow's runs (docs/workflow.md): code
 * that is repaired and retried on an error, then handed back, run in the
 * stateless tier or sent to review; and a run looked up later.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "codec.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

/* A run is up to ten attempts and the fixer's time between them. */
#define RUN_REQUEST_S 1800L

enum {
	RUN_GOAL = CLI_OPT_FIRST_COMMAND,
	RUN_MAX_ATTEMPTS_OPT,
	RUN_ON_FAILURE,
	RUN_TIMEOUT,
	RUN_WAIT,
	RUN_ONCE,
	RUN_RETRY_HOPELESS,
};

static const struct option run_options[] = {
    {"file", required_argument, NULL, 'f'},
    {"goal", required_argument, NULL, RUN_GOAL},
    {"max-attempts", required_argument, NULL, RUN_MAX_ATTEMPTS_OPT},
    {"on-failure", required_argument, NULL, RUN_ON_FAILURE},
    {"timeout", required_argument, NULL, RUN_TIMEOUT},
    {"once", no_argument, NULL, RUN_ONCE},
    {"retry-hopeless", no_argument, NULL, RUN_RETRY_HOPELESS},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* One line per attempt, on stderr: what ran, where it came from, how it
 * ended. */
static void run_show_attempts(yajl_val run)
{
	yajl_val list = json_path_arr(run, "attempts");
	for (size_t i = 0; i < json_arr_len(list); i++) {
		yajl_val a = json_arr_at(list, i);
		double n = 0, ms = -1, fixer_ms = -1;
		json_path_num(a, "n", &n);
		json_path_num(a, "duration_ms", &ms);
		json_path_num(a, "fixer_ms", &fixer_ms);
		char *source =
		    output_clean(json_path_str(a, "source") ? json_path_str(a, "source") : "?");
		char *status =
		    output_clean(json_path_str(a, "status") ? json_path_str(a, "status") : "?");
		const char *ename = json_path_str(a, "error.ename");
		const char *evalue = json_path_str(a, "error.evalue");
		char *what = output_clean(ename ? ename : evalue ? evalue : "");
		char *rule =
		    json_path_str(a, "rule") ? output_clean(json_path_str(a, "rule")) : NULL;
		output_note("[attempt %.0f: %s%s%s%s, %s%s%s]\n", n, source, rule ? " " : "",
			    rule ? rule : "", fixer_ms >= 0 ? " (fixer)" : "", status,
			    what[0] ? ": " : "", what);
		const char *repair = json_path_str(a, "repair_error.message");
		if (repair) {
			char *r = output_clean(repair);
			output_note("[  no repair: %s]\n", r);
			free(r);
		}
		free(source);
		free(status);
		free(what);
		free(rule);
	}
}

/* The end of a run, on stderr: its status, why, and what the ladder did. */
static int run_show_end(struct cli_ctx *ctx, yajl_val run)
{
	const char *status = json_path_str(run, "status");
	const char *state = json_path_str(run, "state");
	const char *reason = json_path_str(run, "failure.reason");
	const char *mode = json_path_str(run, "degraded.mode");
	if (status == NULL) {
		output_note("%s: the server's run has no status\n", CLI_PROG);
		return CLI_EXIT_API;
	}
	yajl_val result = json_path_obj(run, "result");
	int rc = result ? cli_exec_report(ctx, result, 1, NULL) : CLI_EXIT_FAIL;
	if (ctx->json)
		return strcmp(status, "ok") == 0 ? CLI_EXIT_OK : rc ? rc : CLI_EXIT_FAIL;
	char *s = output_clean(status), *st = output_clean(state ? state : "?");
	char *why = reason ? output_clean(reason) : NULL;
	output_note("%s: run %s (%s)%s%s\n", CLI_PROG, s, st, why ? ": " : "", why ? why : "");
	if (mode) {
		char *m = output_clean(mode);
		output_note("%s: degraded: %s\n", CLI_PROG, m);
		free(m);
		const char *how = json_path_str(run, "degraded.handoff.how_to_run");
		const char *review = json_path_str(run, "degraded.review");
		if (how) {
			char *h = output_clean(how);
			output_note("%s: %s\n", CLI_PROG, h);
			free(h);
		}
		if (review) {
			char *r = output_clean(review);
			output_note("%s: review %s is waiting for a reviewer (ci-ctl reviews)\n",
				    CLI_PROG, r);
			free(r);
		}
	}
	free(s);
	free(st);
	free(why);
	if (strcmp(status, "ok") == 0)
		return CLI_EXIT_OK;
	return rc == CLI_EXIT_OK ? CLI_EXIT_FAIL : rc;
}

static int run_show(struct cli_ctx *ctx, struct client_resp *resp)
{
	struct err *e = NULL;
	if (ctx->json)
		output_json_doc(resp->body, resp->len);
	yajl_val doc = json_parse(resp->body, resp->len, &e);
	if (doc == NULL) {
		output_note("%s: unexpected answer from the server: %s\n", CLI_PROG, e->message);
		err_free(e);
		return CLI_EXIT_API;
	}
	if (!ctx->json)
		run_show_attempts(doc);
	int rc = run_show_end(ctx, doc);
	json_free(doc);
	return rc;
}

/* "manual,stateless" as a JSON array of strings. */
static int run_ladder_json(struct cli_ctx *ctx, yajl_gen g, const char *list)
{
	jg_str(g, "on_failure");
	jg_arr(g);
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		if (n == 0 || n > 32)
			return cli_usage_error(
			    ctx, "--on-failure: want modes like manual,stateless,review");
		jg_strn(g, p, n);
		p += n;
		if (*p == ',')
			p++;
	}
	jg_arr_end(g);
	return 0;
}

/* run --once: POST /v1/exec, one execution in a fresh session that the
 * server removes before it answers: no repair, no retry. Shown as exec
 * shows a result, with exec's exit status. */
static int run_once(struct cli_ctx *ctx, const char *code, size_t code_len, double timeout)
{
	struct client_resp resp = {0};
	AUTOGEN yajl_gen g = json_gen_new();
	struct err *e = NULL;
	yajl_val doc = NULL;
	size_t body_len;
	const char *body;
	int rc;

	jg_obj(g);
	jg_str(g, "code");
	jg_strn(g, code, code_len);
	if (timeout > 0)
		jg_kv_int(g, "timeout_s", (int64_t)(timeout + 0.999));
	jg_obj_end(g);
	body = jg_text(g, &body_len);
	rc = cli_call(ctx,
		      &(struct client_req){.method = "POST",
					   .path = "/v1/exec",
					   .content_type = "application/json",
					   .body = body,
					   .body_len = body_len,
					   .timeout_s = RUN_REQUEST_S},
		      &resp, NULL);
	if (rc != CLI_EXIT_OK)
		goto out;
	if (ctx->json)
		output_json_doc(resp.body, resp.len);
	doc = json_parse(resp.body, strlen(resp.body), &e);
	if (doc == NULL || !YAJL_IS_OBJECT(doc)) {
		output_note("%s: unexpected answer from the server: %s\n", CLI_PROG,
			    e ? e->message : "not a JSON object");
		rc = CLI_EXIT_API;
		goto out;
	}
	rc = cli_exec_report(ctx, doc, 1, NULL);
out:
	json_free(doc);
	err_free(e);
	client_resp_release(&resp);
	return rc;
}

static int run_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *file = NULL, *goal = NULL, *ladder = NULL, *code, *session = NULL;
	char *code_buf = NULL, *path = NULL;
	double timeout = -1;
	long attempts = 0;
	size_t code_len;
	int c, rc = CLI_EXIT_USAGE, once = 0, retry_hopeless = 0;
	struct err *e = NULL;
	struct client_resp resp = {0};
	AUTOGEN yajl_gen g = NULL;
	while ((c = cli_getopt(ctx, argc, argv, ":hf:", run_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: rc = ctx->rc; goto out;
		case RUN_ONCE: once = 1; break;
		case RUN_RETRY_HOPELESS: retry_hopeless = 1; break;
		case 'f': file = optarg; break;
		case RUN_GOAL: goal = optarg; break;
		case RUN_MAX_ATTEMPTS_OPT:
			if (codec_parse_long(optarg, 1, 10, &attempts) < 0) {
				cli_usage_error(ctx, "--max-attempts: want 1 to 10");
				goto out;
			}
			break;
		case RUN_ON_FAILURE: ladder = optarg; break;
		case RUN_TIMEOUT:
			if (codec_parse_double(optarg, 1, 86400, &timeout) < 0) {
				cli_usage_error(ctx, "--timeout: want seconds from 1");
				goto out;
			}
			break;
		default: break;
		}
	}
	/* [ID] [CODE|-]: an id is a session's; without one, a one-shot run. */
	int n = argc - optind;
	if (cli_want_args(ctx, n, 0, 2) != 0)
		goto out;
	if (once &&
	    (n == 2 || (n == 1 && file != NULL) || goal || attempts || ladder || retry_hopeless)) {
		cli_usage_error(ctx, "--once runs the code once in a fresh session: no ID, "
				     "--goal, --max-attempts, --on-failure or --retry-hopeless");
		goto out;
	}
	if (n == 2 || (n == 1 && file != NULL)) {
		if (cli_session_id(ctx, &argv[optind]) != 0)
			goto out;
		session = argv[optind];
	}
	const char *code_arg = n == 2                 ? argv[optind + 1]
			       : (n == 1 && !session) ? argv[optind]
						      : NULL;
	if (code_arg && file) {
		cli_usage_error(ctx, "give the code as an argument or with -f, not both");
		goto out;
	}
	if (code_arg && strcmp(code_arg, "-") != 0) {
		code = code_arg;
		code_len = strlen(code);
	} else {
		if ((code_buf = cli_read_code(file, &code_len, &e)) == NULL) {
			rc = cli_report(ctx, e, NULL, NULL);
			goto out;
		}
		code = code_buf;
	}
	if (!json_utf8_valid(code, code_len) || (goal && !json_utf8_valid(goal, strlen(goal)))) {
		cli_usage_error(ctx, "code: %s", CLI_NOT_UTF8);
		goto out;
	}
	if (once) {
		rc = run_once(ctx, code, code_len, timeout);
		goto out;
	}
	g = json_gen_new();
	jg_obj(g);
	jg_str(g, "code");
	jg_strn(g, code, code_len);
	if (goal)
		jg_kv_str(g, "goal", goal);
	if (attempts)
		jg_kv_int(g, "max_attempts", attempts);
	if (timeout > 0)
		jg_kv_int(g, "timeout_s", (int64_t)(timeout + 0.999));
	if (ladder && run_ladder_json(ctx, g, ladder) != 0)
		goto out;
	if (retry_hopeless)
		jg_kv_bool(g, "retry_hopeless", true);
	jg_obj_end(g);
	size_t body_len;
	const char *body = jg_text(g, &body_len);
	path = session ? cli_session_path(session, "/runs") : xstrdup("/v1/runs");
	struct client *client = cli_client(ctx);
	if (client == NULL)
		goto out;
	if (client_do(client,
		      &(struct client_req){.method = "POST",
					   .path = path,
					   .content_type = "application/json",
					   .body = body,
					   .body_len = body_len,
					   .timeout_s = RUN_REQUEST_S},
		      &resp, &e) < 0) {
		rc = cli_report(ctx, e, &resp, NULL);
		goto out;
	}
	rc = run_show(ctx, &resp);
out:
	client_resp_release(&resp);
	err_free(e);
	free(code_buf);
	free(path);
	return rc;
}

static const struct option runs_options[] = {
    {"wait", required_argument, NULL, RUN_WAIT},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int runs_run(struct cli_ctx *ctx, int argc, char **argv)
{
	long wait_s = 0;
	int c, rc = CLI_EXIT_USAGE;
	struct client_resp resp = {0};
	struct err *e = NULL;
	char *path = NULL, *id = NULL;
	while ((c = cli_getopt(ctx, argc, argv, ":h", runs_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == RUN_WAIT && codec_parse_long(optarg, 0, 300, &wait_s) < 0)
			return cli_usage_error(ctx, "--wait: want 0 to 300 seconds");
	}
	if (cli_want_args(ctx, argc - optind, 2, 2) != 0)
		return CLI_EXIT_USAGE;
	if (strcmp(argv[optind], "show") != 0)
		return cli_usage_error(ctx, "unknown subcommand '%s' (want: show)", argv[optind]);
	if (cli_check_id(ctx, argv[optind + 1]) != 0)
		return CLI_EXIT_USAGE;
	id = codec_url_escape(argv[optind + 1], 0);
	path = xasprintf("/v1/runs/%s?wait_s=%ld", id, wait_s);
	struct client *client = cli_client(ctx);
	if (client == NULL)
		goto out;
	if (client_do(client,
		      &(struct client_req){.method = "GET", .path = path, .timeout_s = wait_s + 60},
		      &resp, &e) < 0) {
		rc = cli_report(ctx, e, &resp, NULL);
		goto out;
	}
	rc = run_show(ctx, &resp);
out:
	client_resp_release(&resp);
	err_free(e);
	free(path);
	free(id);
	return rc;
}

const struct cli_cmd cmd_run = {
    .name = "run",
    .usage = "[OPTIONS] [ID] [CODE|-]",
    .summary = "Run code that is repaired and retried on an error (a run).",
    .help = "With a session ID the run uses that session (its variables and files);\n"
	    "without one it runs in a fresh one-shot session.  The code comes from CODE,\n"
	    "from -f FILE, or from stdin.  On an error the daemon repairs the code (its\n"
	    "rules, then the fixer model) and tries again; when nothing works it takes the\n"
	    "--on-failure ladder.  See docs/workflow.md.\n"
	    "\n"
	    "Options:\n"
	    "  -f, --file FILE        read the code from FILE ('-': stdin)\n"
	    "  --goal TEXT            what the code is for (the fixer reads it)\n"
	    "  --max-attempts N       attempts in all, 1 to 10 (default 3)\n"
	    "  --on-failure MODES     comma-separated: manual, stateless, review\n"
	    "                         (default manual)\n"
	    "  --timeout S            deadline of each attempt, in seconds\n"
	    "  --retry-hopeless       repair even a failure the tenant's failure memory\n"
	    "                         knows is hopeless (this run only)\n"
	    "  --once                 one execution, no repair or retry: POST /v1/exec in\n"
	    "                         a fresh session removed before the answer; shown and\n"
	    "                         exiting as exec does (no ID, --goal, --max-attempts,\n"
	    "                         --on-failure or --retry-hopeless)\n"
	    "\n"
	    "Output: a [attempt ...] line per attempt on stderr, the last result as exec\n"
	    "shows it, then the run's status and what the ladder did.  --json prints the\n"
	    "run document.\n"
	    "\n"
	    "Exit status: 0 the run succeeded (status ok); otherwise exec's statuses for\n"
	    "the last attempt (1 error, 3 timeout, 4 killed), 2 usage, 5 API error.\n",
    .run = run_run,
};

const struct cli_cmd cmd_runs = {
    .name = "runs",
    .usage = "show [--wait S] RUN_ID",
    .summary = "Show a run (waiting up to S seconds for it to end).",
    .help = "Options:\n"
	    "  --wait S   wait up to S seconds (0 to 300) for the run to end\n",
    .run = runs_run,
};
