/*
 * cmd_keys.c: API keys (the operator's, with the admin key):
 *   keys create --tenant T [--quota JSON]   POST /v1/admin/keys
 *   keys ls [--tenant T]                    GET /v1/admin/keys
 *   keys revoke ID                          DELETE /v1/admin/keys/ID
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
	KEYS_TENANT = CLI_OPT_FIRST_COMMAND,
	KEYS_QUOTA,
};

static const struct option keys_options[] = {
    {"tenant", required_argument, NULL, KEYS_TENANT},
    {"quota", required_argument, NULL, KEYS_QUOTA},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

static int keys_create(struct cli_ctx *ctx, const char *tenant, const char *quota)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL, q = NULL;
	int rc;

	if (tenant == NULL)
		return cli_usage_error(ctx, "create needs --tenant NAME");
	if (quota != NULL) {
		q = json_parse(quota, strlen(quota), NULL);
		if (q == NULL || !YAJL_IS_OBJECT(q)) {
			json_free(q);
			return cli_usage_error(ctx, "--quota must be a JSON object");
		}
	}
	if (!cli_utf8(tenant))
		return cli_usage_error(ctx, "--tenant: " CLI_NOT_UTF8);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "tenant", tenant);
	if (q != NULL) {
		jg_str(g, "quota");
		jg_value(g, q);
	}
	jg_obj_end(g);
	json_free(q);
	struct client_req req = {.method = "POST", .path = "/v1/admin/keys", .timeout_s = 60};
	req.content_type = "application/json";
	req.body = jg_text(g, &req.body_len);
	rc = cli_call_doc(ctx, &req, &resp, &doc);
	if (rc == CLI_EXIT_OK && doc != NULL) {
		const char *key = json_path_str(doc, "key"), *id = json_path_str(doc, "id");
		if (key == NULL || id == NULL) {
			output_note("%s: the server's answer has no key\n", CLI_PROG);
			rc = CLI_EXIT_API;
		} else {
			/* The key alone on stdout, for `KEY=$(ci-ctl keys create ...)`. */
			printf("%s\n", key);
			output_note("key %s for tenant %s; it is shown only this once\n", id,
				    tenant);
		}
	}
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

static int keys_ls(struct cli_ctx *ctx, const char *tenant)
{
	static const char *const headers[] = {"ID", "TENANT", "CREATED"};
	yajl_val doc = NULL, list;
	struct table *t = NULL;
	int rc;

	rc = cli_get_list(ctx, "/v1/admin/keys", "tenant", tenant, "keys", &doc, &list);
	if (rc != CLI_EXIT_OK || doc == NULL)
		return rc;
	t = table_new(3, headers);
	for (size_t i = 0; i < json_arr_len(list); i++) {
		yajl_val k = json_arr_at(list, i);
		char when[64];

		table_add(t, (const char *const[]){
				 json_path_str(k, "id"), json_path_str(k, "tenant"),
				 output_when(json_path_str(k, "created"), when, sizeof(when))});
	}
	table_print(t, stdout);
	table_free(t);
	json_free(doc);
	return rc;
}

static int keys_revoke(struct cli_ctx *ctx, const char *id)
{
	return cli_delete(ctx, "/v1/admin/keys", id, "key id", "revoked");
}

static int keys_run(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *tenant = NULL, *quota = NULL, *sub;
	int c, n;

	while ((c = cli_getopt(ctx, argc, argv, ":h", keys_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: return ctx->rc;
		case KEYS_TENANT: tenant = optarg; break;
		case KEYS_QUOTA: quota = optarg; break;
		default: break;
		}
	}
	n = argc - optind;
	if (n < 1)
		return cli_usage_error(ctx, "missing subcommand (create, ls or revoke)");
	sub = argv[optind];
	if (strcmp(sub, "create") == 0) {
		if (n != 1)
			return cli_usage_error(ctx, "create takes no arguments");
		return keys_create(ctx, tenant, quota);
	}
	if (quota != NULL)
		return cli_usage_error(ctx, "--quota is for create");
	if (strcmp(sub, "ls") == 0) {
		if (n != 1)
			return cli_usage_error(ctx, "ls takes no arguments");
		return keys_ls(ctx, tenant);
	}
	if (strcmp(sub, "revoke") == 0) {
		if (tenant != NULL)
			return cli_usage_error(ctx, "--tenant is for create and ls");
		if (n != 2)
			return cli_usage_error(ctx, "revoke takes one key id");
		return keys_revoke(ctx, argv[optind + 1]);
	}
	return cli_usage_error(ctx, "unknown subcommand '%s' (create, ls or revoke)", sub);
}

const struct cli_cmd cmd_keys = {
    .name = "keys",
    .usage = "create --tenant NAME [--quota JSON] | ls [--tenant NAME] | revoke ID",
    .summary = "Issue, list and revoke tenants' API keys (needs the admin key).",
    .help = "With --admin-key-file, every call to the daemon carries a key: the admin key\n"
	    "for the operator's commands (gc, drain, keys), a tenant's key for the rest.\n"
	    "Pass it with --api-key or CICTL_API_KEY.\n"
	    "\n"
	    "  create --tenant NAME [--quota JSON]\n"
	    "         issue a key for tenant NAME ([a-z0-9][a-z0-9_-]{0,62}), with the\n"
	    "         tenant's quota as a JSON object if given; prints the key alone on\n"
	    "         stdout (it is shown only this once) and its id on stderr\n"
	    "  ls [--tenant NAME]\n"
	    "         list the keys (ID, TENANT, CREATED), never the keys themselves\n"
	    "  revoke ID\n"
	    "         revoke a key: every daemon sharing the Redis refuses it within a\n"
	    "         second\n"
	    "\n"
	    "--json prints the server's answer: {\"id\",\"key\",\"tenant\",\"created\"} for\n"
	    "create, {\"keys\":[{\"id\",\"tenant\",\"created\"}]} for ls, nothing for revoke.\n",
    .run = keys_run,
};
