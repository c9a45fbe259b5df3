/* fuzz_mcp.c: the MCP endpoint's parsers from any bytes: the JSON-RPC
 * framing (mcp_parse) and, for a tools/call, the arguments' check against
 * the tool's schema (mcp_tools_check). Whatever the bytes: a parse either
 * succeeds with a kind that fits what it found (a request has an id and a
 * method, a notification a method and no id, a response an id and no
 * method) or fails with one of JSON-RPC's codes; an error answer for it
 * can always be written; the check never reads past what it was given. */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "mcp_rpc.h"
#include "mcp_tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp_msg m;
	int code = 0;
	char msg[256];
	int rc = mcp_parse((const char *)data, size, &m, &code, msg, sizeof(msg));
	if (rc < 0) {
		if (code != MCP_PARSE_ERROR && code != MCP_INVALID_REQUEST)
			abort();
		if (strlen(msg) >= sizeof(msg))
			abort();
	} else {
		if (m.kind == MCP_REQUEST && (m.id == NULL || m.method == NULL))
			abort();
		if (m.kind == MCP_NOTIFICATION && (m.id != NULL || m.method == NULL))
			abort();
		if (m.kind == MCP_RESPONSE && (m.id == NULL || m.method != NULL))
			abort();
		if (m.params && !YAJL_IS_OBJECT(m.params))
			abort();
		if (m.method && strcmp(m.method, "tools/call") == 0) {
			char why[256];
			why[0] = '\0';
			mcp_tools_check(json_get_str(m.params, "name"),
					json_get(m.params, "arguments"), why, sizeof(why));
			if (strlen(why) >= sizeof(why))
				abort();
		}
		(void)mcp_negotiate(json_get_str(m.params, "protocolVersion"));
	}
	yajl_gen g = json_gen_new();
	mcp_gen_error(g, m.id, code, msg);
	size_t n;
	if (jg_text(g, &n) == NULL || n == 0)
		abort();
	yajl_gen_free(g);
	mcp_msg_release(&m);
	return 0;
}
