/* test_mcp.c: the MCP endpoint's pure parts: JSON-RPC framing
 * (mcp_rpc.c), protocol negotiation, and the tools' argument check
 * against their schemas (mcp_tools_check). */
#include <string.h>

#include "json.h"
#include "mcp_rpc.h"
#include "mcp_tools.h"
#include "unit.h"

static int parse(const char *text, struct mcp_msg *m, int *code)
{
	char msg[256];
	return mcp_parse(text, strlen(text), m, code, msg, sizeof(msg));
}

TEST(mcp_parse_kinds)
{
	struct mcp_msg m;
	int code = 0;
	CHECK(parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}", &m, &code) == 0);
	CHECK(m.kind == MCP_REQUEST && strcmp(m.method, "ping") == 0 && m.params == NULL);
	mcp_msg_release(&m);
	CHECK(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, &code) ==
	      0);
	CHECK(m.kind == MCP_NOTIFICATION && m.id == NULL);
	mcp_msg_release(&m);
	CHECK(parse("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}", &m, &code) == 0);
	CHECK(m.kind == MCP_RESPONSE);
	mcp_msg_release(&m);
}

TEST(mcp_parse_refusals)
{
	static const struct {
		const char *text;
		int code;
	} cases[] = {
	    {"{", MCP_PARSE_ERROR},
	    {"[]", MCP_INVALID_REQUEST},
	    {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", MCP_INVALID_REQUEST},
	    {"{\"id\":1,\"method\":\"ping\"}", MCP_INVALID_REQUEST},
	    {"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", MCP_INVALID_REQUEST},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":3}",
	     MCP_INVALID_REQUEST},
	    {"{\"jsonrpc\":\"2.0\",\"id\":1}", MCP_INVALID_REQUEST},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct mcp_msg m;
		int code = 0;
		CHECK(parse(cases[i].text, &m, &code) == -1);
		CHECK(code == cases[i].code);
		mcp_msg_release(&m);
	}
	/* The id is kept for the error answer when it could be read. */
	struct mcp_msg m;
	int code;
	CHECK(parse("{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":1}", &m, &code) == -1);
	CHECK(m.id && YAJL_IS_STRING(m.id) && strcmp(m.id->u.string, "q") == 0);
	AUTOGEN yajl_gen g = json_gen_new();
	mcp_gen_error(g, m.id, code, "bad");
	size_t n;
	CHECK_STR(
	    jg_text(g, &n),
	    "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"error\":{\"code\":-32600,\"message\":\"bad\"}}");
	mcp_msg_release(&m);
}

TEST(mcp_negotiate_versions)
{
	CHECK_STR(mcp_negotiate("2025-03-26"), "2025-03-26");
	CHECK_STR(mcp_negotiate("2025-06-18"), "2025-06-18");
	CHECK_STR(mcp_negotiate("2099-01-01"), "2025-06-18");
	CHECK_STR(mcp_negotiate(NULL), "2025-06-18");
}

static int check(const char *name, const char *args, char *why)
{
	struct err *e = NULL;
	AUTOJSON yajl_val v = args ? json_parse(args, strlen(args), &e) : NULL;
	err_free(e);
	return mcp_tools_check(name, v, why, 256);
}

TEST(mcp_tools_check_schemas)
{
	char why[256];
	CHECK(check("run_code", "{\"code\":\"1\",\"retries\":2,\"on_failure\":[\"manual\"]}",
		    why) == 0);
	CHECK(check("run_code", "{\"code\":\"1\",\"fixer\":null}", why) == 0);
	CHECK(check("create_session", NULL, why) == 0);
	CHECK(check("run_code", "{}", why) == -1 && strstr(why, "missing argument \"code\""));
	CHECK(check("run_code", "{\"code\":1}", why) == -1 && strstr(why, "expected string"));
	CHECK(check("run_code", "{\"code\":\"1\",\"x\":1}", why) == -1 && strstr(why, "unknown"));
	CHECK(check("run_code", "{\"code\":\"1\",\"retries\":10}", why) == -1);
	CHECK(check("run_code", "{\"code\":\"1\",\"fixer\":\"u\"}", why) == -1);
	CHECK(check("install_packages", "{\"session_id\":\"s\",\"packages\":[]}", why) == -1);
	CHECK(check("snapshot", "{\"session_id\":\"s\",\"paths\":null}", why) == 0);
	CHECK(check("nope", "{}", why) == -1 && strstr(why, "unknown tool"));
	CHECK(check(NULL, "{}", why) == -1);
	CHECK(check("run_code", "[1]", why) == -1);
}
