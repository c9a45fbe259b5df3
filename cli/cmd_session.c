/*
 * cmd_session.c: session commands: create, ls, show, rm, keepalive.
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

/* A K=V list from repeated options; a later K replaces an earlier one, so
 * the body never carries duplicate keys (which JSON leaves undefined). */
struct session_kv {
	const char **keys; /* allocated copies of the K parts */
	const char **vals; /* point into argv */
	size_t n;
};

static int session_kv_add(struct session_kv *kv, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char *key;
	size_t i;

	if (eq == NULL || eq == arg)
		return -1;
	key = xstrndup(arg, (size_t)(eq - arg));
	for (i = 0; i < kv->n; i++) {
		if (strcmp(kv->keys[i], key) == 0) {
			free(key);
			kv->vals[i] = eq + 1;
			return 0;
		}
	}
	kv->keys = xrealloc(kv->keys, (kv->n + 1) * sizeof(char *));
	kv->vals = xrealloc(kv->vals, (kv->n + 1) * sizeof(char *));
	kv->keys[kv->n] = key;
	kv->vals[kv->n] = eq + 1;
	kv->n++;
	return 0;
}

static void session_kv_release(struct session_kv *kv)
{
	size_t i;

	for (i = 0; i < kv->n; i++)
		free((char *)kv->keys[i]);
	free(kv->keys);
	free(kv->vals);
	memset(kv, 0, sizeof(*kv));
}

/* Whether every key and value is valid UTF-8 (create_run checks first). */
static int session_kv_utf8(const struct session_kv *kv)
{
	size_t i;

	for (i = 0; i < kv->n; i++)
		if (!cli_utf8(kv->keys[i]) || !cli_utf8(kv->vals[i]))
			return 0;
	return 1;
}

static void session_kv_gen(yajl_gen g, const char *name, const struct session_kv *kv)
{
	size_t i;

	if (kv->n == 0)
		return;
	jg_str(g, name);
	jg_obj(g);
	for (i = 0; i < kv->n; i++)
		jg_kv_str(g, kv->keys[i], kv->vals[i]);
	jg_obj_end(g);
}

/* Adds "key: value" lines for a session to t: the known fields in a
 * useful order, then whatever else a newer daemon sends. */
static void session_describe(struct table *t, yajl_val s)
{
	static const char *const order[] = {
	    "id",         "tenant",         "state",      "image",          "runtime",
	    "created_at", "last_active_at", "expires_at", "idle_timeout_s", "max_lifetime_s",
	};
	static const char *const nested[] = {"limits", "network", "metadata"};
	char when[64], key[128];
	size_t i, j;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		yajl_val v = json_path(s, order[i]);
		char *text, *val;

		if (v == NULL)
			continue;
		text = output_json_text(v);
		if (YAJL_IS_STRING(v) && strstr(order[i], "_at") != NULL &&
		    strcmp(output_when_exact(text, when, sizeof(when)), text) != 0)
			val = xasprintf("%s (%s)", text, when);
		else
			val = xstrdup(text);
		snprintf(key, sizeof(key), "%s:", order[i]);
		table_add(t, (const char *const[]){key, val});
		free(text);
		free(val);
	}
	for (i = 0; i < sizeof(nested) / sizeof(nested[0]); i++) {
		yajl_val o = json_path(s, nested[i]);

		if (o == NULL)
			continue;
		if (!YAJL_IS_OBJECT(o) || o->u.object.len == 0) {
			char *text = output_json_text(o);

			snprintf(key, sizeof(key), "%s:", nested[i]);
			table_add(t, (const char *const[]){key, YAJL_IS_OBJECT(o) ? "-" : text});
			free(text);
			continue;
		}
		for (j = 0; j < o->u.object.len; j++) {
			yajl_val v = o->u.object.values[j];
			char *text;

			snprintf(key, sizeof(key), "%s.%s:", nested[i], o->u.object.keys[j]);
			if (YAJL_IS_ARRAY(v)) {
				/* network.allow: a plain comma list reads better */
				struct buf b;
				size_t k;

				buf_init(&b, CLIENT_BODY_MAX);
				for (k = 0; k < v->u.array.len; k++) {
					char *item = output_json_text(v->u.array.values[k]);

					if (k > 0)
						buf_append(&b, ", ", 2);
					buf_append(&b, item, strlen(item));
					free(item);
				}
				text = buf_steal(&b, NULL);
				if (text[0] == '\0') {
					free(text);
					text = xstrdup("none");
				}
			} else {
				text = output_json_text(v);
			}
			table_add(t, (const char *const[]){key, text});
			free(text);
		}
	}
	/* Anything this ci-ctl does not know yet is still worth seeing. */
	for (i = 0; YAJL_IS_OBJECT(s) && i < s->u.object.len; i++) {
		const char *k = s->u.object.keys[i];
		int known = 0;
		char *text;

		for (j = 0; j < sizeof(order) / sizeof(order[0]); j++)
			known |= strcmp(k, order[j]) == 0;
		for (j = 0; j < sizeof(nested) / sizeof(nested[0]); j++)
			known |= strcmp(k, nested[j]) == 0;
		if (known)
			continue;
		text = output_json_text(s->u.object.values[i]);
		snprintf(key, sizeof(key), "%s:", k);
		table_add(t, (const char *const[]){key, text});
		free(text);
	}
}

static void session_print(yajl_val s, FILE *out)
{
	struct table *t = table_new(2, NULL);

	session_describe(t, s);
	table_print(t, out);
	table_free(t);
}

/* ---- create ---------------------------------------------------------- */

enum {
	CREATE_IMAGE = CLI_OPT_FIRST_COMMAND,
	CREATE_IDLE,
	CREATE_MEMORY,
	CREATE_CPUS,
	CREATE_PIDS,
	CREATE_DISK,
	CREATE_EXEC_TIMEOUT,
	CREATE_ALLOW,
	CREATE_ENV,
	CREATE_META,
	CREATE_RUNTIME,
	CREATE_WORKSPACE,
	CREATE_PERSIST_ON_END,
	CREATE_PERSIST_PATH,
	CREATE_PERSIST_NO_VARIABLES,
	CREATE_MAX_LIFETIME,
};

static const struct option create_options[] = {
    {"image", required_argument, NULL, CREATE_IMAGE},
    {"idle-timeout", required_argument, NULL, CREATE_IDLE},
    {"max-lifetime", required_argument, NULL, CREATE_MAX_LIFETIME},
    {"memory", required_argument, NULL, CREATE_MEMORY},
    {"cpus", required_argument, NULL, CREATE_CPUS},
    {"pids", required_argument, NULL, CREATE_PIDS},
    {"disk", required_argument, NULL, CREATE_DISK},
    {"exec-timeout", required_argument, NULL, CREATE_EXEC_TIMEOUT},
    {"allow", required_argument, NULL, CREATE_ALLOW},
    {"env", required_argument, NULL, CREATE_ENV},
    {"meta", required_argument, NULL, CREATE_META},
    {"runtime", required_argument, NULL, CREATE_RUNTIME},
    {"workspace", required_argument, NULL, CREATE_WORKSPACE},
    {"persist-on-end", no_argument, NULL, CREATE_PERSIST_ON_END},
    {"persist-path", required_argument, NULL, CREATE_PERSIST_PATH},
    {"persist-no-variables", no_argument, NULL, CREATE_PERSIST_NO_VARIABLES},
    {"verbose", no_argument, NULL, 'v'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* The limit options, in body order; "whole" ones refuse fractions. */
static const struct {
	int opt;
	const char *flag;
	const char *key;
	int whole;
} create_limits[] = {
    {CREATE_MEMORY, "memory", "memory_mb", 1},
    {CREATE_CPUS, "cpus", "cpus", 0},
    {CREATE_PIDS, "pids", "pids", 1},
    {CREATE_DISK, "disk", "disk_mb", 1},
    {CREATE_EXEC_TIMEOUT, "exec-timeout", "exec_timeout_s", 1},
};

#define CREATE_NLIMITS (sizeof(create_limits) / sizeof(create_limits[0]))

/* Parses a limit option into value[i]; returns -1 if c is not one or the
 * value is bad (after saying so). */
static int create_limit_opt(struct cli_ctx *ctx, int c, const char *arg, double *value)
{
	size_t i;
	long n;

	for (i = 0; i < CREATE_NLIMITS; i++)
		if (create_limits[i].opt == c)
			break;
	if (i == CREATE_NLIMITS)
		return -1;
	if (create_limits[i].whole) {
		if (codec_parse_long(arg, 1, 1L << 30, &n) < 0) {
			cli_usage_error(ctx, "--%s: want a whole number > 0",
					create_limits[i].flag);
			return -1;
		}
		value[i] = (double)n;
	} else if (codec_parse_double(arg, 1e-3, 1e6, &value[i]) < 0) {
		cli_usage_error(ctx, "--%s: want a number > 0", create_limits[i].flag);
		return -1;
	}
	return 0;
}

int cli_session_create(struct cli_ctx *ctx, int argc, char **argv, int restore)
{
	double limits[CREATE_NLIMITS] = {-1, -1, -1, -1, -1}; /* < 0: server default */
	struct session_kv env = {0}, meta = {0};
	const char **allow = NULL, **ppaths = NULL;
	size_t nallow = 0, nppaths = 0, i, body_len;
	const char *image = NULL, *runtime = NULL, *body, *workspace = NULL, *snap = NULL;
	int persist = 0, persist_on_end = 0, persist_novars = 0;
	double idle = -1, max_lifetime = -1;
	int verbose = 0, have_limits = 0, text_ok, c, rc = CLI_EXIT_USAGE;
	AUTOGEN yajl_gen g = NULL;
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	const char *id;
	long n;

	while ((c = cli_getopt(ctx, argc, argv, ":hv", create_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: rc = ctx->rc; goto out;
		case 'v': verbose = 1; break;
		case CREATE_IMAGE: image = optarg; break;
		case CREATE_RUNTIME: runtime = optarg; break;
		case CREATE_IDLE:
			if (codec_parse_long(optarg, 1, 365L * 86400, &n) < 0) {
				cli_usage_error(ctx, "--idle-timeout: want seconds > 0");
				goto out;
			}
			idle = (double)n;
			break;
		case CREATE_MAX_LIFETIME:
			/* The server bounds it by its max-lifetime-s and says so. */
			if (codec_parse_long(optarg, 1, 365L * 86400, &n) < 0) {
				cli_usage_error(ctx, "--max-lifetime: want seconds > 0");
				goto out;
			}
			max_lifetime = (double)n;
			break;
		case CREATE_MEMORY:
		case CREATE_CPUS:
		case CREATE_PIDS:
		case CREATE_DISK:
		case CREATE_EXEC_TIMEOUT:
			if (create_limit_opt(ctx, c, optarg, limits) < 0)
				goto out;
			break;
		case CREATE_ALLOW:
			allow = xrealloc(allow, (nallow + 1) * sizeof(char *));
			allow[nallow++] = optarg;
			break;
		case CREATE_ENV:
		case CREATE_META:
			if (session_kv_add(c == CREATE_ENV ? &env : &meta, optarg) < 0) {
				cli_usage_error(ctx, "%s: want KEY=VALUE, got '%s'",
						c == CREATE_ENV ? "--env" : "--meta", optarg);
				goto out;
			}
			break;
		case CREATE_WORKSPACE:
			if (!cli_workspace_name_ok(optarg)) {
				cli_usage_error(ctx, "--workspace: want [A-Za-z0-9._-]{1,64}, not "
						     "starting with '.'");
				goto out;
			}
			workspace = optarg;
			break;
		case CREATE_PERSIST_ON_END: persist = persist_on_end = 1; break;
		case CREATE_PERSIST_NO_VARIABLES: persist = persist_novars = 1; break;
		case CREATE_PERSIST_PATH:
			if (cli_glob_check(ctx, "--persist-path", optarg) != 0)
				goto out;
			if (nppaths == 64) {
				cli_usage_error(ctx, "--persist-path: at most 64 globs");
				goto out;
			}
			ppaths = xrealloc(ppaths, (nppaths + 1) * sizeof(char *));
			ppaths[nppaths++] = optarg;
			persist = 1;
			break;
		default: break;
		}
	}
	if (!restore && cli_want_args(ctx, argc - optind, 0, 0) != 0)
		goto out;
	if (restore) {
		/* restore SNAP_ID, or restore --workspace NAME: one of them */
		if (cli_want_args(ctx, argc - optind, 0, 1) != 0)
			goto out;
		snap = argc - optind == 1 ? argv[optind] : NULL;
		if (snap == NULL && workspace == NULL) {
			cli_usage_error(ctx, "want a snapshot id or --workspace NAME");
			goto out;
		}
		if (snap != NULL && workspace != NULL) {
			cli_usage_error(ctx, "a snapshot id or --workspace NAME, not both");
			goto out;
		}
		if (snap != NULL && (snap[0] == '\0' || !cli_utf8(snap))) {
			cli_usage_error(ctx, "bad snapshot id '%s'", snap);
			goto out;
		}
	}

	/* The server refuses invalid UTF-8; say so here rather than have the
	 * generator repair an argument. */
	text_ok = (image == NULL || cli_utf8(image)) && (runtime == NULL || cli_utf8(runtime)) &&
		  session_kv_utf8(&env) && session_kv_utf8(&meta);
	for (i = 0; text_ok && i < nallow; i++)
		text_ok = cli_utf8(allow[i]);
	if (!text_ok) {
		rc = cli_usage_error(ctx, "%s", CLI_NOT_UTF8);
		goto out;
	}

	g = json_gen_new();
	jg_obj(g);
	if (image != NULL)
		jg_kv_str(g, "image", image);
	if (runtime != NULL)
		jg_kv_str(g, "runtime", runtime);
	if (idle > 0) {
		jg_str(g, "idle_timeout_s");
		jg_number(g, idle);
	}
	if (max_lifetime > 0) {
		jg_str(g, "max_lifetime_s");
		jg_number(g, max_lifetime);
	}
	for (i = 0; i < CREATE_NLIMITS; i++)
		have_limits |= limits[i] > 0;
	if (have_limits) {
		jg_str(g, "limits");
		jg_obj(g);
		for (i = 0; i < CREATE_NLIMITS; i++) {
			if (limits[i] > 0) {
				jg_str(g, create_limits[i].key);
				jg_number(g, limits[i]);
			}
		}
		jg_obj_end(g);
	}
	if (nallow > 0) {
		jg_str(g, "network");
		jg_obj(g);
		jg_str(g, "allow");
		jg_arr(g);
		for (i = 0; i < nallow; i++)
			jg_str(g, allow[i]);
		jg_arr_end(g);
		jg_obj_end(g);
	}
	session_kv_gen(g, "env", &env);
	session_kv_gen(g, "metadata", &meta);
	if (snap != NULL)
		jg_kv_str(g, "restore", snap);
	if (workspace != NULL)
		jg_kv_str(g, "workspace", workspace);
	if (persist) {
		jg_str(g, "persist");
		jg_obj(g);
		jg_str(g, "paths");
		if (nppaths == 0) {
			jg_null(g);
		} else {
			jg_arr(g);
			for (i = 0; i < nppaths; i++)
				jg_str(g, ppaths[i]);
			jg_arr_end(g);
		}
		jg_kv_bool(g, "variables", !persist_novars);
		jg_kv_bool(g, "on_end", persist_on_end);
		jg_obj_end(g);
	}
	jg_obj_end(g);
	body = jg_text(g, &body_len);

	rc = cli_call_doc(
	    ctx,
	    &(struct client_req){.method = "POST",
				 .path = "/v1/sessions",
				 .content_type = "application/json",
				 .body = body,
				 .body_len = body_len,
				 /* a cold container takes ~0.6 s;
				  * leave room for a loaded host, and
				  * for a large restore */
				 .timeout_s = snap != NULL || workspace != NULL ? 1800 : 120},
	    &resp, &doc);
	if (rc != CLI_EXIT_OK || doc == NULL)
		goto out;
	rc = CLI_EXIT_API;
	id = json_path_str(doc, "id");
	if (id == NULL) {
		fprintf(stderr, "%s: the server's answer has no session id\n", CLI_PROG);
		goto out;
	}
	/* The id alone on stdout, so ID=$(ci-ctl create) just works. */
	printf("%s\n", id);
	if (snap != NULL || workspace != NULL)
		cli_restore_print(doc);
	if (verbose) {
		fflush(stdout);
		session_print(doc, stderr);
	}
	rc = CLI_EXIT_OK;
out:
	json_free(doc);
	client_resp_release(&resp);
	session_kv_release(&env);
	session_kv_release(&meta);
	free(allow);
	free(ppaths);
	return rc;
}

static int create_run(struct cli_ctx *ctx, int argc, char **argv)
{
	return cli_session_create(ctx, argc, argv, 0);
}

const struct cli_cmd cmd_create = {
    .name = "create",
    .usage = "[OPTIONS]",
    .summary = "Create a session and print its id.",
    .help = "Options (unset ones take the server's defaults):\n"
	    "  --image NAME          image to run (e.g. python)\n"
	    "  --runtime NAME        runc (the default) or gvisor (stronger isolation, no\n"
	    "                        --allow)\n"
	    "  --idle-timeout S      expire after S seconds without use\n"
	    "  --max-lifetime S      end S seconds after creation, used or not (up to the\n"
	    "                        server's max-lifetime-s; activity does not extend it)\n"
	    "  --memory MB           memory limit\n"
	    "  --cpus N              CPU limit, may be fractional (0.5)\n"
	    "  --pids N              process/thread limit\n"
	    "  --disk MB             size of /workspace and /tmp\n"
	    "  --exec-timeout S      default deadline of one execution\n"
	    "  --allow HOST[:PORT]   allow outbound traffic to HOST, e.g. api.example.com:443\n"
	    "                        or *.example.org (repeatable); default: no network\n"
	    "  --env K=V             environment variable (repeatable)\n"
	    "  --meta K=V            metadata kept with the session (repeatable)\n"
	    "  --workspace NAME      the session's workspace name: starts from the latest\n"
	    "                        snapshot of NAME (empty when it has none); snapshots\n"
	    "                        are filed under it\n"
	    "  --persist-on-end      snapshot the workspace when the session is deleted or\n"
	    "                        expires (an exit snapshot)\n"
	    "  --persist-path GLOB   what snapshots save: files matching GLOB (repeatable;\n"
	    "                        default: all of /workspace)\n"
	    "  --persist-no-variables  snapshots do not save the kernel's variables\n"
	    "  -v, --verbose         also print the session's details to stderr\n"
	    "\n"
	    "Prints the session id alone on stdout, so ID=$(ci-ctl create) works;\n"
	    "with --json, prints the whole session document.\n",
    .run = create_run,
};

/* ---- ls -------------------------------------------------------------- */

/* -o FORMAT: json (as --json), wide (more columns), name ("session/ID",
 * as kubectl prints it); NULL or "" for the default table.  Returns 0,
 * or a usage error's status. */
int cli_output_format(struct cli_ctx *ctx, const char *arg)
{
	if (strcmp(arg, "json") == 0)
		ctx->json = 1;
	else if (strcmp(arg, "wide") != 0 && strcmp(arg, "name") != 0)
		return cli_usage_error(ctx, "-o: want json, wide or name, not '%s'", arg);
	ctx->output = arg;
	return 0;
}

static int cli_output_is(const struct cli_ctx *ctx, const char *format)
{
	return ctx->output != NULL && strcmp(ctx->output, format) == 0;
}

enum { LS_QUIET = 'q', LS_OUTPUT = 'o' };

static const struct option ls_options[] = {
    {"quiet", no_argument, NULL, LS_QUIET},
    {"output", required_argument, NULL, LS_OUTPUT},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int ls_run(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = {"ID", "STATE", "IMAGE", "CREATED", "EXPIRES"};
	static const char *const wide_headers[] = {
	    "ID", "STATE", "IMAGE", "RUNTIME", "TENANT", "CREATED", "ACTIVE", "EXPIRES", "ALLOW"};
	struct client_resp resp = {0};
	yajl_val doc = NULL, list;
	struct table *t = NULL;
	int quiet = 0, wide, names, c;
	size_t i;
	int rc;

	while ((c = cli_getopt(ctx, argc, argv, ":hqo:", ls_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == LS_QUIET)
			quiet = 1;
		else if (c == LS_OUTPUT && (rc = cli_output_format(ctx, optarg)) != 0)
			return rc;
	}
	if ((rc = cli_want_args(ctx, argc - optind, 0, 0)) != 0)
		return rc;
	if (quiet && ctx->json)
		return cli_usage_error(ctx, "-q prints ids only: not with --json or -o json");
	wide = cli_output_is(ctx, "wide");
	names = cli_output_is(ctx, "name");
	rc = cli_call_doc(
	    ctx, &(struct client_req){.method = "GET", .path = "/v1/sessions", .timeout_s = 60},
	    &resp, &doc);
	if (rc != CLI_EXIT_OK || doc == NULL)
		goto out;
	rc = CLI_EXIT_API;
	list = json_path_arr(doc, "sessions");
	if (list == NULL) {
		fprintf(stderr, "%s: the server's answer has no sessions list\n", CLI_PROG);
		goto out;
	}
	/* -q and -o name: no header, sorted like the table, for $(...). */
	t = quiet || names ? table_new(1, NULL)
			   : table_new(wide ? 9 : 5, wide ? wide_headers : headers);
	for (i = 0; i < json_arr_len(list); i++) {
		yajl_val s = json_arr_at(list, i);
		char created[64], expires[64], active[64];
		const char *id = json_path_str(s, "id");

		if (quiet || names) {
			char *name = names ? xasprintf("session/%s", id ? id : "-") : NULL;

			table_add(t, (const char *const[]){names ? name : id});
			free(name);
			continue;
		}
		output_when(json_path_str(s, "created_at"), created, sizeof(created));
		output_when(json_path_str(s, "expires_at"), expires, sizeof(expires));
		if (!wide) {
			table_add(t, (const char *const[]){id, json_path_str(s, "state"),
							   json_path_str(s, "image"), created,
							   expires});
			continue;
		}
		output_when(json_path_str(s, "last_active_at"), active, sizeof(active));
		{
			yajl_val allow = json_path(s, "network.allow");
			char *list_text = json_arr_len(allow) > 0 ? output_json_text(allow) : NULL;

			table_add(t, (const char *const[]){
					 id, json_path_str(s, "state"), json_path_str(s, "image"),
					 json_path_str(s, "runtime"), json_path_str(s, "tenant"),
					 created, active, expires, list_text});
			free(list_text);
		}
	}
	table_sort(t, 0);
	table_print(t, stdout);
	rc = CLI_EXIT_OK;
out:
	table_free(t);
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

const struct cli_cmd cmd_ls = {
    .name = "ls",
    .usage = "[-q] [-o json|wide|name]",
    .summary = "List your sessions.",
    .help = "Columns: ID, STATE, IMAGE, CREATED and EXPIRES (relative to now), sorted by ID.\n"
	    "  -q, --quiet          print the ids only, one a line (rm $(ci-ctl ls -q))\n"
	    "  -o, --output FORMAT  json: the server's document (as --json); wide: also\n"
	    "                       RUNTIME, TENANT, ACTIVE (last activity) and ALLOW\n"
	    "                       (the allowlist); name: session/ID lines\n"
	    "\n"
	    "Commands that take a session ID also take a unique prefix of it, as docker\n"
	    "does: an ambiguous one lists the sessions it matches (exit 2).\n",
    .run = ls_run,
};

/* ---- show, keepalive ------------------------------------------------- */

/* show and keepalive: one request about one session, answered with it. */
static const struct option one_options[] = {
    {"output", required_argument, NULL, 'o'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int session_one(struct cli_ctx *ctx, int argc, char **argv, const char *method,
		       const char *suffix, int brief)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	char *path;
	int rc, c;

	while ((c = cli_getopt(ctx, argc, argv, ":ho:", one_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == 'o' && (rc = cli_output_format(ctx, optarg)) != 0)
			return rc;
	}
	if ((rc = cli_want_args(ctx, argc - optind, 1, 1)) != 0 ||
	    (rc = cli_session_id(ctx, &argv[optind])) != 0)
		return rc;
	path = cli_session_path(argv[optind], suffix);
	rc =
	    cli_call_doc(ctx, &(struct client_req){.method = method, .path = path, .timeout_s = 60},
			 &resp, &doc);
	free(path);
	if (rc != CLI_EXIT_OK || doc == NULL)
		goto out;
	rc = CLI_EXIT_API;
	if (ctx->output != NULL && strcmp(ctx->output, "name") == 0) {
		const char *id = json_path_str(doc, "id");

		printf("session/%s\n", id ? id : argv[optind]);
	} else if (brief) {
		const char *expires = json_path_str(doc, "expires_at");
		char when[64];

		printf("%s expires_at %s (%s)\n", argv[optind], expires ? expires : "-",
		       output_when(expires, when, sizeof(when)));
	} else {
		session_print(doc, stdout);
	}
	rc = CLI_EXIT_OK;
out:
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

static int show_run(struct cli_ctx *ctx, int argc, char **argv)
{
	return session_one(ctx, argc, argv, "GET", "", 0);
}

const struct cli_cmd cmd_show = {
    .name = "show",
    .usage = "[-o json|wide|name] ID",
    .summary = "Show a session: state, times, limits, network, metadata.",
    .help = "Prints 'key: value' lines: id, tenant, state, image, runtime (runc or gvisor),\n"
	    "the clocks created_at, last_active_at and expires_at (also relative to now,\n"
	    "e.g. 'in 9m 58s'), idle_timeout_s, limits.*, network.allow and metadata.*.\n"
	    "\n"
	    "A session that ended answers 410: 'ci-ctl: expired: session ... ended at TIME\n"
	    "(expired): idle for 600s (idle_timeout_s) (HTTP 410)' on stderr, exit 5.\n"
	    "\n"
	    "  -o, --output FORMAT  json: the session document (as --json); name:\n"
	    "                       session/ID; wide: the same lines as the default\n",
    .run = show_run,
};

static int keepalive_run(struct cli_ctx *ctx, int argc, char **argv)
{
	return session_one(ctx, argc, argv, "POST", "/keepalive", 1);
}

const struct cli_cmd cmd_keepalive = {
    .name = "keepalive",
    .usage = "[-o json|wide|name] ID",
    .summary = "Reset a session's idle clock; print its new expiry.",
    .help = "Prints 'ID expires_at TIME (in 10m)'; --json prints the session document.\n",
    .run = keepalive_run,
};

/* ---- rm -------------------------------------------------------------- */

enum { RM_STRICT = CLI_OPT_FIRST_COMMAND };

static const struct option rm_options[] = {
    {"strict", no_argument, NULL, RM_STRICT},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* A session that already ended (410): what rm wanted is true already. */
static int rm_already_ended(int strict, const struct client_resp *resp, const char *id)
{
	struct err *e = NULL;
	yajl_val doc;
	const char *code;
	int ended;

	if (strict || resp->status != 410 || resp->body == NULL)
		return 0;
	doc = json_parse(resp->body, strlen(resp->body), &e);
	err_free(e);
	code = json_path_str(doc, "error.code");
	ended = code != NULL && (strcmp(code, "expired") == 0 || strcmp(code, "node_lost") == 0);
	if (ended) {
		const char *msg = json_path_str(doc, "error.message");
		char *clean = output_clean(msg ? msg : code);

		output_note("%s: rm %s: already ended: %s\n", CLI_PROG, id, clean);
		free(clean);
	}
	json_free(doc);
	return ended;
}

static int rm_run(struct cli_ctx *ctx, int argc, char **argv)
{
	int rc, i, c, failed = 0, strict = 0;

	while ((c = cli_getopt(ctx, argc, argv, ":h", rm_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == RM_STRICT)
			strict = 1;
	}
	if ((rc = cli_want_args(ctx, argc - optind, 1, -1)) != 0)
		return rc;
	for (i = optind; i < argc; i++)
		if ((rc = cli_session_id(ctx, &argv[i])) != 0)
			return rc;
	for (i = optind; i < argc; i++) {
		struct client_resp resp = {0};
		char *path = cli_session_path(argv[i], "");
		/* Name the session in errors only when there are several. */
		char *what = argc - optind > 1 ? xasprintf("rm %s", argv[i]) : NULL;

		struct err *e = NULL;

		/* client_do, not cli_call: a 410 is reported (or not) here. */
		if (cli_client(ctx) == NULL) {
			rc = CLI_EXIT_USAGE;
		} else if (client_do(ctx->client,
				     &(struct client_req){
					 .method = "DELETE", .path = path, .timeout_s = 60},
				     &resp, &e) == 0 ||
			   rm_already_ended(strict, &resp, argv[i])) {
			rc = CLI_EXIT_OK;
		} else {
			rc = cli_report(ctx, e, &resp, what);
		}
		err_free(e);
		free(what);
		free(path);
		client_resp_release(&resp);
		if (rc != CLI_EXIT_OK)
			failed = rc;
		else if (!ctx->json)
			printf("%s\n", argv[i]);
		if (rc == CLI_EXIT_USAGE)
			break; /* bad --server: every other try fails the same way */
	}
	return failed;
}

const struct cli_cmd cmd_rm = {
    .name = "rm",
    .usage = "[--strict] ID...",
    .summary = "Delete sessions (their containers and files).",
    .help = "Prints each id removed.  Exits non-zero if any removal failed; the others are\n"
	    "still attempted.  With --json, prints nothing on success and the error\n"
	    "document of each failure.\n"
	    "\n"
	    "A session that already ended (410 expired or node_lost) counts as removed: its\n"
	    "id is printed, a note 'already ended: WHY' goes to stderr, and rm exits 0.\n"
	    "  --strict   report an ended session as an error (exit 5) instead\n",
    .run = rm_run,
};

/* ---- allow ----------------------------------------------------------- */

enum { ALLOW_CLEAR = CLI_OPT_FIRST_COMMAND };

static const struct option allow_options[] = {
    {"clear", no_argument, NULL, ALLOW_CLEAR},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int allow_run(struct cli_ctx *ctx, int argc, char **argv)
{
	struct client_resp resp = {0};
	AUTOGEN yajl_gen g = NULL;
	yajl_val doc = NULL, list;
	int clear = 0, c, rc, i;
	const char *body;
	size_t body_len, k;
	char *path;

	while ((c = cli_getopt(ctx, argc, argv, ":h", allow_options)) != -1) {
		if (c == CLI_GETOPT_STOP)
			return ctx->rc;
		if (c == ALLOW_CLEAR)
			clear = 1;
	}
	if ((rc = cli_want_args(ctx, argc - optind, 1, clear ? 1 : -1)) != 0)
		return rc;
	if (!clear && argc - optind < 2)
		return cli_usage_error(ctx, "name the hosts to allow, or --clear for none");
	for (i = optind + 1; i < argc; i++)
		if (argv[i][0] == '\0' || !cli_utf8(argv[i]))
			return cli_usage_error(ctx, "bad host '%s'", argv[i]);
	if ((rc = cli_session_id(ctx, &argv[optind])) != 0)
		return rc;
	/* PATCH replaces the list: the hosts given are the whole new list. */
	g = json_gen_new();
	jg_obj(g);
	jg_str(g, "network");
	jg_obj(g);
	jg_str(g, "allow");
	jg_arr(g);
	for (i = optind + 1; i < argc; i++)
		jg_str(g, argv[i]);
	jg_arr_end(g);
	jg_obj_end(g);
	jg_obj_end(g);
	body = jg_text(g, &body_len);
	path = cli_session_path(argv[optind], "");
	rc = cli_call_doc(ctx,
			  &(struct client_req){.method = "PATCH",
					       .path = path,
					       .content_type = "application/json",
					       .body = body,
					       .body_len = body_len,
					       .timeout_s = 60},
			  &resp, &doc);
	free(path);
	if (rc == CLI_EXIT_OK && doc != NULL) {
		list = json_path_arr(doc, "network.allow");
		printf("%s allow:", argv[optind]);
		for (k = 0; k < json_arr_len(list); k++) {
			char *item = output_json_text(json_arr_at(list, k));
			char *clean = output_clean(item);

			printf(" %s", clean);
			free(clean);
			free(item);
		}
		printf("%s\n", json_arr_len(list) == 0 ? " none" : "");
	}
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

const struct cli_cmd cmd_allow = {
    .name = "allow",
    .usage = "ID HOST[:PORT]... | --clear ID",
    .summary = "Replace a live session's network allowlist.",
    .help = "PATCH /v1/sessions/ID {\"network\":{\"allow\":[...]}}: the hosts given become the\n"
	    "whole allowlist (give the old ones again to keep them); --clear empties it.\n"
	    "Only a session created with --allow may change (else 400). Prints\n"
	    "'ID allow: HOST...' as the server now has it.\n"
	    "  --clear   allow no host\n",
    .run = allow_run,
};
