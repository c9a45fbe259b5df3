/* mcp_rpc.c: JSON-RPC 2.0 messages of the MCP endpoint (mcp_rpc.h). */
#include "mcp_rpc.h"

#include <stdio.h>
#include <string.h>

#include "json.h"

const char *const mcp_protocol_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05", NULL};

const char *mcp_negotiate(const char *asked)
{
	for (size_t i = 0; asked && mcp_protocol_versions[i]; i++)
		if (strcmp(asked, mcp_protocol_versions[i]) == 0)
			return mcp_protocol_versions[i];
	return mcp_protocol_versions[0];
}

void mcp_msg_release(struct mcp_msg *m)
{
	json_free(m->tree);
	memset(m, 0, sizeof(*m));
}

static int fail(int *code, char *msg, size_t size, int c, const char *text)
{
	*code = c;
	snprintf(msg, size, "%s", text);
	return -1;
}

int mcp_parse(const char *body, size_t len, struct mcp_msg *m, int *code, char *msg, size_t size)
{
	memset(m, 0, sizeof(*m));
	struct err *e = NULL;
	m->tree = json_parse(body, len, &e);
	if (m->tree == NULL) {
		snprintf(msg, size, "parse error: %s", e ? e->message : "not JSON");
		*code = MCP_PARSE_ERROR;
		err_free(e);
		return -1;
	}
	if (YAJL_IS_ARRAY(m->tree))
		return fail(code, msg, size, MCP_INVALID_REQUEST,
			    "batches are not supported: send one JSON-RPC message per POST");
	if (!YAJL_IS_OBJECT(m->tree))
		return fail(code, msg, size, MCP_INVALID_REQUEST,
			    "a JSON-RPC message is an object");
	yajl_val id = json_get(m->tree, "id");
	if (id && (YAJL_IS_STRING(id) || YAJL_IS_INTEGER(id)))
		m->id = id;
	const char *v = json_get_str(m->tree, "jsonrpc");
	if (v == NULL || strcmp(v, "2.0") != 0)
		return fail(code, msg, size, MCP_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
	if (id && m->id == NULL)
		return fail(code, msg, size, MCP_INVALID_REQUEST,
			    "id must be a string or an integer");
	yajl_val method = json_get(m->tree, "method");
	if (method == NULL) {
		if (m->id && (json_get(m->tree, "result") || json_get(m->tree, "error"))) {
			m->kind = MCP_RESPONSE;
			return 0;
		}
		return fail(code, msg, size, MCP_INVALID_REQUEST,
			    "a message needs a method (or, as a response, result or error)");
	}
	if (!YAJL_IS_STRING(method) || method->u.string[0] == '\0')
		return fail(code, msg, size, MCP_INVALID_REQUEST,
			    "method must be a non-empty string");
	m->method = method->u.string;
	yajl_val params = json_get(m->tree, "params");
	if (params && !YAJL_IS_NULL(params) && !YAJL_IS_OBJECT(params))
		return fail(code, msg, size, MCP_INVALID_REQUEST, "params must be an object");
	m->params = params && YAJL_IS_OBJECT(params) ? params : NULL;
	m->kind = id ? MCP_REQUEST : MCP_NOTIFICATION;
	return 0;
}

static void gen_id(yajl_gen g, yajl_val id)
{
	jg_str(g, "id");
	if (id)
		jg_value(g, id);
	else
		jg_null(g);
}

void mcp_gen_error(yajl_gen g, yajl_val id, int code, const char *message)
{
	jg_obj(g);
	jg_kv_str(g, "jsonrpc", "2.0");
	gen_id(g, id);
	jg_str(g, "error");
	jg_obj(g);
	jg_kv_int(g, "code", code);
	jg_kv_str(g, "message", message);
	jg_obj_end(g);
	jg_obj_end(g);
}

void mcp_gen_result_begin(yajl_gen g, yajl_val id)
{
	jg_obj(g);
	jg_kv_str(g, "jsonrpc", "2.0");
	gen_id(g, id);
	jg_str(g, "result");
}
