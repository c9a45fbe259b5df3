/*
 * cmd_exec.c: exec: run code in a session and show what a notebook would.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "client.h"
#include "codec.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

/* With no --timeout the server's deadline (60 s by default) rules; this
 * only keeps the CLI from hanging on a daemon that never answers. */
#define EXEC_DEFAULT_REQUEST_S 300L
/* Room on top of --timeout for a kernel restart and the answer. */
#define EXEC_REQUEST_MARGIN_S 60L

enum {
	EXEC_TIMEOUT = CLI_OPT_FIRST_COMMAND,
	EXEC_STREAM,
	EXEC_NO_STREAM,
	EXEC_SAVE_DISPLAY,
};

static const struct option exec_options[] = {
    {"file", required_argument, NULL, 'f'},
    {"timeout", required_argument, NULL, EXEC_TIMEOUT},
    {"stream", no_argument, NULL, EXEC_STREAM},
    {"no-stream", no_argument, NULL, EXEC_NO_STREAM},
    {"save-display", required_argument, NULL, EXEC_SAVE_DISPLAY},
    {"interactive", no_argument, NULL, 'i'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* State of a streamed execution: NDJSON lines are cut from the body as it
 * arrives; the last "result" event is kept for the summary. */
struct exec_stream {
	struct cli_ctx *ctx;
	struct buf line;   /* bytes of the line being received */
	yajl_val result;   /* the result event, parsed */
	char *result_text; /* ... and as received, for --json */
	size_t result_len;
};

static const char *exec_mime_ext(const char *mime)
{
	static const char *const map[][2] = {
	    {"image/png", "png"},       {"image/jpeg", "jpg"},   {"image/gif", "gif"},
	    {"image/svg+xml", "svg"},   {"image/webp", "webp"},  {"text/html", "html"},
	    {"text/plain", "txt"},      {"text/markdown", "md"}, {"application/json", "json"},
	    {"application/pdf", "pdf"},
	};
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i][0], mime) == 0)
			return map[i][1];
	return "bin";
}

/* Writes one display item to DIR/display-N.EXT; -1 after saying why. */
static int exec_save_display(const char *dir, size_t n, const char *mime, const struct buf *data,
			     char **saved)
{
	size_t dirlen;
	char *path;
	FILE *f;
	int ok;

	if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
		output_note("%s: cannot create %s: %s\n", CLI_PROG, dir, strerror(errno));
		return -1;
	}
	dirlen = strlen(dir);
	while (dirlen > 0 && dir[dirlen - 1] == '/')
		dirlen--;
	path = xasprintf("%.*s/display-%zu.%s", (int)dirlen, dir, n, exec_mime_ext(mime));
	f = fopen(path, "wb");
	if (f == NULL) {
		output_note("%s: cannot write %s: %s\n", CLI_PROG, path, strerror(errno));
		free(path);
		return -1;
	}
	ok = fwrite(data->data ? data->data : "", 1, data->len, f) == data->len;
	ok &= fclose(f) == 0;
	if (!ok) {
		output_note("%s: writing %s failed: %s\n", CLI_PROG, path, strerror(errno));
		free(path);
		return -1;
	}
	*saved = path;
	return 0;
}

/* Display items: a note each, and files with --save-display.  Returns -1
 * when one could not be saved. */
static int exec_displays(struct cli_ctx *ctx, yajl_val r, const char *dir)
{
	yajl_val list = json_path_arr(r, "display");
	size_t i;
	int ret = 0;

	for (i = 0; i < json_arr_len(list); i++) {
		yajl_val d = json_arr_at(list, i);
		const char *mime = json_path_str(d, "mime");
		const char *data = json_path_str(d, "data");
		struct buf raw;
		char *saved = NULL;

		if (mime == NULL ||
		    strspn(mime, "abcdefghijklmnopqrstuvwxyz0123456789+-./") != strlen(mime))
			mime = "application/octet-stream"; /* also keeps it safe to print */
		buf_init(&raw, CLIENT_BODY_MAX);
		if (data == NULL || codec_base64_decode(data, &raw) < 0) {
			if (!ctx->json)
				output_note("[display %s, undecodable data]\n", mime);
			buf_release(&raw);
			continue;
		}
		if (dir != NULL && exec_save_display(dir, i + 1, mime, &raw, &saved) < 0)
			ret = -1;
		if (!ctx->json) {
			if (saved != NULL)
				output_note("[display %s, %zu bytes, saved as %s]\n", mime, raw.len,
					    saved);
			else
				output_note("[display %s, %zu bytes]\n", mime, raw.len);
		}
		free(saved);
		buf_release(&raw);
	}
	return ret;
}

static void exec_files(yajl_val r)
{
	yajl_val list = json_path_arr(r, "files");
	size_t i;
	bool flag;

	for (i = 0; i < json_arr_len(list); i++) {
		yajl_val f = json_arr_at(list, i);
		const char *path = json_path_str(f, "path");
		const char *change = json_path_str(f, "change");
		double size;
		char *name, *what;

		if (path == NULL)
			continue;
		name = output_clean(path);
		what = output_clean(change != NULL ? change : "changed");
		if (strcmp(what, "deleted") != 0 && json_path_num(f, "size", &size))
			output_note("[file %s %s (%.0f bytes)]\n", what, name, size);
		else
			output_note("[file %s %s]\n", what, name);
		free(name);
		free(what);
	}
	if (json_path_bool(r, "files_truncated", &flag) && flag)
		output_note("[more files changed; the server truncated the list]\n");
}

static void exec_error(yajl_val r)
{
	yajl_val tb = json_path_arr(r, "error.traceback");
	const char *ename = json_path_str(r, "error.ename");
	const char *evalue = json_path_str(r, "error.evalue");
	size_t i;

	if (json_path_obj(r, "error") == NULL)
		return;
	fflush(stdout);
	for (i = 0; i < json_arr_len(tb); i++) {
		yajl_val line = json_arr_at(tb, i);
		const char *s = YAJL_IS_STRING(line) ? line->u.string : "";
		size_t n = strlen(s);

		fputs(s, stderr);
		if (n == 0 || s[n - 1] != '\n')
			fputc('\n', stderr);
	}
	/* No traceback (e.g. the kernel died): the name still says what. */
	if (json_arr_len(tb) == 0 && (ename != NULL || evalue != NULL))
		fprintf(stderr, "%s%s%s\n", ename ? ename : "",
			ename && evalue && *evalue ? ": " : "", evalue ? evalue : "");
}

/*
 * The closing line of a timeout or a dead kernel: what happened (the
 * daemon's `reason`, e.g. "out of memory: the kernel exceeded
 * memory_mb=256"), and whether the variables survived, which decides what
 * the caller must re-run.
 */
static void exec_ending(yajl_val r, int timed_out, const char *took)
{
	const char *kernel = json_path_str(r, "kernel");
	const char *reason = json_path_str(r, "reason");
	const char *state = "kernel state unknown";
	char *why = NULL;

	if (kernel != NULL && strcmp(kernel, "restarted") == 0)
		state = "kernel restarted, variables lost";
	else if (kernel != NULL && strcmp(kernel, "preserved") == 0)
		state = "kernel preserved";
	if (reason != NULL && *reason != '\0')
		why = output_clean(reason);
	else if (!timed_out)
		why = xstrdup("out of memory or a crash");
	output_note("%s: %s%s%s%s (%s)\n", CLI_PROG,
		    timed_out ? "execution timed out" : "the kernel died", took, why ? ": " : "",
		    why ? why : "", state);
	free(why);
}

/*
 * Shows an exec result and maps its status to the exit status.  With
 * print_streams, stdout and stderr are printed too (non-stream mode: in
 * stream mode they were printed as they came).
 */
int cli_exec_report(struct cli_ctx *ctx, yajl_val r, int print_streams, const char *save_dir)
{
	const char *status = json_path_str(r, "status");
	yajl_val result = json_path(r, "result");
	double ms = -1;
	char took[64] = "";
	bool flag;
	int rc, saved;

	if (status == NULL) {
		output_note("%s: the server's exec result has no status\n", CLI_PROG);
		return CLI_EXIT_API;
	}
	if (json_path_num(r, "duration_ms", &ms) && ms >= 0)
		snprintf(took, sizeof(took), " after %.1f s", ms / 1000.0);

	if (!ctx->json) {
		if (print_streams) {
			const char *out = json_path_str(r, "stdout");
			const char *err = json_path_str(r, "stderr");

			if (out != NULL)
				fputs(out, stdout);
			if (err != NULL && *err != '\0') {
				fflush(stdout);
				fputs(err, stderr);
			}
		}
		if (json_path_bool(r, "stdout_truncated", &flag) && flag)
			output_note("[stdout truncated by the server]\n");
		if (json_path_bool(r, "stderr_truncated", &flag) && flag)
			output_note("[stderr truncated by the server]\n");
		if (result != NULL && !YAJL_IS_NULL(result)) {
			char *text = output_json_text(result);

			printf("%s\n", text);
			free(text);
		}
		exec_error(r);
	}
	saved = exec_displays(ctx, r, save_dir);
	if (!ctx->json)
		exec_files(r);

	if (strcmp(status, "ok") == 0) {
		rc = CLI_EXIT_OK;
	} else if (strcmp(status, "error") == 0) {
		rc = CLI_EXIT_FAIL;
	} else if (strcmp(status, "timeout") == 0 || strcmp(status, "killed") == 0) {
		rc = status[0] == 't' ? CLI_EXIT_TIMEOUT : CLI_EXIT_KILLED;
		if (!ctx->json)
			exec_ending(r, rc == CLI_EXIT_TIMEOUT, took);
	} else {
		output_note("%s: unknown exec status '%s'\n", CLI_PROG, status);
		rc = CLI_EXIT_API;
	}
	/* A display that was asked for but not saved fails a run that was
	 * otherwise fine; the code's own failure stays the better signal. */
	if (saved < 0 && rc == CLI_EXIT_OK)
		rc = CLI_EXIT_FAIL;
	return rc;
}

/* Handles one NDJSON line of a streamed execution. */
static int exec_stream_line(void *arg, const char *line, size_t len, struct err **err)
{
	struct exec_stream *st = arg;
	struct err *e = NULL;
	const char *type, *text;
	yajl_val ev;

	if (strspn(line, " \t\r") == len)
		return 0;
	ev = json_parse(line, strlen(line), &e);
	if (ev == NULL) {
		err_set(err, ERR_UNAVAILABLE, "bad event in the exec stream: %s", e->message);
		err_free(e);
		return -1;
	}
	type = json_path_str(ev, "type");
	text = json_path_str(ev, "text");
	if ((type != NULL && strcmp(type, "error") == 0) ||
	    (type == NULL && json_path_obj(ev, "error") != NULL &&
	     json_path(ev, "status") == NULL)) {
		/* The call failed after the 200 went out (the session expired,
		 * the daemon lost the runner...): an API error, in the stream. */
		const char *code = json_path_str(ev, "error.code");
		const char *msg = json_path_str(ev, "error.message");

		if (st->ctx->json)
			output_json_doc(line, len);
		cli_stream_error(err, code, msg ? msg : "error in the exec stream");
		json_free(ev);
		return -1;
	}
	if (type == NULL || strcmp(type, "result") == 0) {
		/* A server that ignored "stream" answers one plain result. */
		json_free(st->result);
		free(st->result_text);
		st->result = ev;
		st->result_text = xstrndup(line, len);
		st->result_len = len;
		return 0;
	}
	if (!st->ctx->json && text != NULL) {
		if (strcmp(type, "stdout") == 0) {
			fputs(text, stdout);
			fflush(stdout);
		} else if (strcmp(type, "stderr") == 0) {
			fflush(stdout);
			fputs(text, stderr);
		}
	}
	/* "display" events and unknown types wait for the result event, which
	 * repeats everything; that keeps one code path for the summary. */
	json_free(ev);
	return 0;
}

static int exec_stream_data(const char *data, size_t len, void *arg, struct err **err)
{
	struct exec_stream *st = arg;

	return cli_lines_feed(&st->line, data, len, "exec stream line", exec_stream_line, st, err);
}

/* Reads the code from a file, or stdin for NULL or "-"; caller frees. */
char *cli_read_code(const char *file, size_t *len, struct err **err)
{
	struct buf b;
	FILE *f = stdin;
	const char *what = "stdin";
	int r;

	if (file != NULL && strcmp(file, "-") != 0) {
		f = fopen(file, "rb");
		if (f == NULL) {
			err_set(err, ERR_BAD_REQUEST, "%s: %s", file, strerror(errno));
			return NULL;
		}
		what = file;
	} else if (isatty(STDIN_FILENO)) {
		fprintf(stderr, "(reading code from the terminal; end with Ctrl-D)\n");
	}
	/* The code travels in one JSON body, so it is held in memory anyway. */
	buf_init(&b, CLIENT_BODY_MAX);
	r = buf_read_file(&b, f, what, err);
	if (f != stdin)
		fclose(f);
	if (r < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_steal(&b, len);
}

/* Ctrl-C during an exec: the first asks the server to interrupt the code
 * (the result, its KeyboardInterrupt traceback, is still printed), a
 * second stops waiting. Left as it was, the code would run on and keep the
 * session busy. */
static volatile sig_atomic_t exec_sigints;

static void exec_on_sigint(int sig)
{
	(void)sig;
	if (exec_sigints < 2)
		exec_sigints++;
}

struct exec_interrupt {
	struct cli_ctx *ctx;
	const char *session;
};

/* On a client of its own: the exec's transfer holds the other. */
static void exec_send_interrupt(void *arg)
{
	struct exec_interrupt *xi = arg;
	struct err *e = NULL;
	struct client_resp resp = {0};
	output_note("%s: interrupting the execution (Ctrl-C again to stop waiting)\n", CLI_PROG);
	struct client *c = client_new(xi->ctx->server, xi->ctx->api_key, &e);
	if (c != NULL) {
		client_set_cacert(c, xi->ctx->cacert);
		char *path = cli_session_path(xi->session, "/interrupt");
		if (client_do(c,
			      &(struct client_req){.method = "POST", .path = path, .timeout_s = 10},
			      &resp, &e) < 0)
			output_note("%s: the interrupt failed: %s\n", CLI_PROG, e->message);
		free(path);
		client_free(c);
	}
	client_resp_release(&resp);
	err_free(e);
}

/* One execution of code in session id, its result shown (streamed when
 * stream); returns the exit status for it. */
static int exec_one(struct cli_ctx *ctx, const char *id, const char *code, size_t code_len,
		    double timeout, int stream, const char *save_dir)
{
	const char *body;
	char *path = NULL;
	AUTOGEN yajl_gen g = NULL;
	struct exec_stream st = {.ctx = ctx};
	struct client_resp resp = {0};
	struct client *client;
	struct err *e = NULL;
	yajl_val doc = NULL;
	size_t body_len;
	int rc = CLI_EXIT_USAGE;
	long request_s;

	buf_init(&st.line, CLIENT_BODY_MAX);
	/* The server refuses invalid UTF-8; say so here, naming the argument,
	 * rather than have the generator repair the code. */
	if (!json_utf8_valid(code, code_len)) {
		rc = cli_usage_error(ctx, "code: %s", CLI_NOT_UTF8);
		goto out;
	}
	g = json_gen_new();
	jg_obj(g);
	jg_str(g, "code");
	jg_strn(g, code, code_len);
	if (timeout > 0) {
		jg_str(g, "timeout_s");
		jg_number(g, timeout);
	}
	jg_kv_bool(g, "stream", stream);
	jg_obj_end(g);
	body = jg_text(g, &body_len);

	request_s =
	    timeout > 0 ? (long)timeout + 1 + EXEC_REQUEST_MARGIN_S : EXEC_DEFAULT_REQUEST_S;
	path = cli_session_path(id, "/exec");
	client = cli_client(ctx);
	if (client == NULL)
		goto out;
	/* No SA_RESTART, so a wait is cut short; the client polls the count.
	 * An ignored SIGINT (started with & by a script) stays ignored. */
	struct sigaction sa = {.sa_handler = exec_on_sigint}, old_sa;
	sigemptyset(&sa.sa_mask);
	exec_sigints = 0;
	sigaction(SIGINT, NULL, &old_sa);
	if (old_sa.sa_handler != SIG_IGN)
		sigaction(SIGINT, &sa, NULL);
	struct exec_interrupt xi = {.ctx = ctx, .session = id};
	int failed = client_do(
	    client,
	    &(struct client_req){.method = "POST",
				 .path = path,
				 .content_type = "application/json",
				 .accept = stream ? "application/x-ndjson" : "application/json",
				 .body = body,
				 .body_len = body_len,
				 .on_data = stream ? exec_stream_data : NULL,
				 .arg = &st,
				 .timeout_s = request_s,
				 .cancel = &exec_sigints,
				 .on_cancel = exec_send_interrupt,
				 .cancel_arg = &xi},
	    &resp, &e);
	sigaction(SIGINT, &old_sa, NULL);
	if (failed < 0) {
		rc = cli_report(ctx, e, &resp, NULL);
		goto out;
	}
	rc = CLI_EXIT_API;
	if (stream) {
		/* A last line without its newline still counts. */
		if (st.line.len > 0 && exec_stream_line(&st, st.line.data, st.line.len, &e) < 0) {
			rc = cli_report(ctx, e, NULL, NULL);
			goto out;
		}
		if (st.result == NULL) {
			output_note("%s: the exec stream ended without a result\n", CLI_PROG);
			goto out;
		}
		if (ctx->json)
			output_json_doc(st.result_text, st.result_len);
		rc = cli_exec_report(ctx, st.result, 0, save_dir);
		goto out;
	}
	if (ctx->json)
		output_json_doc(resp.body, resp.len);
	doc = json_parse(resp.body, strlen(resp.body), &e);
	if (doc == NULL) {
		output_note("%s: unexpected answer from the server: %s\n", CLI_PROG, e->message);
		goto out;
	}
	rc = cli_exec_report(ctx, doc, 1, save_dir);
out:
	json_free(doc);
	json_free(st.result);
	free(st.result_text);
	buf_release(&st.line);
	client_resp_release(&resp);
	err_free(e);
	free(path);
	return rc;
}

/* exec -i: a block is cut like Python's own prompt does it: a line that
 * opens one (ends with ':' or '\', or starts with '@' or whitespace) is
 * followed by more until an empty line. */
#define EXEC_REPL_MAX ((size_t)1 << 20)

static int exec_repl_opens(const char *line, size_t n)
{
	while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
		n--;
	return n > 0 && (line[n - 1] == ':' || line[n - 1] == '\\' || line[0] == '@');
}

/* Each line or block sent as one execution to the same session, so its
 * variables stay between them. Ends at EOF (Ctrl-D); exits with the last
 * execution's status, or at once on an API error (session gone). */
static int exec_repl(struct cli_ctx *ctx, const char *id, double timeout, int stream,
		     const char *save_dir)
{
	int tty = isatty(STDIN_FILENO);
	char *line = NULL;
	size_t cap = 0;
	struct buf block;
	int rc = CLI_EXIT_OK, in_block = 0;
	ssize_t n;

	buf_init(&block, EXEC_REPL_MAX);
	if (tty)
		output_note("%s: session %s; a block ends with an empty line, Ctrl-D quits\n",
			    CLI_PROG, id);
	for (;;) {
		if (tty)
			output_note("%s", in_block ? "... " : ">>> ");
		n = getline(&line, &cap, stdin);
		if (n < 0)
			break;
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (in_block && n > 0) {
			if (buf_append(&block, "\n", 1) < 0 ||
			    buf_append(&block, line, (size_t)n) < 0)
				goto too_long;
			continue;
		}
		if (!in_block) {
			if (n == 0)
				continue;
			buf_consume(&block, block.len);
			if (buf_append(&block, line, (size_t)n) < 0)
				goto too_long;
			if (exec_repl_opens(line, (size_t)n) || line[0] == ' ' || line[0] == '\t') {
				in_block = 1;
				continue;
			}
		}
		in_block = 0;
		if (!json_utf8_valid(block.data, block.len)) {
			/* A stray byte typed is no reason to lose the session's REPL. */
			output_note("%s: exec -i: %s; not sent\n", CLI_PROG, CLI_NOT_UTF8);
			continue;
		}
		rc = exec_one(ctx, id, block.data, block.len, timeout, stream, save_dir);
		fflush(stdout);
		if (rc == CLI_EXIT_API || rc == CLI_EXIT_USAGE)
			break;
		continue;
	too_long:
		output_note("%s: exec -i: a block longer than %zu MiB is dropped\n", CLI_PROG,
			    EXEC_REPL_MAX >> 20);
		buf_consume(&block, block.len);
		in_block = 0;
	}
	/* EOF inside a block runs what was typed, as python does. */
	if (in_block && block.len > 0 && rc != CLI_EXIT_API && rc != CLI_EXIT_USAGE)
		rc = exec_one(ctx, id, block.data, block.len, timeout, stream, save_dir);
	if (tty)
		output_note("\n");
	buf_release(&block);
	free(line);
	return rc;
}

static int exec_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *file = NULL, *code, *save_dir = NULL;
	char *code_buf = NULL;
	struct err *e = NULL;
	double timeout = -1;
	size_t code_len;
	int stream = -1, c, rc = CLI_EXIT_USAGE, interactive = 0;
	while ((c = cli_getopt(ctx, argc, argv, ":hif:", exec_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: rc = ctx->rc; goto out;
		case 'f': file = optarg; break;
		case EXEC_TIMEOUT:
			if (codec_parse_double(optarg, 1e-3, 86400, &timeout) < 0) {
				cli_usage_error(ctx, "--timeout: want seconds > 0");
				goto out;
			}
			break;
		case EXEC_STREAM: stream = 1; break;
		case EXEC_NO_STREAM: stream = 0; break;
		case EXEC_SAVE_DISPLAY: save_dir = optarg; break;
		case 'i': interactive = 1; break;
		default: break;
		}
	}
	if (cli_want_args(ctx, argc - optind, 1, 2) != 0 || cli_session_id(ctx, &argv[optind]) != 0)
		goto out;
	if (stream < 0)
		stream = !ctx->json && isatty(STDOUT_FILENO);
	if (interactive) {
		if (file != NULL || argc - optind == 2 || ctx->json)
			return cli_usage_error(ctx, "-i reads the code from the terminal: not with "
						    "CODE, -f or --json");
		return exec_repl(ctx, argv[optind], timeout, stream, save_dir);
	}
	if (file != NULL && argc - optind == 2) {
		cli_usage_error(ctx, "give the code as an argument or with -f, "
				     "not both");
		goto out;
	}
	if (argc - optind == 2 && strcmp(argv[optind + 1], "-") != 0) {
		code = argv[optind + 1];
		code_len = strlen(code);
	} else {
		code_buf = cli_read_code(file, &code_len, &e);
		if (code_buf == NULL) {
			rc = cli_report(ctx, e, NULL, NULL);
			goto out;
		}
		code = code_buf;
	}
	/* Live output is for people; scripts get the complete result. */
	rc = exec_one(ctx, argv[optind], code, code_len, timeout, stream, save_dir);
out:
	err_free(e);
	free(code_buf);
	return rc;
}

const struct cli_cmd cmd_exec = {
    .name = "exec",
    .usage = "[OPTIONS] ID [CODE|-] | -i ID",
    .summary = "Run Python code in a session; show output, result, errors.",
    .help = "The code comes from CODE, from -f FILE, or from stdin when neither is given\n"
	    "(or CODE is '-').  Put '--' before code that starts with '-'.\n"
	    "\n"
	    "Options:\n"
	    "  -f, --file FILE        read the code from FILE ('-': stdin)\n"
	    "  --timeout S            deadline for this execution, in seconds\n"
	    "  --stream, --no-stream  print output as it is produced (default: stream when\n"
	    "                         stdout is a terminal and --json is not given)\n"
	    "  --save-display DIR     write display items (charts) as DIR/display-N.png...\n"
	    "  -i, --interactive      a REPL: each line typed (or block: a line ending in\n"
	    "                         ':' and what follows, up to an empty line) is one\n"
	    "                         execution in the session; variables stay; Ctrl-C\n"
	    "                         interrupts the code, Ctrl-D quits\n"
	    "\n"
	    "Output: the code's stdout and stderr exactly as produced, then the value of the\n"
	    "last expression on stdout, then on stderr: the traceback, a [display ...] note\n"
	    "per image and a [file ...] note per file created, modified or deleted under\n"
	    "/workspace.  --json prints the exec result document instead (when streaming,\n"
	    "the final result event).\n"
	    "\n"
	    "Exit status:\n"
	    "  0  the code ran to completion (status ok)\n"
	    "  1  the code raised an exception (status error), or a display was not saved\n"
	    "  2  usage error (including an unreadable -f FILE)\n"
	    "  3  the execution timed out (status timeout)\n"
	    "  4  the kernel died, e.g. out of memory (status killed)\n"
	    "  5  API or transport error (busy, expired, not found, unreachable...)\n",
    .run = exec_run,
};
