/* log.c: one line per event on stderr, RFC 3339 timestamp first. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

enum log_level log_threshold = LOG_LEVEL_INFO;

static const char *const log_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, log_names[i]) == 0)
			return i;
	return -1;
}

void log_write(enum log_level level, const char *fmt, ...)
{
	char stamp[32], line[2048];
	clock_format_rfc3339(clock_now_ms(), stamp, sizeof(stamp));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One fprintf per line keeps lines whole when stderr is shared. */
	fprintf(stderr, "%s %-5s %s\n", stamp, log_names[level], line);
}
