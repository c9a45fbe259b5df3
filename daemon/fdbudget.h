/* fdbudget.h: the daemon's file-descriptor budget.
 *
 * The descriptor table (RLIMIT_NOFILE) is shared by everything the daemon
 * does: its Docker (curl) and Redis connections, helper processes, its
 * listeners, and the descriptors that outside input makes it open (API
 * connections, egress tunnels, the IPC sockets of sessions). When outside
 * input is allowed to fill the table, the daemon's own next open fails
 * somewhere unrelated (a create answers 500, an accept spins on EMFILE). So
 * outside input gets a budget: new egress tunnels and new sessions are
 * refused first, API connections (which /healthz and the clients of existing
 * sessions need) a margin later, and a reserve is never handed out at all.
 *
 * How descriptors are counted: each module that opens descriptors for
 * outside input counts them itself (fdbudget_take or fdbudget_charge when it
 * opens, fdbudget_give when it closes). Counters are exact and cost nothing;
 * scanning /proc/self/fd on every accept would cost O(open descriptors) per
 * accept, which is what an attacker controls. What nobody counts (curl,
 * hiredis, pidfds of helpers, libevent's own) is measured now and then from
 * /proc/self/fd (fdbudget_observe, once a second from main.c): whatever the
 * counters do not explain is "other", and the reserve grows to cover it.
 *
 * The counting is pure (no system calls) and unit-tested; fdbudget_count_open
 * is the only function here that looks at the system. */
#ifndef CI_FDBUDGET_H
#define CI_FDBUDGET_H

#include <stdbool.h>
#include <stdint.h>

enum fdbudget_kind {
	FDBUDGET_HTTP,   /* API connections */
	FDBUDGET_EGRESS, /* proxy tunnels: the sandbox's side and the upstream */
	FDBUDGET_IPC,    /* per-session listeners, runner connections, the kernel's pidfd */
	FDBUDGET_KINDS,
};

/* What one new session opens: its IPC listener, and two runner connections
 * charged two each (a connection and the pidfd it may come to hold). */
#define FDBUDGET_SESSION_FDS 5
/* A new session is admitted only with room for a few tunnels after it, so a
 * session that was just created can do something with its network. */
#define FDBUDGET_SESSION_ROOM (FDBUDGET_SESSION_FDS + 16)
/* How far "other" may grow between two measurements. */
#define FDBUDGET_SLACK 16

struct fdbudget {
	int64_t limit;   /* the soft RLIMIT_NOFILE; 0 = no budget (unit tests, fuzzers) */
	int64_t reserve; /* never handed to outside input */
	int64_t used[FDBUDGET_KINDS];
	int64_t other;                        /* open but not counted, as last measured */
	uint64_t refused[FDBUDGET_KINDS + 1]; /* per kind, and [FDBUDGET_KINDS] = sessions */
};

/* The daemon's one budget: the descriptor table is the process's. */
extern struct fdbudget fdbudget_daemon;

void fdbudget_init(struct fdbudget *b, int64_t limit, int64_t reserve);

/* The limit changed (prlimit from outside, or our own raise). */
void fdbudget_set_limit(struct fdbudget *b, int64_t limit);

/* Count n descriptors of kind when they fit in the budget, and say whether
 * they did. API connections may use everything but the reserve; egress
 * tunnels stop fdbudget_margin() earlier. IPC is never refused here (it is
 * charged, see below). */
bool fdbudget_take(struct fdbudget *b, enum fdbudget_kind kind, int64_t n);

/* Count n descriptors that are opened whatever the budget says: the runner
 * connections of sessions that already exist (bounded per session), and
 * their listeners at adoption after a restart. */
void fdbudget_charge(struct fdbudget *b, enum fdbudget_kind kind, int64_t n);

/* Return n descriptors of kind (closed). */
void fdbudget_give(struct fdbudget *b, enum fdbudget_kind kind, int64_t n);

/* Whether a new session fits: FDBUDGET_SESSION_ROOM, with the tunnels'
 * margin kept. Counts a refusal when it does not. */
bool fdbudget_session_fits(struct fdbudget *b);

/* Descriptors that may still be handed to kind (may be negative). */
int64_t fdbudget_room(const struct fdbudget *b, enum fdbudget_kind kind);

/* The share kept for API connections after tunnels and sessions stop. */
int64_t fdbudget_margin(const struct fdbudget *b);

/* The counted descriptors, all kinds. */
int64_t fdbudget_counted(const struct fdbudget *b);

/* Counted plus other: the best estimate of what is open. */
int64_t fdbudget_in_use(const struct fdbudget *b);

/* A measurement of what is open now (fdbudget_count_open); what the
 * counters do not explain becomes "other". */
void fdbudget_observe(struct fdbudget *b, int64_t open_now);

/* An open failed with EMFILE: the table is full whatever the counters say,
 * so the budget treats it as full until the next measurement. */
void fdbudget_exhausted(struct fdbudget *b);

/* The number of open descriptors (entries of /proc/self/fd, minus the one
 * used to read it); -1 when it cannot be read (at EMFILE, for one). */
int64_t fdbudget_count_open(void);

#endif
