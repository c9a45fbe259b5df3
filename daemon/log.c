/* log.c: one line per event on stderr, a timestamp first, as text or as one
 * JSON object per line (--log-format).
 *
 * A line must stay one line whatever it carries: a client's path or header,
 * a container's message. Text lines have every control byte written as
 * \xNN (so a CR or LF cannot start a forged line); JSON lines go through the
 * generator, which escapes control characters and replaces invalid UTF-8. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "json.h"
#include "xalloc.h"

enum log_level log_threshold = LOG_LEVEL_INFO;
enum log_format log_format = LOG_FORMAT_TEXT;

static const char *const log_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, log_names[i]) == 0)
			return i;
	return -1;
}

int log_format_parse(const char *name)
{
	if (strcmp(name, "text") == 0)
		return LOG_FORMAT_TEXT;
	if (strcmp(name, "json") == 0)
		return LOG_FORMAT_JSON;
	return -1;
}

/* Whether a text value must be quoted to read back as one value. */
static bool text_needs_quotes(const char *s)
{
	if (s[0] == '\0')
		return true;
	for (; *s; s++)
		if (*s == ' ' || *s == '"' || *s == '=' || *s == '\\')
			return true;
	return false;
}

size_t log_text_escape(char *out, size_t size, const char *s, bool quote)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	if (size == 0)
		return 0;
#define PUT(ch)                        \
	do {                           \
		if (o + 1 >= size)     \
			goto full;     \
		out[o++] = (char)(ch); \
	} while (0)
	if (quote)
		PUT('"');
	for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
		if (*u < 0x20 || *u == 0x7f) {
			if (o + 4 >= size)
				goto full;
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[*u >> 4];
			out[o++] = hex[*u & 15];
		} else if (quote && (*u == '"' || *u == '\\')) {
			if (o + 2 >= size)
				goto full;
			out[o++] = '\\';
			out[o++] = (char)*u;
		} else {
			PUT(*u);
		}
	}
	if (quote)
		PUT('"');
#undef PUT
full:
	out[o] = '\0';
	return o;
}

/* Write one whole line: one fwrite per line keeps lines whole when stderr
 * is shared (it is unbuffered). */
static void log_emit(const char *line, size_t len)
{
	fwrite(line, 1, len, stderr);
}

static void json_begin(yajl_gen g, enum log_level level, const char *stamp, const char *msg)
{
	jg_obj(g);
	jg_kv_str(g, "ts", stamp);
	jg_kv_str(g, "level", log_names[level]);
	jg_kv_str(g, "msg", msg);
}

static void json_end_and_emit(yajl_gen g)
{
	jg_obj_end(g);
	size_t n;
	const char *text = jg_text(g, &n);
	char small[4096];
	char *line = n < sizeof(small) ? small : xmalloc(n + 1);
	memcpy(line, text, n);
	line[n] = '\n';
	log_emit(line, n + 1);
	if (line != small)
		free(line);
}

static void log_vwrite(enum log_level level, uint32_t suppressed, const char *fmt, va_list ap)
{
	char stamp[32], msg[2048];
	clock_format_rfc3339(clock_now_ms(), stamp, sizeof(stamp));
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_format == LOG_FORMAT_JSON) {
		AUTOGEN yajl_gen g = json_gen_new();
		json_begin(g, level, stamp, msg);
		if (suppressed)
			jg_kv_int(g, "suppressed", suppressed);
		json_end_and_emit(g);
		return;
	}
	char line[sizeof(msg) * 4 + 128];
	int n = snprintf(line, sizeof(line), "%s %-5s ", stamp, log_names[level]);
	size_t len = (size_t)n;
	len += log_text_escape(line + len, sizeof(line) - len, msg, false);
	if (suppressed)
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					" (%u similar lines suppressed)", suppressed);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	log_emit(line, len);
}

void log_write(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vwrite(level, 0, fmt, ap);
	va_end(ap);
}

void log_fields(enum log_level level, const char *msg, const struct log_field *f, size_t n)
{
	if (level < log_threshold)
		return;
	char stamp[32];
	clock_format_rfc3339(clock_now_ms(), stamp, sizeof(stamp));
	if (log_format == LOG_FORMAT_JSON) {
		AUTOGEN yajl_gen g = json_gen_new();
		json_begin(g, level, stamp, msg);
		for (size_t i = 0; i < n; i++) {
			if (f[i].str == NULL && !f[i].is_num)
				continue;
			jg_str(g, f[i].key);
			if (f[i].is_num)
				jg_number(g, f[i].num);
			else
				jg_strn(g, f[i].str, strnlen(f[i].str, LOG_FIELD_MAX));
		}
		json_end_and_emit(g);
		return;
	}
	char line[8192];
	size_t len = (size_t)snprintf(line, sizeof(line), "%s %-5s ", stamp, log_names[level]);
	len += log_text_escape(line + len, sizeof(line) - len, msg, false);
	for (size_t i = 0; i < n && len < sizeof(line) - 1; i++) {
		if (f[i].str == NULL && !f[i].is_num)
			continue;
		char val[LOG_FIELD_MAX + 1];
		if (f[i].is_num)
			snprintf(val, sizeof(val), "%.15g", f[i].num);
		else
			snprintf(val, sizeof(val), "%s", f[i].str);
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %s=", f[i].key);
		if (len >= sizeof(line) - 1)
			break;
		len += log_text_escape(line + len, sizeof(line) - len, val,
				       !f[i].is_num && text_needs_quotes(val));
	}
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	log_emit(line, len);
}

void log_raw_line(const char *line)
{
	/* One write per line keeps it whole when stderr is shared, however long
	 * (an audit line with its code head is ~5-25 KiB). */
	size_t n = strlen(line);
	char *buf = xmalloc(n + 1);
	memcpy(buf, line, n);
	buf[n] = '\n';
	log_emit(buf, n + 1);
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
