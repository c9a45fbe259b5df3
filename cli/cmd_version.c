/*
 * cmd_version.c: version: ci-ctl's version and the server's (GET /version,
 * which needs no key).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "version.h"
#include "xalloc.h"

#define VERSION_TIMEOUT_S 10L
#define VERSION_HELP                                                                 \
	"Prints this client's version, then asks the server (GET /version, no key\n" \
	"needed). With --json: {\"client\":{...},\"server\":{...}}.\n"

static int version_run(struct cli_ctx *ctx, int argc, char **argv)
{
	struct client_resp resp = {0};
	struct err *e = NULL;
	yajl_val doc;
	int rc;

	if (cli_operands(ctx, argc, argv, 0, 0, 0) < 0)
		return ctx->rc;
	if (!ctx->json)
		printf("client: %s %s (git %s)\n", CLI_PROG, ci_version, ci_git);
	rc = cli_call(ctx,
		      &(struct client_req){
			  .method = "GET", .path = "/version", .timeout_s = VERSION_TIMEOUT_S},
		      &resp, "server version");
	if (rc != CLI_EXIT_OK)
		goto out;
	doc = json_parse(resp.body, strlen(resp.body), &e);
	if (doc == NULL || !YAJL_IS_OBJECT(doc) || json_path_str(doc, "version") == NULL) {
		output_note("%s: unexpected answer from the server for /version%s%s\n", CLI_PROG,
			    e ? ": " : "", e ? e->message : "");
		err_free(e);
		json_free(doc);
		rc = CLI_EXIT_API;
		goto out;
	}
	if (ctx->json) {
		/* Our strings are the build's (no quotes); the server's document
		 * was just parsed as JSON, so it is printed as it came. */
		printf("{\"client\":{\"version\":\"%s\",\"git\":\"%s\"},\"server\":%s}\n",
		       ci_version, ci_git, resp.body);
	} else {
		const char *git = json_path_str(doc, "git"), *api = json_path_str(doc, "api");
		char *v = output_clean(json_path_str(doc, "version"));
		char *g = output_clean(git ? git : "unknown");
		char *a = output_clean(api ? api : "?");

		printf("server: ci-daemon %s (git %s), API %s\n", v, g, a);
		free(v);
		free(g);
		free(a);
	}
	json_free(doc);
out:
	client_resp_release(&resp);
	return rc;
}

const struct cli_cmd cmd_version = {
    .name = "version",
    .usage = "",
    .summary = "print ci-ctl's version and the server's",
    .help = VERSION_HELP,
    .run = version_run,
};
