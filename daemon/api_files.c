/* api_files.c: /v1/sessions/{id}/files[/{path}]: list, upload (PUT,
 * streamed with backpressure both ways), download (GET) and delete. The
 * path was decoded and checked by the dispatch (c->path). */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "json.h"
#include "xalloc.h"

/* A files-API request in flight; it owns its call. Freed right after its
 * single reply. */
struct xfer {
	struct call *c;
	enum file_op_kind kind;
	struct file_op *op;
	int64_t limit;    /* PUT: the session's disk size */
	int64_t received; /* PUT */
	int64_t size;     /* GET: announced by the sandbox */
	int64_t sent;     /* GET */
	bool started;     /* GET: the 200 head is out */
};

#define DOWNLOAD_BACKLOG (1024 * 1024)

/* The request is over (its reply is out or the server gave it). */
static void xfer_free(struct xfer *x)
{
	api_call_free(x->c);
	free(x);
}

/* Answer (api_reply) and free. */
static void xfer_reply(struct xfer *x, int status, yajl_gen g, const struct err *e)
{
	api_reply(x->c, status, g, e);
	free(x);
}

static void xfer_client_gone(struct http_req *req, void *arg)
{
	struct xfer *x = arg;
	if (x->op)
		files_cancel(x->op);
	x->op = NULL;
	if (x->started) {
		http_req_reply_abort(req);
		xfer_free(x);
		return;
	}
	api_fail(x->c, ERR_BAD_REQUEST, "client went away");
	free(x);
}

static void put_writable(void *arg)
{
	struct xfer *x = arg;
	http_req_resume_body(x->c->req);
}

static void put_chunk(struct http_req *req, const char *data, size_t len,
		      enum http_body_state state, void *arg)
{
	struct xfer *x = arg;
	if (state == HTTP_BODY_FAILED) {
		if (x->op)
			files_cancel(x->op);
		xfer_free(x);
		return;
	}
	if (state == HTTP_BODY_END) {
		files_put_end(x->op);
		return;
	}
	x->received += (int64_t)len;
	if (x->received > x->limit) {
		api_audit_file(x->c, "file_write", -1,
			       &(struct err){.code = ERR_PAYLOAD_TOO_LARGE, .message = ""});
		files_cancel(x->op);
		x->op = NULL;
		api_fail(x->c, ERR_PAYLOAD_TOO_LARGE,
			 "upload exceeds the session's disk of %lld MiB (disk_mb)",
			 (long long)(x->limit >> 20));
		free(x);
		return;
	}
	if (files_put_data(x->op, data, len))
		http_req_pause_body(req);
}

static void get_drained(struct http_req *req, void *arg)
{
	(void)req;
	struct xfer *x = arg;
	if (x->op)
		files_get_pause(x->op, false);
}

static void get_meta(int64_t size, void *arg)
{
	struct xfer *x = arg;
	x->size = size < 0 ? 0 : size;
	x->started = true;
	http_req_reply_start(x->c->req, 200, "application/octet-stream", x->size);
	http_req_set_drain_cb(x->c->req, DOWNLOAD_BACKLOG / 2, get_drained, x);
}

static void get_data(const char *data, size_t len, void *arg)
{
	struct xfer *x = arg;
	/* Never more than announced: Content-Length is a promise. */
	if ((int64_t)len > x->size - x->sent)
		len = (size_t)(x->size - x->sent);
	http_req_reply_chunk(x->c->req, data, len);
	x->sent += (int64_t)len;
	if (http_req_output_backlog(x->c->req) > DOWNLOAD_BACKLOG)
		files_get_pause(x->op, true);
}

static void get_done(const struct err *e, int64_t size, yajl_val answer, void *arg)
{
	(void)size;
	(void)answer;
	struct xfer *x = arg;
	x->op = NULL;
	if (!x->started) {
		xfer_reply(x, 0, NULL, e);
		return;
	}
	if (e || x->sent != x->size)
		http_req_reply_abort(x->c->req);
	else
		http_req_reply_end(x->c->req);
	xfer_free(x);
}

/* The listing, re-serialised from what the sandbox said, keeping only
 * well-formed entries. */
static void list_answer(yajl_gen g, yajl_val answer)
{
	jg_obj(g);
	jg_str(g, "files");
	jg_arr(g);
	yajl_val files = json_get(answer, "files");
	size_t n = files && YAJL_IS_ARRAY(files) ? files->u.array.len : 0;
	for (size_t i = 0; i < n && i < 10000; i++) {
		yajl_val f = files->u.array.values[i];
		const char *path = json_get_str(f, "path"), *mtime = json_get_str(f, "mtime"),
			   *type = json_get_str(f, "type");
		int64_t fsize = 0;
		if (path == NULL || !json_get_int(f, "size", &fsize))
			continue;
		jg_obj(g);
		jg_kv_str(g, "path", path);
		jg_kv_int(g, "size", fsize);
		jg_kv_str(g, "mtime", mtime);
		jg_kv_str(g, "type", type ? type : "file");
		jg_obj_end(g);
	}
	jg_arr_end(g);
	yajl_val tr = json_get(answer, "truncated");
	jg_kv_bool(g, "truncated", tr && YAJL_IS_TRUE(tr));
	jg_obj_end(g);
}

/* The end of a PUT (201 {path, size}), a list (200) or a delete (204). */
static void xfer_done(const struct err *e, int64_t size, yajl_val answer, void *arg)
{
	struct xfer *x = arg;
	x->op = NULL;
	if (x->kind == FILE_PUT || x->kind == FILE_DELETE)
		api_audit_file(x->c, x->kind == FILE_PUT ? "file_write" : "file_delete", size, e);
	if (e || x->kind == FILE_DELETE) {
		xfer_reply(x, 204, NULL, e);
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	if (x->kind == FILE_LIST) {
		list_answer(g, answer);
		xfer_reply(x, 200, g, NULL);
		return;
	}
	jg_obj(g);
	jg_kv_str(g, "path", x->c->path);
	jg_kv_int(g, "size", size);
	jg_obj_end(g);
	xfer_reply(x, 201, g, NULL);
}

static const struct file_op_cbs put_cbs = {.writable = put_writable, .done = xfer_done};
static const struct file_op_cbs get_cbs = {.meta = get_meta, .data = get_data, .done = get_done};
static const struct file_op_cbs list_cbs = {.done = xfer_done};
static const struct file_op_cbs delete_cbs = {.done = xfer_done};

static void xfer_start(struct call *c, enum file_op_kind kind, bool recursive,
		       const struct file_op_cbs *cbs)
{
	struct http_req *req = c->req;
	const struct session *s = manager_get(c->api->mgr, c->id, c->tenant);
	if (s == NULL) {
		api_missing(c);
		return;
	}
	int64_t limit = s->limits.disk_mb << 20;
	if (kind == FILE_PUT && http_req_content_length(req) > limit) {
		api_audit_file(c, "file_write", -1,
			       &(struct err){.code = ERR_PAYLOAD_TOO_LARGE, .message = ""});
		api_fail(c, ERR_PAYLOAD_TOO_LARGE,
			 "upload of %lld bytes exceeds the session's disk of %lld MiB (disk_mb)",
			 (long long)http_req_content_length(req), (long long)s->limits.disk_mb);
		return;
	}
	struct xfer *x = xcalloc(1, sizeof(*x));
	x->c = c;
	x->kind = kind;
	x->limit = limit;
	struct err *e = NULL;
	x->op =
	    manager_file_start(c->api->mgr, c->id, c->tenant, kind, c->path, recursive, cbs, x, &e);
	if (x->op == NULL) {
		if (kind == FILE_PUT || kind == FILE_DELETE)
			api_audit_file(c, kind == FILE_PUT ? "file_write" : "file_delete", -1, e);
		xfer_reply(x, 0, NULL, e);
		err_free(e);
		return;
	}
	http_req_set_close_cb(req, xfer_client_gone, x);
	if (kind == FILE_PUT) {
		bool active = files_op_active(x->op);
		http_req_stream_body(req, put_chunk, x);
		if (!active)
			http_req_pause_body(req);
	}
}

void api_files_list(struct call *c)
{
	xfer_start(c, FILE_LIST, false, &list_cbs);
}

void api_files_put(struct call *c)
{
	xfer_start(c, FILE_PUT, false, &put_cbs);
}

void api_files_get(struct call *c)
{
	xfer_start(c, FILE_GET, false, &get_cbs);
}

/* ?recursive=1 (or true) lets a directory go with its contents; without
 * it a directory answers 409 is_a_directory, so a client that meant one
 * file never loses a tree. */
void api_files_delete(struct call *c)
{
	char *v = api_query_param(http_req_query(c->req), "recursive");
	bool recursive = v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
	bool valid = v == NULL || recursive || strcmp(v, "0") == 0 || strcmp(v, "false") == 0;

	free(v);
	if (!valid) {
		api_fail(c, ERR_BAD_REQUEST, "recursive: want 1, true, 0 or false");
		return;
	}
	xfer_start(c, FILE_DELETE, recursive, &delete_cbs);
}
