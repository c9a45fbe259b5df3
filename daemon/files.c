/* files.c: queued file transfers between the API and a sandbox's supervisor. */
#include "files.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>

#include "json.h"
#include "kernel.h"
#include "log.h"
#include "xalloc.h"

/* A supervisor that says nothing about an active request for this long is
 * taken to be stuck. */
#define FILES_IDLE_TIMEOUT_S 30

struct file_op {
	struct files *f;
	enum file_op_kind kind;
	uint64_t id;
	char *path;
	char *params;   /* a tar op's request members (files_start_tar) */
	bool commit;    /* FILE_TAR_IN's end */
	bool recursive; /* FILE_DELETE: a directory may go, with its contents */
	const struct file_op_cbs *cbs;
	void *arg;
	bool active;              /* request sent to the supervisor */
	bool ended;               /* PUT: the client's body is complete */
	bool got_meta;            /* GET */
	struct evbuffer *pending; /* PUT bytes that arrived before the op was active */
	TAILQ_ENTRY(file_op) q;
};

struct files {
	struct event_base *base;
	struct kernel_link *link;
	struct event *idle;
	uint64_t next_id;
	size_t queued;
	TAILQ_HEAD(, file_op) ops;
};

static void op_send_request(struct file_op *op);

int files_path_check(const char *path, struct err **errp)
{
	size_t n = strlen(path);
	if (n == 0)
		return err_set(errp, ERR_BAD_PATH, "empty file path");
	if (n > FILES_PATH_MAX)
		return err_set(errp, ERR_BAD_PATH, "file path longer than %d bytes",
			       FILES_PATH_MAX);
	if (path[0] == '/')
		return err_set(errp, ERR_BAD_PATH,
			       "absolute path '%.64s': paths are relative to /workspace", path);
	const char *p = path;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return err_set(errp, ERR_BAD_PATH, "path '%.64s' has a '..' component",
				       path);
		if (!slash)
			break;
		p = slash + 1;
	}
	return 0;
}

struct files *files_new(struct event_base *base, struct kernel_link *link)
{
	struct files *f = xcalloc(1, sizeof(*f));
	f->base = base;
	f->link = link;
	TAILQ_INIT(&f->ops);
	return f;
}

static void op_free(struct file_op *op)
{
	if (op->pending)
		evbuffer_free(op->pending);
	free(op->path);
	free(op->params);
	free(op);
}

static void arm_idle(struct files *f)
{
	struct timeval tv = {FILES_IDLE_TIMEOUT_S, 0};
	evtimer_add(f->idle, &tv);
}

/* Remove the head op and start the next one. */
static void head_done(struct files *f)
{
	struct file_op *op = TAILQ_FIRST(&f->ops);
	TAILQ_REMOVE(&f->ops, op, q);
	f->queued--;
	op_free(op);
	evtimer_del(f->idle);
	kernel_link_supervisor_pause_read(f->link, false);
	struct file_op *next = TAILQ_FIRST(&f->ops);
	if (next)
		op_send_request(next);
}

static void op_fail(struct file_op *op, enum err_code code, const char *msg)
{
	struct err e = {.code = code, .message = (char *)msg};
	op->cbs->done(&e, 0, NULL, op->arg);
}

static void idle_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct files *f = arg;
	struct file_op *op = TAILQ_FIRST(&f->ops);
	if (op == NULL)
		return;
	op_fail(op, ERR_UNAVAILABLE, "the sandbox did not answer the file request within 30 s");
	head_done(f);
}

static void send_frame(struct files *f, const char *hdr, const void *body, size_t blen)
{
	struct err *e = NULL;
	if (kernel_link_send_supervisor(f->link, hdr, strlen(hdr), body, blen, &e) < 0)
		err_free(e); /* supervisor gone: files_on_supervisor_down fails the op */
}

static void send_data(struct file_op *op, const char *data, size_t len)
{
	char hdr[96];
	snprintf(hdr, sizeof(hdr), "{\"t\":\"file_data\",\"id\":%llu}", (unsigned long long)op->id);
	while (len > 0) {
		size_t n = len < FILES_CHUNK ? len : FILES_CHUNK;
		send_frame(op->f, hdr, data, n);
		data += n;
		len -= n;
	}
}

static void send_end(struct file_op *op)
{
	char hdr[128];
	if (op->kind == FILE_TAR_IN)
		snprintf(hdr, sizeof(hdr), "{\"t\":\"ws_untar_end\",\"id\":%llu,\"commit\":%s}",
			 (unsigned long long)op->id, op->commit ? "true" : "false");
	else
		snprintf(hdr, sizeof(hdr), "{\"t\":\"file_end\",\"id\":%llu}",
			 (unsigned long long)op->id);
	send_frame(op->f, hdr, NULL, 0);
}

/* A tar op's request: {"t":..., "id":N, <params' members>}. */
static void send_tar_request(struct file_op *op, const char *type)
{
	const char *members = op->params ? op->params : "{}";
	while (*members == ' ')
		members++;
	if (*members == '{')
		members++;
	size_t mlen = strlen(members);
	while (mlen > 0 && (members[mlen - 1] == '}' || members[mlen - 1] == ' '))
		mlen--;
	char head[96];
	snprintf(head, sizeof(head), "{\"t\":\"%s\",\"id\":%llu", type, (unsigned long long)op->id);
	size_t hlen = strlen(head);
	char *hdr = xmalloc(hlen + mlen + 3);
	memcpy(hdr, head, hlen);
	size_t n = hlen;
	if (mlen) {
		hdr[n++] = ',';
		memcpy(hdr + n, members, mlen);
		n += mlen;
	}
	hdr[n++] = '}';
	struct err *e = NULL;
	if (kernel_link_send_supervisor(op->f->link, hdr, n, NULL, 0, &e) < 0)
		err_free(e);
	free(hdr);
}

/* An upload that just became active: what came early, then the end or a
 * call for more. */
static void put_flush(struct file_op *op)
{
	if (op->pending) {
		size_t n = evbuffer_get_length(op->pending);
		send_data(op, (const char *)evbuffer_pullup(op->pending, -1), n);
		evbuffer_free(op->pending);
		op->pending = NULL;
	}
	if (op->ended)
		send_end(op);
	else if (op->cbs->writable)
		op->cbs->writable(op->arg);
}

static void op_send_request(struct file_op *op)
{
	struct files *f = op->f;
	static const char *const types[] = {"file_put",    "file_get", "file_list",
					    "file_delete", "ws_tar",   "ws_untar"};
	if (!kernel_link_supervisor_connected(f->link)) {
		op_fail(op, ERR_UNAVAILABLE, "the sandbox's supervisor is not connected");
		head_done(f);
		return;
	}
	if (op->kind == FILE_TAR_OUT || op->kind == FILE_TAR_IN) {
		send_tar_request(op, types[op->kind]);
		op->active = true;
		arm_idle(f);
		if (op->kind == FILE_TAR_IN)
			put_flush(op);
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "t", types[op->kind]);
	jg_kv_int(g, "id", (int64_t)op->id);
	if (op->path)
		jg_kv_str(g, "path", op->path);
	/* Without it the supervisor refuses a directory (is_a_directory). */
	if (op->kind == FILE_DELETE && op->recursive)
		jg_kv_bool(g, "recursive", true);
	jg_obj_end(g);
	size_t len;
	const char *hdr = jg_text(g, &len);
	struct err *e = NULL;
	if (kernel_link_send_supervisor(f->link, hdr, len, NULL, 0, &e) < 0)
		err_free(e);
	op->active = true;
	arm_idle(f);
	if (op->kind == FILE_PUT)
		put_flush(op);
}

/* Queue an op (a path for the file ops, params for the tar ones); the
 * first in the queue is sent at once. */
static struct file_op *op_enqueue(struct files *f, enum file_op_kind kind, const char *path,
				  const char *params, bool recursive, const struct file_op_cbs *cbs,
				  void *arg, struct err **errp)
{
	if (f->queued >= FILES_MAX_QUEUED) {
		err_set(errp, ERR_BUSY, "%d file transfers are already queued for this session",
			FILES_MAX_QUEUED);
		return NULL;
	}
	if (f->idle == NULL)
		f->idle = evtimer_new(f->base, idle_cb, f);
	struct file_op *op = xcalloc(1, sizeof(*op));
	op->f = f;
	op->kind = kind;
	op->id = ++f->next_id;
	op->path = path ? xstrdup(path) : NULL;
	op->params = params ? xstrdup(params) : NULL;
	op->recursive = recursive;
	op->cbs = cbs;
	op->arg = arg;
	bool first = TAILQ_EMPTY(&f->ops);
	TAILQ_INSERT_TAIL(&f->ops, op, q);
	f->queued++;
	if (first)
		op_send_request(op);
	return op;
}

struct file_op *files_start(struct files *f, enum file_op_kind kind, const char *path,
			    const struct file_op_cbs *cbs, void *arg, struct err **errp)
{
	return op_enqueue(f, kind, path, NULL, false, cbs, arg, errp);
}

struct file_op *files_start_delete(struct files *f, const char *path, bool recursive,
				   const struct file_op_cbs *cbs, void *arg, struct err **errp)
{
	return op_enqueue(f, FILE_DELETE, path, NULL, recursive, cbs, arg, errp);
}

struct file_op *files_start_tar(struct files *f, enum file_op_kind kind, const char *params,
				const struct file_op_cbs *cbs, void *arg, struct err **errp)
{
	return op_enqueue(f, kind, NULL, params, false, cbs, arg, errp);
}

void files_tar_in_end(struct file_op *op, bool commit)
{
	op->commit = commit;
	files_put_end(op);
}

bool files_op_active(const struct file_op *op)
{
	return op->active;
}

bool files_put_data(struct file_op *op, const char *data, size_t len)
{
	if (!op->active) {
		if (op->pending == NULL)
			op->pending = evbuffer_new();
		evbuffer_add(op->pending, data, len);
		return true;
	}
	arm_idle(op->f);
	send_data(op, data, len);
	return kernel_link_supervisor_backlog(op->f->link) > FILES_BACKLOG;
}

void files_put_end(struct file_op *op)
{
	op->ended = true;
	if (op->active)
		send_end(op);
}

void files_get_pause(struct file_op *op, bool paused)
{
	if (op->active)
		kernel_link_supervisor_pause_read(op->f->link, paused);
}

void files_cancel(struct file_op *op)
{
	struct files *f = op->f;
	if (!op->active) {
		TAILQ_REMOVE(&f->ops, op, q);
		f->queued--;
		op_free(op);
		return;
	}
	if (op->kind == FILE_PUT || op->kind == FILE_GET || op->kind == FILE_TAR_OUT ||
	    op->kind == FILE_TAR_IN) {
		char hdr[96];
		snprintf(hdr, sizeof(hdr), "{\"t\":\"file_abort\",\"id\":%llu}",
			 (unsigned long long)op->id);
		send_frame(f, hdr, NULL, 0);
	}
	/* The supervisor may still send frames for this id; they no longer
	 * match the head and are dropped. */
	head_done(f);
}

void files_on_frame(struct files *f, yajl_val h, const char *body, size_t len)
{
	struct file_op *op = TAILQ_FIRST(&f->ops);
	int64_t id = 0;
	const char *t = json_get_str(h, "t");
	if (op == NULL || !op->active || !json_get_int(h, "id", &id) || (uint64_t)id != op->id ||
	    t == NULL)
		return; /* stale: a cancelled transfer's tail, or noise */
	arm_idle(f);
	if (strcmp(t, "file_err") == 0) {
		const char *code = json_get_str(h, "code"), *msg = json_get_str(h, "message");
		enum err_code c = ERR_INTERNAL;
		static const struct {
			const char *name;
			enum err_code code;
		} map[] = {{"bad_path", ERR_BAD_PATH},
			   {"not_found", ERR_NOT_FOUND},
			   {"payload_too_large", ERR_PAYLOAD_TOO_LARGE},
			   {"bad_request", ERR_BAD_REQUEST},
			   {"is_a_directory", ERR_IS_A_DIRECTORY}};
		for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
			if (strcmp(code, map[i].name) == 0)
				c = map[i].code;
		char m[512];
		snprintf(m, sizeof(m), "%s: %.400s", op->path ? op->path : "files",
			 msg ? msg : "failed in the sandbox");
		op_fail(op, c, m);
		head_done(f);
		return;
	}
	switch (op->kind) {
	case FILE_GET:
		if (strcmp(t, "file_meta") == 0 && !op->got_meta) {
			int64_t size = 0;
			json_get_int(h, "size", &size);
			op->got_meta = true;
			op->cbs->meta(size, op->arg);
		} else if (strcmp(t, "file_data") == 0 && op->got_meta) {
			op->cbs->data(body, len, op->arg);
		} else if (strcmp(t, "file_end") == 0 && op->got_meta) {
			op->cbs->done(NULL, 0, NULL, op->arg);
			head_done(f);
		}
		return;
	case FILE_LIST:
		if (strcmp(t, "file_list") == 0) {
			op->cbs->done(NULL, 0, h, op->arg);
			head_done(f);
		}
		return;
	case FILE_TAR_OUT:
		if (strcmp(t, "file_data") == 0) {
			op->cbs->data(body, len, op->arg);
		} else if (strcmp(t, "ws_tar_end") == 0) {
			op->cbs->done(NULL, 0, h, op->arg);
			head_done(f);
		}
		return;
	case FILE_TAR_IN:
		if (strcmp(t, "ws_untar_ok") == 0) {
			op->cbs->done(NULL, 0, h, op->arg);
			head_done(f);
		}
		return;
	case FILE_PUT:
	case FILE_DELETE:
		if (strcmp(t, "file_ok") == 0) {
			int64_t size = 0;
			json_get_int(h, "size", &size);
			op->cbs->done(NULL, size, h, op->arg);
			head_done(f);
		}
		return;
	}
}

void files_on_drained(struct files *f)
{
	struct file_op *op = TAILQ_FIRST(&f->ops);
	if (op && op->active && (op->kind == FILE_PUT || op->kind == FILE_TAR_IN) && !op->ended &&
	    op->cbs->writable)
		op->cbs->writable(op->arg);
}

void files_on_supervisor_down(struct files *f)
{
	struct file_op *op = TAILQ_FIRST(&f->ops);
	if (op && op->active) {
		op_fail(op, ERR_UNAVAILABLE,
			"the sandbox's supervisor went away during the transfer");
		head_done(f);
	}
}

void files_free(struct files *f, const char *why)
{
	if (f == NULL)
		return;
	struct file_op *op;
	while ((op = TAILQ_FIRST(&f->ops)) != NULL) {
		TAILQ_REMOVE(&f->ops, op, q);
		char msg[256];
		snprintf(msg, sizeof(msg), "the session ended: %s", why);
		op_fail(op, ERR_EXPIRED, msg);
		op_free(op);
	}
	if (f->idle)
		event_free(f->idle);
	free(f);
}

bool files_idle(const struct files *f)
{
	return f == NULL || TAILQ_EMPTY(&f->ops);
}
