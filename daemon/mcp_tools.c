/* mcp_tools.c: the MCP tools (mcp_tools.h, docs/mcp.md).
 *
 * One table of JSON Schemas is both what tools/list answers and what
 * tools/call checks the arguments against (types, required members, enums,
 * bounds, additionalProperties false), so the two cannot drift. A tool is
 * then the v1 route it stands for, run in this process by api_subcall (the
 * same handler, quota admission and audit as a REST client's request), its
 * JSON answer turned into MCP content; the files tools drive the manager's
 * file ops themselves, as api_files.c does, because those routes stream.
 *
 * A tool's failure (the code raised, a session that is gone, a quota) is a
 * result with isError true, which a model reads; only a malformed call (an
 * unknown tool, arguments that break the schema) is a JSON-RPC error. */
#include "mcp_tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "codec.h"
#include "defer.h"
#include "files.h"
#include "json.h"
#include "log.h"
#include "session.h"
#include "xalloc.h"

/* What download_file answers at most (the MCP answer carries it whole). */
#define MCP_DOWNLOAD_MAX (4u << 20)

#define SID_PROP "\"session_id\":{\"type\":\"string\",\"description\":\"the session's id\"}"

/* Every tool: name, description and input schema (JSON Schema, draft
 * 2020-12 subset that check_args enforces). */
static const char tools_json[] =
    "{\"tools\":["
    "{\"name\":\"create_session\",\"title\":\"Create a sandbox session\","
    "\"description\":\"Start a sandbox with a persistent Python kernel: variables, imports and "
    "files in /workspace survive between run_code calls. Returns the session (its id for the "
    "other tools).\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"image\":{\"type\":\"string\",\"description\":\"an image profile (default python)\"},"
    "\"idle_timeout_s\":{\"type\":\"integer\",\"minimum\":1},"
    "\"max_lifetime_s\":{\"type\":\"integer\",\"minimum\":1},"
    "\"limits\":{\"type\":\"object\",\"description\":\"memory_mb, cpus, pids, disk_mb, "
    "exec_timeout_s\"},"
    "\"network\":{\"type\":\"object\",\"description\":\"{allow: [HOST[:PORT]...]}\"},"
    "\"env\":{\"type\":\"object\"},\"metadata\":{\"type\":\"object\"},"
    "\"workspace\":{\"type\":\"string\"},\"persist\":{\"type\":[\"object\",\"null\"]}}}},"

    "{\"name\":\"run_code\",\"title\":\"Run code\","
    "\"description\":\"Run code in a session (its kernel keeps state) or, without session_id, "
    "once in a fresh sandbox. stdout, stderr, the last expression and a traceback come back as "
    "text, charts as images. With retries, fixer, on_failure or retry_hopeless the code goes "
    "through the runs workflow: a failure is repaired (rules, then the fixer model) and retried, "
    "then the "
    "on_failure ladder answers (Python only).\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"code\"],\"properties\":{" SID_PROP ","
    "\"code\":{\"type\":\"string\"},"
    "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"javascript\",\"bash\"]},"
    "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1},"
    "\"image\":{\"type\":\"string\",\"description\":\"one-shot only: the image profile\"},"
    "\"retries\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9,\"description\":\"repaired "
    "attempts after the first\"},"
    "\"fixer\":{\"type\":[\"object\",\"null\"],\"description\":\"{url, model, api_key_file}; "
    "null: the rules only; absent: the daemon's default\"},"
    "\"on_failure\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"manual\","
    "\"stateless\",\"review\"]}},"
    "\"retry_hopeless\":{\"type\":\"boolean\",\"description\":\"repair even a failure the "
    "failure memory knows is hopeless (this call only)\"},"
    "\"goal\":{\"type\":\"string\",\"description\":\"what the code is for (helps the "
    "fixer)\"}}}},"

    "{\"name\":\"upload_file\",\"title\":\"Write a file\","
    "\"description\":\"Write a file under /workspace of a session (parents are made).\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"session_id\",\"path\",\"content\"],\"properties\":{" SID_PROP ","
    "\"path\":{\"type\":\"string\",\"description\":\"relative to /workspace\"},"
    "\"content\":{\"type\":\"string\"},"
    "\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"],\"description\":\"of "
    "content (default text)\"}}}},"

    "{\"name\":\"download_file\",\"title\":\"Read a file\","
    "\"description\":\"Read a file under /workspace of a session (at most 4 MiB): UTF-8 text as "
    "text, an image as image content, other bytes as a base64 blob resource.\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"session_id\",\"path\"],\"properties\":{" SID_PROP ","
    "\"path\":{\"type\":\"string\"},"
    "\"encoding\":{\"type\":\"string\",\"enum\":[\"auto\",\"text\",\"base64\"]}}}},"

    "{\"name\":\"list_files\",\"title\":\"List files\","
    "\"description\":\"List the files under /workspace of a session (or under path in it).\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"session_id\"],\"properties\":{" SID_PROP ","
    "\"path\":{\"type\":\"string\"}}}},"

    "{\"name\":\"install_packages\",\"title\":\"Install Python packages\","
    "\"description\":\"pip-install packages into a session from the operator's package index "
    "(names and version clauses only).\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"session_id\",\"packages\"],\"properties\":{" SID_PROP ","
    "\"packages\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":32,"
    "\"items\":{\"type\":\"string\"}},"
    "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1}}}},"

    "{\"name\":\"snapshot\",\"title\":\"Snapshot a session\","
    "\"description\":\"Store a session's files, packages and variables; restore gives them to a "
    "new session.\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"session_id\"],\"properties\":{" SID_PROP ","
    "\"paths\":{\"type\":[\"array\",\"null\"],\"items\":{\"type\":\"string\"}},"
    "\"variables\":{\"type\":\"boolean\"},"
    "\"workspace\":{\"type\":\"string\"}}}},"

    "{\"name\":\"restore\",\"title\":\"Restore a snapshot\","
    "\"description\":\"Create a session from a snapshot (snapshot_id) or from a workspace's "
    "latest snapshot (workspace).\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"snapshot_id\":{\"type\":\"string\"},\"workspace\":{\"type\":\"string\"},"
    "\"image\":{\"type\":\"string\"}}}},"

    "{\"name\":\"delete_session\",\"title\":\"Delete a session\","
    "\"description\":\"End a session and remove its sandbox.\","
    "\"inputSchema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"session_id\"],\"properties\":{" SID_PROP "}}}"
    "]}";

/* The table, parsed once (it is ours: a failure is a bug). */
static yajl_val tools_tree(void)
{
	static yajl_val tree;
	if (tree == NULL) {
		struct err *e = NULL;
		tree = json_parse(tools_json, sizeof(tools_json) - 1, &e);
		if (tree == NULL) {
			log_error("mcp tools table: %s", e ? e->message : "?");
			abort();
		}
	}
	return tree;
}

void mcp_tools_list(yajl_gen g)
{
	jg_value(g, tools_tree());
}

static yajl_val tool_schema(const char *name)
{
	yajl_val tools = json_get(tools_tree(), "tools");
	for (size_t i = 0; i < json_arr_len(tools); i++) {
		yajl_val t = json_arr_at(tools, i);
		const char *n = json_get_str(t, "name");
		if (n && strcmp(n, name) == 0)
			return json_get(t, "inputSchema");
	}
	return NULL;
}

/* ---- checking arguments against a schema ---- */

static bool type_is(yajl_val v, const char *type)
{
	if (strcmp(type, "string") == 0)
		return YAJL_IS_STRING(v);
	if (strcmp(type, "integer") == 0)
		return YAJL_IS_INTEGER(v);
	if (strcmp(type, "boolean") == 0)
		return YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v);
	if (strcmp(type, "object") == 0)
		return YAJL_IS_OBJECT(v);
	if (strcmp(type, "array") == 0)
		return YAJL_IS_ARRAY(v);
	if (strcmp(type, "null") == 0)
		return YAJL_IS_NULL(v);
	return false;
}

static int check_value(yajl_val v, yajl_val schema, const char *name, char *msg, size_t size)
{
	yajl_val type = json_get(schema, "type");
	bool ok = false;
	if (type && YAJL_IS_STRING(type))
		ok = type_is(v, type->u.string);
	for (size_t i = 0; type && YAJL_IS_ARRAY(type) && i < json_arr_len(type); i++) {
		yajl_val t = json_arr_at(type, i);
		ok = ok || (YAJL_IS_STRING(t) && type_is(v, t->u.string));
	}
	if (!ok) {
		snprintf(msg, size, "%s: expected %s, got %s", name,
			 type && YAJL_IS_STRING(type) ? type->u.string : "another type",
			 json_type_name(v));
		return -1;
	}
	yajl_val en = json_get(schema, "enum");
	if (en && YAJL_IS_STRING(v)) {
		bool found = false;
		for (size_t i = 0; i < json_arr_len(en); i++) {
			yajl_val x = json_arr_at(en, i);
			found =
			    found || (YAJL_IS_STRING(x) && strcmp(x->u.string, v->u.string) == 0);
		}
		if (!found) {
			snprintf(msg, size, "%s: '%.64s' is not one of the allowed values", name,
				 v->u.string);
			return -1;
		}
	}
	int64_t bound;
	if (YAJL_IS_INTEGER(v) && json_get_int(schema, "minimum", &bound) &&
	    YAJL_GET_INTEGER(v) < bound) {
		snprintf(msg, size, "%s: must be at least %lld", name, (long long)bound);
		return -1;
	}
	if (YAJL_IS_INTEGER(v) && json_get_int(schema, "maximum", &bound) &&
	    YAJL_GET_INTEGER(v) > bound) {
		snprintf(msg, size, "%s: must be at most %lld", name, (long long)bound);
		return -1;
	}
	if (YAJL_IS_ARRAY(v)) {
		size_t n = json_arr_len(v);
		if (json_get_int(schema, "minItems", &bound) && (int64_t)n < bound) {
			snprintf(msg, size, "%s: needs at least %lld items", name,
				 (long long)bound);
			return -1;
		}
		if (json_get_int(schema, "maxItems", &bound) && (int64_t)n > bound) {
			snprintf(msg, size, "%s: at most %lld items", name, (long long)bound);
			return -1;
		}
		yajl_val items = json_get(schema, "items");
		for (size_t i = 0; items && i < n; i++) {
			char item[80];
			snprintf(item, sizeof(item), "%s[%zu]", name, i);
			if (check_value(json_arr_at(v, i), items, item, msg, size) < 0)
				return -1;
		}
	}
	return 0;
}

/* args (an object, or NULL for none) against the tool's input schema. */
static int check_args(yajl_val args, yajl_val schema, char *msg, size_t size)
{
	yajl_val props = json_get(schema, "properties");
	if (args && !YAJL_IS_OBJECT(args)) {
		snprintf(msg, size, "arguments must be an object");
		return -1;
	}
	for (size_t i = 0; args && i < args->u.object.len; i++) {
		const char *k = args->u.object.keys[i];
		yajl_val ps = json_get(props, k);
		if (ps == NULL) {
			snprintf(msg, size, "unknown argument \"%.64s\"", k);
			return -1;
		}
		if (check_value(args->u.object.values[i], ps, k, msg, size) < 0)
			return -1;
	}
	yajl_val req = json_get(schema, "required");
	for (size_t i = 0; i < json_arr_len(req); i++) {
		yajl_val r = json_arr_at(req, i);
		if (YAJL_IS_STRING(r) && json_get(args, r->u.string) == NULL) {
			snprintf(msg, size, "missing argument \"%s\"", r->u.string);
			return -1;
		}
	}
	return 0;
}

int mcp_tools_check(const char *name, yajl_val args, char *msg, size_t size)
{
	yajl_val schema = name ? tool_schema(name) : NULL;
	if (schema == NULL) {
		snprintf(msg, size, "unknown tool: %.100s (tools/list has them)", name ? name : "");
		return -1;
	}
	return check_args(args, schema, msg, size);
}

/* ---- one call in flight ---- */

enum tool {
	TOOL_CREATE,
	TOOL_RUN,
	TOOL_UPLOAD,
	TOOL_DOWNLOAD,
	TOOL_LIST,
	TOOL_INSTALL,
	TOOL_SNAPSHOT,
	TOOL_RESTORE,
	TOOL_DELETE,
};

static const char *const tool_names[] = {
    [TOOL_CREATE] = "create_session", [TOOL_RUN] = "run_code",
    [TOOL_UPLOAD] = "upload_file",    [TOOL_DOWNLOAD] = "download_file",
    [TOOL_LIST] = "list_files",       [TOOL_INSTALL] = "install_packages",
    [TOOL_SNAPSHOT] = "snapshot",     [TOOL_RESTORE] = "restore",
    [TOOL_DELETE] = "delete_session",
};

struct tool_call {
	struct call *c;
	struct mcp_msg m;
	mcp_tools_done done;
	enum tool tool;
	yajl_val args; /* borrowed from m */
	bool run;      /* run_code through the runs workflow */
	char sid[SESSION_ID_LEN + 1];
	/* The files tools. */
	struct file_op *op;
	struct buf data; /* upload: the bytes to send; download: what came */
	size_t sent;
	bool ended;
	bool too_big; /* download: over MCP_DOWNLOAD_MAX */
	int64_t size;
	const char *encoding;
	const char *prefix; /* list_files: the sub-path, or NULL */
	/* The answer (answer()): kept for the loop while starting. */
	bool starting; /* mcp_tools_call has not returned yet */
	yajl_gen answer;
	int code;
	char message[256];
};

static void tc_free(struct tool_call *t)
{
	mcp_msg_release(&t->m);
	buf_release(&t->data);
	free(t);
}

static void deliver(struct tool_call *t)
{
	t->done(t->c, &t->m, t->answer, t->code, t->message);
	json_gen_cleanup(&t->answer);
	tc_free(t);
}

static void deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver(arg);
}

/* The end of t: g its whole answer, or NULL for a JSON-RPC error. An answer
 * known while mcp_tools_call still runs goes out from the loop (a callback
 * never runs inside the call that registered it). */
static void answer(struct tool_call *t, yajl_gen g, int code, const char *message)
{
	t->answer = g;
	t->code = code;
	snprintf(t->message, sizeof(t->message), "%s", message ? message : "");
	if (t->starting)
		defer_call(t->c->api->base, deliver_cb, t);
	else
		deliver(t);
}

/* The answer's head, up to the CallToolResult's members. */
static yajl_gen result_begin(struct tool_call *t)
{
	yajl_gen g = json_gen_new();
	mcp_gen_result_begin(g, t->m.id);
	jg_obj(g);
	jg_str(g, "content");
	jg_arr(g);
	return g;
}

/* Close the content list, add isError and structuredContent (NULL: none),
 * and answer. */
static void result_end(struct tool_call *t, yajl_gen g, bool is_error, yajl_val structured)
{
	jg_arr_end(g);
	jg_kv_bool(g, "isError", is_error);
	if (structured && YAJL_IS_OBJECT(structured)) {
		jg_str(g, "structuredContent");
		jg_value(g, structured);
	}
	jg_obj_end(g);
	jg_obj_end(g);
	answer(t, g, 0, NULL);
}

static void text_item(yajl_gen g, const char *text, size_t len)
{
	jg_obj(g);
	jg_kv_str(g, "type", "text");
	jg_str(g, "text");
	jg_strn(g, text, len);
	jg_obj_end(g);
}

/* label, a newline or a space, then text (whole). */
static void labelled_item(yajl_gen g, const char *label, const char *text, bool newline)
{
	size_t ll = strlen(label), tl = strlen(text);
	AUTOFREE char *s = xmalloc(ll + tl + 2);
	memcpy(s, label, ll);
	s[ll] = newline ? '\n' : ' ';
	memcpy(s + ll + 1, text, tl + 1);
	text_item(g, s, ll + 1 + tl);
}

static void textf_item(yajl_gen g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void textf_item(yajl_gen g, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	text_item(g, text, n < 0 ? 0 : (size_t)n >= sizeof(text) ? sizeof(text) - 1 : (size_t)n);
}

/* A tool's failure: isError with its text (and the error as structured). */
static void tool_error(struct tool_call *t, const char *code, const char *message,
		       yajl_val structured)
{
	yajl_gen g = result_begin(t);
	textf_item(g, "%s: %s", code, message);
	result_end(t, g, true, structured);
}

static void tool_err(struct tool_call *t, const struct err *e)
{
	tool_error(t, err_code_name(e->code), e->message, NULL);
}

/* A malformed call: a JSON-RPC error. */
static void call_invalid(struct tool_call *t, int code, const char *message)
{
	answer(t, NULL, code, message);
}

/* ---- exec results as content ---- */

/* Labelled text items for an exec result, images for its displays; true
 * when the code did not end ok. */
static bool exec_content(yajl_gen g, yajl_val r)
{
	const char *status = json_get_str(r, "status");
	size_t items = 0;
	const char *out = json_get_str(r, "stdout"), *err = json_get_str(r, "stderr");
	if (out && *out)
		text_item(g, out, strlen(out)), items++;
	if (err && *err)
		labelled_item(g, "[stderr]", err, true), items++;
	const char *result = json_get_str(r, "result");
	if (result)
		labelled_item(g, "[result]", result, false), items++;
	yajl_val e = json_get(r, "error");
	if (e && YAJL_IS_OBJECT(e)) {
		struct buf b;
		buf_init(&b, 64 * 1024);
		const char *ename = json_get_str(e, "ename"), *evalue = json_get_str(e, "evalue");
		char head[512];
		int n = snprintf(head, sizeof(head), "[error] %.200s: %.300s\n",
				 ename ? ename : "Error", evalue ? evalue : "");
		buf_append(&b, head, (size_t)n);
		yajl_val tb = json_get(e, "traceback");
		for (size_t i = 0; i < json_arr_len(tb); i++) {
			yajl_val line = json_arr_at(tb, i);
			if (YAJL_IS_STRING(line) &&
			    (buf_append(&b, line->u.string, strlen(line->u.string)) < 0 ||
			     buf_append(&b, "\n", 1) < 0))
				break;
		}
		text_item(g, b.data, b.len);
		buf_release(&b);
		items++;
	}
	yajl_val display = json_get(r, "display");
	for (size_t i = 0; i < json_arr_len(display); i++) {
		yajl_val d = json_arr_at(display, i);
		const char *mime = json_get_str(d, "mime"), *data = json_get_str(d, "data");
		if (mime && data && strncmp(mime, "image/", 6) == 0 &&
		    strcmp(mime, "image/svg+xml")) {
			jg_obj(g);
			jg_kv_str(g, "type", "image");
			jg_kv_str(g, "data", data);
			jg_kv_str(g, "mimeType", mime);
			jg_obj_end(g);
			items++;
		}
	}
	bool failed = status == NULL || strcmp(status, "ok") != 0;
	if (failed && (e == NULL || !YAJL_IS_OBJECT(e))) {
		const char *reason = json_get_str(r, "reason");
		textf_item(g, "[%s] %.500s", status ? status : "failed", reason ? reason : ""),
		    items++;
	}
	if (items == 0)
		textf_item(g, "(no output)");
	return failed;
}

/* ---- the tools that are a route ---- */

/* An answer of the route: an error becomes isError; else each tool says it. */
static void route_answered(int status, const char *body, size_t len, void *arg)
{
	struct tool_call *t = arg;
	struct err *pe = NULL;
	AUTOJSON yajl_val v = len ? json_parse(body, len, &pe) : NULL;
	err_free(pe);
	if (status >= 400) {
		const char *code = json_path_str(v, "error.code"),
			   *message = json_path_str(v, "error.message");
		tool_error(t, code ? code : "error", message ? message : "the request failed", v);
		return;
	}
	yajl_gen g = result_begin(t);
	bool failed = false;
	switch (t->tool) {
	case TOOL_CREATE:
	case TOOL_RESTORE:
		textf_item(g, "session %s is %s (image %s)%s", json_get_str(v, "id"),
			   json_get_str(v, "state") ? json_get_str(v, "state") : "ready",
			   json_get_str(v, "image") ? json_get_str(v, "image") : "default",
			   t->tool == TOOL_RESTORE ? ", restored" : "");
		break;
	case TOOL_RUN:
		if (t->run) {
			const char *rs = json_get_str(v, "status");
			textf_item(g, "[run] %s, %zu attempt(s)%s%s", rs ? rs : "?",
				   json_arr_len(json_get(v, "attempts")),
				   json_path_str(v, "degraded.mode") ? ", degraded to " : "",
				   json_path_str(v, "degraded.mode")
				       ? json_path_str(v, "degraded.mode")
				       : "");
			yajl_val result = json_get(v, "result");
			if (result && YAJL_IS_OBJECT(result))
				exec_content(g, result);
			failed = rs == NULL || strcmp(rs, "ok") != 0;
		} else {
			failed = exec_content(g, v);
		}
		break;
	case TOOL_INSTALL: {
		yajl_val inst = json_get(v, "installed");
		struct buf b;
		buf_init(&b, 8192);
		buf_append(&b, "installed:", 10);
		for (size_t i = 0; i < json_arr_len(inst); i++) {
			yajl_val p = json_arr_at(inst, i);
			const char *name =
			    YAJL_IS_STRING(p) ? p->u.string : json_get_str(p, "name");
			const char *ver = YAJL_IS_OBJECT(p) ? json_get_str(p, "version") : NULL;
			char one[200];
			int n = snprintf(one, sizeof(one), " %.100s%s%.60s", name ? name : "?",
					 ver ? "==" : "", ver ? ver : "");
			buf_append(&b, one, (size_t)n);
		}
		text_item(g, b.data, b.len);
		buf_release(&b);
		break;
	}
	case TOOL_SNAPSHOT: {
		int64_t files = 0, size = 0;
		json_get_int(v, "files", &files);
		json_get_int(v, "size", &size);
		textf_item(g,
			   "snapshot %s %s (%lld files, %lld bytes); restore it with restore "
			   "{\"snapshot_id\": \"%s\"}",
			   json_get_str(v, "id"), json_get_str(v, "state"), (long long)files,
			   (long long)size, json_get_str(v, "id"));
		break;
	}
	case TOOL_DELETE: textf_item(g, "session %s deleted", t->sid); break;
	default: break;
	}
	result_end(t, g, failed, v);
}

/* A route's body: the tool's arguments, less those named in drop, plus
 * what extra adds (a JSON object's members, without the braces). */
static char *route_body(yajl_val args, const char *const *drop, const char *extra, size_t *len)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	for (size_t i = 0; args && YAJL_IS_OBJECT(args) && i < args->u.object.len; i++) {
		const char *k = args->u.object.keys[i];
		bool dropped = false;
		for (size_t j = 0; drop && drop[j]; j++)
			dropped = dropped || strcmp(drop[j], k) == 0;
		if (dropped)
			continue;
		jg_str(g, k);
		jg_value(g, args->u.object.values[i]);
	}
	jg_obj_end(g);
	size_t n;
	const char *text = jg_text(g, &n);
	size_t extra_len = extra ? strlen(extra) : 0;
	char *out = xmalloc(n + extra_len + 2);
	memcpy(out, text, n - 1); /* without the closing brace */
	size_t at = n - 1;
	if (extra_len) {
		if (n > 2)
			out[at++] = ',';
		memcpy(out + at, extra, extra_len);
		at += extra_len;
	}
	out[at++] = '}';
	out[at] = '\0';
	*len = at;
	return out;
}

static void subcall(struct tool_call *t, const char *method, const char *path, const char *body,
		    size_t len)
{
	api_subcall(t->c, method, path, body, len, route_answered, t);
}

static void run_tool(struct tool_call *t)
{
	yajl_val args = t->args;
	t->run = json_get(args, "retries") || json_get(args, "fixer") ||
		 json_get(args, "on_failure") || json_get(args, "retry_hopeless");
	bool oneshot = t->sid[0] == '\0';
	char path[96];
	if (!oneshot && json_get(args, "image")) {
		tool_error(t, "bad_request", "image is for a one-shot run (without session_id)",
			   NULL);
		return;
	}
	size_t len;
	AUTOFREE char *body = NULL;
	if (t->run) {
		const char *lang = json_get_str(args, "language");
		if (lang && strcmp(lang, "python") != 0) {
			tool_error(t, "bad_request",
				   "retries, fixer, on_failure and retry_hopeless are for Python "
				   "code (the runs workflow repairs Python)",
				   NULL);
			return;
		}
		int64_t retries = 2;
		json_get_int(args, "retries", &retries);
		char extra[40];
		snprintf(extra, sizeof(extra), "\"max_attempts\":%lld", (long long)retries + 1);
		static const char *const drop[] = {"session_id", "retries", "language", NULL};
		body = route_body(args, drop, extra, &len);
		if (oneshot)
			snprintf(path, sizeof(path), "/v1/runs");
		else
			snprintf(path, sizeof(path), "/v1/sessions/%s/runs", t->sid);
	} else {
		static const char *const drop[] = {"session_id", NULL};
		body = route_body(args, drop, NULL, &len);
		if (oneshot)
			snprintf(path, sizeof(path), "/v1/exec");
		else
			snprintf(path, sizeof(path), "/v1/sessions/%s/exec", t->sid);
	}
	subcall(t, "POST", path, body, len);
}

/* ---- the files tools ---- */

static void file_done(const struct err *e, int64_t size, yajl_val answer, void *arg);

static void upload_push(struct tool_call *t)
{
	while (!t->ended && t->op && t->sent < t->data.len) {
		size_t n = t->data.len - t->sent;
		if (n > FILES_CHUNK)
			n = FILES_CHUNK;
		bool pause = files_put_data(t->op, t->data.data + t->sent, n);
		t->sent += n;
		if (pause)
			return;
	}
	if (!t->ended && t->op) {
		t->ended = true;
		files_put_end(t->op);
	}
}

static void upload_writable(void *arg)
{
	upload_push(arg);
}

/* Past the cap the bytes are dropped and the end answers the error: the
 * op is not cancelled from inside its own callback. */
static void download_data(const char *data, size_t len, void *arg)
{
	struct tool_call *t = arg;
	if (!t->too_big && buf_append(&t->data, data, len) < 0)
		t->too_big = true; /* the announced size lied, or the file grew */
}

static void download_meta(int64_t size, void *arg)
{
	struct tool_call *t = arg;
	t->size = size;
	t->too_big = size > (int64_t)MCP_DOWNLOAD_MAX;
}

static const struct file_op_cbs upload_cbs = {.writable = upload_writable, .done = file_done};
static const struct file_op_cbs download_cbs = {
    .meta = download_meta, .data = download_data, .done = file_done};
static const struct file_op_cbs list_cbs = {.done = file_done};

static const char *guess_image_mime(const char *path)
{
	const char *dot = strrchr(path, '.');
	if (dot == NULL)
		return NULL;
	if (strcasecmp(dot, ".png") == 0)
		return "image/png";
	if (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0)
		return "image/jpeg";
	if (strcasecmp(dot, ".gif") == 0)
		return "image/gif";
	if (strcasecmp(dot, ".webp") == 0)
		return "image/webp";
	return NULL;
}

static void download_answer(struct tool_call *t)
{
	const char *path = t->c->path;
	const char *enc = t->encoding ? t->encoding : "auto";
	bool utf8 =
	    json_utf8_valid_prefix((const unsigned char *)(t->data.data ? t->data.data : ""),
				   t->data.len) == t->data.len &&
	    (t->data.len == 0 || memchr(t->data.data, 0, t->data.len) == NULL);
	if (strcmp(enc, "text") == 0 && !utf8) {
		tool_error(t, "bad_request", "the file is not UTF-8 text (use encoding base64)",
			   NULL);
		return;
	}
	yajl_gen g = result_begin(t);
	const char *image = guess_image_mime(path);
	if (strcmp(enc, "text") == 0 || (strcmp(enc, "auto") == 0 && utf8 && image == NULL)) {
		text_item(g, t->data.data ? t->data.data : "", t->data.len);
	} else {
		AUTOFREE char *b64 =
		    codec_base64_encode((const unsigned char *)t->data.data, t->data.len);
		jg_obj(g);
		if (image && strcmp(enc, "auto") == 0) {
			jg_kv_str(g, "type", "image");
			jg_kv_str(g, "data", b64);
			jg_kv_str(g, "mimeType", image);
		} else {
			jg_kv_str(g, "type", "resource");
			jg_str(g, "resource");
			jg_obj(g);
			char uri[FILES_PATH_MAX + 80];
			snprintf(uri, sizeof(uri), "file:///workspace/%s", path);
			jg_kv_str(g, "uri", uri);
			jg_kv_str(g, "mimeType", image ? image : "application/octet-stream");
			jg_kv_str(g, "blob", b64);
			jg_obj_end(g);
		}
		jg_obj_end(g);
	}
	result_end(t, g, false, NULL);
}

static void list_answer(struct tool_call *t, yajl_val answer)
{
	yajl_gen g = result_begin(t);
	AUTOGEN yajl_gen s = json_gen_new();
	struct buf b;
	buf_init(&b, 256 * 1024);
	jg_obj(s);
	jg_str(s, "files");
	jg_arr(s);
	yajl_val files = json_get(answer, "files");
	size_t prefix_len = t->prefix ? strlen(t->prefix) : 0;
	while (prefix_len && t->prefix[prefix_len - 1] == '/') /* "data/" is "data" */
		prefix_len--;
	size_t shown = 0;
	for (size_t i = 0; i < json_arr_len(files) && i < 10000; i++) {
		yajl_val f = json_arr_at(files, i);
		const char *p = json_get_str(f, "path"), *type = json_get_str(f, "type");
		int64_t size = 0;
		if (p == NULL || !json_get_int(f, "size", &size))
			continue;
		if (prefix_len && !(strncmp(p, t->prefix, prefix_len) == 0 &&
				    (p[prefix_len] == '/' || p[prefix_len] == '\0')))
			continue;
		jg_obj(s);
		jg_kv_str(s, "path", p);
		jg_kv_int(s, "size", size);
		jg_kv_str(s, "type", type ? type : "file");
		jg_obj_end(s);
		char line[FILES_PATH_MAX + 64];
		int n = snprintf(line, sizeof(line), "%s\t%lld\t%s\n", type ? type : "file",
				 (long long)size, p);
		buf_append(&b, line, (size_t)n);
		shown++;
	}
	jg_arr_end(s);
	jg_obj_end(s);
	if (shown)
		text_item(g, b.data, b.len);
	else
		textf_item(g, "(no files)");
	buf_release(&b);
	size_t n;
	const char *text = jg_text(s, &n);
	struct err *pe = NULL;
	AUTOJSON yajl_val structured = json_parse(text, n, &pe);
	err_free(pe);
	result_end(t, g, false, structured);
}

static void file_done(const struct err *e, int64_t size, yajl_val answer, void *arg)
{
	struct tool_call *t = arg;
	t->op = NULL;
	if (t->tool == TOOL_UPLOAD)
		api_audit_file(t->c, "file_write", size, e);
	if (e) {
		tool_err(t, e);
		return;
	}
	if (t->tool == TOOL_UPLOAD) {
		yajl_gen g = result_begin(t);
		textf_item(g, "wrote %lld bytes to /workspace/%s", (long long)size, t->c->path);
		result_end(t, g, false, NULL);
	} else if (t->tool == TOOL_DOWNLOAD && t->too_big) {
		char msg[200];
		snprintf(msg, sizeof(msg),
			 "the file (%lld bytes) is over download_file's cap of %u MiB; use GET "
			 "/v1/sessions/{id}/files/{path}",
			 (long long)t->size, MCP_DOWNLOAD_MAX >> 20);
		tool_error(t, "payload_too_large", msg, NULL);
	} else if (t->tool == TOOL_DOWNLOAD) {
		download_answer(t);
	} else {
		list_answer(t, answer);
	}
}

static void missing_cb(const struct err *e, void *arg)
{
	tool_err(arg, e);
}

static void files_tool(struct tool_call *t)
{
	struct call *c = t->c;
	const char *path = json_get_str(t->args, "path");
	struct err *e = NULL;
	if (t->tool == TOOL_LIST) {
		t->prefix = path && *path && strcmp(path, ".") ? path : NULL;
	} else if (files_path_check(path, &e) < 0) {
		tool_err(t, e);
		err_free(e);
		return;
	}
	/* The audit's entry names the session and the file (api_audit.c). */
	memcpy(c->id, t->sid, sizeof(c->id));
	free(c->path);
	c->path = t->tool == TOOL_LIST ? NULL : xstrdup(path);
	const struct session *s = manager_get(c->api->mgr, t->sid, c->tenant);
	if (s == NULL) {
		manager_explain_missing(c->api->mgr, t->sid, c->tenant, missing_cb, t);
		return;
	}
	enum file_op_kind kind = FILE_LIST;
	const struct file_op_cbs *cbs = &list_cbs;
	if (t->tool == TOOL_UPLOAD) {
		kind = FILE_PUT;
		cbs = &upload_cbs;
		const char *content = json_get_str(t->args, "content");
		const char *enc = json_get_str(t->args, "encoding");
		buf_init(&t->data, (size_t)(s->limits.disk_mb << 20));
		int rc = enc && strcmp(enc, "base64") == 0
			     ? codec_base64_decode(content, &t->data)
			     : buf_append(&t->data, content, strlen(content));
		if (rc < 0) {
			api_audit_file(c, "file_write", -1,
				       &(struct err){.code = ERR_BAD_REQUEST, .message = ""});
			tool_error(t, "bad_request",
				   enc && strcmp(enc, "base64") == 0
				       ? "content is not base64, or larger than the session's disk"
				       : "content is larger than the session's disk",
				   NULL);
			return;
		}
	} else if (t->tool == TOOL_DOWNLOAD) {
		kind = FILE_GET;
		cbs = &download_cbs;
		t->encoding = json_get_str(t->args, "encoding");
		buf_init(&t->data, MCP_DOWNLOAD_MAX);
	}
	t->op =
	    manager_file_start(c->api->mgr, t->sid, c->tenant, kind, c->path, false, cbs, t, &e);
	if (t->op == NULL) {
		if (t->tool == TOOL_UPLOAD)
			api_audit_file(c, "file_write", -1, e);
		tool_err(t, e);
		err_free(e);
		return;
	}
	if (kind == FILE_PUT && files_op_active(t->op))
		upload_push(t);
}

/* ---- tools/call ---- */

static void tool_start(struct tool_call *t);

void mcp_tools_call(struct call *c, struct mcp_msg *m, mcp_tools_done done)
{
	struct tool_call *t = xcalloc(1, sizeof(*t));
	t->c = c;
	t->m = *m;
	memset(m, 0, sizeof(*m));
	t->done = done;
	t->starting = true;
	tool_start(t);
	t->starting = false; /* alive: every answer so far was deferred */
}

static void tool_start(struct tool_call *t)
{
	const char *name = json_get_str(t->m.params, "name");
	if (name == NULL) {
		call_invalid(t, MCP_INVALID_PARAMS, "tools/call needs params.name, a string");
		return;
	}
	size_t n = sizeof(tool_names) / sizeof(tool_names[0]), i = 0;
	while (i < n && strcmp(tool_names[i], name) != 0)
		i++;
	if (i == n) {
		char msg[160];
		snprintf(msg, sizeof(msg), "unknown tool: %.100s (tools/list has them)", name);
		call_invalid(t, MCP_INVALID_PARAMS, msg);
		return;
	}
	t->tool = (enum tool)i;
	t->args = json_get(t->m.params, "arguments");
	if (t->args && YAJL_IS_NULL(t->args))
		t->args = NULL;
	char msg[256];
	if (check_args(t->args, tool_schema(name), msg, sizeof(msg)) < 0) {
		call_invalid(t, MCP_INVALID_PARAMS, msg);
		return;
	}
	const char *sid = json_get_str(t->args, "session_id");
	if (sid && !session_id_valid(sid)) {
		/* As the REST API answers a malformed id: no such session. */
		tool_error(t, "not_found", "no such session (malformed id)", NULL);
		return;
	}
	if (sid)
		snprintf(t->sid, sizeof(t->sid), "%s", sid);
	char path[96];
	size_t len;
	switch (t->tool) {
	case TOOL_CREATE: {
		AUTOFREE char *body = route_body(t->args, NULL, NULL, &len);
		subcall(t, "POST", "/v1/sessions", body, len);
		return;
	}
	case TOOL_RESTORE: {
		const char *snap = json_get_str(t->args, "snapshot_id"),
			   *ws = json_get_str(t->args, "workspace");
		if ((snap == NULL) == (ws == NULL)) {
			call_invalid(t, MCP_INVALID_PARAMS,
				     "restore takes one of snapshot_id and workspace");
			return;
		}
		AUTOGEN yajl_gen g = json_gen_new();
		jg_obj(g);
		jg_kv_str(g, snap ? "restore" : "workspace", snap ? snap : ws);
		if (json_get_str(t->args, "image"))
			jg_kv_str(g, "image", json_get_str(t->args, "image"));
		jg_obj_end(g);
		const char *body = jg_text(g, &len);
		subcall(t, "POST", "/v1/sessions", body, len);
		return;
	}
	case TOOL_RUN: run_tool(t); return;
	case TOOL_INSTALL: {
		static const char *const drop[] = {"session_id", "packages", NULL};
		AUTOGEN yajl_gen g = json_gen_new();
		jg_value(g, json_get(t->args, "packages"));
		const char *pkgs = jg_text(g, &len);
		char *extra = xmalloc(len + 8);
		snprintf(extra, len + 8, "\"pip\":%s", pkgs);
		AUTOFREE char *body = route_body(t->args, drop, extra, &len);
		free(extra);
		snprintf(path, sizeof(path), "/v1/sessions/%s/packages", t->sid);
		subcall(t, "POST", path, body, len);
		return;
	}
	case TOOL_SNAPSHOT: {
		static const char *const drop[] = {"session_id", NULL};
		AUTOFREE char *body = route_body(t->args, drop, NULL, &len);
		snprintf(path, sizeof(path), "/v1/sessions/%s/snapshots", t->sid);
		subcall(t, "POST", path, body, len);
		return;
	}
	case TOOL_DELETE:
		snprintf(path, sizeof(path), "/v1/sessions/%s", t->sid);
		subcall(t, "DELETE", path, NULL, 0);
		return;
	case TOOL_UPLOAD:
	case TOOL_DOWNLOAD:
	case TOOL_LIST: files_tool(t); return;
	}
}
