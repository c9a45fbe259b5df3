/* snapshot_internal.h: what snapshot.c (the node's engine: spool, uploads,
 * index, retention), snapshot_capture.c (taking one) and
 * snapshot_restore.c (restoring one) share. Not for other modules. */
#ifndef CI_SNAPSHOT_INTERNAL_H
#define CI_SNAPSHOT_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include <yajl/yajl_tree.h>

#include "session.h"
#include "snapshot.h"

/* How long the variables code may take; at a session's end, less. */
#define SNAP_VARS_TIMEOUT_S 60
#define SNAP_VARS_EXIT_TIMEOUT_S 10
/* A capture or a restore that makes no progress for this long is failed. */
#define SNAP_STALL_S 60
/* The manifest is read whole: at most this. */
#define SNAP_MANIFEST_MAX (64u << 20)
/* The marker of the variables code's answer line. */
#define SNAP_VARS_MARK \
	"\x1e"         \
	"CI-VARS "

struct snap_upload;
struct snap_capture;
struct snap_restore;

struct snapshots {
	struct event_base *base;
	const struct config *cfg;
	struct manager *mgr;
	struct store *store;
	struct blobstore *blobs;
	char spool[PATH_MAX];              /* <state-dir>/spool */
	TAILQ_HEAD(, snap_upload) uploads; /* the first is the one running */
	size_t n_uploads;
	struct event *upload_timer; /* the next attempt after a failure */
	struct event *retention_timer;
	bool retention_running;
	bool closing; /* snapshots_close: every late answer is dropped */
	LIST_HEAD(, snap_capture) captures;
	LIST_HEAD(, snap_restore) restores;
	struct snapshots_stats stats;
};

/* "2026-12-01T20:00:00Z" (fractions allowed) as ms since the epoch; -1 if not. */
int64_t snap_parse_time(const char *s);

/* The blobstore keys of snapshot id of tenant. */
void snap_key(char *buf, size_t size, const char *tenant, const char *id, const char *object);
/* <spool>/<name> */
void snap_spool_path(const struct snapshots *sn, char *buf, size_t size, const char *name);

/* snapshot.c: a capture is in the spool (<id>.tar and <id>.json, the
 * manifest): index it as pending and queue its upload. cb (may be NULL)
 * hears the first attempt's outcome: 201 stored or 202 pending. */
void snap_upload_queue(struct snapshots *sn, const char *tenant, const char *id,
		       const char *manifest, size_t len, snapshot_cb cb, void *arg);

/* The record (the API's JSON) of a manifest: every member but "entries",
 * plus "state" and, when pending, "error" and "attempts". NULL when the
 * manifest is not a JSON object. Caller frees. */
char *snap_record_json(const char *manifest, size_t len, const char *state, const char *error,
		       int attempts, size_t *out_len);

/* snapshot_capture.c */
struct snap_capture_req {
	char session[SESSION_ID_LEN + 1];
	const char *tenant;
	const char *workspace;
	char *const *paths;
	size_t n_paths;
	bool variables;
	bool at_exit; /* a session's end: shorter deadlines */
};
/* The capture's end: e NULL and the snapshot in the spool (then queued by
 * the capture itself, with upload_cb). */
typedef void (*snap_capture_cb)(const struct err *e, const char *snap_id, void *arg);
int snap_capture_start(struct snapshots *sn, const struct snap_capture_req *req, snap_capture_cb cb,
		       snapshot_cb upload_cb, void *arg, struct err **errp);
/* At close: transfers cancelled; at free: everything freed. */
void snap_captures_close(struct snapshots *sn);
void snap_captures_free(struct snapshots *sn);

/* The variables code's answer line in r's output, parsed (a JSON object,
 * caller frees with json_free); NULL when there is none. */
struct exec_result;
yajl_val snap_vars_answer(const struct exec_result *r);
/* The variables code followed by call ("__ci_vars_save()"), malloc'd. */
char *snap_vars_code(const char *call, size_t *len);

/* snapshot_restore.c */
void snap_restores_close(struct snapshots *sn);
void snap_restores_free(struct snapshots *sn);

#endif
