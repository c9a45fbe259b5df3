/*
 * cmd_quota.c: tenants' quotas and usage: quota (show, --set), usage.
 * A refusal over a quota (429) is reported like any API error: its message
 * names the quota and the Retry-After.
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

/* The daemon's quota names (daemon/quota.h), in its order. */
static const char *const quota_names[] = {"sessions",
					  "executions",
					  "memory_mb",
					  "exec_seconds_per_hour",
					  "requests_per_second",
					  "disk_mb",
					  "snapshot_keep",
					  "snapshot_max_age_s"};
#define NQUOTAS (sizeof(quota_names) / sizeof(quota_names[0]))

/* The usage counters, each with the quota that bounds it. */
static const char *const usage_names[NQUOTAS] = {
    "sessions", "executions", "memory_mb", "exec_seconds_last_hour", "requests_last_second",
    "disk_mb"};
/* (The two retention limits have no usage counter: NULL.) */

/* [a-z0-9][a-z0-9_-]{0,62}, as the daemon wants; checked here so a bad
 * name is a usage error and never a path of its choosing. */
static int tenant_ok(const char *t)
{
	size_t n = strlen(t), i;

	if (n == 0 || n > 63)
		return 0;
	for (i = 0; i < n; i++) {
		char ch = t[i];
		int alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');

		if (!alnum && (i == 0 || (ch != '_' && ch != '-')))
			return 0;
	}
	return 1;
}

static int quota_index(const char *name, size_t len)
{
	for (size_t i = 0; i < NQUOTAS; i++)
		if (strlen(quota_names[i]) == len && strncmp(quota_names[i], name, len) == 0)
			return (int)i;
	return -1;
}

static void limit_text(yajl_val quota, const char *name, char *out, size_t size)
{
	yajl_val v = json_get(quota, name);

	if (v == NULL || !YAJL_IS_INTEGER(v))
		snprintf(out, size, "-");
	else if (YAJL_GET_INTEGER(v) == 0)
		snprintf(out, size, "unlimited");
	else
		snprintf(out, size, "%lld", (long long)YAJL_GET_INTEGER(v));
}

/* QUOTA LIMIT SOURCE, from a {"quota","overrides"} answer. */
static void quota_print(yajl_val doc)
{
	static const char *const headers[] = {"QUOTA", "LIMIT", "FROM"};
	yajl_val quota = json_path_obj(doc, "quota"), over = json_path_obj(doc, "overrides");
	struct table *t = table_new(3, headers);

	for (size_t i = 0; i < NQUOTAS; i++) {
		char limit[32];

		limit_text(quota, quota_names[i], limit, sizeof(limit));
		table_add(
		    t, (const char *const[]){quota_names[i], limit,
					     json_get(over, quota_names[i]) ? "tenant" : "server"});
	}
	table_print(t, stdout);
	table_free(t);
}

/* ---- quota ----------------------------------------------------------- */

enum {
	QUOTA_SET = CLI_OPT_FIRST_COMMAND,
};

static const struct option quota_options[] = {
    {"set", required_argument, NULL, QUOTA_SET},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* The --set values over the current overrides: -1 keeps it, -2 removes it
 * ("default"), else the value. */
static int quota_set_arg(struct cli_ctx *ctx, const char *arg, long long *set)
{
	const char *eq = strchr(arg, '=');
	long n;
	int i = eq ? quota_index(arg, (size_t)(eq - arg)) : -1;

	if (i < 0)
		return cli_usage_error(ctx,
				       "--set %s: want NAME=VALUE, NAME one of sessions, "
				       "executions, memory_mb, exec_seconds_per_hour, "
				       "requests_per_second, disk_mb, snapshot_keep, "
				       "snapshot_max_age_s",
				       arg);
	if (strcmp(eq + 1, "default") == 0)
		set[i] = -2;
	else if (strcmp(eq + 1, "unlimited") == 0)
		set[i] = 0;
	else if (codec_parse_long(eq + 1, 0, 1000000000L, &n) < 0)
		return cli_usage_error(ctx,
				       "--set %s: want a whole number >= 0, 'unlimited' or "
				       "'default'",
				       arg);
	else
		set[i] = n;
	return 0;
}

/* One call whose answer prints with print (unless --json printed it);
 * returns the exit status. */
static int quota_call(struct cli_ctx *ctx, const struct client_req *req, void (*print)(yajl_val))
{
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	int rc = cli_call_doc(ctx, req, &resp, &doc);

	if (rc == CLI_EXIT_OK && doc != NULL)
		print(doc);
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

/* The PUT body: the stored overrides (GET first: PUT replaces them all)
 * with the --set values over them. NULL after reporting a failed GET. */
static char *quota_merged(struct cli_ctx *ctx, const char *path, const long long *set, int *rc)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	int json = ctx->json;
	char *out = NULL;

	ctx->json = 0;
	*rc = cli_call_doc(ctx, &(struct client_req){.method = "GET", .path = path}, &resp, &doc);
	ctx->json = json;
	if (*rc == CLI_EXIT_OK) {
		yajl_val over = json_path_obj(doc, "overrides");
		AUTOGEN yajl_gen g = json_gen_new();
		size_t len;

		jg_obj(g);
		for (size_t i = 0; i < NQUOTAS; i++) {
			yajl_val v = json_get(over, quota_names[i]);

			if (set[i] >= 0)
				jg_kv_int(g, quota_names[i], set[i]);
			else if (set[i] == -1 && v && YAJL_IS_INTEGER(v))
				jg_kv_int(g, quota_names[i], YAJL_GET_INTEGER(v));
		}
		jg_obj_end(g);
		out = xstrdup(jg_text(g, &len));
	}
	json_free(doc);
	client_resp_release(&resp);
	return out;
}

/* "/v1/admin/tenants/TENANT/WHAT" (caller frees), or NULL after a usage
 * error for a name the daemon would refuse. */
static char *tenant_path(struct cli_ctx *ctx, const char *tenant, const char *what)
{
	char *path = NULL;

	if (!tenant_ok(tenant)) {
		cli_usage_error(ctx, "tenant '%s': want [a-z0-9][a-z0-9_-]{0,62}", tenant);
		return NULL;
	}
	if (asprintf(&path, "/v1/admin/tenants/%s/%s", tenant, what) < 0)
		abort();
	return path;
}

static int quota_run(struct cli_ctx *ctx, int argc, char **argv)
{
	long long set[NQUOTAS];
	for (size_t i = 0; i < NQUOTAS; i++)
		set[i] = -1;
	char *path, *body = NULL;
	int c, rc, any = 0;

	while ((c = cli_getopt(ctx, argc, argv, ":h", quota_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: return ctx->rc;
		case QUOTA_SET:
			if (quota_set_arg(ctx, optarg, set) != 0)
				return CLI_EXIT_USAGE;
			any = 1;
			break;
		default: break;
		}
	}
	if ((rc = cli_want_args(ctx, argc - optind, 1, 1)) != 0)
		return rc;
	if ((path = tenant_path(ctx, argv[optind], "quota")) == NULL)
		return CLI_EXIT_USAGE;
	if (!any)
		rc = quota_call(ctx, &(struct client_req){.method = "GET", .path = path},
				quota_print);
	else if ((body = quota_merged(ctx, path, set, &rc)) != NULL)
		rc = quota_call(ctx,
				&(struct client_req){.method = "PUT",
						     .path = path,
						     .content_type = "application/json",
						     .body = body,
						     .body_len = strlen(body)},
				quota_print);
	free(body);
	free(path);
	return rc;
}

const struct cli_cmd cmd_quota = {
    .name = "quota",
    .usage = "TENANT [--set NAME=VALUE ...]",
    .summary = "Show a tenant's quotas, or set its own (an admin call).",
    .help = "GET /v1/admin/tenants/TENANT/quota.  Prints a table: QUOTA, LIMIT (a number or\n"
	    "'unlimited') and FROM ('tenant' for the tenant's own value, 'server' for the\n"
	    "daemon's --quota-* flag).\n"
	    "\n"
	    "Options:\n"
	    "  --set NAME=VALUE  set the tenant's own quota NAME (repeatable): a whole number,\n"
	    "                    'unlimited' (0), or 'default' to fall back to the server's.\n"
	    "                    Names: sessions, executions, memory_mb,\n"
	    "                    exec_seconds_per_hour, requests_per_second, disk_mb, and\n"
	    "                    the snapshot retention limits snapshot_keep (per\n"
	    "                    workspace) and snapshot_max_age_s.  Quotas not named keep\n"
	    "                    their value.\n"
	    "\n"
	    "--json prints the answer: {\"tenant\":...,\"quota\":{...},\"overrides\":{...}}.\n",
    .run = quota_run,
};

/* ---- usage ----------------------------------------------------------- */

/* The tenant, then USAGE NOW LIMIT. */
static void usage_print(yajl_val doc)
{
	static const char *const headers[] = {"USAGE", "NOW", "LIMIT"};
	yajl_val used = json_path_obj(doc, "usage"), quota = json_path_obj(doc, "quota");
	const char *tenant = json_path_str(doc, "tenant");
	struct table *t = table_new(3, headers);
	char *clean = output_clean(tenant ? tenant : "-");

	printf("tenant %s\n", clean);
	free(clean);
	for (size_t i = 0; i < NQUOTAS; i++) {
		char now[32], limit[32];
		double v;

		if (usage_names[i] == NULL)
			continue;
		if (json_path_num(used, usage_names[i], &v))
			snprintf(now, sizeof(now), "%g", v);
		else
			snprintf(now, sizeof(now), "-");
		limit_text(quota, quota_names[i], limit, sizeof(limit));
		table_add(t, (const char *const[]){usage_names[i], now, limit});
	}
	table_print(t, stdout);
	table_free(t);
}

static int usage_run(struct cli_ctx *ctx, int argc, char **argv)
{
	char *path;
	int rc;

	if (cli_operands(ctx, argc, argv, 0, 1, 0) < 0)
		return ctx->rc;
	path = optind < argc ? tenant_path(ctx, argv[optind], "usage") : xstrdup("/v1/usage");
	if (path == NULL)
		return CLI_EXIT_USAGE;
	rc = quota_call(ctx, &(struct client_req){.method = "GET", .path = path}, usage_print);
	free(path);
	return rc;
}

const struct cli_cmd cmd_usage = {
    .name = "usage",
    .usage = "[TENANT]",
    .summary = "Show a tenant's usage against its quotas (your own without TENANT).",
    .help = "GET /v1/usage (the tenant of your key), or with TENANT the admin call\n"
	    "GET /v1/admin/tenants/TENANT/usage.  Prints the tenant, then a table: USAGE\n"
	    "(live sessions, running executions, memory of live sessions in MB, execution\n"
	    "seconds in the last hour, requests in this second), NOW and LIMIT (the quota\n"
	    "that bounds it, or 'unlimited').\n"
	    "\n"
	    "--json prints the answer: {\"tenant\":...,\"usage\":{...},\"quota\":{...}}.\n",
    .run = usage_run,
};
