/* quota.h: per-tenant quotas, the pure part: their names, a tenant's
 * override parsed from JSON (a PUT body, or what Redis holds), merging it
 * over the server's flags, and the Retry-After estimates. No I/O: the
 * counting is store_quota.c's (Redis, atomic across daemons), the routes
 * and the admission hooks api_quota.c's. Unit-tested.
 *
 * A value of 0 means unlimited, everywhere: in the flags (the default, so a
 * server without quota flags behaves as before) and in an override; but for
 * "stateless", a boolean (a permission, not a count). */
#ifndef CI_QUOTA_H
#define CI_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "config.h"
#include "err.h"

enum quota_name {
	QUOTA_SESSIONS,              /* live sessions */
	QUOTA_EXECUTIONS,            /* concurrent executions */
	QUOTA_MEMORY_MB,             /* the memory limits of live sessions, summed */
	QUOTA_EXEC_SECONDS_PER_HOUR, /* execution wall time in a sliding hour */
	QUOTA_REQUESTS_PER_SECOND,   /* a token bucket (quota_burst) */
	QUOTA_DISK_MB,               /* the disk_mb of live sessions, summed */
	/* Snapshot retention (snapshot.c), not admission: how many snapshots
	 * of each workspace are kept, and for how long (0: no limit). */
	QUOTA_SNAPSHOT_KEEP,
	QUOTA_SNAPSHOT_MAX_AGE_S,
	/* The stateless tier (stateless.h), per node: whether the tenant's runs
	 * may take its rung at all (a boolean on the wire, 1 or 0 here: the one
	 * quota where 0 is not "unlimited"), and how many of its runs may be in
	 * it at once (0: up to --stateless-max-running). */
	QUOTA_STATELESS,
	QUOTA_STATELESS_RUNS,
	QUOTA_COUNT,
};

/* The largest value a quota may take (and a sane bound for Lua's doubles). */
#define QUOTA_MAX_VALUE 1000000000LL

/* The sliding window of exec_seconds_per_hour. */
#define QUOTA_WINDOW_MS 3600000LL

/* A reservation outlives the clock it was given by this much before Redis
 * drops it on its own (a node that died holding it, clocks apart). */
#define QUOTA_GRACE_MS 60000LL

/* Effective quotas of a tenant: one value per name, 0 = unlimited. */
struct quota {
	int64_t v[QUOTA_COUNT];
};

/* What a tenant's override sets: the names in set (1 << name). */
struct quota_override {
	unsigned set;
	int64_t v[QUOTA_COUNT];
};

/* The wire name of a quota ("sessions", ...). */
const char *quota_name(enum quota_name n);

/* The quota named name (len bytes), into *out; -1 when there is none. */
int quota_lookup(const char *name, size_t len, enum quota_name *out);

/* The server's defaults: the --quota-* flags. */
void quota_from_config(const struct config *cfg, struct quota *out);

/* Parse a JSON object of quota names to integers into *out. Every member
 * must be a known name with an integer in [0, QUOTA_MAX_VALUE] ("stateless":
 * true or false, stored as 1 or 0); the error
 * (bad_request) names the member otherwise, and *out is left empty. */
int quota_override_parse(const char *text, size_t len, struct quota_override *out,
			 struct err **errp);
/* The same, of a parsed value (the "quota" of POST /v1/admin/keys). */
int quota_override_from_json(yajl_val v, struct quota_override *out, struct err **errp);

/* defaults, with each name o sets replaced by o's value (o may be NULL). */
void quota_merge(const struct quota *defaults, const struct quota_override *o, struct quota *out);

/* {"sessions":N,...}: every name (q), or only the names o sets. */
void quota_to_json(const struct quota *q, yajl_gen g);
void quota_override_to_json(const struct quota_override *o, yajl_gen g);

/* The token bucket's size for a rate: twice the rate, at least 1, so a
 * client may send a second's worth of requests at once and still be held to
 * the rate over time. */
int64_t quota_burst(int64_t rate);

/* Retry-After, whole seconds (at least 1), for a wait of ms milliseconds
 * (rounded up): the exec-seconds window, or anything measured in time. */
int64_t quota_retry_after_ms(int64_t ms);

/* Retry-After for a token bucket holding milli_tokens thousandths of a
 * token and refilling at rate tokens a second: until one whole token is
 * back. */
int64_t quota_retry_after_bucket(int64_t milli_tokens, int64_t rate);

#endif
