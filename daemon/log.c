/* log.c: one line per event on stderr, RFC 3339 timestamp first. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "xalloc.h"

enum log_level log_threshold = LOG_LEVEL_INFO;

static const char *const log_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, log_names[i]) == 0)
			return i;
	return -1;
}

static void log_vwrite(enum log_level level, uint32_t suppressed, const char *fmt, va_list ap)
{
	char stamp[32], line[2048];
	clock_format_rfc3339(clock_now_ms(), stamp, sizeof(stamp));
	vsnprintf(line, sizeof(line), fmt, ap);
	/* One fprintf per line keeps lines whole when stderr is shared. */
	if (suppressed)
		fprintf(stderr, "%s %-5s %s (%u similar lines suppressed)\n", stamp,
			log_names[level], line, suppressed);
	else
		fprintf(stderr, "%s %-5s %s\n", stamp, log_names[level], line);
}

void log_write(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vwrite(level, 0, fmt, ap);
	va_end(ap);
}

void log_raw_line(const char *line)
{
	/* One write per line keeps it whole when stderr is shared, however long
	 * (an audit line with its code head is ~5-25 KiB). */
	size_t n = strlen(line);
	char *buf = xmalloc(n + 1);
	memcpy(buf, line, n);
	buf[n] = '\n';
	fwrite(buf, 1, n + 1, stderr);
	free(buf);
}

bool log_limit_allow(struct log_limit *ll, int64_t now_ms, int64_t window_ms, uint32_t burst,
		     uint32_t *suppressed)
{
	/* A fresh window at the first line, and whenever the last one is over
	 * (or the clock went back, which a monotonic clock does not). */
	if (ll->in_window == 0 || now_ms - ll->window_start_ms >= window_ms ||
	    now_ms < ll->window_start_ms) {
		ll->window_start_ms = now_ms;
		ll->in_window = 0;
	}
	if (ll->in_window >= burst) {
		if (ll->suppressed < UINT32_MAX)
			ll->suppressed++;
		return false;
	}
	ll->in_window++;
	*suppressed = ll->suppressed;
	ll->suppressed = 0;
	return true;
}

void log_write_limited(struct log_limit *ll, enum log_level level, const char *fmt, ...)
{
	uint32_t suppressed = 0;
	if (!log_limit_allow(ll, clock_mono_ms(), LOG_LIMIT_WINDOW_MS, LOG_LIMIT_BURST,
			     &suppressed))
		return;
	va_list ap;
	va_start(ap, fmt);
	log_vwrite(level, suppressed, fmt, ap);
	va_end(ap);
}
