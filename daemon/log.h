/* log.h: leveled logging to stderr.
 *
 * The macros check the level before the arguments are formatted, so a debug
 * line on the exec path costs a branch when debug is off. */
#ifndef CI_LOG_H
#define CI_LOG_H

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };

extern enum log_level log_threshold;

/* Parse "debug", "info", "warn" or "error"; -1 when unknown. */
int log_level_parse(const char *name);

#include <stdbool.h>
static inline bool log_level_valid(const char *name)
{
	return log_level_parse(name) >= 0;
}

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_at(level, ...)                               \
	do {                                             \
		if ((level) >= log_threshold)            \
			log_write((level), __VA_ARGS__); \
	} while (0)
#define log_debug(...) log_at(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_at(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_at(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...) log_at(LOG_LEVEL_ERROR, __VA_ARGS__)

#endif
