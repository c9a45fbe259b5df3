/*
 * cmd_install.c: install ID SPEC...: a time-boxed package install
 * (POST /v1/sessions/{id}/packages); prints NAME VERSION per line.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "codec.h"
#include "err.h"
#include "json.h"
#include "xalloc.h"

enum { INSTALL_TIMEOUT = CLI_OPT_FIRST_COMMAND };

static const struct option install_options[] = {
    {"timeout", required_argument, NULL, INSTALL_TIMEOUT},
    CLI_COMMON_OPTIONS,
    {0, 0, 0, 0},
};

static int install_run(struct cli_ctx *ctx, int argc, char **argv)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	long timeout = 0;
	int c, rc;

	while ((c = cli_getopt(ctx, argc, argv, ":h", install_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == INSTALL_TIMEOUT && codec_parse_long(optarg, 1, 86400, &timeout) < 0)
			return cli_usage_error(ctx, "--timeout: want seconds > 0");
	}
	if ((rc = cli_want_args(ctx, argc - optind, 2, -1)) != 0)
		return rc;
	if ((rc = cli_session_id(ctx, &argv[optind])) != 0)
		return rc;
	for (int i = optind + 1; i < argc; i++)
		if (!cli_utf8(argv[i]))
			return cli_usage_error(ctx, "%s", CLI_NOT_UTF8);

	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "pip");
	jg_arr(g);
	for (int i = optind + 1; i < argc; i++)
		jg_str(g, argv[i]);
	jg_arr_end(g);
	if (timeout > 0)
		jg_kv_int(g, "timeout_s", timeout);
	jg_obj_end(g);
	size_t body_len;
	const char *body = jg_text(g, &body_len);
	char *path = cli_session_path(argv[optind], "/packages");
	rc = cli_call_doc(ctx,
			  &(struct client_req){.method = "POST",
					       .path = path,
					       .content_type = "application/json",
					       .body = body,
					       .body_len = body_len,
					       /* the window (at most the server's
						* --install-max-timeout-s), and room */
					       .timeout_s = (timeout > 0 ? timeout : 3600) + 30},
			  &resp, &doc);
	free(path);
	if (rc != CLI_EXIT_OK || doc == NULL)
		goto out;
	yajl_val list = json_path_arr(doc, "installed");
	for (size_t i = 0; i < json_arr_len(list); i++) {
		yajl_val p = json_arr_at(list, i);
		const char *name = json_path_str(p, "name");
		const char *version = json_path_str(p, "version");
		printf("%s %s\n", name ? name : "-", version ? version : "-");
	}
out:
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

const struct cli_cmd cmd_install = {
    .name = "install",
    .usage = "[--timeout S] ID NAME[==VERSION]...",
    .summary = "Install packages into a session within a time window.",
    .help = "Runs pip in the session against the server's package index (--pip-index-url),\n"
	    "which the session may reach for the window only; the packages go to\n"
	    "/workspace/.ci/site, on the kernel's sys.path. Prints NAME VERSION for each\n"
	    "package installed (the requested ones, then new dependencies).\n"
	    "Options:\n"
	    "  --timeout S   the window in seconds (default and cap: the server's\n"
	    "                --install-max-timeout-s)\n"
	    "Exit 5 with 'timeout: the install window of S s ended ...' (HTTP 504) when\n"
	    "the window ends first; 'unavailable' (HTTP 503) when the server has no index.\n",
    .run = install_run,
};
