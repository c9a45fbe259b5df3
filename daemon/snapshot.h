/* snapshot.h: durable workspaces. A snapshot is a session's workspace
 * files (all, or its persist.paths globs), the packages installed into it
 * (/workspace/.ci/site) and, when asked, its picklable variables, kept in
 * the blobstore (blobstore.h) as a tar and a manifest with a SHA-256 per
 * file, indexed in Redis (store_snapshots.h). docs/snapshots.md has the
 * format and the rules.
 *
 * Taking one (snapshot_capture.c): the variables code runs in the kernel,
 * the supervisor streams the tar (ws_tar), and every byte goes through the
 * tar scanner (tar_scan.h) into a spool file on this node's disk, so what
 * was taken is safe before the store has it. Uploading it (snapshot.c):
 * the tar, then the manifest (its presence commits the snapshot), from the
 * spool, retried with backoff while the store is down, and resumed by the
 * next daemon after a restart. Restoring one (snapshot_restore.c): the
 * manifest, then the tar into a spool file while the scanner checks every
 * file against the manifest; only a snapshot that passed whole is sent to
 * the sandbox (ws_untar) and committed, then the variables are loaded. */
#ifndef CI_SNAPSHOT_H
#define CI_SNAPSHOT_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "manager.h"

struct blobstore;
struct config;
struct store;
struct snapshots;

struct snapshots_deps {
	struct event_base *base;
	const struct config *cfg;
	struct manager *mgr;
	struct store *store;     /* Redis: the index */
	struct blobstore *blobs; /* the objects; NULL: snapshots are off (503) */
};

/* The node's snapshots: the spool directory <state-dir>/spool is made and
 * what a previous daemon left there is queued for upload (or removed when
 * it was never finished). Registers the exit snapshot with the manager. */
struct snapshots *snapshots_new(const struct snapshots_deps *d, struct err **errp);
/* The daemon is stopping, before the manager and the store go: no
 * callback of snapshot_* runs from here on, transfers in flight are
 * cancelled, and answers still to come from the manager or Redis are
 * dropped. The spool stays for the next start. NULL-safe. */
void snapshots_close(struct snapshots *sn);
/* After the manager and the store are freed. NULL-safe. */
void snapshots_free(struct snapshots *sn);

/* Uploads waiting in the spool, and snapshots ever taken and restored
 * (for /metrics). */
struct snapshots_stats {
	uint64_t taken, restored, failed, pending, upload_retries, expired;
};
void snapshots_stats(const struct snapshots *sn, struct snapshots_stats *out);

/* An answer: status 201 (stored) or 202 (pending: the store refused, the
 * upload is retried), json the snapshot's record (borrowed), or e. */
typedef void (*snapshot_cb)(const struct err *e, int status, const char *json, size_t len,
			    void *arg);

struct snapshot_options {
	char *const *paths; /* globs; NULL = the whole workspace */
	size_t n_paths;
	bool variables;
	const char *workspace; /* NULL: the session's */
};

/* Take a snapshot of tenant's session id now (POST .../snapshots). */
int snapshot_take(struct snapshots *sn, const char *id, const char *tenant,
		  const struct snapshot_options *o, snapshot_cb cb, void *arg, struct err **errp);

/* Restore into tenant's fresh session id: snap_id, or (snap_id NULL) the
 * latest stored snapshot of workspace (none: json "null", nothing done).
 * cb's json is the "restored" object. Nothing is applied unless the whole
 * snapshot checked out; the caller ends the session on an error. */
int snapshot_restore(struct snapshots *sn, const char *id, const char *tenant, const char *snap_id,
		     const char *workspace, snapshot_cb cb, void *arg, struct err **errp);

/* The index, for the API (records as JSON, tenant's own only). */
typedef void (*snapshot_list_cb)(const struct err *e, const char *const *json, const size_t *len,
				 size_t n, void *arg);
void snapshot_list(struct snapshots *sn, const char *tenant, const char *workspace, size_t limit,
		   snapshot_list_cb cb, void *arg);
void snapshot_get(struct snapshots *sn, const char *tenant, const char *snap_id,
		  snapshot_list_cb cb, void *arg);
void snapshot_workspaces(struct snapshots *sn, const char *tenant, snapshot_list_cb cb, void *arg);
/* Delete the objects, then the record; cb's n is 0 when there was none. */
void snapshot_delete(struct snapshots *sn, const char *tenant, const char *snap_id,
		     snapshot_list_cb cb, void *arg);

/* Whether s is a snapshot id (a lowercase UUID). */
bool snapshot_id_valid(const char *s);

#endif
