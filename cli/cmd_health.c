/*
 * cmd_health.c: health: the daemon's liveness and readiness.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cli.h"
#include "client.h"
#include "err.h"
#include "json.h"
#include "output.h"
#include "xalloc.h"

/* A probe should answer at once; a slow one is as good as down. */
#define HEALTH_TIMEOUT_S 10L

struct health_probe {
	const char *path;
	long status; /* HTTP status, 0 when unreachable */
	char *body;  /* the answer, as received */
	size_t len;
	char *reason; /* why it is not ok, for people; NULL when ok */
};

/*
 * Why a probe failed, in the daemon's words: error.message from the API's
 * error shape, else a "message" field, else the checks that are not "ok"
 * ({"docker":"ok","redis":"down"} gives "redis: down"), else the text.
 */
static char *health_reason(const char *body, long status)
{
	yajl_val doc = json_parse(body, strlen(body), NULL);
	const char *msg = json_path_str(doc, "error.message");
	struct buf b;
	size_t i;

	if (msg == NULL)
		msg = json_path_str(doc, "message");
	if (msg != NULL) {
		char *r = xstrdup(msg);

		json_free(doc);
		return r;
	}
	buf_init(&b, 4096);
	for (i = 0; YAJL_IS_OBJECT(doc) && i < doc->u.object.len; i++) {
		yajl_val v = doc->u.object.values[i];
		char *text = output_json_text(v);

		if (!YAJL_IS_TRUE(v) && strcmp(text, "ok") != 0 &&
		    strcmp(doc->u.object.keys[i], "status") != 0) {
			char *part =
			    xasprintf("%s%s: %s", b.len ? ", " : "", doc->u.object.keys[i], text);

			buf_append(&b, part, strlen(part)); /* capped: shown cut */
			free(part);
		}
		free(text);
	}
	json_free(doc);
	if (b.len == 0 && body[0] != '\0' && doc == NULL) {
		size_t n = strcspn(body, "\r\n");

		buf_append(&b, body, n > 200 ? 200 : n);
	}
	if (b.len == 0) {
		buf_release(&b);
		return xasprintf("HTTP %ld", status);
	}
	return buf_steal(&b, NULL);
}

/* Runs one probe; returns -1 only when the daemon could not be reached
 * (after reporting it), 0 when it answered, ok or not. */
static int health_probe(struct cli_ctx *ctx, struct client *client, struct health_probe *p)
{
	struct client_resp resp = {0};
	struct err *e = NULL;
	int r = 0;

	if (client_do(client,
		      &(struct client_req){.method = "GET",
					   .path = p->path,
					   .accept = "application/json, "
						     "text/plain",
					   .timeout_s = HEALTH_TIMEOUT_S},
		      &resp, &e) < 0) {
		if (e->peer_status == 0) {
			cli_report(ctx, e, NULL, NULL);
			r = -1;
		} else {
			char *raw = health_reason(resp.body, resp.status);

			p->reason = output_clean(raw);
			free(raw);
		}
	}
	p->status = resp.status;
	p->body = steal_pointer(&resp.body);
	p->len = resp.len;
	client_resp_release(&resp);
	err_free(e);
	return r;
}

static void health_gen_probe(yajl_gen g, const struct health_probe *p)
{
	AUTOJSON yajl_val doc = p->len > 0 ? json_parse(p->body, strlen(p->body), NULL) : NULL;

	jg_str(g, p->path + 1);
	jg_obj(g);
	jg_kv_int(g, "http_status", p->status);
	jg_str(g, "body");
	if (doc != NULL)
		jg_value(g, doc);
	else if (p->len > 0) /* a text body; a byte that is not UTF-8 shows as U+FFFD */
		jg_strn(g, p->body, strlen(p->body));
	else
		jg_null(g);
	jg_obj_end(g);
}

static int health_run(struct cli_ctx *ctx, int argc, char **argv)
{
	struct health_probe probes[2] = {{.path = "/healthz"}, {.path = "/readyz"}};
	struct client *client;
	AUTOGEN yajl_gen g = NULL;
	const char *doc;
	size_t i, len;
	int rc, ready = 1;

	if (cli_operands(ctx, argc, argv, 0, 0, 0) < 0)
		return ctx->rc;
	client = cli_client(ctx);
	if (client == NULL)
		return CLI_EXIT_USAGE;
	rc = CLI_EXIT_OK;
	for (i = 0; i < 2; i++) {
		if (health_probe(ctx, client, &probes[i]) < 0) {
			rc = CLI_EXIT_API;
			goto out;
		}
		ready &= probes[i].reason == NULL;
	}
	if (ctx->json) {
		/* The two answers are two documents; wrap them as one, each with
		 * its status and its body as sent (text bodies as strings). */
		g = json_gen_new();
		jg_obj(g);
		for (i = 0; i < 2; i++)
			health_gen_probe(g, &probes[i]);
		jg_kv_bool(g, "ready", ready);
		jg_obj_end(g);
		doc = jg_text(g, &len);
		output_json_doc(doc, len);
	} else {
		for (i = 0; i < 2; i++)
			printf("%s: %s\n", probes[i].path + 1,
			       probes[i].reason ? probes[i].reason : "ok");
	}
	rc = ready ? CLI_EXIT_OK : CLI_EXIT_FAIL;
out:
	for (i = 0; i < 2; i++) {
		free(probes[i].body);
		free(probes[i].reason);
	}
	return rc;
}

const struct cli_cmd cmd_health = {
    .name = "health",
    .usage = "",
    .summary = "Check the daemon: GET /healthz and /readyz.",
    .help = "Prints 'healthz: ok' and 'readyz: ok', or what the daemon says is down.\n"
	    "\n"
	    "Exit status: 0 ready; 1 the daemon answered but is not live or not ready;\n"
	    "5 it could not be reached.\n"
	    "With --json, one document:\n"
	    "  {\"healthz\":{\"http_status\":N,\"body\":...},\"readyz\":{...},\"ready\":BOOL}\n",
    .run = health_run,
};
