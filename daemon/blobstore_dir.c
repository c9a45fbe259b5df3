/* blobstore_dir.c: the dir:PATH store (blobstore.h).
 *
 * Disk I/O runs on one worker thread per store, and the loop only hands it
 * steps and reads completions from a pipe. Why a thread and not bounded
 * chunks on the loop: a write of a chunk is cheap, but fsync (which a put
 * needs before its rename, or a crash can leave an empty file under the
 * final name) waits for the whole file to reach the disk, seconds for a
 * large snapshot on a busy disk, and nothing on the loop may wait that
 * long. One thread is enough: it serialises the store's disk traffic,
 * which a disk prefers anyway, and keeps every op's state on the loop.
 *
 * An op is a sequence of steps; the thread runs one step of one op at a
 * time (a chunk of at most DIR_CHUNK bytes), then posts the op back
 * through the pipe, and the loop decides the next step (it pulls the next
 * chunk from a callback source, or pushes one into a callback sink). So an
 * op is either on the thread (queued or running) or on the loop, never
 * both, and no lock guards its fields.
 *
 * A put writes ROOT/.tmp/put-XXXXXX, fsyncs it, renames it to ROOT/KEY and
 * fsyncs the directory: a reader sees the old object or the whole new one;
 * a put that fails, is cancelled or is killed leaves only a temporary file
 * under .tmp, which is not an object (keys never start with '.') and is
 * swept when the store opens. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blobstore_internal.h"
#include "defer.h"
#include "xalloc.h"

#define DIR_CHUNK (1024 * 1024)
#define DIR_SCAN_MAX 100000 /* entries a list walks at most */

enum dir_kind { DK_PUT, DK_GET, DK_LIST, DK_DEL };
enum dir_step {
	DS_PUT_OPEN,
	DS_PUT_CHUNK,
	DS_PUT_COMMIT,
	DS_PUT_ABORT,
	DS_GET_OPEN,
	DS_GET_CHUNK,
	DS_LIST,
	DS_DEL,
	DS_DONE
};

struct dir_store;

struct dir_op {
	struct blob_op base;
	struct dir_store *ds;
	enum dir_kind kind;
	enum dir_step step;
	char *key;
	int io_fd;  /* the caller's fd, dup()ed: put's source, get's sink; -1: callbacks */
	int obj_fd; /* put: the temporary file; get: the object */
	char *tmp_path;
	blob_read_fn read;
	blob_write_fn write;
	void *io_arg;
	uint64_t max_bytes;
	char *buf;
	size_t buf_len;
	bool eof;
	uint64_t bytes;
	/* list */
	char *prefix, *token;
	size_t max_keys;
	struct blob_entry *entries;
	size_t n_entries;
	char *next_token;
	struct err *err;
	bool cancelled;
	bool parked;             /* on the loop: its source said BLOB_READ_AGAIN */
	struct event *resume_ev; /* pulls again, after blob_resume */
	blob_done_cb cb;
	void *arg;
	TAILQ_ENTRY(dir_op) qlink;
	LIST_ENTRY(dir_op) link;
};

struct dir_store {
	struct blobstore *s;
	char *root, *tmpdir;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	TAILQ_HEAD(, dir_op) queue; /* under mu */
	int pipe[2];                /* the thread writes finished ops' pointers */
	struct event *ev;
	LIST_HEAD(, dir_op) ops; /* every live op, on the loop */
};

static void op_free(struct dir_op *op)
{
	LIST_REMOVE(op, link);
	if (op->resume_ev)
		event_free(op->resume_ev);
	if (op->io_fd >= 0)
		close(op->io_fd);
	if (op->obj_fd >= 0)
		close(op->obj_fd);
	if (op->tmp_path)
		unlink(op->tmp_path);
	free(op->tmp_path);
	free(op->key);
	free(op->buf);
	free(op->prefix);
	free(op->token);
	for (size_t i = 0; i < op->n_entries; i++)
		free((char *)op->entries[i].key);
	free(op->entries);
	free(op->next_token);
	err_free(op->err);
	free(op);
}

/* ---- on the worker thread ---- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static ssize_t read_some(int fd, char *p, size_t cap)
{
	size_t got = 0;
	while (got < cap) {
		ssize_t r = read(fd, p + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static char *obj_path(struct dir_store *ds, const char *key)
{
	return xasprintf("%s/%s", ds->root, key);
}

/* mkdir -p of the directories above key under root. */
static int make_parents(struct dir_store *ds, const char *key)
{
	char *path = obj_path(ds, key);
	size_t base = strlen(ds->root) + 1;
	int rc = 0;
	for (char *p = path + base; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(path, 0750) < 0 && errno != EEXIST)
			rc = -1;
		*p = '/';
		if (rc < 0)
			break;
	}
	free(path);
	return rc;
}

static void fsync_dir_of(const char *path)
{
	char *d = xstrdup(path);
	char *slash = strrchr(d, '/');
	if (slash) {
		*slash = '\0';
		int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			fsync(fd);
			close(fd);
		}
	}
	free(d);
}

static void set_errno_err(struct dir_op *op, const char *what)
{
	int e = errno;
	enum err_code code = e == ENOENT                  ? ERR_NOT_FOUND
			     : e == ENOSPC || e == EDQUOT ? ERR_UNAVAILABLE
							  : ERR_INTERNAL;
	err_give(&op->err,
		 err_new(code, "store: %s %s: %s", what, op->key ? op->key : "", strerror(e)));
}

static void put_abort(struct dir_op *op)
{
	if (op->obj_fd >= 0)
		close(op->obj_fd);
	op->obj_fd = -1;
	if (op->tmp_path)
		unlink(op->tmp_path);
	free(op->tmp_path);
	op->tmp_path = NULL;
}

struct walk {
	const char *prefix, *token;
	char **keys;
	uint64_t *sizes;
	size_t n, cap, scanned;
	bool overflow;
};

/* Could a key under directory rel ("a/b") start with prefix? */
static bool dir_may_match(const char *rel, const char *prefix)
{
	size_t rn = strlen(rel), pn = strlen(prefix);
	if (pn <= rn + 1) /* the prefix ends inside rel + "/" */
		return strncmp(rel, prefix, pn < rn ? pn : rn) == 0 &&
		       (pn <= rn || prefix[rn] == '/');
	return strncmp(prefix, rel, rn) == 0 && prefix[rn] == '/';
}

static void walk_dir(struct walk *w, int dfd, const char *rel)
{
	DIR *d = fdopendir(dfd);
	if (d == NULL) {
		close(dfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue; /* ".", "..", ".tmp": never keys */
		if (++w->scanned > DIR_SCAN_MAX) {
			w->overflow = true;
			break;
		}
		char *key = rel[0] ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		struct stat st;
		if (!blobstore_key_valid(key) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			free(key);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (dir_may_match(key, w->prefix)) {
				int sub = openat(dirfd(d), de->d_name,
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub >= 0)
					walk_dir(w, sub, key);
			}
			free(key);
			continue;
		}
		if (!S_ISREG(st.st_mode) || strncmp(key, w->prefix, strlen(w->prefix)) != 0 ||
		    (w->token && strcmp(key, w->token) <= 0)) {
			free(key);
			continue;
		}
		if (w->n == w->cap) {
			w->cap = w->cap ? w->cap * 2 : 64;
			w->keys = xrealloc(w->keys, w->cap * sizeof(*w->keys));
			w->sizes = xrealloc(w->sizes, w->cap * sizeof(*w->sizes));
		}
		w->keys[w->n] = key;
		w->sizes[w->n++] = (uint64_t)st.st_size;
	}
	closedir(d);
}

static int cmp_idx(const void *a, const void *b, void *arg)
{
	char **keys = arg;
	return strcmp(keys[*(const size_t *)a], keys[*(const size_t *)b]);
}

static void do_list(struct dir_op *op)
{
	struct walk w = {.prefix = op->prefix, .token = op->token};
	int fd = open(op->ds->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		set_errno_err(op, "list");
		return;
	}
	walk_dir(&w, fd, "");
	if (w.overflow) {
		err_give(&op->err,
			 err_new(ERR_INTERNAL, "store: list: more than %d entries under the store",
				 DIR_SCAN_MAX));
	} else {
		size_t *idx = xmalloc((w.n ? w.n : 1) * sizeof(*idx));
		for (size_t i = 0; i < w.n; i++)
			idx[i] = i;
		qsort_r(idx, w.n, sizeof(*idx), cmp_idx, w.keys);
		size_t take = w.n < op->max_keys ? w.n : op->max_keys;
		op->entries = xmalloc((take ? take : 1) * sizeof(*op->entries));
		for (size_t i = 0; i < take; i++) {
			op->entries[i].key = w.keys[idx[i]];
			op->entries[i].size = w.sizes[idx[i]];
			w.keys[idx[i]] = NULL;
		}
		op->n_entries = take;
		if (take < w.n)
			op->next_token = xstrdup(op->entries[take - 1].key);
		free(idx);
	}
	for (size_t i = 0; i < w.n; i++)
		free(w.keys[i]);
	free(w.keys);
	free(w.sizes);
}

static void do_delete(struct dir_op *op)
{
	char *path = obj_path(op->ds, op->key);
	if (unlink(path) < 0 && errno != ENOENT) {
		set_errno_err(op, "delete");
	} else {
		/* Remove the directories the key leaves empty, up to the root. */
		size_t base = strlen(op->ds->root);
		char *slash;
		while ((slash = strrchr(path, '/')) != NULL && (size_t)(slash - path) > base) {
			*slash = '\0';
			if (rmdir(path) < 0)
				break;
		}
		fsync_dir_of(path);
	}
	free(path);
}

/* One step of op, on the thread. */
static void dir_work(struct dir_op *op)
{
	struct dir_store *ds = op->ds;
	switch (op->step) {
	case DS_PUT_OPEN: {
		if (make_parents(ds, op->key) < 0) {
			set_errno_err(op, "put (its directory)");
			return;
		}
		op->tmp_path = xasprintf("%s/put-XXXXXX", ds->tmpdir);
		op->obj_fd = mkostemp(op->tmp_path, O_CLOEXEC);
		if (op->obj_fd < 0) {
			free(op->tmp_path);
			op->tmp_path = NULL;
			set_errno_err(op, "put (a temporary file)");
		}
		return;
	}
	case DS_PUT_CHUNK:
		if (op->io_fd >= 0) {
			ssize_t n = read_some(op->io_fd, op->buf, DIR_CHUNK);
			if (n < 0) {
				set_errno_err(op, "put (reading the source of)");
				put_abort(op);
				return;
			}
			op->buf_len = (size_t)n;
			op->eof = n == 0;
		}
		if (op->buf_len && write_all(op->obj_fd, op->buf, op->buf_len) < 0) {
			set_errno_err(op, "put (writing)");
			put_abort(op);
			return;
		}
		op->bytes += op->buf_len;
		op->buf_len = 0;
		return;
	case DS_PUT_COMMIT: {
		char *path = obj_path(ds, op->key);
		if (fsync(op->obj_fd) < 0 || rename(op->tmp_path, path) < 0) {
			set_errno_err(op, "put (committing)");
			put_abort(op);
		} else {
			close(op->obj_fd);
			op->obj_fd = -1;
			free(op->tmp_path);
			op->tmp_path = NULL;
			fsync_dir_of(path);
		}
		free(path);
		return;
	}
	case DS_PUT_ABORT: put_abort(op); return;
	case DS_GET_OPEN: {
		char *path = obj_path(ds, op->key);
		op->obj_fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		free(path);
		struct stat st;
		if (op->obj_fd < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				err_give(&op->err,
					 err_new(ERR_NOT_FOUND, "store: no object %s", op->key));
			else
				set_errno_err(op, "get");
		} else if (fstat(op->obj_fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			err_give(&op->err, err_new(ERR_NOT_FOUND, "store: no object %s", op->key));
		} else if (op->max_bytes && (uint64_t)st.st_size > op->max_bytes) {
			err_give(&op->err,
				 err_new(ERR_PAYLOAD_TOO_LARGE,
					 "store: object %s is %lld bytes, over the cap of "
					 "%llu",
					 op->key, (long long)st.st_size,
					 (unsigned long long)op->max_bytes));
		}
		return;
	}
	case DS_GET_CHUNK: {
		ssize_t n = read_some(op->obj_fd, op->buf, DIR_CHUNK);
		if (n < 0) {
			set_errno_err(op, "get (reading)");
			return;
		}
		op->buf_len = (size_t)n;
		op->eof = n == 0;
		if (op->max_bytes && op->bytes + (uint64_t)n > op->max_bytes) {
			err_give(&op->err, err_new(ERR_PAYLOAD_TOO_LARGE,
						   "store: object %s grew over the cap", op->key));
			return;
		}
		if (op->io_fd >= 0 && n > 0) {
			if (write_all(op->io_fd, op->buf, (size_t)n) < 0) {
				set_errno_err(op, "get (writing the sink of)");
				return;
			}
			op->bytes += (uint64_t)n;
			op->buf_len = 0;
		}
		return;
	}
	case DS_LIST: do_list(op); return;
	case DS_DEL: do_delete(op); return;
	case DS_DONE: return;
	}
}

static void *dir_thread(void *arg)
{
	struct dir_store *ds = arg;
	pthread_mutex_lock(&ds->mu);
	for (;;) {
		while (!ds->stop && TAILQ_EMPTY(&ds->queue))
			pthread_cond_wait(&ds->cv, &ds->mu);
		if (ds->stop)
			break;
		struct dir_op *op = TAILQ_FIRST(&ds->queue);
		TAILQ_REMOVE(&ds->queue, op, qlink);
		pthread_mutex_unlock(&ds->mu);
		dir_work(op);
		ssize_t w;
		do
			w = write(ds->pipe[1], &op, sizeof(op));
		while (w < 0 && errno == EINTR);
		pthread_mutex_lock(&ds->mu);
	}
	pthread_mutex_unlock(&ds->mu);
	return NULL;
}

/* ---- on the loop ---- */

static void submit(struct dir_op *op, enum dir_step step)
{
	struct dir_store *ds = op->ds;
	op->step = step;
	pthread_mutex_lock(&ds->mu);
	TAILQ_INSERT_TAIL(&ds->queue, op, qlink);
	pthread_cond_signal(&ds->cv);
	pthread_mutex_unlock(&ds->mu);
}

static void finish(struct dir_op *op)
{
	struct blob_result r = {.error = op->err,
				.bytes = op->bytes,
				.entries = op->entries,
				.n_entries = op->n_entries,
				.next_token = op->next_token};
	op->cb(&r, op->arg);
	op_free(op);
}

/* op came back from the thread: choose its next step. */
static void advance(struct dir_op *op)
{
	if (op->cancelled) {
		if (op->kind == DK_PUT && op->tmp_path && op->step != DS_PUT_ABORT)
			submit(op, DS_PUT_ABORT); /* the unlink is disk I/O too */
		else
			op_free(op);
		return;
	}
	if (op->err) {
		if (op->kind == DK_PUT && op->tmp_path && op->step != DS_PUT_ABORT) {
			submit(op, DS_PUT_ABORT);
			return;
		}
		finish(op);
		return;
	}
	switch (op->step) {
	case DS_PUT_OPEN:
	case DS_PUT_CHUNK:
		if (op->eof) {
			submit(op, DS_PUT_COMMIT);
			return;
		}
		if (op->io_fd < 0) {
			ssize_t n = op->read(op->io_arg, op->buf, DIR_CHUNK);
			if (n == BLOB_READ_AGAIN) {
				op->parked = true; /* back on blob_resume */
				return;
			}
			if (n < 0 || n > DIR_CHUNK) {
				err_give(&op->err,
					 err_new(ERR_INTERNAL, "store: put %s: its source failed",
						 op->key));
				submit(op, DS_PUT_ABORT);
				return;
			}
			op->buf_len = (size_t)n;
			if (n == 0) {
				submit(op, DS_PUT_COMMIT);
				return;
			}
		}
		submit(op, DS_PUT_CHUNK);
		return;
	case DS_GET_OPEN: submit(op, DS_GET_CHUNK); return;
	case DS_GET_CHUNK:
		if (op->io_fd < 0 && op->buf_len > 0) {
			if (op->write(op->io_arg, op->buf, op->buf_len) < 0) {
				err_give(&op->err,
					 err_new(ERR_INTERNAL, "store: get %s: its sink failed",
						 op->key));
				finish(op);
				return;
			}
			op->bytes += op->buf_len;
			op->buf_len = 0;
		}
		if (op->eof)
			finish(op);
		else
			submit(op, DS_GET_CHUNK);
		return;
	default: finish(op); return;
	}
}

static void pipe_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	(void)arg;
	struct dir_op *ops[64];
	ssize_t n = read(fd, ops, sizeof(ops));
	if (n <= 0)
		return;
	for (size_t i = 0; i < (size_t)n / sizeof(ops[0]); i++)
		advance(ops[i]);
}

static struct dir_op *op_new(struct blobstore *s, enum dir_kind kind, const char *key,
			     blob_done_cb cb, void *arg)
{
	struct dir_store *ds = s->impl;
	struct dir_op *op = xmalloc(sizeof(*op));
	*op = (struct dir_op){.base = {.s = s},
			      .ds = ds,
			      .kind = kind,
			      .key = key ? xstrdup(key) : NULL,
			      .io_fd = -1,
			      .obj_fd = -1,
			      .cb = cb,
			      .arg = arg};
	LIST_INSERT_HEAD(&ds->ops, op, link);
	return op;
}

/* A dup of the caller's fd, or -1 (then the op fails from the loop). */
static int dup_fd(struct dir_op *op, int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (d < 0)
		err_give(&op->err, err_new(ERR_INTERNAL, "store: bad fd: %s", strerror(errno)));
	return d;
}

static struct blob_op *dir_put(struct blobstore *s, const char *key, const struct blob_source *src,
			       blob_done_cb cb, void *arg)
{
	struct dir_op *op = op_new(s, DK_PUT, key, cb, arg);
	op->buf = xmalloc(DIR_CHUNK);
	if (src->read == NULL)
		op->io_fd = dup_fd(op, src->fd);
	op->read = src->read;
	op->io_arg = src->arg;
	/* An early failure still goes through the thread, so the callback
	 * comes from the loop (the open step sees op->err and does nothing). */
	submit(op, op->err ? DS_DONE : DS_PUT_OPEN);
	return &op->base;
}

static struct blob_op *dir_get(struct blobstore *s, const char *key, const struct blob_sink *sink,
			       blob_done_cb cb, void *arg)
{
	struct dir_op *op = op_new(s, DK_GET, key, cb, arg);
	op->buf = xmalloc(DIR_CHUNK);
	if (sink->write == NULL)
		op->io_fd = dup_fd(op, sink->fd);
	op->write = sink->write;
	op->io_arg = sink->arg;
	op->max_bytes = sink->max_bytes;
	submit(op, op->err ? DS_DONE : DS_GET_OPEN);
	return &op->base;
}

static struct blob_op *dir_list(struct blobstore *s, const char *prefix, const char *token,
				size_t max_keys, blob_done_cb cb, void *arg)
{
	struct dir_op *op = op_new(s, DK_LIST, NULL, cb, arg);
	op->prefix = xstrdup(prefix);
	op->token = token ? xstrdup(token) : NULL;
	op->max_keys = max_keys;
	submit(op, DS_LIST);
	return &op->base;
}

static struct blob_op *dir_del(struct blobstore *s, const char *key, blob_done_cb cb, void *arg)
{
	struct dir_op *op = op_new(s, DK_DEL, key, cb, arg);
	submit(op, DS_DEL);
	return &op->base;
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	advance(arg); /* the same step again: it pulls from the source */
}

static void dir_resume(struct blob_op *bop)
{
	struct dir_op *op = (struct dir_op *)bop;
	if (!op->parked)
		return;
	op->parked = false;
	if (op->resume_ev == NULL)
		op->resume_ev = evtimer_new(op->ds->s->base, resume_cb, op);
	defer_event(op->resume_ev);
}

static void dir_cancel(struct blob_op *bop)
{
	/* The op is on the thread (it is between the loop's steps), and is
	 * freed when it comes back, its temporary file removed. A put waiting
	 * for its source (or about to pull again) is on the loop: it is sent
	 * to the thread to remove its temporary file. */
	struct dir_op *op = (struct dir_op *)bop;
	op->cancelled = true;
	bool pending = op->resume_ev && evtimer_pending(op->resume_ev, NULL);
	if (op->parked || pending) {
		op->parked = false;
		if (op->resume_ev)
			event_del(op->resume_ev);
		submit(op, DS_PUT_ABORT);
	}
}

static void dir_free(struct blobstore *s)
{
	struct dir_store *ds = s->impl;
	pthread_mutex_lock(&ds->mu);
	ds->stop = true;
	pthread_cond_signal(&ds->cv);
	pthread_mutex_unlock(&ds->mu);
	pthread_join(ds->thread, NULL);
	/* Every op is now still queued or posted in the pipe: free them all
	 * (op_free unlinks a put's temporary file). Blocking here is a
	 * shutdown's business only. */
	struct dir_op *op;
	while ((op = LIST_FIRST(&ds->ops)) != NULL)
		op_free(op);
	event_free(ds->ev);
	close(ds->pipe[0]);
	close(ds->pipe[1]);
	pthread_mutex_destroy(&ds->mu);
	pthread_cond_destroy(&ds->cv);
	free(ds->root);
	free(ds->tmpdir);
	free(ds);
}

static size_t dir_count(const struct blobstore *s)
{
	const struct dir_store *ds = s->impl;
	size_t n = 0;
	for (const struct dir_op *op = LIST_FIRST(&ds->ops); op; op = LIST_NEXT(op, link))
		n++;
	return n;
}

static const struct blob_backend dir_backend = {
    .put = dir_put,
    .get = dir_get,
    .list = dir_list,
    .del = dir_del,
    .cancel = dir_cancel,
    .resume = dir_resume,
    .free = dir_free,
    .count = dir_count,
    .reload = NULL,
};

/* mkdir -p path (absolute). */
static int mkdir_p(const char *path)
{
	char *p = xstrdup(path);
	int rc = 0;
	for (char *s = p + 1;; s++) {
		char c = *s;
		if (c == '/' || c == '\0') {
			*s = '\0';
			if (mkdir(p, 0750) < 0 && errno != EEXIST)
				rc = -1;
			*s = c;
			if (rc < 0 || c == '\0')
				break;
		}
	}
	free(p);
	return rc;
}

/* Remove what killed puts left in .tmp (at open, before any op). */
static void sweep_tmp(const char *tmpdir)
{
	DIR *d = opendir(tmpdir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "put-", 4) == 0)
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

int blobstore_dir_open(struct blobstore *s, const struct blob_url *u, struct err **errp)
{
	char *tmpdir = xasprintf("%s/.tmp", u->path);
	if (mkdir_p(tmpdir) < 0) {
		int e = errno;
		free(tmpdir);
		return err_set(errp, ERR_INTERNAL, "store: cannot make %s: %s", u->path,
			       strerror(e));
	}
	sweep_tmp(tmpdir);
	struct dir_store *ds = xmalloc(sizeof(*ds));
	*ds = (struct dir_store){.s = s, .root = xstrdup(u->path), .tmpdir = tmpdir};
	TAILQ_INIT(&ds->queue);
	LIST_INIT(&ds->ops);
	if (pipe2(ds->pipe, O_CLOEXEC) < 0)
		abort();
	evutil_make_socket_nonblocking(ds->pipe[0]);
	pthread_mutex_init(&ds->mu, NULL);
	pthread_cond_init(&ds->cv, NULL);
	ds->ev = event_new(s->base, ds->pipe[0], EV_READ | EV_PERSIST, pipe_cb, ds);
	event_add(ds->ev, NULL);
	if (pthread_create(&ds->thread, NULL, dir_thread, ds) != 0)
		abort();
	s->be = &dir_backend;
	s->impl = ds;
	s->describe = xasprintf("dir:%s", ds->root);
	return 0;
}
