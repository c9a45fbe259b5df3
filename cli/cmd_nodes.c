/*
 * cmd_nodes.c: ci-ctl nodes: the nodes sharing this daemon's Redis
 * (GET /v1/admin/nodes; docs/deploy.md, "Several nodes on one Redis").
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "client.h"
#include "codec.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

enum {
	NODES_FORGET = CLI_OPT_FIRST_COMMAND,
};

static const struct option nodes_options[] = {
    {"forget", required_argument, NULL, NODES_FORGET},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* DELETE /v1/admin/nodes?node=NAME. */
static int forget(struct cli_ctx *ctx, const char *node)
{
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	char *esc = codec_url_escape(node, 0);
	char *path = xasprintf("/v1/admin/nodes?node=%s", esc);
	int rc = cli_call_doc(
	    ctx, &(struct client_req){.method = "DELETE", .path = path, .timeout_s = 30}, &resp,
	    &doc);
	if (rc == CLI_EXIT_OK && doc) {
		double n = 0;
		json_path_num(doc, "sessions_ended", &n);
		printf("forgot node %s: %.0f of its sessions ended (node_lost)\n", node, n);
	}
	json_free(doc);
	client_resp_release(&resp);
	free(path);
	free(esc);
	return rc;
}

static void num(yajl_val o, const char *key, char *buf, size_t size)
{
	double v;
	if (json_path_num(o, key, &v))
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "-");
}

static int nodes_run(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = {"NODE", "STATE", "SESSIONS", "MAX",
					      "ROOM", "AGE",   "URL",      "VERSION"};
	struct client_resp resp = {0};
	yajl_val doc = NULL;
	struct table *t = NULL;
	const char *forget_node = NULL;
	int rc, c;

	while ((c = cli_getopt(ctx, argc, argv, ":h", nodes_options)) != -1) {
		switch (c) {
		case CLI_GETOPT_STOP: return ctx->rc;
		case NODES_FORGET: forget_node = optarg; break;
		default: break;
		}
	}
	if ((rc = cli_want_args(ctx, argc - optind, 0, 0)) != 0)
		return rc;
	if (forget_node)
		return forget(ctx, forget_node);
	rc = cli_call_doc(
	    ctx, &(struct client_req){.method = "GET", .path = "/v1/admin/nodes", .timeout_s = 30},
	    &resp, &doc);
	if (rc != CLI_EXIT_OK || doc == NULL)
		goto out;
	yajl_val list = json_path_arr(doc, "nodes");
	if (list == NULL) {
		output_note("%s: the server's answer has no nodes list\n", CLI_PROG);
		rc = CLI_EXIT_API;
		goto out;
	}
	t = table_new(8, headers);
	for (size_t i = 0; i < json_arr_len(list); i++) {
		yajl_val o = json_arr_at(list, i);
		char sessions[24], max[24], room[24], age[32];
		bool draining = false;
		double a;
		num(o, "sessions", sessions, sizeof(sessions));
		num(o, "max_sessions", max, sizeof(max));
		num(o, "room", room, sizeof(room));
		if (json_path_num(o, "age_ms", &a))
			snprintf(age, sizeof(age), "%.1fs", a / 1000.0);
		else
			snprintf(age, sizeof(age), "-");
		json_path_bool(o, "draining", &draining);
		const char *state = json_path_str(o, "state"), *url = json_path_str(o, "url");
		table_add(t, (const char *const[]){json_path_str(o, "node"),
						   draining ? "draining" : state, sessions, max,
						   room, age, url && *url ? url : "-",
						   json_path_str(o, "version")});
	}
	table_print(t, stdout);
out:
	table_free(t);
	json_free(doc);
	client_resp_release(&resp);
	return rc;
}

const struct cli_cmd cmd_nodes = {
    .name = "nodes",
    .usage = "[--forget NODE]",
    .summary = "List the nodes sharing this daemon's Redis, live or lost; --forget a lost one.",
    .help =
	"GET /v1/admin/nodes (admin).  Every node that ever heartbeated into the shared\n"
	"Redis and key prefix, from this daemon's view (refreshed every heartbeat-ms):\n"
	"NODE, STATE (live; lost: no heartbeat for node-lost-ms, its sessions answer 410\n"
	"node_lost; draining), SESSIONS, MAX (max-sessions), ROOM (what placement uses),\n"
	"AGE (since its last heartbeat), URL (where peers forward to; '-': none) and\n"
	"VERSION.  --json prints the answer: {\"self\":...,\"heartbeat_ms\":...,\n"
	"\"node_lost_ms\":...,\"nodes\":[{\"node\",\"state\",\"url\",\"sessions\",\n"
	"\"max_sessions\",\"room\",\"pool_ready\",\"draining\",\"started_ms\",\"heartbeat_ms\",\n"
	"\"heartbeat_at\",\"age_ms\",\"version\"}]}.\n"
	"\n"
	"Options:\n"
	"  --forget NODE  DELETE /v1/admin/nodes?node=NODE: a lost node (no heartbeat;\n"
	"                 a live one is refused, 409) leaves the list, and each of its\n"
	"                 sessions whose record is left is tombstoned node_lost and\n"
	"                 its record removed.  Prints 'forgot node NODE: N of its\n"
	"                 sessions ended (node_lost)'; --json prints the answer:\n"
	"                 {\"node\",\"sessions_ended\"}.\n",
    .run = nodes_run,
};
