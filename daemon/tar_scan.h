/* tar_scan.h: a streaming reader of a snapshot's workspace.tar (issue 13).
 *
 * Pure (no I/O): the caller feeds the tar as it arrives from the sandbox or
 * from the store, in pieces of any size (one byte or a megabyte), and the
 * scanner checks every header, hashes every byte and each regular file's
 * contents, and calls fn once per entry when that entry is complete (a
 * file's SHA-256 known). Nothing of a file's contents is kept: memory is the
 * scanner, a 512-byte header and a pax header of at most TAR_PAX_MAX bytes.
 *
 * The format accepted (docs/SNAPSHOT_SPEC, "Tar format"): POSIX.1-2001 pax
 * as Python's tarfile.PAX_FORMAT and `tar --format=posix` write it: ustar
 * headers (magic "ustar\0" "00", checksum right, octal or base-256 numbers),
 * 'x' extended headers (records "%d %s=%s\n", path and size used), 'g'
 * global headers skipped; entries regular files ('0' or NUL) and directories
 * ('5', size 0) only; paths by tar_path_check; entries in depth-first order,
 * names sorted bytewise, each directory before its contents (so no path
 * appears twice and every parent is an entry); the end two zero blocks and
 * then only zero bytes. Anything else stops the scan with ERR_BAD_REQUEST
 * "tar: <what>, at byte N" (N: the offset of the header or byte concerned);
 * more than max_bytes fed, or more than max_entries entries, with
 * ERR_PAYLOAD_TOO_LARGE. After an error every later feed fails. */
#ifndef CI_TAR_SCAN_H
#define CI_TAR_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define TAR_PATH_MAX 4096       /* bytes of a path, without a NUL */
#define TAR_PAX_MAX (64 * 1024) /* bytes of one 'x' or 'g' header's data */
#define TAR_SHA256_HEX 64

struct tar_entry {
	const char *path; /* borrowed, valid during the call; no trailing '/' */
	bool dir;
	uint64_t size;                   /* 0 for a directory */
	uint32_t mode;                   /* mode & 0777 */
	char sha256[TAR_SHA256_HEX + 1]; /* lowercase hex of the contents; "" for a directory */
};

/* Called once per complete entry, in tar order, from inside tar_scan_feed.
 * Returning -1 (with *errp filled) stops the scan with that error. */
typedef int (*tar_entry_fn)(const struct tar_entry *e, void *arg, struct err **errp);

struct tar_scan;

/* A scanner; fn may be NULL (check and hash only). Caller frees it
 * (tar_scan_free). max_bytes and max_entries of 0 mean no cap. */
struct tar_scan *tar_scan_new(uint64_t max_bytes, uint64_t max_entries, tar_entry_fn fn, void *arg);

/* Scan len more bytes. -1 and *errp on the first error (see above), and on
 * every call after one. */
int tar_scan_feed(struct tar_scan *ts, const void *buf, size_t len, struct err **errp);

/* The tar is over: 0 when its end blocks were seen (and nothing after them
 * but zeros); else -1, ERR_BAD_REQUEST "tar: truncated ...". */
int tar_scan_finish(struct tar_scan *ts, struct err **errp);

/* The SHA-256 (lowercase hex) of every byte fed so far. */
void tar_scan_sha256(const struct tar_scan *ts, char out[TAR_SHA256_HEX + 1]);

/* Bytes fed so far, complete entries (those fn was called for), regular
 * files among them and the sum of their sizes. */
uint64_t tar_scan_bytes(const struct tar_scan *ts);
uint64_t tar_scan_entries(const struct tar_scan *ts);
uint64_t tar_scan_files(const struct tar_scan *ts);
uint64_t tar_scan_content_bytes(const struct tar_scan *ts);

/* NULL is a no-op. */
void tar_scan_free(struct tar_scan *ts);

/* Whether path (len bytes, no NUL needed) is a path a snapshot may hold:
 * 1..TAR_PATH_MAX bytes of UTF-8, no NUL, no leading '/', no empty, "." or
 * ".." component, no trailing '/' (the scanner strips a directory's one).
 * -1 and ERR_BAD_REQUEST "<why>" (without the path) otherwise; the manifest
 * parser uses it too. */
int tar_path_check(const char *path, size_t len, struct err **errp);

/* Whether path a sorts before path b in the tar's order (depth-first,
 * components compared bytewise): "a" < "a/x" < "a-b". */
bool tar_path_before(const char *a, const char *b);

/* Whether path may follow prev (NULL: path is the first entry; prev_dir:
 * prev is a directory) in a tar: after it in that order, and its parent
 * directory an entry already (prev itself or one of prev's ancestors).
 * NULL when it may, else why not (a static string). */
const char *tar_order_check(const char *prev, bool prev_dir, const char *path);

#endif
