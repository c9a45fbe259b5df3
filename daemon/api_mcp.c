/* api_mcp.c: the MCP endpoint, /mcp (Streamable HTTP; docs/mcp.md).
 *
 * Stateless: one POST is one JSON-RPC message, answered in that POST (JSON,
 * or one server-sent event when the client accepts only that). No
 * Mcp-Session-Id is issued, and so GET (a server stream) and DELETE (a
 * session's end) are 405. The caller is the route's: the same Bearer keys,
 * tenant and request quota as the v1 API (api.c). An Origin header that
 * neither --allowed-origins nor --mcp-allowed-origins lists is refused 403
 * before the route is reached, as on every route (api.c, http_guard.h: a
 * web page in a browser must not reach a daemon on loopback). */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_requests.h"
#include "json.h"
#include "xalloc.h"
#include "mcp_rpc.h"
#include "mcp_tools.h"
#include "version.h"

/* Whether the client takes application/json (else it asked for
 * text/event-stream only, and gets the answer as one event). */
static bool accepts_json(const struct http_req *req)
{
	const char *a = http_req_header(req, "Accept");
	if (a == NULL || *a == '\0')
		return true;
	return strstr(a, "application/json") || strstr(a, "*/*") || !strstr(a, "text/event-stream");
}

static void reply_rpc(struct call *c, int status, yajl_gen g)
{
	size_t len;
	const char *text = jg_text(g, &len);
	if (accepts_json(c->req)) {
		api_reply_body(c, status, "application/json", text, len);
		return;
	}
	AUTOFREE char *sse = xmalloc(len + 32);
	int n = snprintf(sse, len + 32, "event: message\ndata: %.*s\n\n", (int)len, text);
	api_reply_body(c, status, "text/event-stream", sse, (size_t)n);
}

static void reply_error(struct call *c, int status, yajl_val id, int code, const char *message)
{
	AUTOGEN yajl_gen g = json_gen_new();
	mcp_gen_error(g, id, code, message);
	reply_rpc(c, status, g);
}

static void tools_done(struct call *c, const struct mcp_msg *m, yajl_gen result, int code,
		       const char *message)
{
	if (result == NULL) {
		reply_error(c, 200, m->id, code, message);
		return;
	}
	reply_rpc(c, 200, result);
}

static void gen_initialize(yajl_gen g, const struct mcp_msg *m)
{
	jg_obj(g);
	jg_kv_str(g, "protocolVersion", mcp_negotiate(json_get_str(m->params, "protocolVersion")));
	jg_str(g, "capabilities");
	jg_obj(g);
	jg_str(g, "tools");
	jg_obj(g);
	jg_kv_bool(g, "listChanged", false);
	jg_obj_end(g);
	jg_obj_end(g);
	jg_str(g, "serverInfo");
	jg_obj(g);
	jg_kv_str(g, "name", "ci");
	jg_kv_str(g, "title", "ci code-interpreter sandboxes");
	jg_kv_str(g, "version", ci_version);
	jg_obj_end(g);
	jg_kv_str(g, "instructions",
		  "Run code in isolated sandboxes. create_session gives a session whose "
		  "kernel keeps variables across run_code calls; run_code without "
		  "session_id runs once in a fresh sandbox. Files live under /workspace. "
		  "delete_session when done.");
	jg_obj_end(g);
}

/* An empty list for what we do not offer (the SDK's clients ask). */
static void gen_empty_list(yajl_gen g, const char *name)
{
	jg_obj(g);
	jg_str(g, name);
	jg_arr(g);
	jg_arr_end(g);
	jg_obj_end(g);
}

static void dispatch(struct call *c, struct mcp_msg *m)
{
	const char *method = m->method;
	if (strcmp(method, "tools/call") == 0) {
		mcp_tools_call(c, m, tools_done);
		return;
	}
	AUTOGEN yajl_gen r = json_gen_new();
	mcp_gen_result_begin(r, m->id);
	if (strcmp(method, "initialize") == 0)
		gen_initialize(r, m);
	else if (strcmp(method, "ping") == 0) {
		jg_obj(r);
		jg_obj_end(r);
	} else if (strcmp(method, "tools/list") == 0)
		mcp_tools_list(r);
	else if (strcmp(method, "resources/list") == 0)
		gen_empty_list(r, "resources");
	else if (strcmp(method, "resources/templates/list") == 0)
		gen_empty_list(r, "resourceTemplates");
	else if (strcmp(method, "prompts/list") == 0)
		gen_empty_list(r, "prompts");
	else {
		char msg[160];
		snprintf(msg, sizeof(msg), "method not found: %.100s", method);
		reply_error(c, 200, m->id, MCP_METHOD_NOT_FOUND, msg);
		mcp_msg_release(m);
		return;
	}
	jg_obj_end(r);
	mcp_msg_release(m);
	reply_rpc(c, 200, r);
}

static void mcp_body(struct call *c, const char *body, size_t len)
{
	struct mcp_msg m;
	int code;
	char msg[256];
	if (mcp_parse(body, len, &m, &code, msg, sizeof(msg)) < 0) {
		reply_error(c, 400, m.id, code, msg);
		mcp_msg_release(&m);
		return;
	}
	/* A \u0000 would end a C string early: "a\u0000b" must not be "a". */
	if (api_body_has_nul(body, len)) {
		reply_error(c, 400, m.id, MCP_INVALID_REQUEST,
			    "a string holds \\u0000 (NUL), which no argument may carry");
		mcp_msg_release(&m);
		return;
	}
	if (m.kind != MCP_REQUEST) { /* a notification, or a response to nothing we asked */
		mcp_msg_release(&m);
		api_reply_body(c, 202, NULL, NULL, 0);
		return;
	}
	dispatch(c, &m);
}

void api_mcp_post(struct call *c)
{
	const char *pv = http_req_header(c->req, "MCP-Protocol-Version");
	if (pv && strcmp(mcp_negotiate(pv), pv) != 0) {
		api_fail(
		    c, ERR_BAD_REQUEST,
		    "MCP-Protocol-Version %.40s is not supported (this server speaks %s, %s, %s)",
		    pv, mcp_protocol_versions[0], mcp_protocol_versions[1],
		    mcp_protocol_versions[2]);
		return;
	}
	api_read_body(c, mcp_body);
}

/* GET (a server-initiated stream) and DELETE (a session's end): we keep
 * neither; the spec's answer is 405. */
void api_mcp_refuse(struct call *c)
{
	http_req_add_header(c->req, "Allow", "POST");
	static const char body[] =
	    "{\"error\":{\"code\":\"bad_request\",\"message\":\"/mcp is stateless: POST one "
	    "JSON-RPC message (no server stream to GET, no session to DELETE)\"}}";
	api_reply_body(c, 405, "application/json", body, sizeof(body) - 1);
}
