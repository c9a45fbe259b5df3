/*
 * cmd_audit.c: ci-ctl audit: read and tail the audit trail (GET /v1/audit,
 * or /v1/admin/audit for every tenant).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "codec.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

/* Short forms too, as tail(1) and journalctl(1) have them (-f, -n). */
static const struct option audit_options[] = {
    {"tenant", required_argument, NULL, 't'},
    {"all", no_argument, NULL, 'A'},
    {"session", required_argument, NULL, 's'},
    {"action", required_argument, NULL, 'a'},
    {"since", required_argument, NULL, 'S'},
    {"limit", required_argument, NULL, 'n'},
    {"follow", no_argument, NULL, 'f'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* The server holds a follow's request this long when nothing happens. */
#define AUDIT_FOLLOW_WAIT_S 25

/* Set by SIGINT: --follow stops and exits 0. */
static volatile sig_atomic_t audit_interrupted;

static void audit_on_sigint(int sig)
{
	(void)sig;
	audit_interrupted = 1;
}

struct audit_args {
	const char *tenant, *session, *action, *since, *limit;
	int all, follow;
};

/* "&name=value", value escaped, appended to *q (when value is set). */
static void add_param(char **q, const char *name, const char *value)
{
	char *esc, *n;

	if (value == NULL)
		return;
	esc = codec_url_escape(value, 0);
	n = xasprintf("%s%s%s=%s", *q, **q ? "&" : "", name, esc);
	free(esc);
	free(*q);
	*q = n;
}

static char *audit_path(const struct audit_args *a, const char *since, int wait_s)
{
	char *q = xstrdup(""), *path, wait[16];

	if (a->all || a->tenant)
		add_param(&q, "tenant", a->tenant);
	add_param(&q, "session", a->session);
	add_param(&q, "action", a->action);
	add_param(&q, "since", since);
	add_param(&q, "limit", a->limit);
	if (wait_s > 0) {
		snprintf(wait, sizeof(wait), "%d", wait_s);
		add_param(&q, "wait_s", wait);
	}
	path = xasprintf("%s%s%s", a->all || a->tenant ? "/v1/admin/audit" : "/v1/audit",
			 *q ? "?" : "", q);
	free(q);
	return path;
}

/* One entry as a line: TIME TENANT ACTION SESSION OUTCOME DURATION WHAT,
 * WHAT being the code's sha256 prefix, the file path or the target. */
static void audit_print(yajl_val ev)
{
	const char *what = json_path_str(ev, "code_sha256");
	char sha[13], dur[24], *f[7];
	const char *fields[7];
	double ms;
	size_t i;

	if (what != NULL) {
		snprintf(sha, sizeof(sha), "%s", what);
		what = sha;
	} else if ((what = json_path_str(ev, "path")) == NULL) {
		what = json_path_str(ev, "target");
	}
	if (json_path_num(ev, "duration_ms", &ms))
		snprintf(dur, sizeof(dur), "%.0fms", ms);
	else
		snprintf(dur, sizeof(dur), "-");
	fields[0] = json_path_str(ev, "time");
	fields[1] = json_path_str(ev, "tenant");
	fields[2] = json_path_str(ev, "action");
	fields[3] = json_path_str(ev, "session");
	fields[4] = json_path_str(ev, "outcome");
	fields[5] = dur;
	fields[6] = what;
	/* Tenants, paths and code come from outside: no escape sequences. */
	for (i = 0; i < 7; i++)
		f[i] = output_clean(fields[i] != NULL && *fields[i] ? fields[i] : "-");
	printf("%s %-10s %-14s %-16s %-9s %7s %s\n", f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
	for (i = 0; i < 7; i++)
		free(f[i]);
}

/* Prints the entries of one answer; its next into *next (malloc'd). */
static int audit_page(struct cli_ctx *ctx, const struct client_resp *resp, char **next)
{
	struct err *e = NULL;
	yajl_val doc = json_parse(resp->body, strlen(resp->body), &e), list;
	const char *nx;
	size_t i, n;

	list = json_path_arr(doc, "entries");
	nx = json_path_str(doc, "next");
	if (list == NULL || nx == NULL) {
		output_note("%s: unexpected answer from the server: %s\n", CLI_PROG,
			    e ? e->message : "no entries or next");
		err_free(e);
		json_free(doc);
		return CLI_EXIT_API;
	}
	n = json_arr_len(list);
	for (i = 0; i < n; i++) {
		yajl_val ev = json_arr_at(list, i);

		if (ctx->json) {
			AUTOGEN yajl_gen g = json_gen_new();
			size_t len;
			const char *text;

			jg_value(g, ev);
			text = jg_text(g, &len);
			printf("%.*s\n", (int)len, text);
		} else {
			audit_print(ev);
		}
	}
	free(*next);
	*next = xstrdup(nx);
	json_free(doc);
	if (fflush(stdout) != 0 || ferror(stdout))
		return CLI_EXIT_FAIL;
	return CLI_EXIT_OK;
}

static int audit_run(struct cli_ctx *ctx, int argc, char **argv)
{
	struct audit_args a = {0};
	struct sigaction sa, old_sa;
	char *next = NULL;
	int c, rc;

	while ((c = cli_getopt(ctx, argc, argv, ":ht:As:a:S:n:f", audit_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: return ctx->rc;
		case 't': a.tenant = optarg; break;
		case 'A': a.all = 1; break;
		case 's': a.session = optarg; break;
		case 'a': a.action = optarg; break;
		case 'S': a.since = optarg; break;
		case 'n': a.limit = optarg; break;
		case 'f': a.follow = 1; break;
		default: break;
		}
	}
	if ((rc = cli_want_args(ctx, argc - optind, 0, 0)) != 0)
		return rc;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = audit_on_sigint;
	sigemptyset(&sa.sa_mask);
	audit_interrupted = 0;
	sigaction(SIGINT, NULL, &old_sa);
	if (a.follow && old_sa.sa_handler != SIG_IGN)
		sigaction(SIGINT, &sa, NULL);
	next = a.since ? xstrdup(a.since) : NULL;
	do {
		struct client_resp resp = {0};
		/* The first page answers at once; a follow then waits for more. */
		char *path = audit_path(&a, next, a.follow && next ? AUDIT_FOLLOW_WAIT_S : 0);

		rc = cli_call(ctx,
			      &(struct client_req){.method = "GET",
						   .path = path,
						   .timeout_s = AUDIT_FOLLOW_WAIT_S + 30,
						   .cancel = a.follow ? &audit_interrupted : NULL},
			      &resp, NULL);
		free(path);
		if (rc == CLI_EXIT_OK)
			rc = audit_page(ctx, &resp, &next);
		client_resp_release(&resp);
	} while (a.follow && rc == CLI_EXIT_OK && !audit_interrupted);
	sigaction(SIGINT, &old_sa, NULL);
	free(next);
	return audit_interrupted ? CLI_EXIT_OK : rc;
}

const struct cli_cmd cmd_audit = {
    .name = "audit",
    .usage = "[--all | --tenant T] [--session ID] [--action A] [--since S] [--limit N] "
	     "[--follow]",
    .summary = "Show and tail the audit trail (GET /v1/audit, /v1/admin/audit).",
    .help = "Prints one line per audited action, oldest first:\n"
	    "  TIME TENANT ACTION SESSION OUTCOME DURATION WHAT\n"
	    "WHAT is the first 12 hex digits of the code's SHA-256 (executions), the file\n"
	    "path (file writes and deletes) or what an admin action acted on; '-' for none.\n"
	    "\n"
	    "Options:\n"
	    "  -A, --all         every tenant's entries (GET /v1/admin/audit: the admin key)\n"
	    "  -t, --tenant T    one tenant's entries (the admin route too)\n"
	    "  -s, --session ID  only this session's\n"
	    "  -a, --action A    only this action's (exec, exec_oneshot, file_write,\n"
	    "                    file_delete, session_create, session_delete, admin_gc,\n"
	    "                    admin_drain, ...)\n"
	    "  -S, --since S     entries after S, a stream id (an entry's id, or a previous\n"
	    "                    answer's next) or an RFC 3339 time; without it, the latest\n"
	    "  -n, --limit N     at most N entries a page (1 to 1000, default 100)\n"
	    "  -f, --follow      keep printing new entries as they come, until Ctrl-C\n"
	    "                    (exit 0)\n"
	    "\n"
	    "Without --all or --tenant it shows the entries of the key's own tenant.  --json\n"
	    "prints each entry as one JSON line (NDJSON), its stream id in \"id\".\n",
    .run = audit_run,
};
