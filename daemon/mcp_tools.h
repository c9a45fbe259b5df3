/* mcp_tools.h: the MCP endpoint's tools (docs/mcp.md): their list with
 * JSON Schemas, and tools/call, each tool mapped onto the v1 route it is
 * (api_subcall: the same handler, quotas and audit as for a REST client)
 * or, for the files, onto the manager's file ops as api_files.c does. */
#ifndef CI_MCP_TOOLS_H
#define CI_MCP_TOOLS_H

#include <yajl/yajl_gen.h>

#include "api.h"
#include "mcp_rpc.h"

/* The tools/list result ({"tools":[...]}) into g. */
void mcp_tools_list(yajl_gen g);

/* Check a tools/call's name and arguments (an object or NULL) against the
 * tool's schema: 0, or -1 with why in msg (size bytes). Pure, for the fuzz
 * target; mcp_tools_call checks with it. */
int mcp_tools_check(const char *name, yajl_val args, char *msg, size_t size);

/* How a tools/call ends: answer, the whole JSON-RPC answer whose result is
 * a CallToolResult (isError for a tool's failure), or, when answer is
 * NULL, a JSON-RPC error (code, message). */
typedef void (*mcp_tools_done)(struct call *c, const struct mcp_msg *m, yajl_gen answer, int code,
			       const char *message);

/* Run the tools/call request m (taken: released after done) for c's
 * caller; done runs exactly once, from the loop. */
void mcp_tools_call(struct call *c, struct mcp_msg *m, mcp_tools_done done);

#endif
