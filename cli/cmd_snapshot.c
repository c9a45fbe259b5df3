/*
 * cmd_snapshot.c: durable workspaces (docs/api.md, snapshots):
 *   snapshot ID [--paths GLOB]... [--no-variables] [--workspace NAME]
 *                                     POST /v1/sessions/ID/snapshots
 *   snapshots [ls [--workspace NAME] | show SNAP_ID | rm SNAP_ID]
 *                                     GET /v1/snapshots[/SNAP_ID], DELETE
 *   workspaces                        GET /v1/workspaces
 *   restore SNAP_ID|--workspace NAME [create's options]
 *                                     POST /v1/sessions with restore/workspace
 *                                     (cmd_session.c's create does the request;
 *                                     cli_restore_print here says what came back)
 */
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

/* The server's caps on globs (SNAPSHOT_SPEC.md): refused here first, so a
 * typo costs no round trip; the server checks them again. */
#define SNAP_MAX_GLOBS 64
#define SNAP_MAX_GLOB_LEN 256

/* A snapshot (or a capture) can take as long as its bytes take to reach the
 * store's spool; leave room for a large workspace on a loaded host. */
#define SNAP_TIMEOUT_S 1800

/* "12.3 MiB": sizes for people; the exact byte count is in --json and show. */
static char *snap_size(yajl_val rec, const char *key, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v;
	size_t u = 0;

	if (!json_path_num(rec, key, &v)) {
		snprintf(buf, len, "-");
		return buf;
	}
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f B", v);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

/* A number from a record as text ("-" when absent). */
static char *snap_num(yajl_val rec, const char *key, char *buf, size_t len)
{
	double v;

	if (json_path_num(rec, key, &v))
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* "a, b, c" of an array of strings, or of the "name"/"path" member of an
 * array of objects, with " (reason)" when the objects carry one; "none"
 * when empty. Caller frees. */
static char *snap_list(yajl_val arr)
{
	struct buf b;
	size_t i;

	buf_init(&b, CLIENT_BODY_MAX);
	for (i = 0; i < json_arr_len(arr); i++) {
		yajl_val v = json_arr_at(arr, i);
		const char *name = NULL, *reason = NULL;
		char *text = NULL;

		if (YAJL_IS_OBJECT(v)) {
			name = json_path_str(v, "name");
			if (name == NULL)
				name = json_path_str(v, "path");
			reason = json_path_str(v, "reason");
		}
		if (name == NULL)
			text = output_json_text(v);
		if (i > 0)
			buf_append(&b, ", ", 2);
		buf_append(&b, name ? name : text, strlen(name ? name : text));
		if (reason != NULL) {
			buf_append(&b, " (", 2);
			buf_append(&b, reason, strlen(reason));
			buf_append(&b, ")", 1);
		}
		free(text);
	}
	char *out = buf_steal(&b, NULL);
	if (out[0] == '\0') {
		free(out);
		out = xstrdup("none");
	}
	return out;
}

static void snap_row(struct table *t, const char *key, const char *val)
{
	table_add(t, (const char *const[]){key, val});
}

/* "key: value" lines for a snapshot record: the known fields in a useful
 * order, then whatever else a newer daemon sends. */
static void snap_describe(struct table *t, yajl_val rec)
{
	static const char *const order[] = {
	    "id",    "workspace",     "state",  "error", "session",   "created_at", "size",
	    "files", "content_bytes", "sha256", "paths", "variables", "skipped"};
	char num[64], when[64];
	size_t i, j;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const char *k = order[i];
		yajl_val v = json_path(rec, k);
		char key[64], *text;

		if (v == NULL)
			continue;
		snprintf(key, sizeof(key), "%s:", k);
		if (strcmp(k, "size") == 0 || strcmp(k, "content_bytes") == 0) {
			char sz[64];

			text = xasprintf("%s (%s)", snap_num(rec, k, num, sizeof(num)),
					 snap_size(rec, k, sz, sizeof(sz)));
		} else if (strcmp(k, "created_at") == 0 && YAJL_IS_STRING(v)) {
			text = xasprintf("%s (%s)", v->u.string,
					 output_when(v->u.string, when, sizeof(when)));
		} else if (strcmp(k, "paths") == 0 && YAJL_IS_ARRAY(v)) {
			text = snap_list(v);
		} else if (strcmp(k, "paths") == 0 && YAJL_IS_NULL(v)) {
			text = xstrdup("all");
		} else if (strcmp(k, "skipped") == 0 && YAJL_IS_ARRAY(v)) {
			text = snap_list(v);
		} else if (strcmp(k, "variables") == 0 && YAJL_IS_OBJECT(v)) {
			/* variables.saved / modules / skipped on their own lines */
			for (j = 0; j < v->u.object.len; j++) {
				yajl_val m = v->u.object.values[j];
				char sub[96];

				snprintf(sub, sizeof(sub), "variables.%s:", v->u.object.keys[j]);
				text = YAJL_IS_ARRAY(m) ? snap_list(m) : output_json_text(m);
				snap_row(t, sub, text);
				free(text);
			}
			continue;
		} else if (strcmp(k, "variables") == 0 && YAJL_IS_NULL(v)) {
			text = xstrdup("not saved");
		} else {
			text = output_json_text(v);
		}
		snap_row(t, key, text);
		free(text);
	}
	for (i = 0; YAJL_IS_OBJECT(rec) && i < rec->u.object.len; i++) {
		const char *k = rec->u.object.keys[i];
		int known = 0;
		char key[128], *text;

		for (j = 0; j < sizeof(order) / sizeof(order[0]); j++)
			known |= strcmp(k, order[j]) == 0;
		if (known)
			continue;
		text = output_json_text(rec->u.object.values[i]);
		snprintf(key, sizeof(key), "%s:", k);
		snap_row(t, key, text);
		free(text);
	}
}

static void snap_print(yajl_val rec, FILE *out)
{
	struct table *t = table_new(2, NULL);

	snap_describe(t, rec);
	table_print(t, out);
	table_free(t);
}

/* A snapshot id as the routes take it: a UUID; anything else would be a
 * 400 from the server, and an empty one would name the collection. */
static int snap_check_id(struct cli_ctx *ctx, const char *id)
{
	size_t i, n = strlen(id);

	if (n != 36)
		goto bad;
	for (i = 0; i < n; i++) {
		char c = id[i];

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				goto bad;
		} else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
			     (c >= 'A' && c <= 'F'))) {
			goto bad;
		}
	}
	return 0;
bad:
	return cli_usage_error(ctx, "'%s' is not a snapshot id (a UUID)", id);
}

/* Workspace names: [A-Za-z0-9._-]{1,64}, not starting with '.'. */
int cli_workspace_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > 64 || name[0] == '.')
		return 0;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* Checks one --paths glob the way the server will. */
int cli_glob_check(struct cli_ctx *ctx, const char *flag, const char *glob)
{
	if (glob[0] == '\0')
		return cli_usage_error(ctx, "%s: empty glob", flag);
	if (strlen(glob) > SNAP_MAX_GLOB_LEN)
		return cli_usage_error(ctx, "%s: a glob is at most %d bytes", flag,
				       SNAP_MAX_GLOB_LEN);
	if (!cli_utf8(glob))
		return cli_usage_error(ctx, "%s: %s", flag, CLI_NOT_UTF8);
	return 0;
}

/* ---- snapshot -------------------------------------------------------- */

enum {
	SNAPSHOT_PATHS = CLI_OPT_FIRST_COMMAND,
	SNAPSHOT_NO_VARIABLES,
	SNAPSHOT_WORKSPACE,
};

static const struct option snapshot_options[] = {
    {"paths", required_argument, NULL, SNAPSHOT_PATHS},
    {"no-variables", no_argument, NULL, SNAPSHOT_NO_VARIABLES},
    {"workspace", required_argument, NULL, SNAPSHOT_WORKSPACE},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int snapshot_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char **paths = NULL;
	size_t npaths = 0, i;
	const char *workspace = NULL;
	int novars = 0, c, rc = CLI_EXIT_USAGE;
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	char *path = NULL;
	AUTOGEN yajl_gen g = NULL; /* before any goto out: the cleanup runs there */

	while ((c = cli_getopt(ctx, argc, argv, ":h", snapshot_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: rc = ctx->rc; goto out;
		case SNAPSHOT_PATHS:
			if ((rc = cli_glob_check(ctx, "--paths", optarg)) != 0)
				goto out;
			if (npaths == SNAP_MAX_GLOBS) {
				rc = cli_usage_error(ctx, "--paths: at most %d globs",
						     SNAP_MAX_GLOBS);
				goto out;
			}
			paths = xrealloc(paths, (npaths + 1) * sizeof(char *));
			paths[npaths++] = optarg;
			break;
		case SNAPSHOT_NO_VARIABLES: novars = 1; break;
		case SNAPSHOT_WORKSPACE:
			if (!cli_workspace_name_ok(optarg)) {
				rc = cli_usage_error(ctx,
						     "--workspace: want [A-Za-z0-9._-]{1,64}, not "
						     "starting with '.'");
				goto out;
			}
			workspace = optarg;
			break;
		default: break;
		}
	}
	if ((rc = cli_want_args(ctx, argc - optind, 1, 1)) != 0)
		goto out;
	if ((rc = cli_session_id(ctx, &argv[optind])) != 0)
		goto out;

	g = json_gen_new();
	jg_obj(g);
	if (npaths > 0) {
		jg_str(g, "paths");
		jg_arr(g);
		for (i = 0; i < npaths; i++)
			jg_str(g, paths[i]);
		jg_arr_end(g);
	}
	if (novars)
		jg_kv_bool(g, "variables", false);
	if (workspace != NULL)
		jg_kv_str(g, "workspace", workspace);
	jg_obj_end(g);
	size_t body_len;
	const char *body = jg_text(g, &body_len);
	path = cli_session_path(argv[optind], "/snapshots");
	rc = cli_call_doc(ctx,
			  &(struct client_req){.method = "POST",
					       .path = path,
					       .content_type = "application/json",
					       .body = body,
					       .body_len = body_len,
					       .timeout_s = SNAP_TIMEOUT_S},
			  &resp, &doc);
	if (rc != CLI_EXIT_OK || doc == NULL)
		goto out;
	const char *id = json_path_str(doc, "id");
	if (id == NULL) {
		output_note("%s: the server's answer has no snapshot id\n", CLI_PROG);
		rc = CLI_EXIT_API;
		goto out;
	}
	/* The id alone on stdout, for SNAP=$(ci-ctl snapshot ID). */
	printf("%s\n", id);
	{
		const char *state = json_path_str(doc, "state");
		const char *ws = json_path_str(doc, "workspace");
		const char *why = json_path_str(doc, "error");
		char files[32], size[32];
		yajl_val vars = json_path_obj(doc, "variables");
		yajl_val skipped = json_path_arr(doc, "skipped");

		output_note("%s: %s files, %s, workspace %s\n", state ? state : "stored",
			    snap_num(doc, "files", files, sizeof(files)),
			    snap_size(doc, "size", size, sizeof(size)), ws ? ws : "-");
		if (resp.status == 202 || (state != NULL && strcmp(state, "pending") == 0))
			output_note("the store did not take it yet (%s); it is retried in the "
				    "background: `%s snapshots show %s` says when it is stored\n",
				    why ? why : "unavailable", CLI_PROG, id);
		if (vars != NULL) {
			char *saved = snap_list(json_path_arr(vars, "saved"));
			char *vskipped = snap_list(json_path_arr(vars, "skipped"));

			output_note("variables saved: %s; not saved: %s\n", saved, vskipped);
			free(saved);
			free(vskipped);
		}
		if (json_arr_len(skipped) > 0) {
			char *s = snap_list(skipped);

			output_note("files skipped: %s\n", s);
			free(s);
		}
	}
	rc = CLI_EXIT_OK;
out:
	json_free(doc);
	client_resp_release(&resp);
	free(path);
	free(paths);
	return rc;
}

const struct cli_cmd cmd_snapshot = {
    .name = "snapshot",
    .usage = "[--paths GLOB]... [--no-variables] [--workspace NAME] ID",
    .summary = "Snapshot a session's workspace to the store; print the snapshot id.",
    .help = "Saves the session's /workspace files (all, or those matching --paths), the\n"
	    "packages installed into it (always) and, unless --no-variables, its picklable\n"
	    "variables, as one snapshot in the daemon's store (--store).\n"
	    "Options:\n"
	    "  --paths GLOB       save only files matching GLOB (repeatable, at most 64):\n"
	    "                     '*' and '?' stay within a directory, '**' crosses them\n"
	    "                     ('out/**'); a glob without '/' matches the base name at\n"
	    "                     any depth ('*.csv' matches a/b.csv)\n"
	    "  --no-variables     do not save the kernel's variables\n"
	    "  --workspace NAME   the workspace name to file it under (default: the\n"
	    "                     session's workspace, else its id)\n"
	    "\n"
	    "Prints the snapshot id alone on stdout (SNAP=$(ci-ctl snapshot ID)); the\n"
	    "state, size, the variables saved and the names that could not be saved go\n"
	    "to stderr. A store that is down answers 'pending': the upload is retried in\n"
	    "the background (exit 0). Over the size or file caps: 'payload_too_large'\n"
	    "(HTTP 413), exit 5.\n",
    .run = snapshot_run,
};

/* ---- snapshots ------------------------------------------------------- */

enum { SNAPSHOTS_WORKSPACE = CLI_OPT_FIRST_COMMAND };

static const struct option snapshots_options[] = {
    {"workspace", required_argument, NULL, SNAPSHOTS_WORKSPACE},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int snapshots_ls(struct cli_ctx *ctx, const char *workspace)
{
	static const char *const headers[] = {"ID",    "WORKSPACE", "STATE",
					      "FILES", "SIZE",      "CREATED"};
	yajl_val doc = NULL, list;
	struct table *t = NULL;
	int rc;

	rc = cli_get_list(ctx, "/v1/snapshots", "workspace", workspace, "snapshots", &doc, &list);
	if (rc != CLI_EXIT_OK || doc == NULL)
		return rc;
	t = table_new(6, headers);
	for (size_t i = 0; i < json_arr_len(list); i++) {
		yajl_val s = json_arr_at(list, i);
		char files[32], size[32], when[64];

		table_add(t,
			  (const char *const[]){
			      json_path_str(s, "id"), json_path_str(s, "workspace"),
			      json_path_str(s, "state"), snap_num(s, "files", files, sizeof(files)),
			      snap_size(s, "size", size, sizeof(size)),
			      output_when(json_path_str(s, "created_at"), when, sizeof(when))});
	}
	table_print(t, stdout);
	table_free(t);
	json_free(doc);
	return rc;
}

static int snapshots_show(struct cli_ctx *ctx, const char *id)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	char *esc, *path;
	int rc;

	if ((rc = snap_check_id(ctx, id)) != 0)
		return rc;
	esc = codec_url_escape(id, 0);
	path = xasprintf("/v1/snapshots/%s", esc);
	rc = cli_call_doc(ctx, &(struct client_req){.method = "GET", .path = path, .timeout_s = 60},
			  &resp, &doc);
	if (rc == CLI_EXIT_OK && doc != NULL)
		snap_print(doc, stdout);
	json_free(doc);
	client_resp_release(&resp);
	free(path);
	free(esc);
	return rc;
}

static int snapshots_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *workspace = NULL, *sub;
	int c, n, rc;

	while ((c = cli_getopt(ctx, argc, argv, ":h", snapshots_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: return ctx->rc;
		case SNAPSHOTS_WORKSPACE:
			if (!cli_workspace_name_ok(optarg))
				return cli_usage_error(ctx,
						       "--workspace: want [A-Za-z0-9._-]{1,64}, "
						       "not starting with '.'");
			workspace = optarg;
			break;
		default: break;
		}
	}
	n = argc - optind;
	sub = n > 0 ? argv[optind] : "ls";
	if (strcmp(sub, "ls") == 0) {
		if (n > 1)
			return cli_usage_error(ctx, "ls takes no arguments");
		return snapshots_ls(ctx, workspace);
	}
	if (workspace != NULL)
		return cli_usage_error(ctx, "--workspace is for ls");
	if (strcmp(sub, "show") == 0 || strcmp(sub, "rm") == 0) {
		if (n != 2)
			return cli_usage_error(ctx, "%s takes one snapshot id", sub);
		if (sub[0] == 's')
			return snapshots_show(ctx, argv[optind + 1]);
		if ((rc = snap_check_id(ctx, argv[optind + 1])) != 0)
			return rc;
		return cli_delete(ctx, "/v1/snapshots", argv[optind + 1], "snapshot id", "removed");
	}
	return cli_usage_error(ctx, "unknown subcommand '%s' (ls, show or rm)", sub);
}

const struct cli_cmd cmd_snapshots = {
    .name = "snapshots",
    .usage = "[ls [--workspace NAME] | show SNAP_ID | rm SNAP_ID]",
    .summary = "List, show and delete your snapshots.",
    .help = "  ls [--workspace NAME]\n"
	    "         your snapshots, newest first (the default subcommand): ID, WORKSPACE,\n"
	    "         STATE (stored, or pending while the store is retried), FILES, SIZE,\n"
	    "         CREATED; --workspace: only that workspace's\n"
	    "  show SNAP_ID\n"
	    "         one snapshot: 'key: value' lines (sizes, sha256 of the tar, the globs,\n"
	    "         the variables saved and skipped, files skipped)\n"
	    "  rm SNAP_ID\n"
	    "         delete it from the store; prints 'removed SNAP_ID'\n"
	    "\n"
	    "Another tenant's snapshot is 'not_found' (HTTP 404), exit 5.\n",
    .run = snapshots_run,
};

/* ---- workspaces ------------------------------------------------------ */

static int workspaces_run(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = {"NAME", "SNAPSHOTS", "SIZE", "LATEST", "UPDATED"};
	struct client_resp resp = {0};
	yajl_val doc = NULL, list;
	struct table *t = NULL;
	int rc;

	if (cli_operands(ctx, argc, argv, 0, 0, 0) < 0)
		return ctx->rc;
	rc = cli_call_doc(
	    ctx, &(struct client_req){.method = "GET", .path = "/v1/workspaces", .timeout_s = 60},
	    &resp, &doc);
	if (rc != CLI_EXIT_OK || doc == NULL)
		goto out;
	list = json_path_arr(doc, "workspaces");
	if (list == NULL) {
		output_note("%s: the server's answer has no workspaces list\n", CLI_PROG);
		rc = CLI_EXIT_API;
		goto out;
	}
	t = table_new(5, headers);
	for (size_t i = 0; i < json_arr_len(list); i++) {
		yajl_val w = json_arr_at(list, i);
		yajl_val latest = json_path_obj(w, "latest");
		char n[32], size[32], when[64];

		table_add(
		    t, (const char *const[]){
			   json_path_str(w, "name"), snap_num(w, "snapshots", n, sizeof(n)),
			   snap_size(w, "bytes", size, sizeof(size)), json_path_str(latest, "id"),
			   output_when(json_path_str(latest, "created_at"), when, sizeof(when))});
	}
	table_print(t, stdout);
out:
	table_free(t);
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

const struct cli_cmd cmd_workspaces = {
    .name = "workspaces",
    .usage = "",
    .summary = "List your named workspaces and their latest snapshots.",
    .help = "Columns: NAME, SNAPSHOTS (how many are kept), SIZE (all of them), LATEST (the\n"
	    "snapshot `ci-ctl restore --workspace NAME` would restore) and UPDATED.\n",
    .run = workspaces_run,
};

/* ---- restore --------------------------------------------------------- */

void cli_restore_print(yajl_val doc)
{
	yajl_val r = json_path_obj(doc, "restored");
	const char *ws = json_path_str(doc, "workspace");

	if (r == NULL) {
		/* a workspace name with no snapshot yet starts empty */
		output_note("workspace %s: no snapshot yet, the session starts empty\n",
			    ws ? ws : "-");
		return;
	}
	const char *snap = json_path_str(r, "snapshot");
	const char *rws = json_path_str(r, "workspace");
	char files[32], size[32], ms[32];

	output_note("restored snapshot %s (workspace %s): %s files, %s in %s ms\n",
		    snap ? snap : "-", rws ? rws : (ws ? ws : "-"),
		    snap_num(r, "files", files, sizeof(files)),
		    snap_size(r, "size", size, sizeof(size)), snap_num(r, "ms", ms, sizeof(ms)));
	yajl_val vars = json_path_obj(r, "variables");
	if (vars != NULL) {
		char *loaded = snap_list(json_path_arr(vars, "loaded"));
		char *skipped = snap_list(json_path_arr(vars, "skipped"));

		output_note("variables loaded: %s; not loaded: %s\n", loaded, skipped);
		free(loaded);
		free(skipped);
	}
}

static int restore_run(struct cli_ctx *ctx, int argc, char **argv)
{
	return cli_session_create(ctx, argc, argv, 1);
}

const struct cli_cmd cmd_restore = {
    .name = "restore",
    .usage = "SNAP_ID|--workspace NAME [create's options]",
    .summary = "Create a session from a snapshot; print the new session's id.",
    .help = "Creates a session (POST /v1/sessions with \"restore\" or \"workspace\") and\n"
	    "restores into it, before its first execution, the snapshot's files, its\n"
	    "installed packages (not reinstalled) and its saved variables.\n"
	    "  SNAP_ID            the snapshot to restore\n"
	    "  --workspace NAME   the latest snapshot of workspace NAME instead; a name\n"
	    "                     with no snapshot yet starts empty under that name\n"
	    "Every option of `ci-ctl create` applies too (--image, --memory, --disk,\n"
	    "--persist-on-end, ...; see `ci-ctl create -h`).\n"
	    "\n"
	    "Prints the new session id alone on stdout (ID=$(ci-ctl restore SNAP)); what\n"
	    "was restored (files, size, time, variables loaded and not) goes to stderr.\n"
	    "A snapshot whose files do not match its manifest is 'corrupt' (HTTP 422):\n"
	    "nothing is applied and no session is left. 'not_found' (404): no such\n"
	    "snapshot; 'unavailable' (503): the store cannot be reached; exit 5.\n",
    .run = restore_run,
};
