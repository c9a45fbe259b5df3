/*
 * cmd_failures.c: the tenant's failure memory:
 *   failures [ls] [--limit N]   GET /v1/failures
 *   failures rm SIG             DELETE /v1/failures/SIG
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "codec.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

enum {
	FAILURES_LIMIT = CLI_OPT_FIRST_COMMAND,
};

static const struct option failures_options[] = {
    {"limit", required_argument, NULL, FAILURES_LIMIT},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* A number member as text ("-" when absent); caller frees. */
static char *num_text(yajl_val v, const char *path)
{
	yajl_val n = json_get(v, path);
	return n ? output_json_text(n) : xstrdup("-");
}

static int failures_ls(struct cli_ctx *ctx, const char *limit)
{
	static const char *const headers[] = {"SIGNATURE", "SEEN",      "RETRIED", "FIXED",
					      "CLASS",     "LAST SEEN", "ERROR",   "LINE"};
	yajl_val doc = NULL, list;
	struct table *t = NULL;
	int rc;

	rc = cli_get_list(ctx, "/v1/failures", "limit", limit, "failures", &doc, &list);
	if (rc != CLI_EXIT_OK || doc == NULL)
		return rc;
	t = table_new(8, headers);
	for (size_t i = 0; i < json_arr_len(list); i++) {
		yajl_val f = json_arr_at(list, i);
		yajl_val fixed = json_get(f, "fixed");
		char when[64];
		AUTOFREE char *seen = num_text(f, "seen");
		AUTOFREE char *retried = num_text(f, "retried");
		AUTOFREE char *rule = fixed ? num_text(fixed, "rule") : xstrdup("-");
		AUTOFREE char *fixer = fixed ? num_text(fixed, "fixer") : xstrdup("-");
		AUTOFREE char *fixes = xasprintf("%s rule, %s fixer", rule, fixer);
		const char *ename = json_path_str(f, "ename"), *msg = json_path_str(f, "message");
		AUTOFREE char *error = xasprintf("%s: %s", ename ? ename : "?", msg ? msg : "");

		table_add(t, (const char *const[]){
				 json_path_str(f, "signature"), seen, retried, fixes,
				 json_path_str(f, "class"),
				 output_when(json_path_str(f, "last_seen"), when, sizeof(when)),
				 error, json_path_str(f, "line")});
	}
	table_print(t, stdout);
	table_free(t);
	json_free(doc);
	return rc;
}

static int failures_rm(struct cli_ctx *ctx, const char *sig)
{
	return cli_delete(ctx, "/v1/failures", sig, "signature", "forgot");
}

static int failures_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *limit = NULL;
	int c, n;

	while ((c = cli_getopt(ctx, argc, argv, ":h", failures_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: return ctx->rc;
		case FAILURES_LIMIT: limit = optarg; break;
		default: break;
		}
	}
	n = argc - optind;
	if (n == 0 || (n == 1 && strcmp(argv[optind], "ls") == 0))
		return failures_ls(ctx, limit);
	if (strcmp(argv[optind], "rm") == 0) {
		if (limit != NULL)
			return cli_usage_error(ctx, "--limit is for ls");
		if (n != 2)
			return cli_usage_error(ctx, "rm takes one signature");
		return failures_rm(ctx, argv[optind + 1]);
	}
	if (strcmp(argv[optind], "ls") == 0)
		return cli_usage_error(ctx, "ls takes no arguments");
	return cli_usage_error(ctx, "unknown subcommand '%s' (ls or rm)", argv[optind]);
}

const struct cli_cmd cmd_failures = {
    .name = "failures",
    .usage = "[ls] [--limit N] | rm SIGNATURE",
    .summary = "List or forget the failure patterns the daemon remembers for your tenant.",
    .help = "Failures of runs are remembered per tenant by signature (the exception, its\n"
	    "message with numbers, strings and paths masked, the failing line, the image),\n"
	    "with how often each was seen, retried and fixed; an entry not seen for\n"
	    "--failure-memory-ttl-s (7 days) is forgotten.\n"
	    "\n"
	    "  [ls] [--limit N]\n"
	    "         the most recently seen first (SIGNATURE, SEEN, RETRIED, FIXED by a\n"
	    "         rule and by the fixer, CLASS of a hopeless one, LAST SEEN, ERROR,\n"
	    "         LINE); at most N (1 to 1000, default 100)\n"
	    "  rm SIGNATURE\n"
	    "         forget one (a signature that was hopeless is retried again)\n"
	    "\n"
	    "--json prints the server's answer: {\"failures\":[{\"signature\",\"ename\",\n"
	    "\"message\",\"line\",\"image\",\"class\",\"seen\",\"retried\",\"fixed\":{\"rule\",\n"
	    "\"fixer\"},\"first_seen\",\"last_seen\"}]} for ls, nothing for rm.\n",
    .run = failures_run,
};
