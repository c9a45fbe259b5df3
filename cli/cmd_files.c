/*
 * cmd_files.c: file commands: put, get, files, rmfile.
 *
 * Transfers stream between disk and socket, so a file's size is not
 * bounded by memory; only the server's own limits apply.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "codec.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

/* "/v1/sessions/ID/files/REMOTE", each segment of REMOTE escaped on its
 * own so names with spaces, '?' or '#' survive; caller frees. */
static char *files_path(const char *id, const char *remote)
{
	char *esc = codec_url_escape(remote, 1);
	char *suffix = xasprintf("/files/%s", esc);
	char *path = cli_session_path(id, suffix);

	free(esc);
	free(suffix);
	return path;
}

/* ---- put ------------------------------------------------------------- */

static int put_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *id, *local, *remote;
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	struct stat sb;
	FILE *f = NULL;
	char *path = NULL;
	long long size = -1;
	double rsize;
	int rc;

	if (cli_operands(ctx, argc, argv, 2, 3, CLI_ARGS_ID) < 0)
		return ctx->rc;
	id = argv[optind];
	local = argv[optind + 1];
	remote = argc - optind == 3 ? argv[optind + 2] : util_basename(local);
	if (strcmp(local, "-") == 0 && argc - optind < 3)
		return cli_usage_error(ctx, "name the REMOTE file when reading "
					    "stdin");
	if (remote[0] == '\0')
		return cli_usage_error(ctx, "empty REMOTE path");

	if (strcmp(local, "-") == 0) {
		f = stdin; /* size unknown: sent chunked */
	} else {
		f = fopen(local, "rb");
		if (f == NULL) {
			fprintf(stderr, "%s: %s: %s\n", CLI_PROG, local, strerror(errno));
			return CLI_EXIT_FAIL;
		}
		if (fstat(fileno(f), &sb) < 0 || !S_ISREG(sb.st_mode)) {
			fprintf(stderr, "%s: %s: not a regular file\n", CLI_PROG, local);
			fclose(f);
			return CLI_EXIT_FAIL;
		}
		size = (long long)sb.st_size;
	}
	path = files_path(id, remote);
	rc = cli_call(ctx,
		      &(struct client_req){.method = "PUT",
					   .path = path,
					   .content_type = "application/octet-stream",
					   .upload = f,
					   .upload_size = size,
					   .timeout_s = 0},
		      &resp, NULL);
	if (rc != CLI_EXIT_OK)
		goto out;
	if (ctx->json) {
		output_json_doc(resp.body, resp.len);
		goto out;
	}
	/* Prefer the server's view (its normalised path, the size it stored)
	 * and fall back to ours if the answer is thin. */
	doc = json_parse(resp.body, strlen(resp.body), NULL);
	if (json_path_num(doc, "size", &rsize))
		size = (long long)rsize;
	printf("%s %lld\n", json_path_str(doc, "path") ? json_path_str(doc, "path") : remote, size);
out:
	json_free(doc);
	client_resp_release(&resp);
	free(path);
	if (f != NULL && f != stdin)
		fclose(f);
	return rc;
}

const struct cli_cmd cmd_put = {
    .name = "put",
    .usage = "ID LOCAL [REMOTE]",
    .summary = "Upload a file into the session's /workspace.",
    .help = "REMOTE is relative to /workspace and defaults to LOCAL's base name.  The file\n"
	    "is streamed from disk.  LOCAL '-' reads stdin (then REMOTE is required).\n"
	    "Prints 'REMOTE SIZE' as the server stored it.\n",
    .run = put_run,
};

/* ---- get ------------------------------------------------------------- */

struct get_sink {
	FILE *f;
	const char *name; /* for messages */
	unsigned long long bytes;
};

static int get_on_data(const char *data, size_t len, void *arg, struct err **err)
{
	struct get_sink *s = arg;

	if (fwrite(data, 1, len, s->f) != len) {
		err_set(err, ERR_INTERNAL, "writing %s: %s", s->name, strerror(errno));
		return -1;
	}
	s->bytes += len;
	return 0;
}

/* Downloads REMOTE into LOCAL (or stdout), through a temporary name so a
 * failed download leaves nothing; prints "LOCAL SIZE". */
static int get_file(struct cli_ctx *ctx, struct client *client, const char *id, const char *remote,
		    const char *local, int to_stdout)
{
	struct get_sink sink = {0};
	struct client_resp resp = {0};
	struct err *e = NULL;
	char *path = NULL, *tmp = NULL;
	int rc, fd;
	mode_t mask;

	if (to_stdout) {
		sink.f = stdout;
		sink.name = "stdout";
	} else {
		/* Download next to LOCAL and rename at the end, so a failed or
		 * refused download never leaves a truncated LOCAL behind. */
		tmp = xasprintf("%s.ci-ctl-XXXXXX", local);
		fd = mkstemp(tmp);
		if (fd < 0) {
			fprintf(stderr, "%s: cannot create %s: %s\n", CLI_PROG, tmp,
				strerror(errno));
			free(tmp);
			tmp = NULL;
			rc = CLI_EXIT_FAIL;
			goto out;
		}
		mask = umask(0);
		umask(mask);
		/* mkstemp makes 0600; give the file the mode cp would. */
		fchmod(fd, 0666 & ~mask);
		sink.f = fdopen(fd, "wb");
		if (sink.f == NULL) {
			fprintf(stderr, "%s: %s: %s\n", CLI_PROG, tmp, strerror(errno));
			close(fd);
			rc = CLI_EXIT_FAIL;
			goto out;
		}
		sink.name = local;
	}

	path = files_path(id, remote);
	if (client_do(client,
		      &(struct client_req){.method = "GET",
					   .path = path,
					   .accept = "application/octet-stream",
					   .on_data = get_on_data,
					   .arg = &sink,
					   .timeout_s = 0},
		      &resp, &e) < 0) {
		rc = cli_report(ctx, e, &resp, NULL);
		goto out;
	}
	if (to_stdout) {
		rc = CLI_EXIT_OK;
		goto out;
	}
	if (fclose(sink.f) != 0) {
		sink.f = NULL;
		fprintf(stderr, "%s: writing %s: %s\n", CLI_PROG, local, strerror(errno));
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	sink.f = NULL;
	if (rename(tmp, local) < 0) {
		fprintf(stderr, "%s: %s: %s\n", CLI_PROG, local, strerror(errno));
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	free(tmp);
	tmp = NULL;
	if (!ctx->json)
		printf("%s %llu\n", local, sink.bytes);
	rc = CLI_EXIT_OK;
out:
	if (sink.f != NULL && sink.f != stdout)
		fclose(sink.f);
	if (tmp != NULL) {
		unlink(tmp);
		free(tmp);
	}
	client_resp_release(&resp);
	err_free(e);
	free(path);
	return rc;
}

/* get -r: a remote path must be relative with plain components, so a
 * hostile listing cannot write outside LOCAL. */
static int get_safe_rel(const char *rel)
{
	const char *p = rel;

	if (rel[0] == '\0' || rel[0] == '/')
		return 0;
	while (*p != '\0') {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		p += n;
		if (*p == '/')
			p++;
	}
	return 1;
}

static int get_mkdir(const char *dir)
{
	if (mkdir(dir, 0777) == 0 || errno == EEXIST)
		return 0;
	fprintf(stderr, "%s: cannot create %s: %s\n", CLI_PROG, dir, strerror(errno));
	return -1;
}

/* get -r ID DIR LOCAL: the listing's entries under DIR become a local tree
 * under LOCAL (directories made, files downloaded one by one; symlinks are
 * skipped with a note: their targets are the sandbox's). */
static int get_tree(struct cli_ctx *ctx, struct client *client, const char *id, const char *remote,
		    const char *local)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL, list;
	char *path, *dir = xstrdup(remote);
	size_t n = strlen(dir), i, got = 0;
	int rc, failed = 0;

	while (n > 0 && dir[n - 1] == '/')
		dir[--n] = '\0';
	path = cli_session_path(id, "/files");
	rc = cli_call(ctx, &(struct client_req){.method = "GET", .path = path, .timeout_s = 60},
		      &resp, NULL);
	free(path);
	if (rc != CLI_EXIT_OK)
		goto out;
	rc = CLI_EXIT_API;
	doc = json_parse(resp.body, strlen(resp.body), NULL);
	if ((list = json_path_arr(doc, "files")) == NULL) {
		output_note("%s: the server's answer has no files list\n", CLI_PROG);
		goto out;
	}
	if (json_path(doc, "truncated") != NULL && YAJL_IS_TRUE(json_path(doc, "truncated")))
		output_note("%s: get -r: the server's listing was cut short; some files may be "
			    "missing\n",
			    CLI_PROG);
	rc = CLI_EXIT_FAIL;
	if (get_mkdir(local) < 0)
		goto out;
	/* The listing is depth-first from the top: parents come before
	 * their contents, so each directory exists when it is needed. */
	for (i = 0; i < json_arr_len(list); i++) {
		yajl_val f = json_arr_at(list, i);
		const char *p = json_path_str(f, "path"), *type = json_path_str(f, "type");
		const char *rel;
		char *to;

		if (p == NULL || type == NULL || strncmp(p, dir, n) != 0 || p[n] != '/')
			continue;
		got++;
		rel = p + n + 1;
		if (!get_safe_rel(rel) || !cli_utf8(rel)) {
			char *clean = output_clean(p);

			output_note("%s: get -r: skipping unsafe path %s\n", CLI_PROG, clean);
			free(clean);
			failed = CLI_EXIT_FAIL;
			continue;
		}
		to = xasprintf("%s/%s", local, rel);
		if (strcmp(type, "dir") == 0) {
			if (get_mkdir(to) < 0)
				failed = CLI_EXIT_FAIL;
		} else if (strcmp(type, "file") == 0) {
			int r = get_file(ctx, client, id, p, to, 0);

			if (r != CLI_EXIT_OK)
				failed = r;
		} else {
			char *clean = output_clean(p);

			output_note("%s: get -r: skipping %s (a %s)\n", CLI_PROG, clean, type);
			free(clean);
		}
		free(to);
	}
	if (got == 0) {
		char *clean = output_clean(dir);

		output_note("%s: get -r: no directory %s with contents in /workspace\n", CLI_PROG,
			    clean);
		free(clean);
		rmdir(local);
		rc = CLI_EXIT_API;
		goto out;
	}
	rc = failed;
out:
	json_free(doc);
	client_resp_release(&resp);
	free(dir);
	return rc;
}

static const struct option get_options[] = {
    {"recursive", no_argument, NULL, 'r'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int get_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *id, *remote, *local;
	struct client *client;
	char *local_buf = NULL;
	struct stat sb;
	int rc, c, to_stdout, recursive = 0;

	while ((c = cli_getopt(ctx, argc, argv, ":hr", get_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == 'r')
			recursive = 1;
	}
	if ((rc = cli_want_args(ctx, argc - optind, 2, 3)) != 0 ||
	    (rc = cli_session_id(ctx, &argv[optind])) != 0)
		return rc;
	id = argv[optind];
	remote = argv[optind + 1];
	local = argc - optind == 3 ? argv[optind + 2] : util_basename(remote);
	if (remote[0] == '\0')
		return cli_usage_error(ctx, "empty REMOTE path");
	if (local[0] == '\0')
		return cli_usage_error(ctx, "cannot name a local file after '%s'; give LOCAL",
				       remote);
	to_stdout = strcmp(local, "-") == 0;
	if (recursive && to_stdout)
		return cli_usage_error(ctx, "-r writes a directory tree, not to stdout");
	/* Like cp: into an existing directory, under the remote's name. */
	if (!to_stdout && stat(local, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		size_t n = strlen(local);

		if (util_basename(remote)[0] == '\0')
			return cli_usage_error(ctx, "cannot name a file in %s after '%s'", local,
					       remote);
		while (n > 1 && local[n - 1] == '/')
			n--;
		local = local_buf = xasprintf("%.*s/%s", (int)n, local, util_basename(remote));
	}
	client = cli_client(ctx);
	if (client == NULL)
		rc = CLI_EXIT_USAGE;
	else if (recursive)
		rc = get_tree(ctx, client, id, remote, local);
	else
		rc = get_file(ctx, client, id, remote, local, to_stdout);
	free(local_buf);
	return rc;
}

const struct cli_cmd cmd_get = {
    .name = "get",
    .usage = "[-r] ID REMOTE [LOCAL|-]",
    .summary = "Download a file (with -r, a directory) from the session's /workspace.",
    .help = "LOCAL defaults to REMOTE's base name (inside LOCAL when that is a directory);\n"
	    "'-' writes the bytes to stdout.  A file is written under a temporary name and\n"
	    "renamed once complete, so a failed download leaves nothing behind; then\n"
	    "'LOCAL SIZE' is printed.\n"
	    "  -r, --recursive   REMOTE is a directory: its files are downloaded into a\n"
	    "                    local tree LOCAL (made; existing files are replaced), one\n"
	    "                    'LOCAL/PATH SIZE' line each; symlinks are skipped with a note\n",
    .run = get_run,
};

/* ---- files ----------------------------------------------------------- */

/* files ID PATH: PATH relative to /workspace, without "./" or trailing
 * slashes ("out/" is "out"); *sub is the caller's.  "." or "" is all. */
static int files_sub_check(struct cli_ctx *ctx, const char *arg, const char **sub)
{
	char *s;
	size_t n;

	while (arg[0] == '.' && arg[1] == '/')
		arg += 2;
	if (arg[0] == '/')
		return cli_usage_error(ctx, "PATH is relative to /workspace");
	s = xstrdup(arg);
	n = strlen(s);
	while (n > 0 && s[n - 1] == '/')
		s[--n] = '\0';
	if (n == 0 || strcmp(s, ".") == 0) {
		free(s);
		return 0;
	}
	*sub = s;
	return 0;
}

/* Whether path is sub itself or under it (sub NULL: everything). */
static int files_under(const char *path, const char *sub)
{
	size_t n;

	if (sub == NULL)
		return 1;
	if (path == NULL)
		return 0;
	n = strlen(sub);
	return strncmp(path, sub, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static const struct option files_options[] = {
    {"output", required_argument, NULL, 'o'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int files_run(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = {"PATH", "SIZE", "MTIME", "TYPE"};
	const char *sub = NULL;
	size_t shown = 0;
	int c, names;
	struct client_resp resp = {0};
	struct table *t = NULL;
	yajl_val doc = NULL, list;
	char *path = NULL;
	size_t i;
	int rc;

	while ((c = cli_getopt(ctx, argc, argv, ":ho:", files_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == 'o' && (rc = cli_output_format(ctx, optarg)) != 0)
			return rc;
	}
	if ((rc = cli_want_args(ctx, argc - optind, 1, 2)) != 0 ||
	    (rc = cli_session_id(ctx, &argv[optind])) != 0)
		return rc;
	names = ctx->output != NULL && strcmp(ctx->output, "name") == 0;
	if (argc - optind == 2 && (rc = files_sub_check(ctx, argv[optind + 1], &sub)) != 0)
		return rc;
	path = cli_session_path(argv[optind], "/files");
	rc = cli_call(ctx, &(struct client_req){.method = "GET", .path = path, .timeout_s = 60},
		      &resp, NULL);
	if (rc != CLI_EXIT_OK)
		goto out;
	if (ctx->json) {
		output_json_doc(resp.body, resp.len);
		goto out;
	}
	rc = CLI_EXIT_API;
	doc = json_parse(resp.body, strlen(resp.body), NULL);
	list = json_path_arr(doc, "files");
	if (list == NULL) {
		output_note("%s: the server's answer has no files list\n", CLI_PROG);
		goto out;
	}
	t = names ? table_new(1, NULL) : table_new(4, headers);
	for (i = 0; i < json_arr_len(list); i++) {
		yajl_val f = json_arr_at(list, i);
		yajl_val mtime = json_path(f, "mtime");
		char *size;
		char when[64];
		double secs;

		if (!files_under(json_path_str(f, "path"), sub))
			continue;
		shown++;
		if (names) {
			table_add(t, (const char *const[]){json_path_str(f, "path")});
			continue;
		}
		size = output_json_text(json_path(f, "size"));
		/* mtime as RFC 3339 like every other time, or epoch seconds. */
		if (YAJL_IS_STRING(mtime))
			output_when(mtime->u.string, when, sizeof(when));
		else if (json_path_num(f, "mtime", &secs))
			output_age((time_t)secs, time(NULL), when, sizeof(when));
		else
			snprintf(when, sizeof(when), "-");
		table_add(t, (const char *const[]){json_path_str(f, "path"), size[0] ? size : NULL,
						   when, json_path_str(f, "type")});
		free(size);
	}
	if (sub != NULL && shown == 0) {
		output_note("%s: files: nothing at %s in /workspace\n", CLI_PROG, sub);
		rc = CLI_EXIT_API;
		goto out;
	}
	table_sort(t, 0);
	table_print(t, stdout);
	rc = CLI_EXIT_OK;
out:
	table_free(t);
	json_free(doc);
	client_resp_release(&resp);
	free(path);
	free((char *)sub);
	return rc;
}

const struct cli_cmd cmd_files = {
    .name = "files",
    .usage = "[-o json|wide|name] ID [PATH]",
    .summary = "List the files under the session's /workspace.",
    .help = "Columns: PATH (relative to /workspace), SIZE in bytes, MTIME (relative to now)\n"
	    "and TYPE, sorted by PATH. With PATH, only that entry and what is under it\n"
	    "(a directory's contents); nothing there is an error (exit 5). --json prints\n"
	    "the server's whole list.\n"
	    "  -o, --output FORMAT  json: as --json; name: the paths alone, one a line;\n"
	    "                       wide: the table\n",
    .run = files_run,
};

/* ---- rmfile ---------------------------------------------------------- */

enum { RMFILE_RECURSIVE = 'r' };

static const struct option rmfile_options[] = {
    {"recursive", no_argument, NULL, RMFILE_RECURSIVE},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int rmfile_run(struct cli_ctx *ctx, int argc, char **argv)
{
	int recursive = 0, c, rc, i, failed = 0;

	while ((c = cli_getopt(ctx, argc, argv, ":hr", rmfile_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == RMFILE_RECURSIVE)
			recursive = 1;
	}
	if ((rc = cli_want_args(ctx, argc - optind, 2, -1)) != 0)
		return rc;
	for (i = optind + 1; i < argc; i++)
		if (argv[i][0] == '\0')
			return cli_usage_error(ctx, "empty REMOTE path");
	if ((rc = cli_session_id(ctx, &argv[optind])) != 0)
		return rc;
	for (i = optind + 1; i < argc; i++) {
		struct client_resp resp;
		char *base = files_path(argv[optind], argv[i]);
		/* Without recursive=1 the server refuses a directory (409
		 * is_a_directory): one mistyped name must not empty a tree. */
		char *path = recursive ? xasprintf("%s?recursive=1", base) : xstrdup(base);
		char *what = argc - optind > 2 ? xasprintf("rmfile %s", argv[i]) : NULL;

		rc = cli_call(
		    ctx, &(struct client_req){.method = "DELETE", .path = path, .timeout_s = 60},
		    &resp, what);
		if (rc != CLI_EXIT_OK && resp.status == 409 && !recursive)
			output_note("%s: %s is a directory: use rmfile -r to delete it with its "
				    "contents\n",
				    CLI_PROG, argv[i]);
		client_resp_release(&resp);
		free(what);
		free(path);
		free(base);
		if (rc == CLI_EXIT_OK && !ctx->json)
			printf("%s\n", argv[i]);
		if (rc != CLI_EXIT_OK)
			failed = rc;
		if (rc == CLI_EXIT_USAGE)
			break; /* bad --server: every other try fails the same way */
	}
	return failed;
}

const struct cli_cmd cmd_rmfile = {
    .name = "rmfile",
    .usage = "[-r] ID REMOTE...",
    .summary = "Delete files (with -r, directories) from the session's /workspace.",
    .help = "Prints each REMOTE once deleted. Exits non-zero if any failed; the others are\n"
	    "still attempted.\n"
	    "  -r, --recursive   also delete directories, with everything in them; without\n"
	    "                    it a directory is refused (409 is_a_directory) and kept\n",
    .run = rmfile_run,
};
