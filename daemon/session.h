/* session.h: what a session is, and the rules about it.
 *
 * Pure state and validation: no I/O, no event loop, so every rule here is
 * unit-tested without Docker or Redis. The orchestration that moves a session
 * through its life (containers, kernels, Redis) lives in manager.c. */
#ifndef CI_SESSION_H
#define CI_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"

#define SESSION_ID_LEN 36
#define SESSION_MAX_ALLOW 64
#define SESSION_MAX_KV 64
#define SESSION_MAX_KV_BYTES 4096
/* Durable workspaces (snapshot.h): a workspace's name, the persist.paths globs. */
#define SESSION_WORKSPACE_MAX 64
#define SESSION_PERSIST_MAX_PATHS 64
#define SESSION_PERSIST_PATH_MAX 256

enum session_state {
	SESSION_STARTING, /* container being created; not yet usable */
	SESSION_READY,
	SESSION_BUSY,    /* an execution is running */
	SESSION_EXPIRED, /* ended by a clock; a tombstone remains */
	SESSION_DEAD,    /* ended by a failure or a delete; a tombstone remains */
};

struct session_limits {
	int64_t memory_mb;
	double cpus;
	int64_t pids;
	int64_t disk_mb;
	int64_t exec_timeout_s;
};

struct session_kv {
	char *key;
	char *value;
};

/* What a session keeps of itself (POST /v1/sessions "persist"): which
 * files (paths NULL and all false: every file), whether its variables,
 * and whether an exit snapshot is taken when it ends. */
struct session_persist {
	bool set;     /* the client asked for it */
	char **paths; /* globs; NULL (n_paths 0) = the whole workspace */
	size_t n_paths;
	bool variables;
	bool on_end;
};

struct session {
	char id[SESSION_ID_LEN + 1];
	char *tenant;
	char *image;    /* profile name, e.g. "python" */
	bool gvisor;    /* the stronger tier: runs under the gVisor runtime */
	bool networked; /* on the sandbox network (it was created with an allowlist) */
	enum session_state state;
	int64_t created_at_ms;
	int64_t last_active_at_ms;
	int64_t expires_at_ms;
	int64_t idle_timeout_s;
	int64_t max_lifetime_s;
	struct session_limits limits;
	char **allow;
	size_t n_allow;
	struct session_kv *env;
	size_t n_env;
	struct session_kv *metadata;
	size_t n_metadata;
	char *node;
	char *container_id; /* NULL until Docker created it */
	char net_ip[64];    /* address on the sandbox network; "" without network */
	int64_t uid;        /* host uid (and gid) of the sandbox's processes; 0 = none yet */
	char *workspace;    /* the name its snapshots go under; NULL = its id */
	struct session_persist persist;
};

/* Which fields of a session_request the client set. */
enum session_request_field {
	SRQ_IMAGE = 1 << 0,
	SRQ_IDLE_TIMEOUT = 1 << 1,
	SRQ_MAX_LIFETIME = 1 << 2,
	SRQ_MEMORY = 1 << 3,
	SRQ_CPUS = 1 << 4,
	SRQ_PIDS = 1 << 5,
	SRQ_DISK = 1 << 6,
	SRQ_EXEC_TIMEOUT = 1 << 7,
	SRQ_ALLOW = 1 << 8,
	SRQ_RUNTIME = 1 << 9,
	SRQ_ENV = 1 << 10,
	SRQ_METADATA = 1 << 11,
	SRQ_RESTORE = 1 << 12,
	SRQ_WORKSPACE = 1 << 13,
	SRQ_PERSIST = 1 << 14,
};

/* A create (or PATCH) request as the client sent it, typed: the API parses
 * the wire format into it (api_requests.c) and checks the types; the rules
 * (ranges against the server's maxima, names, allowlist entries) are
 * session_from_request's. Owns its strings (session_request_release). */
struct session_request {
	unsigned set; /* SRQ_* */
	char *image;
	int64_t idle_timeout_s;
	int64_t max_lifetime_s;
	struct session_limits limits;
	char **allow;
	size_t n_allow;
	bool gvisor; /* runtime "gvisor" (else "runc") */
	struct session_kv *env;
	size_t n_env;
	struct session_kv *metadata;
	size_t n_metadata;
	char *restore;   /* a snapshot id to restore (snapshot.h checks it) */
	char *workspace; /* a workspace name: its latest snapshot, or a new one */
	struct session_persist persist;
};

void session_request_release(struct session_request *r);

/* A new session from a create request (NULL = all defaults), validated
 * against cfg's defaults and maxima. Caller owns the result (session_free).
 * The id, times and node are left for the caller to set. */
struct session *session_from_request(const struct session_request *req, const struct config *cfg,
				     const char *tenant, struct err **errp);

/* Check an allowlist (create or PATCH): every entry valid, at most
 * SESSION_MAX_ALLOW of them. The error names the entry. */
int session_check_allow(char *const *allow, size_t n, struct err **errp);

void session_free(struct session *s);

/* The name s's snapshots go under: its workspace, or its id. */
const char *session_workspace_name(const struct session *s);
/* Whether name is a workspace name: [A-Za-z0-9._-]{1,64}, not starting with '.'. */
bool session_workspace_valid(const char *name);
/* Check persist.paths globs (at most 64, each 1..256 bytes, no NUL, no '..'
 * component, not absolute). The error names the glob. */
int session_check_globs(char *const *globs, size_t n, struct err **errp);
void session_persist_clear(struct session_persist *p);
void session_persist_copy(struct session_persist *dst, const struct session_persist *src);

/* A new random id (RFC 4122 v4, lowercase) into buf[SESSION_ID_LEN + 1]. */
void session_new_id(char *buf);

/* Whether s looks like an id this daemon issued (36 chars, hex and dashes).
 * Checked before an id reaches a path, a Redis key or a Docker filter. */
bool session_id_valid(const char *s);

const char *session_state_name(enum session_state st);

/* Every change of a session's state goes through here, and only the changes
 * the life of a session allows are made:
 *   starting → ready                   (created)
 *   ready ⇄ busy                       (an execution starts, ends)
 *   starting, ready, busy → expired    (a clock ended it)
 *   starting, ready, busy → dead       (deleted, failed, lost)
 * Expired and dead are final. false, and no change, for any other. */
bool session_state_allowed(enum session_state from, enum session_state to);
bool session_set_state(struct session *s, enum session_state to);

/* Record activity at now_ms: the idle clock slides, but never past the
 * end of the session's lifetime. */
void session_touch(struct session *s, int64_t now_ms);

/* Whether the lifetime, rather than idleness, ends the session at expires_at. */
bool session_lifetime_bound(const struct session *s);

/* Whether an execution may start now; busy (409) or not ready otherwise. */
int session_check_exec(const struct session *s, struct err **errp);

/* Copy key/value pairs (env, metadata). Caller frees with session_kv_free. */
struct session_kv *session_kv_dup(const struct session_kv *kv, size_t n);
void session_kv_free(struct session_kv *kv, size_t n);

#endif
