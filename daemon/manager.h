/* manager.h: sessions in motion. Creates, executes in, expires and tears
 * down sessions by driving docker.c, store.c and kernel.c.
 *
 * Each long flow (create, exec, teardown) is a small context struct walked
 * through its steps by callbacks; session.c holds the rules, this file the
 * orchestration. Results are reported through callbacks that run exactly
 * once and never inside the call that started the flow; a flow that cannot
 * start returns -1 with an error instead. */
#ifndef CI_MANAGER_H
#define CI_MANAGER_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "docker.h"
#include "err.h"
#include "exec_result.h"
#include "files.h"
#include "install.h"
#include "session.h"
#include "store.h"

struct manager;

typedef void (*manager_session_cb)(const struct session *s, const struct err *e, void *arg);
typedef void (*manager_exec_cb)(const struct exec_result *r, const struct err *e, void *arg);
typedef void (*manager_done_cb)(const struct err *e, void *arg);
/* Live output of a streaming execution: "stdout" or "stderr" text (display
 * NULL), or a "display" (the entry kept in the result: mime, base64 data,
 * group, result; data is its base64). */
typedef void (*manager_event_cb)(const char *type, const char *data, size_t len,
				 const struct exec_display *display, void *arg);

struct sandbox_net;
struct egress_peer;

/* net may be NULL (then sessions with an allowlist are refused). */
struct manager *manager_new(struct event_base *base, const struct config *cfg,
			    struct docker *docker, struct store *store, struct sandbox_net *net,
			    struct err **errp);

/* For the egress proxy: the session behind a sandbox's source address. */
bool manager_egress_lookup(const char *src_ip, struct egress_peer *peer, void *arg);

/* Replace a live session's allowlist (PATCH): req's allow list, checked
 * with the create rules, becomes the session's. */
int manager_patch(struct manager *m, const char *id, const char *tenant,
		  const struct session_request *req, struct err **errp);

/* A time-boxed package install in session id (install.h): req is only
 * read during the call; cb runs once with the result (borrowed) or why
 * there is none (503 no index configured, 400 a bad spec or a session
 * without network, 409 busy, 504 the window ended first). */
typedef void (*manager_install_cb)(const struct install_result *r, const struct err *e, void *arg);
int manager_install(struct manager *m, const char *id, const char *tenant,
		    const struct install_request *req, manager_install_cb cb, void *arg,
		    struct err **errp);

/* Exit snapshots (snapshot.h): a session with persist.on_end that is
 * deleted, expires or is drained calls fn before its container goes; fn
 * calls done(NULL, done_arg) exactly once when it has what it needs (the
 * files spooled), and the ending goes on. Meanwhile the session refuses
 * its clients ("ending"), but manager_snapshot_exec and _tar still work. */
typedef void (*manager_exit_hook)(void *arg, const struct session *s, manager_done_cb done,
				  void *done_arg);
void manager_set_exit_snapshot(struct manager *m, manager_exit_hook fn, void *arg);

/* The snapshot engine's access to session id (the caller checked the
 * tenant): an execution of the daemon's own code, and a tar op
 * (files_start_tar), allowed also while its exit snapshot is taken. */
int manager_snapshot_exec(struct manager *m, const char *id, const char *code, size_t len,
			  int64_t timeout_s, manager_exec_cb cb, void *arg, struct err **errp);
struct file_op *manager_snapshot_tar(struct manager *m, const char *id, enum file_op_kind kind,
				     const char *params, const struct file_op_cbs *cbs, void *arg,
				     struct err **errp);

/* Remove path (relative to /workspace) in session id, not waiting for
 * it: the variables file once its snapshot has it. */
void manager_snapshot_forget_file(struct manager *m, const char *id, const char *path);

/* Delete session id without an exit snapshot (a create whose restore
 * failed: there is nothing of the client's to keep). */
int manager_discard(struct manager *m, const char *id, const char *tenant, manager_done_cb cb,
		    void *arg, struct err **errp);
/* Name the workspace session id's snapshots go under (a restore's). */
void manager_set_workspace(struct manager *m, const char *id, const char *tenant, const char *name);

/* Free every session's runtime state. Containers are left running for the
 * next daemon to adopt (or removed by the caller first, per config). */
void manager_free(struct manager *m);
/* A clean exit: when no session or sandbox outlives the daemon (none was
 * left, or remove-on-exit ended them all), the IPC tmpfs on
 * <state-dir>/s is unmounted (the next daemon mounts its own). With
 * sessions left for the next daemon to adopt it stays: their containers
 * hold their IPC directories in it. Before manager_free. */
void manager_release_state_dir(struct manager *m);

/* Create a session from req (NULL: all defaults) for tenant. */
int manager_create(struct manager *m, const struct session_request *req, const char *tenant,
		   manager_session_cb cb, void *arg, struct err **errp);

/* The live session with this id owned by tenant, or NULL. Borrowed. */
const struct session *manager_get(struct manager *m, const char *id, const char *tenant);

/* Why tenant's session id is not here: 410 expired with when and why
 * (tombstone), or 404. Another tenant's session, live or ended, is a 404
 * exactly like an id that never existed. Always calls cb with an error. */
void manager_explain_missing(struct manager *m, const char *id, const char *tenant,
			     manager_done_cb cb, void *arg);

int manager_exec(struct manager *m, const char *id, const char *tenant, const char *code,
		 size_t len, int64_t timeout_s, manager_event_cb on_event, manager_exec_cb cb,
		 void *arg, struct err **errp);
/* manager_exec in another language than Python: language is one of
 * exec_languages (a static string, kept as is) or NULL for Python. The
 * kernel bridges it to a child process it keeps (docs/protocol.md). */
int manager_exec_lang(struct manager *m, const char *id, const char *tenant, const char *language,
		      const char *code, size_t len, int64_t timeout_s, manager_event_cb on_event,
		      manager_exec_cb cb, void *arg, struct err **errp);

/* Interrupt the execution running in session id (the client's, like
 * Ctrl-C): SIGINT to the kernel, SIGKILL after the kill grace if the code
 * ignores it; the execution's own caller gets its result (the traceback of
 * a KeyboardInterrupt, as a rule). *interrupted says whether one was
 * running. */
int manager_interrupt(struct manager *m, const char *id, const char *tenant, bool *interrupted,
		      struct err **errp);

/* One execution in a fresh session (POST /v1/exec): create a session of
 * req->image (NULL: the default) for tenant, run req->code in it (timeout_s
 * 0: the session's exec_timeout_s), remove it, then call cb once: r the
 * result (borrowed), or e why there is none; created says whether the
 * session was made (a create error otherwise). req is only read during the
 * call. manager_oneshot.c. */
struct exec_request {
	char *code;
	size_t len;
	int64_t timeout_s; /* 0: the session's exec_timeout_s */
	bool stream;       /* POST /v1/sessions/{id}/exec only: NDJSON events */
	char *image;       /* one-shot only: NULL = the default image */
	/* One of exec_languages (static, not owned); NULL: Python. */
	const char *language;
};
/* The languages an execution may name, NULL-terminated; the first,
 * "python", is the default (api_requests.c). */
extern const char *const exec_languages[];
typedef void (*manager_oneshot_cb)(const struct exec_result *r, const struct err *e, bool created,
				   void *arg);
int manager_oneshot(struct manager *m, const char *tenant, const struct exec_request *req,
		    manager_oneshot_cb cb, void *arg, struct err **errp);

/* Start a files-API operation in a session (see files.h; recursive: a
 * FILE_DELETE may remove a directory); the returned op
 * is driven with files_put_data / files_put_end / files_cancel. */
struct file_op *manager_file_start(struct manager *m, const char *id, const char *tenant,
				   enum file_op_kind kind, const char *path, bool recursive,
				   const struct file_op_cbs *cbs, void *arg, struct err **errp);

int manager_delete(struct manager *m, const char *id, const char *tenant, manager_done_cb cb,
		   void *arg, struct err **errp);

/* Slide the idle clock. */
int manager_keepalive(struct manager *m, const char *id, const char *tenant, struct err **errp);

/* Call fn for each live session of tenant. */
void manager_foreach(struct manager *m, const char *tenant,
		     void (*fn)(const struct session *s, void *arg), void *arg);

/* Sessions on this node (all tenants). */
size_t manager_count(const struct manager *m);

/* End every session of this node (container removed, tombstone "reason"),
 * or with pool_only just the warm pool's sandboxes (nobody would adopt
 * them), then call cb once. */
void manager_shutdown(struct manager *m, const char *reason, bool pool_only, manager_done_cb cb,
		      void *arg);

/* Reconcile Docker with Redis after a start: adopt live sessions, remove
 * orphan containers, tombstone sessions whose container is gone. Runs in the
 * background (again every second until both answer); also started by the
 * first connection to Redis. */
void manager_recover(struct manager *m);

/* Session events ("ready", "exec", "expired", "dead", "adopted", ...), for
 * the live event stream. One listener; detail may be NULL. */
typedef void (*manager_event_fn)(const char *type, const struct session *s, const char *detail,
				 void *arg);
void manager_set_listener(struct manager *m, manager_event_fn fn, void *arg);

/* What this node and prefix left behind: containers that no live session
 * owns, and session directories in the state dir without a session. cb gets
 * a JSON object {"orphans":[{"container","session","state"}],
 * "state_dirs":[name...]} (borrowed), or an error. With remove set they are
 * removed too. */
typedef void (*manager_orphans_cb)(const struct err *e, const char *json, size_t len, void *arg);
void manager_orphans(struct manager *m, bool remove, manager_orphans_cb cb, void *arg);

/* The pool sizes changed (SIGHUP): end warm sandboxes beyond them, oldest
 * first, and start what is missing. Sandboxes still starting beyond a
 * lowered size are ended once ready. */
void manager_pool_resize(struct manager *m);

/* The warm pool: sandboxes ready now, creates it served, creates it could
 * have served but was empty for. */
void manager_pool_stats(const struct manager *m, size_t *ready, uint64_t *hits, uint64_t *misses);
/* What the warm pool of the default kind aims at now (pool.h: it grows with
 * bursts of creates). */
size_t manager_pool_target(const struct manager *m);

/* Why sessions ended, for /metrics (a fixed set, so a bounded label). */
enum manager_end {
	MANAGER_END_DELETED,   /* by the client (and the one-shot's own end) */
	MANAGER_END_IDLE,      /* idle timeout */
	MANAGER_END_LIFETIME,  /* max lifetime */
	MANAGER_END_FAILED,    /* its create failed */
	MANAGER_END_CRASHED,   /* its container or sandbox died */
	MANAGER_END_DRAINED,   /* the daemon shut it down */
	MANAGER_END_NODE_LOST, /* found without a container at a restart */
	MANAGER_END_COUNT,
};
const char *manager_end_name(enum manager_end why);

/* End session id because another node tombstoned it node_lost while this
 * one was away (cluster.c, after the heartbeat that took its records):
 * container removed, nothing written to Redis, reason kept for a later
 * GET here. false when id is not a session of this node. */
bool manager_end_lost(struct manager *m, const char *id, const char *reason);
/* Sessions ended since start, by reason (warm sandboxes are not counted). */
void manager_endings(const struct manager *m, uint64_t out[MANAGER_END_COUNT]);

/* Write every session's current clock to Redis (before the daemon exits
 * and leaves its sessions to the next one). */
void manager_flush_clocks(struct manager *m);

/* Executions running now. */
size_t manager_execs_in_flight(const struct manager *m);

/* Refuse new sessions and executions from now on (drain). */
void manager_set_draining(struct manager *m, bool draining);
bool manager_is_draining(const struct manager *m);

/* Whether the sessions this node had before a restart are adopted: until
 * then an id it does not know may be one of them. */
bool manager_is_recovered(const struct manager *m);

#endif
