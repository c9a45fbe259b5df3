/* manager_internal.h: what the manager's files share. Not for other modules.
 *
 * The manager is cut by ownership, each file owning one flow and its state:
 *   manager.c           the session table, a session's runtime (IPC link,
 *                       clocks), the kernel link's events, queries, set-up
 *   manager_create.c    creating a session: a cancellable state machine,
 *                       cold or from the warm pool (pool.c keeps the pool)
 *   manager_exec.c      executions: deadlines, output, the kernel's death
 *   manager_teardown.c  ending a session: teardown and tombstones
 *   manager_recovery.c  restarts (adoption), Redis write-back, orphans and
 *                       leftovers, shutdown
 *   manager_oneshot.c   the one-shot execution (create, exec, delete)
 *   manager_install.c   a time-boxed package install: the egress window
 *                       and pip as one execution (install.h)
 *   manager_pip.c       `%pip install` in a cell: the kernel asks for the
 *                       window during its execution (pip_open/pip_close)
 * A flow's op is owned by its session (ms->create, ms->exec, ms->teardown);
 * ending a session cancels what is in flight rather than detaching it. */
#ifndef CI_MANAGER_INTERNAL_H
#define CI_MANAGER_INTERNAL_H

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "docker.h"
#include "files.h"
#include "kernel.h"
#include "manager.h"
#include "pool.h"
#include "session.h"
#include "workspace_disk.h"

#define BUCKETS 4096

struct create_op;
struct exec_op;
struct teardown_op;
struct install_op;
struct shutdown_op;

struct kernel_exit_info {
	bool valid;
	int code, sig;
	bool oom;
};

struct msession {
	struct manager *m;
	struct session *s;
	struct kernel_link *link;
	struct files *files;
	struct event *idle_timer;
	struct event *supervisor_timer;
	struct create_op *create;
	struct exec_op *exec;
	struct teardown_op *teardown;
	struct install_op *install;  /* a package install's window is open */
	struct exit_snap *exit_snap; /* its exit snapshot is being taken (manager_snapshot.c) */
	bool exit_snap_done;         /* ... was, or was not wanted: the ending goes on */
	/* Another node tombstoned it node_lost and this node's heartbeat took
	 * its records (cluster.h): its ending writes nothing to Redis. */
	bool tomb_elsewhere;
	struct kernel_exit_info last_exit;
	char *end_reason;
	int64_t clock_written_ms; /* when the clock last went to Redis */
	/* Execution ids are per session, so a sandbox cannot count the node's
	 * other executions; seeded from the clock, so they keep growing across
	 * restarts. */
	uint64_t next_exec_id;
	uint64_t pip_exec_id; /* the execution pip_requests counts (manager_pip.c) */
	unsigned pip_requests;
	bool pooled;                   /* a warm sandbox, not yet anybody's session */
	struct pool_entry *pool_entry; /* ... ready in the pool (NULL while starting) */
	struct workspace_vol *wsvol;   /* its loop-mounted /workspace (NULL: a tmpfs) */
	struct msession *hnext;
	TAILQ_ENTRY(msession) all;
};

struct manager {
	struct event_base *base;
	const struct config *cfg;
	struct docker *docker;
	struct store *store;
	struct sandbox_net *net;
	char *sessions_dir;
	bool ipc_tmpfs; /* sessions_dir is the tmpfs of ipc_dir.h */
	struct msession *buckets[BUCKETS];
	TAILQ_HEAD(, msession) all;
	size_t count;
	struct uid_range *uids; /* one host uid per session */
	char *seccomp;          /* the sandboxes' seccomp profile (JSON), NULL = engine's */
	struct pool *pool;
	struct workspace_disk *wsdisk; /* where /workspace lives (workspace_disk.h) */
	struct shutdown_op *shutdown;  /* in progress */
	bool draining;
	bool recovering, recovered;
	struct recovery *recovery; /* the one under way (manager_recovery.c) */
	manager_event_fn listener;
	void *listener_arg;
	manager_exit_hook exit_hook; /* the snapshot engine's (manager_set_exit_snapshot) */
	void *exit_hook_arg;
	TAILQ_HEAD(tomb_head_, tomb) tombs; /* newest first */
	size_t n_tombs;
	uint64_t endings[MANAGER_END_COUNT]; /* sessions ended, by reason */
	bool orphans_suspected;              /* a container removal failed: sweep soon */
	int64_t last_sweep_ms;
	struct event *sweep;
};

/* A supervisor that stays away this long means the container is gone: the
 * session ends (its reason from Docker when Docker knew it by then). */
#define SUPERVISOR_GRACE_MS 3000

/* Recent endings, kept here too: a call on an ended session gets its 410
 * even while Redis is down, and a tombstone Redis could not take is written
 * when it is back. Bounded twice: a written one goes when Redis's copy does
 * (tombstone-ttl-s, so both answer alike), and past TOMBS_MAX the oldest
 * go first. */
#define TOMBS_MAX 4096

struct tomb {
	char id[SESSION_ID_LEN + 1];
	char tenant[64];
	char node[128];
	enum session_state state;
	char *reason;
	int64_t at_ms;
	bool unwritten;
	TAILQ_ENTRY(tomb) link;
};

/* manager_snapshot.c: a session with persist.on_end that ends for a reason
 * an exit snapshot is for has it taken first: true when msession_end must
 * stop here (it is called again, with the same arguments, when the
 * snapshot is done). */
bool exit_snap_begin(struct msession *ms, enum session_state st, enum manager_end why,
		     const char *reason, manager_done_cb cb, void *arg);
/* Free an exit snapshot's state at the daemon's exit (nobody waits). */
void exit_snap_free_at_exit(struct msession *ms);
/* Whether clients are refused: the session is ending (its teardown or its
 * exit snapshot). */
static inline bool msession_closing(const struct msession *ms)
{
	return ms->teardown != NULL || ms->exit_snap != NULL;
}

/* manager.c: the table and a session's runtime */
struct msession *manager_find(struct manager *m, const char *id);
/* The live session id of tenant, or NULL (also while it is ending). */
struct msession *manager_owned(struct manager *m, const char *id, const char *tenant);
void manager_emit(struct manager *m, const char *type, const struct session *s, const char *detail);
size_t manager_client_sessions(const struct manager *m);
bool manager_any_networked(const struct manager *m);
/* The runtime side of a session (IPC socket, transfers, timers), in the
 * table. Takes s (freed on failure). */
struct msession *msession_new(struct manager *m, struct session *s, struct err **errp);
/* Out of the table and freed: the end of a teardown. */
void msession_remove(struct msession *ms);
void msession_arm_idle(struct msession *ms);
void msession_touch(struct msession *ms);
void msession_persist(struct msession *ms);

/* manager_create.c */
/* Walk a new session through its create steps; with record, it gets its
 * Redis record first (a warm sandbox has no owner, so none). */
void create_start(struct msession *ms, manager_session_cb cb, void *arg, bool record);
/* The runner's supervisor or kernel connected: maybe the create is done. */
void create_on_runner_up(struct create_op *op);
/* The session ends while it is being created: cb hears why, what is in
 * flight is cancelled, the op is freed. */
void create_abort(struct create_op *op, const char *reason);
/* After recovery: the warm pool may start filling. */
void create_pool_init(struct manager *m);
/* The daemon exits: the op goes, nobody is told. */
void create_free_at_exit(struct create_op *op);

/* manager_exec.c: what the kernel link reports about executions */
void exec_on_kernel_up(struct msession *ms);
void exec_on_kernel_down(struct msession *ms);
void exec_on_kernel_exit(struct msession *ms);
void exec_on_stream(struct msession *ms, uint64_t id, bool is_stderr, const char *data, size_t len,
		    bool tail, uint64_t dropped);
void exec_on_display(struct msession *ms, uint64_t id, const struct exec_display_info *info,
		     const char *data, size_t len);
void exec_on_done(struct msession *ms, uint64_t id, yajl_val header);
/* The session ends under a running execution: it is answered "killed". */
void exec_abort(struct exec_op *op, const char *reason);
/* The daemon exits: answered without touching the session. */
void exec_abort_at_exit(struct exec_op *op);
/* The id of the execution the kernel is running (0: none), and the
 * milliseconds left before its deadline's interrupt. */
uint64_t exec_running_id(const struct msession *ms, int64_t *left_ms);
/* Start an execution in ms with this deadline (no cap applied: the caller
 * decided it), for manager_exec and the install flow. */
int exec_start(struct msession *ms, const char *code, size_t len, int64_t timeout_s,
	       manager_event_cb on_event, manager_exec_cb cb, void *arg, struct err **errp);
/* exec_start in language (static; NULL: Python). */
int exec_start_lang(struct msession *ms, const char *language, const char *code, size_t len,
		    int64_t timeout_s, manager_event_cb on_event, manager_exec_cb cb, void *arg,
		    struct err **errp);

/* manager_install.c: the install window (install.h) */
/* The allowlist the proxy applies to ms now: its own, plus the index's
 * entry while an install window is open. Borrowed. */
void install_effective_allow(struct msession *ms, char *const **allow, size_t *n);
/* ms's own allowlist changed (PATCH): the window's list follows. */
void install_on_allow_changed(struct install_op *op);
/* The daemon exits: the window's timer goes, the proxy is not touched. */
void install_abort_at_exit(struct install_op *op);
/* A %pip install in execution exec_id (manager_pip.c): the same checks as
 * the API's install, then the window, for the node's longest window or
 * limit_ms (what is left of the execution's deadline), whichever is less;
 * *window_ms says which, entry the index's host:port. */
int install_kernel_open(struct msession *ms, uint64_t exec_id, char *const *specs, size_t n_specs,
			int64_t limit_ms, int64_t *window_ms, char *entry, size_t esize,
			struct err **errp);
/* Close the window execution exec_id opened (0: whichever execution),
 * if it is still open; why goes in the log line. */
void install_kernel_close(struct msession *ms, uint64_t exec_id, const char *why);

/* manager_pip.c: the kernel's pip_open and pip_close frames */
void pip_on_frame(struct msession *ms, uint64_t id, bool close, const struct kernel_pip *pip);

/* manager_teardown.c */
/* End ms (why: the metrics' reason; reason: the words of its tombstone). */
void msession_end(struct msession *ms, enum session_state st, enum manager_end why,
		  const char *reason, manager_done_cb cb, void *arg);
struct tomb *manager_tomb_find(struct manager *m, const char *id);
void manager_tomb_write(struct manager *m, struct tomb *t);
void manager_tombs_free(struct manager *m);
/* Drop the written endings older than tombstone-ttl-s (the sweep's tick). */
void manager_tombs_expire(struct manager *m, int64_t now_ms);

/* manager_recovery.c */
void manager_registry_write_back(void *arg);
/* At exit: a recovery still under way is freed, now or at its last callback. */
void manager_recovery_abandon(struct manager *m);
void manager_sweep_cb(evutil_socket_t fd, short what, void *arg);
/* Shutdowns still in progress when the daemon exits: freed, nobody told. */
void manager_shutdown_free(struct manager *m);

#endif
