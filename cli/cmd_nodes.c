/*
 * cmd_nodes.c: ci-ctl nodes: the nodes sharing this daemon's Redis
 * (GET /v1/admin/nodes; docs/deploy.md, "Several nodes on one Redis").
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "client.h"
#include "json.h"
#include "output.h"

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
	int rc;

	if (cli_operands(ctx, argc, argv, 0, 0, 0) < 0)
		return ctx->rc;
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
    .usage = "",
    .summary = "List the nodes sharing this daemon's Redis, live or lost.",
    .help =
	"GET /v1/admin/nodes (admin).  Every node that ever heartbeated into the shared\n"
	"Redis and key prefix, from this daemon's view (refreshed every heartbeat-ms):\n"
	"NODE, STATE (live; lost: no heartbeat for node-lost-ms, its sessions answer 410\n"
	"node_lost; draining), SESSIONS, MAX (max-sessions), ROOM (what placement uses),\n"
	"AGE (since its last heartbeat), URL (where peers forward to; '-': none) and\n"
	"VERSION.  --json prints the answer: {\"self\":...,\"heartbeat_ms\":...,\n"
	"\"node_lost_ms\":...,\"nodes\":[{\"node\",\"state\",\"url\",\"sessions\",\n"
	"\"max_sessions\",\"room\",\"pool_ready\",\"draining\",\"started_ms\",\"heartbeat_ms\",\n"
	"\"heartbeat_at\",\"age_ms\",\"version\"}]}.\n",
    .run = nodes_run,
};
