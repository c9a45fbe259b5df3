/* pool.c: the warm pool's bookkeeping.
 *
 * A cold create costs a Docker create and start and a Python start (about
 * 0.3 s here). The pool keeps pool-size sandboxes of the default image and
 * limits started, with their kernels connected, and hands one to a create
 * that it can serve (the manager decides which can: pool_take). It grows with
 * bursts of creates (pool_demand.h) within pool-max and pool-memory-mb, and
 * a timer brings it back down once they stop. */
#include "pool.h"

#include <sys/queue.h>

#include "clock.h"
#include "pool_demand.h"
#include "xalloc.h"

/* How often the target is looked at again while no create comes: how
 * quickly an idle pool shrinks, and a grown one refills after a failure. */
#define POOL_TICK_S 5

struct pool_entry {
	void *sandbox;
	bool networked;
	TAILQ_ENTRY(pool_entry) link;
};

struct pool {
	struct pool_sizes sizes;
	const struct pool_ops *ops;
	void *arg;
	TAILQ_HEAD(, pool_entry) ready; /* oldest first */
	size_t n_ready[2], n_starting[2];
	uint64_t hits, misses;
	struct event *retry, *tick;
	struct pool_demand demand;
};

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pool_fill(arg);
}

static size_t have(const struct pool *p, bool networked);

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct pool *p = arg;
	if (have(p, false) > pool_target(p) && p->n_ready[false] > 0)
		p->ops->shrink(p->arg); /* it calls pool_fill */
	else
		pool_fill(p);
}

struct pool *pool_new(struct event_base *base, const struct pool_sizes *sizes,
		      const struct pool_ops *ops, void *arg)
{
	struct pool *p = xcalloc(1, sizeof(*p));
	p->sizes = *sizes;
	p->ops = ops;
	p->arg = arg;
	TAILQ_INIT(&p->ready);
	p->retry = evtimer_new(base, retry_cb, p);
	p->tick = event_new(base, -1, EV_PERSIST, tick_cb, p);
	struct timeval every = {POOL_TICK_S, 0};
	evtimer_add(p->tick, &every);
	pool_demand_init(&p->demand);
	return p;
}

void pool_free(struct pool *p)
{
	if (p == NULL)
		return;
	while (!TAILQ_EMPTY(&p->ready)) {
		struct pool_entry *e = TAILQ_FIRST(&p->ready);
		TAILQ_REMOVE(&p->ready, e, link);
		free(e);
	}
	event_free(p->retry);
	event_free(p->tick);
	free(p);
}

static void retry_later(struct pool *p)
{
	struct timeval two = {2, 0};
	evtimer_add(p->retry, &two);
}

static size_t have(const struct pool *p, bool networked)
{
	return p->n_ready[networked] + p->n_starting[networked];
}

size_t pool_target(struct pool *p)
{
	int64_t floor = *p->sizes.size, max = *p->sizes.max;
	if (floor <= 0 || max <= floor)
		return floor > 0 ? (size_t)floor : 0;
	int64_t by_memory = *p->sizes.memory_mb / POOL_SANDBOX_MB;
	int64_t cap = max < by_memory ? max : by_memory;
	int64_t peak = (int64_t)pool_demand_peak(&p->demand, clock_mono_ms());
	int64_t want = peak < cap ? peak : cap;
	return (size_t)(want > floor ? want : floor);
}

void pool_note_demand(struct pool *p)
{
	pool_demand_note(&p->demand, clock_mono_ms());
}

void pool_fill(struct pool *p)
{
	size_t target = pool_target(p);
	/* Above the floor, while growing, two at a time; else one. */
	size_t parallel = target > (size_t)*p->sizes.size && have(p, false) + 1 < target
			      ? POOL_PARALLEL_STARTS
			      : 1;
	while (p->n_starting[0] + p->n_starting[1] < parallel && p->ops->may_start(p->arg)) {
		bool networked;
		if (have(p, false) < target)
			networked = false;
		else if (have(p, true) < (size_t)*p->sizes.network_size)
			networked = true;
		else
			return;
		p->n_starting[networked]++;
		if (p->ops->start(p->arg, networked) < 0) {
			p->n_starting[networked]--;
			retry_later(p);
			return;
		}
	}
}

struct pool_entry *pool_started(struct pool *p, void *sandbox, bool networked)
{
	p->n_starting[networked]--;
	struct pool_entry *e = xcalloc(1, sizeof(*e));
	e->sandbox = sandbox;
	e->networked = networked;
	TAILQ_INSERT_TAIL(&p->ready, e, link);
	p->n_ready[networked]++;
	pool_fill(p);
	return e;
}

void pool_start_failed(struct pool *p, bool networked)
{
	p->n_starting[networked]--;
	retry_later(p);
}

void *pool_take(struct pool *p, bool networked)
{
	struct pool_entry *e;
	TAILQ_FOREACH (e, &p->ready, link)
		if (e->networked == networked)
			break;
	if (e == NULL) {
		p->misses++;
		return NULL;
	}
	p->hits++;
	TAILQ_REMOVE(&p->ready, e, link);
	p->n_ready[networked]--;
	void *sandbox = e->sandbox;
	free(e);
	pool_fill(p);
	return sandbox;
}

void pool_forget(struct pool *p, struct pool_entry *e)
{
	TAILQ_REMOVE(&p->ready, e, link);
	p->n_ready[e->networked]--;
	free(e);
	retry_later(p); /* replace it */
}

void *pool_surplus(struct pool *p)
{
	for (int networked = 0; networked < 2; networked++) {
		size_t want = networked ? (size_t)*p->sizes.network_size : pool_target(p);
		if (have(p, networked) <= want || p->n_ready[networked] == 0)
			continue;
		struct pool_entry *e;
		TAILQ_FOREACH (e, &p->ready, link)
			if (e->networked == networked)
				return e->sandbox; /* the oldest */
	}
	return NULL;
}

size_t pool_total(const struct pool *p)
{
	return p->n_ready[0] + p->n_ready[1] + p->n_starting[0] + p->n_starting[1];
}

void pool_stats(const struct pool *p, size_t *ready, uint64_t *hits, uint64_t *misses)
{
	*ready = p->n_ready[0] + p->n_ready[1];
	*hits = p->hits;
	*misses = p->misses;
}
