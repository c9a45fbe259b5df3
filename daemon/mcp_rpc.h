/* mcp_rpc.h: JSON-RPC 2.0 framing of the MCP endpoint (api_mcp.c), pure
 * (no I/O; fuzzed by tests/fuzz/fuzz_mcp.c).
 *
 * One POST carries one message: a request (id and method), a notification
 * (method, no id) or a response (id and result or error: a client answering
 * a server request; we make none, so it is accepted and dropped). A batch
 * (an array) is refused with -32600: the protocol revisions we speak
 * (2025-06-18 removed batches) do not need them. */
#ifndef CI_MCP_RPC_H
#define CI_MCP_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

/* JSON-RPC's error codes. */
#define MCP_PARSE_ERROR -32700
#define MCP_INVALID_REQUEST -32600
#define MCP_METHOD_NOT_FOUND -32601
#define MCP_INVALID_PARAMS -32602
#define MCP_INTERNAL_ERROR -32603

/* The protocol revisions we speak, newest first (the first is offered to a
 * client asking for one we do not know). */
extern const char *const mcp_protocol_versions[];

enum mcp_kind { MCP_REQUEST, MCP_NOTIFICATION, MCP_RESPONSE };

struct mcp_msg {
	enum mcp_kind kind;
	yajl_val tree;      /* owned (mcp_msg_release) */
	yajl_val id;        /* a string or integer, borrowed from tree; NULL if none */
	const char *method; /* requests and notifications */
	yajl_val params;    /* an object, or NULL when absent */
};

/* Parse one message of len bytes. 0 on success; -1 with *code (one of the
 * codes above) and a message in msg (size bytes); m->id is then the id when
 * one could be read (the error answer carries it), else NULL, and m must
 * still be released. */
int mcp_parse(const char *body, size_t len, struct mcp_msg *m, int *code, char *msg, size_t size);
void mcp_msg_release(struct mcp_msg *m);

/* The protocol revision to answer a client asking for `asked` (NULL: the
 * newest we speak). */
const char *mcp_negotiate(const char *asked);

/* {"jsonrpc":"2.0","id":id,"error":{"code","message"}} into g (id NULL is
 * written as null). */
void mcp_gen_error(yajl_gen g, yajl_val id, int code, const char *message);
/* The head of a result answer, {"jsonrpc":"2.0","id":id,"result": ; the
 * caller writes the result value and closes the object with jg_obj_end. */
void mcp_gen_result_begin(yajl_gen g, yajl_val id);

#endif
