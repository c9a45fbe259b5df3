/* manager_internal.h: what the manager's files share (manager.c: sessions
 * and their flows; manager_pool.c: the warm pool; manager_recovery.c:
 * reconciling Docker and Redis, orphans, shutdown). Not for other modules. */
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
#include "session.h"

#define BUCKETS 4096

struct msession;

struct create_op {
	struct manager *m;
	struct msession *ms; /* NULL once the session ended under it */
	manager_session_cb cb;
	void *arg;
	struct event *timeout;
	enum {
		CREATE_STORE,
		CREATE_NETWORK,
		CREATE_DOCKER_CREATE,
		CREATE_DOCKER_START,
		CREATE_INSPECT,
		CREATE_WAIT_KERNEL
	} step;
};

struct exec_op {
	struct msession *ms;
	uint64_t id;
	char *code;
	size_t len;
	bool sent;
	bool timed_out;   /* the deadline passed and SIGINT was sent */
	bool hard_killed; /* SIGKILL was sent after the grace */
	bool kernel_lost; /* waiting for the supervisor's exit notice */
	int64_t start_us;
	int64_t timeout_s;
	struct exec_result *result;
	struct event *deadline;
	manager_event_cb on_event;
	manager_exec_cb cb;
	void *arg;
};

struct teardown_op {
	struct msession *ms;
	int pending;
	manager_done_cb cb;
	void *arg;
};

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
	struct kernel_exit_info last_exit;
	char *end_reason;
	int64_t clock_written_ms; /* when the clock last went to Redis */
	/* Execution ids are per session, so a sandbox cannot count the node's
	 * other executions; seeded from the clock, so they keep growing across
	 * restarts. */
	uint64_t next_exec_id;
	bool pooled;  /* a warm sandbox, not yet anybody's session */
	bool in_pool; /* ... and ready in the pool's list */
	struct msession *hnext;
	TAILQ_ENTRY(msession) all;
	TAILQ_ENTRY(msession) pool_link;
};

struct manager {
	struct event_base *base;
	const struct config *cfg;
	struct docker *docker;
	struct store *store;
	struct sandbox_net *net;
	char *sessions_dir;
	struct msession *buckets[BUCKETS];
	TAILQ_HEAD(, msession) all;
	size_t count;
	struct uid_range *uids; /* one host uid per session */
	char *seccomp;          /* the sandboxes' seccomp profile (JSON), NULL = engine's */
	bool draining;
	bool recovering, recovered;
	manager_event_fn listener;
	void *listener_arg;
	TAILQ_HEAD(tomb_head_, tomb) tombs; /* newest first */
	size_t n_tombs;
	bool orphans_suspected; /* a container removal failed: sweep soon */
	int64_t last_sweep_ms;
	struct event *sweep;
	TAILQ_HEAD(, msession) pool; /* warm and ready, oldest first */
	size_t pool_ready, pool_filling, pooled_total;
	uint64_t pool_hits, pool_misses;
	struct event *pool_retry;
};

/* Recent endings, kept here too: a call on an ended session gets its 410
 * even while Redis is down, and a tombstone Redis could not take is written
 * when it is back. Bounded: the oldest go first. */
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

/* manager.c */
void manager_emit(struct manager *m, const char *type, const struct session *s, const char *detail);
struct msession *manager_find(struct manager *m, const char *id);
size_t manager_client_sessions(const struct manager *m);
void manager_tomb_write(struct manager *m, struct tomb *t);
void msession_arm_idle(struct msession *ms);
void msession_touch(struct msession *ms);
void msession_persist(struct msession *ms);
void manager_ignore_response(const struct docker_response *resp, void *arg);
void manager_ignore_net_ready(const struct err *e, void *arg);
struct msession *msession_new(struct manager *m, struct session *s, struct err **errp);
void msession_create_start(struct manager *m, struct msession *ms, manager_session_cb cb, void *arg,
			   bool record);
void msession_end(struct msession *ms, enum session_state st, const char *reason,
		  manager_done_cb cb, void *arg);

/* manager_pool.c */
bool manager_pool_eligible(const struct manager *m, const struct session *s);
void manager_pool_retry_cb(evutil_socket_t fd, short what, void *arg);
void manager_pool_fill(struct manager *m);
void manager_pool_claim(struct manager *m, struct msession *ms, struct session *s,
			manager_session_cb cb, void *arg);

/* Whether a session of ours (a warm sandbox too) is on the sandbox network. */
bool manager_any_networked(const struct manager *m);

/* manager_recovery.c */
void manager_registry_write_back(void *arg);
void manager_sweep_cb(evutil_socket_t fd, short what, void *arg);

#endif
