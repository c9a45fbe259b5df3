/* files.h: the files API's transfers for one session, through its supervisor.
 *
 * File requests go to the sandbox's supervisor (never Docker's archive API,
 * which writes beneath the /workspace tmpfs where nobody sees the file). The
 * supervisor answers them one at a time, so they are queued here in order.
 * Data moves in frames of at most 256 KiB with backpressure both ways, so a
 * 100 MB upload or download never sits in the daemon's memory. */
#ifndef CI_FILES_H
#define CI_FILES_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_tree.h>

#include "err.h"

#define FILES_CHUNK (256 * 1024)
/* Unsent bytes toward the supervisor before an upload is paused. */
#define FILES_BACKLOG (1024 * 1024)
#define FILES_MAX_QUEUED 16
#define FILES_PATH_MAX 4096

/* FILE_TAR_OUT and FILE_TAR_IN are a snapshot's (snapshot.h): the
 * supervisor's ws_tar (the workspace as a tar, in data callbacks, ending
 * with its ws_tar_end frame as done's answer) and ws_untar (tar bytes in,
 * given like a PUT's, ended by files_tar_in_end; done's answer is the
 * ws_untar_ok frame). docs/protocol.md has the frames. */
enum file_op_kind { FILE_PUT, FILE_GET, FILE_LIST, FILE_DELETE, FILE_TAR_OUT, FILE_TAR_IN };

struct file_op_cbs {
	/* GET: the file exists and has this size; data follows. */
	void (*meta)(int64_t size, void *arg);
	/* GET: a piece of the file. */
	void (*data)(const char *data, size_t len, void *arg);
	/* PUT: the op may take data now (it reached the head of the queue, or
	 * the supervisor drained its backlog). */
	void (*writable)(void *arg);
	/* The end, exactly once unless cancelled: e on failure; for PUT the
	 * size written, for LIST the answer (borrowed, only during the call). */
	void (*done)(const struct err *e, int64_t size, yajl_val answer, void *arg);
};

struct files;
struct file_op;
struct kernel_link;

/* Per-session transfer queue over link. Caller owns it (files_free). */
struct files *files_new(struct event_base *base, struct kernel_link *link);

/* Fail every queued transfer ("session ended") and free. NULL is a no-op. */
void files_free(struct files *f, const char *why);

/* Check a decoded API path: relative, no "..", no NUL, not empty, bounded.
 * bad_path otherwise. */
int files_path_check(const char *path, struct err **errp);

/* Queue an operation. NULL with an error when the queue is full. */
struct file_op *files_start(struct files *f, enum file_op_kind kind, const char *path,
			    const struct file_op_cbs *cbs, void *arg, struct err **errp);

/* FILE_DELETE; a directory only with recursive (else the supervisor
 * answers is_a_directory, 409). files_start(FILE_DELETE) is not recursive. */
struct file_op *files_start_delete(struct files *f, const char *path, bool recursive,
				   const struct file_op_cbs *cbs, void *arg, struct err **errp);

/* A tar op (FILE_TAR_OUT, FILE_TAR_IN) with params, a JSON object's text
 * whose members go into the request (ws_tar's paths, max_bytes,
 * max_files; NULL or "{}" for none). */
struct file_op *files_start_tar(struct files *f, enum file_op_kind kind, const char *params,
				const struct file_op_cbs *cbs, void *arg, struct err **errp);
/* FILE_TAR_IN: the tar is all sent; commit says whether the supervisor
 * moves it into /workspace (true) or drops it (false). */
void files_tar_in_end(struct file_op *op, bool commit);

/* Whether the op is at the head of the queue (may take data). */
bool files_op_active(const struct file_op *op);

/* PUT: hand over upload bytes; returns true when the caller should pause
 * until writable is called. */
bool files_put_data(struct file_op *op, const char *data, size_t len);
void files_put_end(struct file_op *op);

/* GET: stop or resume reading from the supervisor (the client is slow). */
void files_get_pause(struct file_op *op, bool paused);

/* The client went away: abort the op; its done callback is not called. */
void files_cancel(struct file_op *op);

/* Whether no transfer is queued or running. */
bool files_idle(const struct files *f);

/* Routed from the kernel link. */
void files_on_frame(struct files *f, yajl_val header, const char *body, size_t len);
void files_on_drained(struct files *f);
void files_on_supervisor_down(struct files *f);

#endif
