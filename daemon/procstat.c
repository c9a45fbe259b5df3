/* procstat.c: the daemon's own memory and CPU, from /proc and glibc. */
#include "procstat.h"

#include <malloc.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "clock.h"

/* The process start, recorded by procstat_init: reading /proc/self/stat's
 * start field would need the boot time as well, for the same answer. */
static int64_t start_time_s;

void procstat_init(void)
{
	start_time_s = clock_now_ms() / 1000;
}

static int64_t read_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	if (f == NULL)
		return -1;
	long long size = 0, resident = -1;
	int n = fscanf(f, "%lld %lld", &size, &resident);
	fclose(f);
	if (n != 2 || resident < 0)
		return -1;
	return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

void procstat_read(struct procstat *ps)
{
	ps->start_time_s = start_time_s;
	ps->rss_bytes = read_rss_bytes();

	struct rusage ru;
	ps->cpu_seconds = 0;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		ps->cpu_seconds = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
				  (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;

	/* uordblks: in use in the arenas; hblkhd: chunks malloc mmapped on
	 * their own (big buffers), which are in use by definition. arena is
	 * what the arenas took with brk/mmap. */
	struct mallinfo2 mi = mallinfo2();
	ps->heap_in_use = (int64_t)(mi.uordblks + mi.hblkhd);
	ps->heap_mapped = (int64_t)(mi.arena + mi.hblkhd);
}
