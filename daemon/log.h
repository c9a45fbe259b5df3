/* log.h: leveled logging to stderr, as text or JSON lines (--log-format).
 *
 * Text: `2026-01-02T03:04:05.678Z info  message key=value ...`, every control
 * byte of the message and the values written as \xNN. JSON: one object per
 * line, {"ts","level","msg", fields...}, strings escaped by the generator and
 * invalid UTF-8 replaced. Either way no input can end a line early.
 *
 * The macros check the level before the arguments are formatted, so a debug
 * line on the exec path costs a branch when debug is off. */
#ifndef CI_LOG_H
#define CI_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };

extern enum log_level log_threshold;

enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };
extern enum log_format log_format;

/* Parse "text" or "json"; -1 when unknown. */
int log_format_parse(const char *name);

/* Parse "debug", "info", "warn" or "error"; -1 when unknown. */
int log_level_parse(const char *name);

static inline bool log_level_valid(const char *name)
{
	return log_level_parse(name) >= 0;
}

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write line to the log sink as it is, plus a newline, whatever the level:
 * for lines that are already a record of their own (the audit's JSON). */
void log_raw_line(const char *line);

#define log_at(level, ...)                               \
	do {                                             \
		if ((level) >= log_threshold)            \
			log_write((level), __VA_ARGS__); \
	} while (0)
#define log_debug(...) log_at(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_at(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_at(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...) log_at(LOG_LEVEL_ERROR, __VA_ARGS__)

/* A line with fields (the access log): key=value pairs in text, members
 * in JSON. A field with str NULL (and not is_num) is left out; strings are
 * cut at LOG_FIELD_MAX bytes. Checks the level itself. */
#define LOG_FIELD_MAX 512
struct log_field {
	const char *key; /* a plain name of ours */
	const char *str;
	double num;
	bool is_num;
};
#define LOG_STR(k, v) ((struct log_field){.key = (k), .str = (v)})
#define LOG_NUM(k, v) ((struct log_field){.key = (k), .num = (double)(v), .is_num = true})
void log_fields(enum log_level level, const char *msg, const struct log_field *f, size_t n);

/* Write json, one complete line made by the caller (the audit), to the log
 * as is, with a newline and no prefix, whatever the level and format. */
void log_raw_line(const char *json);

/* s into out (size bytes, NUL-terminated, cut when full) with every control
 * byte as \xNN; with quote, in double quotes with " and \ escaped. The
 * length written. For the unit tests and log.c's text lines. */
size_t log_text_escape(char *out, size_t size, const char *s, bool quote);

/* Rate-limited lines, for events an outsider can repeat at will (refused
 * connections, accept errors): each call site may write LOG_LIMIT_BURST
 * lines per LOG_LIMIT_WINDOW_MS, and the next line it writes after a quiet
 * spell says how many similar ones were suppressed meanwhile. */
#define LOG_LIMIT_WINDOW_MS 10000
#define LOG_LIMIT_BURST 5

struct log_limit {
	int64_t window_start_ms;
	uint32_t in_window;  /* lines written in the current window */
	uint32_t suppressed; /* lines dropped since the last one written */
};

/* Whether a line at now_ms may be written (at most burst per window_ms).
 * When it may, *suppressed gets the lines dropped since the last one
 * written, and that count starts again. Pure, for the unit tests. */
bool log_limit_allow(struct log_limit *ll, int64_t now_ms, int64_t window_ms, uint32_t burst,
		     uint32_t *suppressed);

void log_write_limited(struct log_limit *ll, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One struct log_limit per call site (a static in the macro's block). */
#define log_limited(level, ...)                                                    \
	do {                                                                       \
		static struct log_limit log_limit_site_;                           \
		if ((level) >= log_threshold)                                      \
			log_write_limited(&log_limit_site_, (level), __VA_ARGS__); \
	} while (0)
#define log_info_limited(...) log_limited(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn_limited(...) log_limited(LOG_LEVEL_WARN, __VA_ARGS__)

#endif
