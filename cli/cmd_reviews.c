/*
 * cmd_reviews.c: the human review queue (the caller's tenant):
 *   reviews [--all]                                  GET /v1/reviews[?state=all]
 *   reviews show ID                                  GET /v1/reviews/ID
 *   reviews approve ID [--code-file F] [--comment C] POST /v1/reviews/ID/approve
 *   reviews reject ID --comment C                    POST /v1/reviews/ID/reject
 * Everything a case holds came from sandboxed code and a model: it is
 * printed with control characters shown as '?' (tabs and newlines kept).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cli.h"
#include "client.h"
#include "codec.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

enum {
	REVIEWS_ALL = CLI_OPT_FIRST_COMMAND,
	REVIEWS_CODE_FILE,
	REVIEWS_COMMENT,
};

static const struct option reviews_options[] = {
    {"all", no_argument, NULL, REVIEWS_ALL},
    {"code-file", required_argument, NULL, REVIEWS_CODE_FILE},
    {"comment", required_argument, NULL, REVIEWS_COMMENT},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* Text from a case, kept readable: tabs and newlines as they are, other
 * control characters (an escape sequence) as '?'. */
static void print_text(const char *s)
{
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;
		putchar(ch == '\n' || ch == '\t' || (ch >= 0x20 && ch != 0x7f) ? ch : '?');
	}
}

static void print_field(const char *name, const char *v)
{
	char *clean = output_clean(v ? v : "-");
	printf("%-10s %s\n", name, clean);
	free(clean);
}

static int reviews_list(struct cli_ctx *ctx, int all)
{
	static const char *const headers[] = {"ID", "RUN", "STATE", "CREATED", "ATTEMPTS", "GOAL"};
	yajl_val doc = NULL, list;
	struct table *t = NULL;
	int rc;

	rc = cli_get_list(ctx, all ? "/v1/reviews?state=all&limit=500" : "/v1/reviews?limit=500",
			  NULL, NULL, "reviews", &doc, &list);
	if (rc != CLI_EXIT_OK || doc == NULL)
		return rc;
	t = table_new(6, headers);
	for (size_t i = 0; i < json_arr_len(list); i++) {
		yajl_val r = json_arr_at(list, i);
		char when[64], n[24], goal[64];
		const char *g = json_path_str(r, "case.goal");
		snprintf(n, sizeof(n), "%zu", json_arr_len(json_path_arr(r, "case.attempts")));
		snprintf(goal, sizeof(goal), "%.60s", g ? g : "");
		table_add(t, (const char *const[]){
				 json_path_str(r, "id"), json_path_str(r, "run"),
				 json_path_str(r, "state"),
				 output_when(json_path_str(r, "created_at"), when, sizeof(when)), n,
				 g ? goal : NULL});
	}
	table_print(t, stdout);
	table_free(t);
	json_free(doc);
	return rc;
}

static void show_attempt(yajl_val a)
{
	double n = 0;
	json_path_num(a, "n", &n);
	const char *src = json_path_str(a, "source"), *st = json_path_str(a, "status");
	char head[160];
	snprintf(head, sizeof(head), "--- attempt %.0f (%s, %s) ---", n, src ? src : "?",
		 st ? st : "?");
	char *clean = output_clean(head);
	printf("\n%s\n", clean);
	free(clean);
	print_text(json_path_str(a, "code"));
	printf("\n");
	const char *ename = json_path_str(a, "error.ename"),
		   *evalue = json_path_str(a, "error.evalue");
	if (ename || evalue) {
		printf("error: ");
		print_text(ename ? ename : "");
		printf(": ");
		print_text(evalue ? evalue : "");
		printf("\n");
	}
}

static int reviews_show(struct cli_ctx *ctx, const char *id)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	char *esc = codec_url_escape(id, 0), *path = xasprintf("/v1/reviews/%s", esc);
	int rc = cli_call_doc(
	    ctx, &(struct client_req){.method = "GET", .path = path, .timeout_s = 60}, &resp, &doc);
	if (rc == CLI_EXIT_OK && doc != NULL) {
		char when[64];
		print_field("id", json_path_str(doc, "id"));
		print_field("run", json_path_str(doc, "run"));
		print_field("state", json_path_str(doc, "state"));
		print_field("created",
			    output_when(json_path_str(doc, "created_at"), when, sizeof(when)));
		if (json_path_str(doc, "decided_at"))
			print_field("decided", output_when(json_path_str(doc, "decided_at"), when,
							   sizeof(when)));
		if (json_path_str(doc, "case.goal"))
			print_field("goal", json_path_str(doc, "case.goal"));
		if (json_path_str(doc, "comment"))
			print_field("comment", json_path_str(doc, "comment"));
		yajl_val attempts = json_path_arr(doc, "case.attempts");
		for (size_t i = 0; i < json_arr_len(attempts); i++)
			show_attempt(json_arr_at(attempts, i));
		if (json_path_str(doc, "code")) {
			printf("\n--- approved with this code ---\n");
			print_text(json_path_str(doc, "code"));
			printf("\n");
		}
	}
	json_free(doc);
	client_resp_release(&resp);
	free(path);
	free(esc);
	return rc;
}

/* The file's text, or stdin's for "-"; caller frees. */
static char *read_code(const char *file, struct err **err)
{
	struct buf b;
	FILE *f = stdin;
	size_t len;
	if (strcmp(file, "-") != 0 && (f = fopen(file, "rb")) == NULL) {
		err_set(err, ERR_BAD_REQUEST, "%s: %s", file, strerror(errno));
		return NULL;
	}
	buf_init(&b, CLIENT_BODY_MAX);
	int r = buf_read_file(&b, f, strcmp(file, "-") == 0 ? "stdin" : file, err);
	if (f != stdin)
		fclose(f);
	if (r < 0) {
		buf_release(&b);
		return NULL;
	}
	char *s = buf_steal(&b, &len);
	if (s == NULL)
		s = xstrdup("");
	if (strlen(s) != len) {
		free(s);
		err_set(err, ERR_BAD_REQUEST, "%s: the code has a NUL byte", file);
		return NULL;
	}
	return s;
}

static int reviews_decide(struct cli_ctx *ctx, const char *id, int approve, const char *code_file,
			  const char *comment)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	char *code = NULL;
	struct err *e = NULL;
	int rc;

	if (!approve && (comment == NULL || *comment == '\0'))
		return cli_usage_error(ctx, "reject needs --comment TEXT");
	if (!approve && code_file)
		return cli_usage_error(ctx, "--code-file is for approve");
	if (comment && !cli_utf8(comment))
		return cli_usage_error(ctx, "--comment: " CLI_NOT_UTF8);
	if (code_file && (code = read_code(code_file, &e)) == NULL) {
		rc = cli_report(ctx, e, NULL, NULL);
		err_free(e);
		return rc;
	}
	if (code && !cli_utf8(code)) {
		free(code);
		return cli_usage_error(ctx, "--code-file: " CLI_NOT_UTF8);
	}
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	if (code)
		jg_kv_str(g, "code", code);
	if (comment)
		jg_kv_str(g, "comment", comment);
	jg_obj_end(g);
	free(code);
	char *esc = codec_url_escape(id, 0);
	char *path = xasprintf("/v1/reviews/%s/%s", esc, approve ? "approve" : "reject");
	struct client_req req = {.method = "POST", .path = path, .timeout_s = 60};
	req.content_type = "application/json";
	req.body = jg_text(g, &req.body_len);
	rc = cli_call_doc(ctx, &req, &resp, &doc);
	if (rc == CLI_EXIT_OK && doc != NULL) {
		char *clean = output_clean(id);
		printf("%s %s\n", approve ? "approved" : "rejected", clean);
		free(clean);
	}
	json_free(doc);
	client_resp_release(&resp);
	free(path);
	free(esc);
	return rc;
}

static int reviews_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *code_file = NULL, *comment = NULL, *sub;
	int all = 0, c, n;

	while ((c = cli_getopt(ctx, argc, argv, ":h", reviews_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: return ctx->rc;
		case REVIEWS_ALL: all = 1; break;
		case REVIEWS_CODE_FILE: code_file = optarg; break;
		case REVIEWS_COMMENT: comment = optarg; break;
		default: break;
		}
	}
	n = argc - optind;
	if (n == 0 || strcmp(argv[optind], "ls") == 0) {
		if (n > 1)
			return cli_usage_error(ctx, "the list takes no arguments");
		if (code_file || comment)
			return cli_usage_error(
			    ctx, "--code-file and --comment are for approve and reject");
		return reviews_list(ctx, all);
	}
	sub = argv[optind];
	if (all)
		return cli_usage_error(ctx, "--all is for the list");
	if (n != 2)
		return cli_usage_error(ctx, "%s takes one review id", sub);
	if (argv[optind + 1][0] == '\0')
		return cli_usage_error(ctx, "empty review id");
	if (strcmp(sub, "show") == 0) {
		if (code_file || comment)
			return cli_usage_error(
			    ctx, "--code-file and --comment are for approve and reject");
		return reviews_show(ctx, argv[optind + 1]);
	}
	if (strcmp(sub, "approve") == 0)
		return reviews_decide(ctx, argv[optind + 1], 1, code_file, comment);
	if (strcmp(sub, "reject") == 0)
		return reviews_decide(ctx, argv[optind + 1], 0, code_file, comment);
	return cli_usage_error(ctx, "unknown subcommand '%s' (show, approve or reject)", sub);
}

const struct cli_cmd cmd_reviews = {
    .name = "reviews",
    .usage = "[--all] | show ID | approve ID [--code-file F] [--comment C] | reject ID --comment C",
    .summary = "List, show and decide the cases waiting for a human review.",
    .help = "A run whose attempts failed and whose on_failure says \"review\" waits in\n"
	    "the tenant's review queue. Approving it runs its last code (or the code in\n"
	    "--code-file, \"-\" for stdin) to complete the run; rejecting it ends the run\n"
	    "failed with the comment.\n"
	    "\n"
	    "  (no subcommand) [--all]\n"
	    "         the pending cases (ID, RUN, STATE, CREATED, ATTEMPTS, GOAL); --all\n"
	    "         also the decided ones\n"
	    "  show ID\n"
	    "         one case with each attempt's code and error\n"
	    "  approve ID [--code-file F] [--comment C]\n"
	    "  reject ID --comment C\n"
	    "         decide a pending case; one already decided exits 5 (conflict)\n"
	    "\n"
	    "--json prints the server's answer: {\"reviews\":[...]} for the list, the\n"
	    "review {\"id\",\"run\",\"state\",\"created_at\",\"decided_at\",\"comment\",\"code\",\n"
	    "\"case\"} for the others.\n",
    .run = reviews_run,
};
