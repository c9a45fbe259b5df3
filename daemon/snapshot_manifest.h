/* snapshot_manifest.h: a snapshot's manifest.json (format 1, issue 13):
 * built from the tar scanner's entries at capture, parsed and checked at
 * restore, and the verifier that holds a restored tar to it. Pure (no I/O).
 *
 * Capture:
 *   struct snapshot_head h = {.id = id, .tenant = t, .workspace = ws, .session = sid,
 *                             .created_at_ms = now, .paths = globs, .n_paths = n,
 *                             .all_paths = globs == NULL, .variables = vars};
 *   struct snapshot_builder *b = snapshot_builder_new(&h);
 *   struct tar_scan *ts = tar_scan_new(max_bytes, max_files, snapshot_builder_entry, b);
 *   ... tar_scan_feed ..., tar_scan_finish
 *   char sha[65]; tar_scan_sha256(ts, sha);
 *   struct snapshot_tail t = {.size = tar_scan_bytes(ts), .sha256 = sha,
 *                             .packages = pkgs, .n_packages = n, .skipped = skipped};
 *   char *json = snapshot_builder_finish(b, &t, &len, &e);
 *
 * Restore:
 *   struct snapshot_manifest *m = snapshot_manifest_parse(text, len, max_files, &e);
 *   struct snapshot_verify *v = snapshot_verify_new(m);
 *   struct tar_scan *ts = tar_scan_new(m->size, max_files, snapshot_verify_entry, v);
 *   ... tar_scan_feed (each piece also to ws_untar) ..., tar_scan_finish;
 *       on a failure of either: snapshot_verify_scan_error(v, &e) (ERR_CORRUPT)
 *   snapshot_verify_finish(v, ts, &e): 0 → ws_untar_end commit:true, else commit:false
 *
 * Everything a manifest holds is checked both ways: what the builder writes
 * passes the parser. Errors of the parser and the verifier are ERR_CORRUPT
 * ("snapshot <id> is corrupt: <what>"; the parser's name the field). */
#ifndef CI_SNAPSHOT_MANIFEST_H
#define CI_SNAPSHOT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_tree.h>

#include "err.h"
#include "tar_scan.h"

#define SNAPSHOT_MANIFEST_MAX (64 * 1024 * 1024) /* bytes of manifest.json */
#define SNAPSHOT_UUID_LEN 36
#define SNAPSHOT_NAME_MAX 1024  /* a variable's, module's or package's name, a reason */
#define SNAPSHOT_LIST_MAX 50000 /* items in variables.saved/modules/skipped, packages */
/* JSON tokens of a manifest (',' ':' '[' '{' outside strings, +1): bounds
 * the parsed tree (tens of bytes a node) far below what 64 MiB of "[1,1,..."
 * would build. 50,000 entries and full variable lists fit. */
#define SNAPSHOT_TOKENS_MAX 1000000
#define SNAPSHOT_SKIPPED_MAX 1000 /* items in skipped */

struct install_pkg;

/* What is known when the capture starts (all borrowed during the call). */
struct snapshot_head {
	const char *id;        /* lowercase UUID */
	const char *tenant;    /* 1..SNAPSHOT_NAME_MAX bytes */
	const char *workspace; /* [A-Za-z0-9._-]{1,64}, not starting with '.' */
	const char *session;   /* UUID, or NULL: written as null */
	int64_t created_at_ms; /* epoch ms */
	bool all_paths;        /* paths: null (everything) */
	const char *const *paths;
	size_t n_paths; /* at most 64 globs of 1..256 bytes */
	/* The kernel's save answer ({"saved","modules","skipped",...}), or NULL
	 * (variables: null). Only saved, modules and skipped are kept; see
	 * snapshot_builder_finish for what is done with odd items. */
	yajl_val variables;
};

/* What is known when the tar is over (borrowed during the call). */
struct snapshot_tail {
	uint64_t size;                      /* the tar's bytes */
	const char *sha256;                 /* the tar's, 64 lowercase hex */
	const struct install_pkg *packages; /* name and version each */
	size_t n_packages;
	/* ws_tar_end's "skipped" ([{"path","reason"}]), or NULL for []. */
	yajl_val skipped;
};

struct snapshot_builder;

/* A builder, which writes the head at once and each entry as it comes (so
 * its memory is the manifest's text, never more than SNAPSHOT_MANIFEST_MAX).
 * Caller frees it (snapshot_builder_free). */
struct snapshot_builder *snapshot_builder_new(const struct snapshot_head *h);

/* A tar_entry_fn: arg is the builder. ERR_PAYLOAD_TOO_LARGE once the text
 * would pass SNAPSHOT_MANIFEST_MAX. */
int snapshot_builder_entry(const struct tar_entry *e, void *arg, struct err **errp);

/* The manifest's JSON text (caller frees it; *len its length). What came
 * from the sandbox (variables, skipped, packages: descriptive only) never
 * fails a capture: an item of the wrong shape, empty or not UTF-8 is left
 * out, a string over its cap (SNAPSHOT_NAME_MAX, TAR_PATH_MAX for a path)
 * is cut at a character, a list at its cap; variables that are not an
 * object are written as null. NULL and ERR_BAD_REQUEST for a bad head
 * field (id, tenant, workspace, session, paths: the daemon's own) or tar
 * sha256, ERR_PAYLOAD_TOO_LARGE over SNAPSHOT_MANIFEST_MAX or
 * SNAPSHOT_TOKENS_MAX; so what is returned always parses. Call once. */
char *snapshot_builder_finish(struct snapshot_builder *b, const struct snapshot_tail *t,
			      size_t *len, struct err **errp);

/* NULL is a no-op. */
void snapshot_builder_free(struct snapshot_builder *b);

struct snapshot_entry {
	const char *path; /* borrowed from the manifest's tree */
	bool dir;
	uint64_t size;
	uint32_t mode;
	char sha256[TAR_SHA256_HEX + 1]; /* "" for a directory */
};

/* A parsed manifest. Strings and trees are borrowed from root, which the
 * manifest owns: valid until snapshot_manifest_free. */
struct snapshot_manifest {
	char id[SNAPSHOT_UUID_LEN + 1];
	const char *tenant, *workspace;
	const char *session;    /* NULL when null */
	const char *created_at; /* as written: "2026-12-01T20:00:00Z" */
	int64_t created_at_ms;
	uint64_t size, files, content_bytes;
	char sha256[TAR_SHA256_HEX + 1];
	struct snapshot_entry *entries; /* owned */
	size_t n_entries;
	/* The descriptive parts, checked; each may be absent from the text
	 * (another tool's manifest): paths and variables are then NULL as for
	 * null, packages and skipped NULL for [] (json_arr_len(NULL) is 0). */
	yajl_val paths;     /* an array of strings, or NULL: everything */
	yajl_val variables; /* {"saved","modules","skipped"}, or NULL: none */
	yajl_val packages;  /* [{"name","version"}] or NULL */
	yajl_val skipped;   /* [{"path","reason"}] or NULL */
	yajl_val root;      /* owned */
};

/* Parse and check len bytes of manifest.json (hostile: from the store).
 * NULL and ERR_CORRUPT naming the field ("snapshot <id> is corrupt: manifest:
 * entries[3].sha256: not 64 lowercase hex digits"), also for more than
 * max_entries entries (0: no cap), a text over SNAPSHOT_MANIFEST_MAX or
 * SNAPSHOT_TOKENS_MAX (counted before any tree is built), and counts that
 * do not add up (files, content_bytes, a size below the files' sum or an
 * empty tar's 1024 bytes). Before the id is read the message begins
 * "snapshot manifest is corrupt: ". The caller still compares m->id and
 * m->tenant with the ones it asked for. Caller frees the result
 * (snapshot_manifest_free). */
struct snapshot_manifest *snapshot_manifest_parse(const char *text, size_t len,
						  uint64_t max_entries, struct err **errp);

/* NULL is a no-op. */
void snapshot_manifest_free(struct snapshot_manifest *m);

struct snapshot_verify;

/* A verifier of a tar against m (borrowed: m must outlive it). Caller frees
 * it (snapshot_verify_free). */
struct snapshot_verify *snapshot_verify_new(const struct snapshot_manifest *m);

/* A tar_entry_fn: arg is the verifier. The entry must be the manifest's
 * next one (path, type, size, mode, sha256); ERR_CORRUPT "snapshot <id> is
 * corrupt: out/a.csv: sha256 does not match the manifest" otherwise. */
int snapshot_verify_entry(const struct tar_entry *e, void *arg, struct err **errp);

/* What tar_scan_feed or tar_scan_finish refused during a restore (a bad
 * header, more bytes than the manifest's size): the tar came from the
 * store, so it is corruption: *errp becomes ERR_CORRUPT "snapshot <id> is
 * corrupt: tar: ...". An ERR_CORRUPT (the verifier's own) is left as it is. */
void snapshot_verify_scan_error(const struct snapshot_verify *v, struct err **errp);

/* After tar_scan_finish: every entry seen, and the tar's size and sha256
 * those of the manifest. -1 and ERR_CORRUPT otherwise. */
int snapshot_verify_finish(struct snapshot_verify *v, const struct tar_scan *ts, struct err **errp);

/* NULL is a no-op. */
void snapshot_verify_free(struct snapshot_verify *v);

/* Whether s is a lowercase UUID (8-4-4-4-12 hex). */
bool snapshot_uuid_valid(const char *s);

#endif
