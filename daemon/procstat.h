/* procstat.h: what the daemon process itself holds, for /metrics.
 *
 * The usual process gauges (resident memory, CPU seconds, start time) and
 * the allocator's own view: bytes handed out by malloc and not yet freed,
 * against bytes the allocator holds from the kernel. A slow leak shows as
 * heap in use growing; fragmentation or a pool that filled once shows as
 * the mapped figure growing with in use flat. The soak (tests/soak) checks
 * both, and RSS alone cannot tell them apart. */
#ifndef CI_PROCSTAT_H
#define CI_PROCSTAT_H

#include <stdint.h>

struct procstat {
	int64_t rss_bytes;    /* -1 when /proc did not answer */
	double cpu_seconds;   /* user + system */
	int64_t start_time_s; /* Unix seconds */
	int64_t heap_in_use;  /* malloc'd and not freed (all arenas, mmapped chunks too) */
	int64_t heap_mapped;  /* what the allocator holds from the kernel */
};

/* Records the start time; main() calls it once, before it serves. */
void procstat_init(void);

/* Reads the figures; cheap enough for each scrape (one small /proc read and
 * a walk of the allocator's free lists). */
void procstat_read(struct procstat *ps);

#endif
