/* pool.h: the warm pool: sandboxes started ahead of demand, of two kinds
 * (without network, and on the sandbox network), handed out on create.
 *
 * A one-way module: the manager calls the pool; the pool never reaches into
 * the manager, only asks it to start a sandbox through the ops it was given,
 * and holds the sandboxes as opaque pointers. The pool owns the bookkeeping:
 * what is ready, what is starting, hits and misses, the retry after a
 * failure. */
#ifndef CI_POOL_H
#define CI_POOL_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pool;
struct pool_entry; /* a ready sandbox's place in the pool */

struct pool_ops {
	/* Whether a sandbox may be started now (not draining, recovered, room
	 * for one more session on this node). */
	bool (*may_start)(void *arg);
	/* Start a warm sandbox of this kind. The manager answers later with
	 * pool_started or pool_start_failed, from the loop. 0 when started,
	 * -1 when it could not even begin (then the pool retries later). */
	int (*start)(void *arg, bool networked);
	/* The pool holds more than its target now (the bursts stopped): end
	 * the surplus (pool_surplus) from the loop. */
	void (*shrink)(void *arg);
};

/* What the pool reads at every fill, so a config reload takes effect:
 * size and network_size are the floors; the pool of the default kind grows
 * above size with the creates' demand (pool_demand.h), up to max (0: no
 * growth) and to memory_mb of warm sandboxes at POOL_SANDBOX_MB each. */
struct pool_sizes {
	const int64_t *size, *network_size, *max, *memory_mb;
};

/* What an idle warm sandbox holds of the host's memory: 13.8 MiB measured
 * (docs/deploy.md, capacity plan), rounded up. */
#define POOL_SANDBOX_MB 16
/* Warm sandboxes started at once while the pool grows (one at a time
 * otherwise: filling competes with clients' creates for the engine). */
#define POOL_PARALLEL_STARTS 2

/* Caller frees (pool_free, NULL-safe). */
struct pool *pool_new(struct event_base *base, const struct pool_sizes *sizes,
		      const struct pool_ops *ops, void *arg);
void pool_free(struct pool *p);

/* Start what is missing, one sandbox at a time (filling competes with
 * clients' creates for the engine). */
void pool_fill(struct pool *p);

/* A sandbox pool_ops.start began is ready: into the pool. The entry is the
 * caller's handle for pool_forget. */
struct pool_entry *pool_started(struct pool *p, void *sandbox, bool networked);
/* ... or it failed: the pool tries again in 2 s. */
void pool_start_failed(struct pool *p, bool networked);

/* A create that a warm sandbox of the default kind could serve arrived (a
 * hit or a miss): the demand the pool grows to. */
void pool_note_demand(struct pool *p);

/* How many sandboxes of the default kind the pool aims at now. */
size_t pool_target(struct pool *p);

/* A ready sandbox of this kind, out of the pool (it is the caller's now), or
 * NULL. Counts a hit or a miss. */
void *pool_take(struct pool *p, bool networked);

/* A ready sandbox ended before it was taken; another is started in 2 s. */
void pool_forget(struct pool *p, struct pool_entry *e);

/* A ready sandbox of a kind that holds more (ready and starting) than its
 * size (the sizes were lowered), the oldest, still in the pool: the caller
 * ends it, and the end calls pool_forget. NULL when the pool is within its
 * sizes, or when none of the surplus kind is ready yet (ask again when one
 * is: a starting sandbox cannot be ended from here). */
void *pool_surplus(struct pool *p);

/* Warm sandboxes in all, ready and starting (they are no client's sessions). */
size_t pool_total(const struct pool *p);

void pool_stats(const struct pool *p, size_t *ready, uint64_t *hits, uint64_t *misses);

#endif
