/* pool_demand.c: the peak of creates in a sliding window (pool_demand.h). */
#include "pool_demand.h"

void pool_demand_init(struct pool_demand *d)
{
	d->head = 0;
	d->n = 0;
}

static int64_t nth(const struct pool_demand *d, size_t i)
{
	return d->at[(d->head + i) % POOL_DEMAND_MAX];
}

void pool_demand_note(struct pool_demand *d, int64_t now_ms)
{
	if (d->n == POOL_DEMAND_MAX) { /* the oldest goes */
		d->head = (d->head + 1) % POOL_DEMAND_MAX;
		d->n--;
	}
	d->at[(d->head + d->n) % POOL_DEMAND_MAX] = now_ms;
	d->n++;
}

size_t pool_demand_peak(struct pool_demand *d, int64_t now_ms)
{
	while (d->n > 0 && nth(d, 0) <= now_ms - POOL_DEMAND_HORIZON_MS) {
		d->head = (d->head + 1) % POOL_DEMAND_MAX;
		d->n--;
	}
	/* Two pointers over times in arrival order (the caller's clock is
	 * monotonic): for each arrival, those within the window after it. */
	size_t peak = 0, j = 0;
	for (size_t i = 0; i < d->n; i++) {
		if (j < i)
			j = i;
		while (j < d->n && nth(d, j) < nth(d, i) + POOL_DEMAND_WINDOW_MS)
			j++;
		if (j - i > peak)
			peak = j - i;
	}
	return peak;
}
