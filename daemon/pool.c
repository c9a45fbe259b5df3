/* pool.c: the warm pool's bookkeeping.
 *
 * A cold create costs a Docker create and start and a Python start (about
 * 0.3 s here). The pool keeps pool-size sandboxes of the default image and
 * limits started, with their kernels connected, and hands one to a create
 * that it can serve (the manager decides which can: pool_take). */
#include "pool.h"

#include <sys/queue.h>

#include "xalloc.h"

struct pool_entry {
	void *sandbox;
	bool networked;
	TAILQ_ENTRY(pool_entry) link;
};

struct pool {
	const int64_t *size, *network_size;
	const struct pool_ops *ops;
	void *arg;
	TAILQ_HEAD(, pool_entry) ready; /* oldest first */
	size_t n_ready[2], n_starting[2];
	uint64_t hits, misses;
	struct event *retry;
};

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pool_fill(arg);
}

struct pool *pool_new(struct event_base *base, const int64_t *size, const int64_t *network_size,
		      const struct pool_ops *ops, void *arg)
{
	struct pool *p = xcalloc(1, sizeof(*p));
	p->size = size;
	p->network_size = network_size;
	p->ops = ops;
	p->arg = arg;
	TAILQ_INIT(&p->ready);
	p->retry = evtimer_new(base, retry_cb, p);
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

void pool_fill(struct pool *p)
{
	if (p->n_starting[0] + p->n_starting[1] > 0 || !p->ops->may_start(p->arg))
		return;
	bool networked;
	if (have(p, false) < (size_t)*p->size)
		networked = false;
	else if (have(p, true) < (size_t)*p->network_size)
		networked = true;
	else
		return;
	p->n_starting[networked]++;
	if (p->ops->start(p->arg, networked) < 0) {
		p->n_starting[networked]--;
		retry_later(p);
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
		size_t want = (size_t) * (networked ? p->network_size : p->size);
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
