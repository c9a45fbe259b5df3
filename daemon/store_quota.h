/* store_quota.h: per-tenant quotas and usage in Redis, atomic across every
 * daemon sharing the Redis and key prefix (Lua scripts, EVALSHA with EVAL
 * when Redis does not know the script yet).
 *
 * Keys, under the prefix P, for tenant T:
 *   P tenant:T:quota          the tenant's override (JSON object, quota.h)
 *   P quota:T:sessions        sorted set: live session (or pending create) →
 *                             when the reservation lapses (ms)
 *   P quota:T:memory          hash: the same members → memory limit (MB)
 *   P quota:T:disk            hash: the same members → disk_mb
 *   P quota:T:execs           sorted set: running execution → when it lapses
 *   P quota:T:exec_seconds    sorted set: "<duration ms>:<exec>" → end (ms)
 *   P quota:T:exec_ms         the durations in that set, summed (ms)
 *   P quota:T:requests        hash: token bucket (tokens, ts) and this
 *                             second's request count (sec, n)
 * A reservation is a member with a lapse time: a daemon that dies holding
 * one does not hold it for ever. Sessions lapse at their own expiry plus
 * QUOTA_GRACE_MS (the session's clock writes move it; store.c), executions
 * at their timeout plus the kill grace plus QUOTA_GRACE_MS. Every script
 * drops the lapsed members before it counts; "now" is Redis's clock (TIME),
 * the one clock all daemons share. */
#ifndef CI_STORE_QUOTA_H
#define CI_STORE_QUOTA_H

#include <stdint.h>

#include "quota.h"
#include "store.h"

struct store_quota_op;

/* Admission: e set when Redis could not answer (unavailable); else refused
 * is -1 when admitted, or the quota that refused (enum quota_name) with
 * retry_after_s (>= 1) the estimate of when it would not. */
typedef void (*store_quota_admit_cb)(const struct err *e, int refused, int64_t retry_after_s,
				     void *arg);

/* The callback will not run. NULL-safe; op must not have completed. */
void store_quota_cancel(struct store_quota_op *op);

/* The tenant's override: o->set == 0 when there is none. A stored value
 * that does not parse is logged and read as none. */
typedef void (*store_quota_get_cb)(const struct err *e, const struct quota_override *o, void *arg);
struct store_quota_op *store_quota_get(struct store *st, const char *tenant, store_quota_get_cb cb,
				       void *arg);

/* Replace the tenant's override with o (none set: delete it). -1 (and no
 * callback) when tenant is not a tenant name; else cb runs once, and *opp
 * (when opp is not NULL) is the op, for store_quota_cancel until then. */
int store_quota_put(struct store *st, const char *tenant, const struct quota_override *o,
		    store_done_cb cb, void *arg, struct store_quota_op **opp, struct err **errp);

/* Reserve a session slot of memory_mb and disk_mb for member (a pending
 * create) until lapse_ms, if q allows it (sessions, memory_mb, disk_mb).
 * cb NULL: reserved without an answer (nothing to enforce; counted for the
 * usage). */
struct store_quota_op *store_quota_session_admit(struct store *st, const char *tenant,
						 const char *member, int64_t memory_mb,
						 int64_t disk_mb, int64_t lapse_ms,
						 const struct quota *q, store_quota_admit_cb cb,
						 void *arg);

/* The create of member succeeded as session id: the reservation is moved
 * to id, lapsing at lapse_ms. Fire and forget. */
void store_quota_session_commit(struct store *st, const char *tenant, const char *member,
				const char *id, int64_t memory_mb, int64_t disk_mb,
				int64_t lapse_ms);

/* Give back a session reservation (a create that failed). Fire and forget.
 * A session's own ending releases its id with its tombstone (store.c). */
void store_quota_session_release(struct store *st, const char *tenant, const char *member);

/* The live session s holds its reservation (Redis may have lost it: it
 * came back empty). Fire and forget; what is there is kept. */
void store_quota_session_restore(struct store *st, const struct session *s);

/* Reserve an execution slot for member until lapse_ms, if q allows it
 * (executions, exec_seconds_per_hour). cb NULL: fire and forget (nothing
 * to enforce; the slot is only counted for the usage). */
struct store_quota_op *store_quota_exec_admit(struct store *st, const char *tenant,
					      const char *member, int64_t lapse_ms,
					      const struct quota *q, store_quota_admit_cb cb,
					      void *arg);

/* The execution member ended after duration_ms of wall time: its slot is
 * given back and the time counted in the hour. Fire and forget. */
void store_quota_exec_end(struct store *st, const char *tenant, const char *member,
			  int64_t duration_ms);

/* One request of tenant: counted, and taken from its token bucket of rate
 * tokens a second (quota_burst(rate) deep). */
struct store_quota_op *store_quota_request(struct store *st, const char *tenant, int64_t rate,
					   store_quota_admit_cb cb, void *arg);

/* n requests of tenant without a rate, counted only (for the usage). Fire
 * and forget. */
void store_quota_count(struct store *st, const char *tenant, int64_t n);

struct store_quota_usage {
	int64_t sessions, executions, memory_mb, disk_mb;
	int64_t exec_ms_last_hour;
	int64_t requests_last_second;
};
typedef void (*store_quota_usage_cb)(const struct err *e, const struct store_quota_usage *u,
				     void *arg);
struct store_quota_op *store_quota_usage(struct store *st, const char *tenant,
					 store_quota_usage_cb cb, void *arg);

#endif
