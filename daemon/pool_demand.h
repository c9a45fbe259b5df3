/* pool_demand.h: how many warm sandboxes the creates of late would have
 * needed, from their arrival times.
 *
 * A burst of 50 creates against a pool of 4 waits for 46 cold starts. The
 * pool therefore sizes itself to the largest number of creates that came
 * within any POOL_DEMAND_WINDOW_MS over the last POOL_DEMAND_HORIZON_MS: it
 * grows after the first burst so the next one is served warm, and falls back
 * once the bursts stop. Pure bookkeeping, unit-tested; the clock is the
 * caller's. */
#ifndef CI_POOL_DEMAND_H
#define CI_POOL_DEMAND_H

#include <stddef.h>
#include <stdint.h>

#define POOL_DEMAND_WINDOW_MS 10000   /* a burst: creates within 10 s */
#define POOL_DEMAND_HORIZON_MS 300000 /* remembered for 5 minutes */
#define POOL_DEMAND_MAX 1024          /* arrivals kept; more is more than any pool */

struct pool_demand {
	int64_t at[POOL_DEMAND_MAX]; /* arrival times, a ring, oldest at head */
	size_t head, n;
};

void pool_demand_init(struct pool_demand *d);
/* A create that the pool could have served arrived at now_ms. */
void pool_demand_note(struct pool_demand *d, int64_t now_ms);
/* The most creates within any window of POOL_DEMAND_WINDOW_MS among those of
 * the last POOL_DEMAND_HORIZON_MS (older ones are dropped here). */
size_t pool_demand_peak(struct pool_demand *d, int64_t now_ms);

#endif
