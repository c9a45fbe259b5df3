/* blobstore.h: an asynchronous object store on the event loop, where
 * snapshots go (issue 13). Two backends behind one interface:
 *
 *   dir:PATH               files under PATH (blobstore_dir.c)
 *   s3://bucket/prefix     an S3-compatible service (blobstore_s3.c)
 *
 * How the snapshot API uses it (cfg->store "" means dir:<state-dir>/store):
 *
 *   struct blobstore_options o = {.url = url, .endpoint = cfg->store_endpoint,
 *                                 .region = cfg->store_region,
 *                                 .credentials_file = cfg->store_credentials_file,
 *                                 .timeout_ms = cfg->store_timeout_ms,
 *                                 .retries = (int)cfg->store_retries};
 *   struct blobstore *bs = blobstore_new(base, &o, &e);        // at start
 *   blobstore_reload(bs, &e);                                   // on SIGHUP
 *   struct blob_source src = {.fd = tar_fd};       // or {.read = fn, .arg = ctx}
 *   op = blobstore_put(bs, "t/tenant/snap/abc.tar", &src, put_done, ctx, &e);
 *   ...  blob_cancel(op) when the session ends first (put_done never runs)
 *
 * Every operation streams: a put reads its source in chunks (a part of at
 * most part_size is the most held in memory), a get writes each chunk into
 * its sink as it arrives. Each takes a callback that runs exactly once,
 * from the loop, never inside the call that started it, unless the op is
 * cancelled first (then never). An op handle is valid until its callback
 * has returned or blob_cancel; the store frees it.
 *
 * Keys: 1 to BLOB_KEY_MAX bytes of [A-Za-z0-9._-/], segments separated by
 * single '/', no segment empty or starting with '.', so no "..", no
 * absolute path and no hidden file. A bad key is refused at the call
 * (NULL and *errp, ERR_BAD_REQUEST). An object that is not there is
 * ERR_NOT_FOUND; a store that cannot be reached (after the retries) is
 * ERR_UNAVAILABLE. */
#ifndef CI_BLOBSTORE_H
#define CI_BLOBSTORE_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define BLOB_KEY_MAX 512
#define BLOB_LIST_MAX 1000 /* most keys one list call returns */

struct blobstore;
struct blob_op;

struct blobstore_options {
	const char *url;              /* "dir:PATH" or "s3://bucket[/prefix]" */
	const char *endpoint;         /* s3: "http://127.0.0.1:PORT" (path-style); required */
	const char *region;           /* s3: signing region; NULL or "" = "us-east-1" */
	const char *credentials_file; /* s3: NULL or "" = AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY */
	int64_t timeout_ms;           /* s3: one request's deadline; 0 = 60000 */
	int retries;                  /* s3: attempts after the first on 5xx/connection; 0 = 4 */
	size_t part_size;             /* s3: multipart part size; 0 = 8 MiB (min 5 MiB) */
};

/* Where a put reads from: read when set (then fd is not looked at), else
 * fd (borrowed: the store dup()s it, so the caller may close its own at
 * once; read from its current offset to its end). The fd must be a regular file: the S3 store reads
 * it on the loop and the dir store on its one worker thread, so a pipe that waits would stall one
 * or the other. A stream (a container's tar on a socket) is given as read(arg, buf, cap) instead,
 * pulled from the loop: it returns the bytes it put in buf (> 0), 0 at the end, -1 on failure, or
 * BLOB_READ_AGAIN when it has nothing yet: the store then waits, without
 * calling it, until the caller says blob_resume(op). */
#define BLOB_READ_AGAIN (-2)
typedef ssize_t (*blob_read_fn)(void *arg, void *buf, size_t cap);
struct blob_source {
	int fd;
	blob_read_fn read;
	void *arg;
};

/* Where a get writes to: write when set, else fd (dup()ed, as above);
 * write(arg, buf, len) is called from the loop and returns 0, or -1 to
 * stop the get with an error.
 * max_bytes > 0 caps the object (more is ERR_PAYLOAD_TOO_LARGE). A failed
 * get may have written a part: the caller discards what it got. */
typedef int (*blob_write_fn)(void *arg, const void *buf, size_t len);
struct blob_sink {
	int fd;
	blob_write_fn write;
	void *arg;
	uint64_t max_bytes;
};

struct blob_entry {
	const char *key; /* relative to the store's prefix */
	uint64_t size;
};

/* How an op ended; everything borrowed for the callback. error NULL: it
 * worked. bytes: put or got. entries/next_token: a list page (next_token
 * NULL on the last page, else pass it to the next list call). */
struct blob_result {
	const struct err *error;
	uint64_t bytes;
	const struct blob_entry *entries;
	size_t n_entries;
	const char *next_token;
};

typedef void (*blob_done_cb)(const struct blob_result *r, void *arg);

/* A store from o (checked: a URL that parses, credentials that load; the
 * directory is made). Caller owns it (blobstore_free). */
struct blobstore *blobstore_new(struct event_base *base, const struct blobstore_options *o,
				struct err **errp);

/* Ops in flight are dropped without their callbacks (a put leaves no
 * object). NULL-safe. */
void blobstore_free(struct blobstore *s);

/* Re-read what may change on SIGHUP (the s3 credentials file). The old
 * credentials stay when the new ones do not load. */
int blobstore_reload(struct blobstore *s, struct err **errp);

/* "dir:/var/lib/ci/store" or "s3://bucket/prefix", for logs. Borrowed. */
const char *blobstore_describe(const struct blobstore *s);

/* Store src under key, replacing an object there atomically: a reader
 * sees the old object or the whole new one, and a put that fails or is
 * cancelled leaves no part of it. */
struct blob_op *blobstore_put(struct blobstore *s, const char *key, const struct blob_source *src,
			      blob_done_cb cb, void *arg, struct err **errp);

/* Stream key's object into sink. */
struct blob_op *blobstore_get(struct blobstore *s, const char *key, const struct blob_sink *sink,
			      blob_done_cb cb, void *arg, struct err **errp);

/* Keys starting with prefix ("" = all; same charset as keys, may end in
 * '/'), in byte order, at most max_keys (1..BLOB_LIST_MAX) per page;
 * token NULL for the first page. */
struct blob_op *blobstore_list(struct blobstore *s, const char *prefix, const char *token,
			       size_t max_keys, blob_done_cb cb, void *arg, struct err **errp);

/* Remove key; an object that is not there is not an error (S3's rule). */
struct blob_op *blobstore_delete(struct blobstore *s, const char *key, blob_done_cb cb, void *arg,
				 struct err **errp);

/* op's callback will not run, and what it started is undone (a put's
 * temporary file or multipart upload is removed; the S3 abort is a request
 * the store finishes on its own, counted by blobstore_ops). NULL-safe; op
 * must not have completed, and this is not called from inside op's own
 * read or write callback (defer it to the loop). */
void blob_cancel(struct blob_op *op);

/* Ops the store holds: in flight, and cancelled ones still undoing what
 * they started. A clean shutdown waits for 0 before blobstore_free. */
size_t blobstore_ops(const struct blobstore *s);

/* The --store options checked at start (config_validate): url "" (the
 * default dir:<state-dir>/store) or one that parses; an s3:// URL needs
 * an http(s) endpoint; the region's charset. Nothing is opened. */
int blobstore_check_config(const char *url, const char *endpoint, const char *region,
			   struct err **errp);

/* A put whose read callback said BLOB_READ_AGAIN pulls again, from the
 * loop (never inside this call). A no-op when it is not waiting. */
void blob_resume(struct blob_op *op);

/* Pure helpers, exported for the tests. */
bool blobstore_key_valid(const char *key);
bool blobstore_prefix_valid(const char *prefix);

#endif
