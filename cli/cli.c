/*
 * cli.c: option parsing and request helpers shared by the commands.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "client.h"
#include "codec.h"
#include "err.h"
#include "idprefix.h"
#include "json.h"
#include "output.h"
#include "version.h"
#include "xalloc.h"

void cli_print_version(void)
{
	printf("%s %s (git %s)\n", CLI_PROG, ci_version, ci_git);
}

void cli_option_problem(int c, char **argv, char *out, size_t size)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";
	size_t n = strcspn(arg, "=");

	if (c == ':')
		snprintf(out, size, "option %.*s needs a value", (int)n, arg);
	else if (strncmp(arg, "--", 2) == 0 && arg[n] == '=' && optopt != 0)
		snprintf(out, size, "option %.*s takes no value", (int)n, arg);
	else if (strncmp(arg, "--", 2) == 0)
		snprintf(out, size, "unknown option %.*s", (int)n, arg);
	else
		snprintf(out, size, "unknown option -%c",
			 optopt > 0 && optopt < 0x100 ? optopt : '?');
}

void cli_cmd_help(const struct cli_cmd *cmd, FILE *out)
{
	fprintf(out, "usage: %s %s%s%s\n\n%s\n", CLI_PROG, cmd->name, cmd->usage[0] ? " " : "",
		cmd->usage, cmd->summary);
	if (cmd->help != NULL)
		fprintf(out, "\n%s", cmd->help);
	fprintf(out, "\nGlobal options (--server, --json, --api-key, --cacert): see `%s --help`.\n",
		CLI_PROG);
}

int cli_usage_error(struct cli_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s %s: ", CLI_PROG, ctx->cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s %s %s  (see `%s %s -h`)\n", CLI_PROG, ctx->cmd->name,
		ctx->cmd->usage, CLI_PROG, ctx->cmd->name);
	return CLI_EXIT_USAGE;
}

int cli_want_args(struct cli_ctx *ctx, int argc, int min, int max)
{
	if (argc < min)
		return cli_usage_error(ctx, "missing argument");
	if (max >= 0 && argc > max)
		return cli_usage_error(ctx, "too many arguments");
	return 0;
}

int cli_check_id(struct cli_ctx *ctx, const char *id)
{
	if (id[0] == '\0')
		return cli_usage_error(ctx, "empty session id");
	return 0;
}

/* Candidates listed in an ambiguity error; more are counted, not named. */
#define CLI_ID_CANDIDATES 10

int cli_session_id(struct cli_ctx *ctx, char **id)
{
	struct client_resp resp = {0};
	size_t match[CLI_ID_CANDIDATES], n, nmatch, i;
	const char **ids = NULL;
	yajl_val doc = NULL, list;
	struct err *e = NULL;
	int rc;

	if ((rc = cli_check_id(ctx, *id)) != 0)
		return rc;
	if (strlen(*id) == CLI_ID_LEN || cli_client(ctx) == NULL)
		return 0;
	/* The lookup is a convenience: when it fails, the request itself
	 * reports what is wrong (server down, bad key) once, in its words. */
	if (client_do(
		ctx->client,
		&(struct client_req){.method = "GET", .path = "/v1/sessions", .timeout_s = 60},
		&resp, &e) != 0) {
		err_free(e);
		goto out;
	}
	doc = json_parse(resp.body, strlen(resp.body), NULL);
	list = json_path_arr(doc, "sessions");
	n = json_arr_len(list);
	if (n == 0)
		goto out;
	ids = xcalloc(n, sizeof(char *));
	for (i = 0; i < n; i++)
		ids[i] = json_path_str(json_arr_at(list, i), "id");
	nmatch = idprefix_match(*id, ids, n, match, CLI_ID_CANDIDATES);
	if (nmatch == 1) {
		ctx->resolved = xrealloc(ctx->resolved, (ctx->nresolved + 1) * sizeof(char *));
		*id = ctx->resolved[ctx->nresolved++] = xstrdup(ids[match[0]]);
	} else if (nmatch > 1) {
		char *prefix = output_clean(*id);

		fflush(stdout);
		fprintf(stderr, "%s: session id prefix '%s' is ambiguous: %zu sessions match:\n",
			CLI_PROG, prefix, nmatch);
		for (i = 0; i < nmatch && i < CLI_ID_CANDIDATES; i++)
			fprintf(stderr, "  %s\n", ids[match[i]]);
		if (nmatch > CLI_ID_CANDIDATES)
			fprintf(stderr, "  ... and %zu more\n", nmatch - CLI_ID_CANDIDATES);
		fprintf(stderr, "%s: give more of the id\n", CLI_PROG);
		free(prefix);
		rc = CLI_EXIT_USAGE;
	}
out:
	free(ids);
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

int cli_global_option(struct cli_ctx *ctx, int opt, const char *arg)
{
	switch (opt) {
	case CLI_OPT_SERVER: ctx->server = arg; return 1;
	case CLI_OPT_JSON: ctx->json = 1; return 1;
	case CLI_OPT_API_KEY: ctx->api_key = arg; return 1;
	case CLI_OPT_CACERT: ctx->cacert = arg; return 1;
	case CLI_OPT_VERSION:
		cli_print_version();
		ctx->rc = CLI_EXIT_OK;
		return CLI_GETOPT_STOP;
	default: return 0;
	}
}

int cli_getopt(struct cli_ctx *ctx, int argc, char **argv, const char *shortopts,
	       const struct option *longopts)
{
	int c, g;

	if (!ctx->getopt_started) {
		/* optind = 0 makes glibc start over on the new argv. */
		optind = 0;
		opterr = 0;
		ctx->getopt_started = 1;
	}
	for (;;) {
		c = getopt_long(argc, argv, shortopts, longopts, NULL);
		switch (c) {
		case 'h':
			cli_cmd_help(ctx->cmd, stdout);
			ctx->rc = CLI_EXIT_OK;
			return CLI_GETOPT_STOP;
		case '?':
		case ':': {
			char problem[256];

			cli_option_problem(c, argv, problem, sizeof(problem));
			ctx->rc = cli_usage_error(ctx, "%s", problem);
			return CLI_GETOPT_STOP;
		}
		default:
			g = cli_global_option(ctx, c, optarg);
			if (g == CLI_GETOPT_STOP)
				return g;
			if (g == 0)
				return c;
			break;
		}
	}
}

static const struct option cli_plain_options[] = {
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

int cli_no_options(struct cli_ctx *ctx, int argc, char **argv)
{
	int c;

	while ((c = cli_getopt(ctx, argc, argv, ":h", cli_plain_options)) != -1)
		if (c == CLI_GETOPT_STOP)
			return -1;
	return 0;
}

int cli_operands(struct cli_ctx *ctx, int argc, char **argv, int min, int max, int flags)
{
	if (cli_no_options(ctx, argc, argv) < 0)
		return -1;
	ctx->rc = cli_want_args(ctx, argc - optind, min, max);
	if (ctx->rc == 0 && (flags & CLI_ARGS_ID))
		ctx->rc = cli_session_id(ctx, &argv[optind]);
	return ctx->rc != 0 ? -1 : 0;
}

struct client *cli_client(struct cli_ctx *ctx)
{
	struct err *e = NULL;

	if (ctx->client == NULL) {
		ctx->client = client_new(ctx->server, ctx->api_key, &e);
		if (ctx->client == NULL) {
			cli_report(ctx, e, NULL, NULL);
			err_free(e);
		} else {
			client_set_cacert(ctx->client, ctx->cacert);
		}
	}
	return ctx->client;
}

int cli_report(struct cli_ctx *ctx, const struct err *e, const struct client_resp *resp,
	       const char *what)
{
	const char *sep = what != NULL ? ": " : "";
	char *msg, *code;

	if (what == NULL)
		what = "";
	/* Scripts reading --json get the error document too, but only when it
	 * is one: a proxy's HTML page would break their parser. */
	if (ctx->json && e->peer_status != 0 && resp != NULL && resp->body != NULL &&
	    resp->len > 0) {
		yajl_val doc = json_parse(resp->body, strlen(resp->body), NULL);

		if (doc != NULL)
			output_json_doc(resp->body, resp->len);
		json_free(doc);
	}
	/* The message may quote a path or name chosen by sandboxed code. */
	msg = output_clean(e->message);
	code = e->peer_code != NULL ? output_clean(e->peer_code) : NULL;
	fflush(stdout);
	if (code != NULL && e->peer_status != 0)
		fprintf(stderr, "%s: %s%s%s: %s (HTTP %d)\n", CLI_PROG, what, sep, code, msg,
			e->peer_status);
	else if (code != NULL) /* an error event inside a 200 stream */
		fprintf(stderr, "%s: %s%s%s: %s\n", CLI_PROG, what, sep, code, msg);
	else if (e->peer_status != 0)
		fprintf(stderr, "%s: %s%sHTTP %d: %s\n", CLI_PROG, what, sep, e->peer_status, msg);
	else
		fprintf(stderr, "%s: %s%s%s\n", CLI_PROG, what, sep, msg);
	/* A 401 is about how ci-ctl was called, so say how to call it. */
	if (e->peer_status == 401)
		fprintf(
		    stderr,
		    ctx->api_key != NULL && ctx->api_key[0] != '\0'
			? "%s: the API key given (--api-key or CICTL_API_KEY) was refused: check "
			  "it, or ask the operator for a new one\n"
			: "%s: this daemon needs an API key: pass --api-key KEY or set "
			  "CICTL_API_KEY\n",
		    CLI_PROG);
	free(msg);
	free(code);
	return cli_exit_status(e);
}

int cli_delete(struct cli_ctx *ctx, const char *collection, const char *name, const char *what,
	       const char *done)
{
	if (name[0] == '\0')
		return cli_usage_error(ctx, "empty %s", what);
	struct client_resp resp = {0};
	char *esc = codec_url_escape(name, 0);
	char *path = xasprintf("%s/%s", collection, esc);
	int rc =
	    cli_call(ctx, &(struct client_req){.method = "DELETE", .path = path, .timeout_s = 60},
		     &resp, name);
	if (rc == CLI_EXIT_OK && !ctx->json)
		printf("%s %s\n", done, name);
	client_resp_release(&resp);
	free(path);
	free(esc);
	return rc;
}

int cli_call(struct cli_ctx *ctx, const struct client_req *req, struct client_resp *resp,
	     const char *what)
{
	struct client *c;
	struct err *e = NULL;
	int rc;

	memset(resp, 0, sizeof(*resp));
	c = cli_client(ctx);
	if (c == NULL)
		return CLI_EXIT_USAGE;
	if (client_do(c, req, resp, &e) == 0)
		return CLI_EXIT_OK;
	rc = cli_report(ctx, e, resp, what);
	err_free(e);
	return rc;
}

int cli_call_doc(struct cli_ctx *ctx, const struct client_req *req, struct client_resp *resp,
		 yajl_val *doc)
{
	struct err *e = NULL;
	int rc;

	*doc = NULL;
	rc = cli_call(ctx, req, resp, NULL);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (ctx->json) {
		output_json_doc(resp->body, resp->len);
		return CLI_EXIT_OK;
	}
	*doc = json_parse(resp->body, strlen(resp->body), &e);
	if (*doc != NULL && !YAJL_IS_OBJECT(*doc)) {
		json_free(*doc);
		*doc = NULL;
		err_set(&e, ERR_UNAVAILABLE, "not a JSON object");
	}
	if (*doc == NULL) {
		output_note("%s: unexpected answer from the server: %s\n", CLI_PROG, e->message);
		err_free(e);
		return CLI_EXIT_API;
	}
	return CLI_EXIT_OK;
}

int cli_get_list(struct cli_ctx *ctx, const char *path, const char *param, const char *value,
		 const char *key, yajl_val *doc, yajl_val *list)
{
	struct client_resp resp = {0};
	char *full, *esc = NULL;
	int rc;

	*list = NULL;
	if (value != NULL) {
		esc = codec_url_escape(value, 0);
		full = xasprintf("%s?%s=%s", path, param, esc);
	} else {
		full = xstrdup(path);
	}
	rc = cli_call_doc(ctx, &(struct client_req){.method = "GET", .path = full, .timeout_s = 60},
			  &resp, doc);
	client_resp_release(&resp);
	free(full);
	free(esc);
	if (rc != CLI_EXIT_OK || *doc == NULL)
		return rc;
	if ((*list = json_path_arr(*doc, key)) == NULL) {
		output_note("%s: the server's answer has no %s list\n", CLI_PROG, key);
		json_free(*doc);
		*doc = NULL;
		return CLI_EXIT_API;
	}
	return CLI_EXIT_OK;
}

int cli_stream_error(struct err **err, const char *code, const char *msg)
{
	enum err_code ec = ERR_INTERNAL;
	struct err *e;

	if (code != NULL)
		err_code_from_name(code, &ec);
	e = err_new(ec, "%s", msg);
	err_set_peer(e, 0, code != NULL ? code : "internal");
	err_give(err, e);
	return -1;
}

int cli_lines_feed(struct buf *line, const char *data, size_t len, const char *what, cli_line_fn fn,
		   void *arg, struct err **err)
{
	char *nl;

	if (buf_append(line, data, len) < 0) {
		if (line->max >= (size_t)1 << 20)
			return err_set(err, ERR_UNAVAILABLE, "%s longer than the %zu MiB cap", what,
				       line->max >> 20);
		return err_set(err, ERR_UNAVAILABLE, "%s longer than the %zu KiB cap", what,
			       line->max >> 10);
	}
	while (line->len > 0 && (nl = memchr(line->data, '\n', line->len)) != NULL) {
		size_t n = (size_t)(nl - line->data);

		*nl = '\0';
		if (fn(arg, line->data, n, err) < 0)
			return -1;
		buf_consume(line, n + 1);
	}
	return 0;
}

int cli_utf8(const char *s)
{
	return json_utf8_valid(s, strlen(s));
}

char *cli_session_path(const char *id, const char *suffix)
{
	char *esc = codec_url_escape(id, 0);
	char *path = xasprintf("/v1/sessions/%s%s", esc, suffix);

	free(esc);
	return path;
}
