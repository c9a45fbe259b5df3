/*
 * util.c: allocation, errors, bounded buffers and small codecs.
 */
/* vasprintf; the top-level Makefile also passes -D_GNU_SOURCE */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void util_oom(size_t n) __attribute__((noreturn));

static void util_oom(size_t n)
{
	fprintf(stderr, "ci-ctl: out of memory (allocating %zu bytes)\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		util_oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (p == NULL)
		util_oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		util_oom(n);
	return q;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static char *util_vasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

static char *util_vasprintf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0)
		util_oom(strlen(fmt));
	return s;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = util_vasprintf(fmt, ap);
	va_end(ap);
	return s;
}

void util_freep(void *p)
{
	free(*(void **)p);
}

void err_set(struct err **err, int code, long http_status, const char *fmt, ...)
{
	struct err *e;
	va_list ap;

	if (err == NULL)
		return;
	e = xcalloc(1, sizeof(*e));
	e->code = code;
	e->http_status = http_status;
	va_start(ap, fmt);
	e->msg = util_vasprintf(fmt, ap);
	va_end(ap);
	/* Keep the first error: it is the cause, later ones are fallout. */
	if (*err != NULL) {
		err_free(e);
		return;
	}
	*err = e;
}

void err_wrap(struct err **err, const char *fmt, ...)
{
	char *ctx, *msg;
	va_list ap;

	if (err == NULL || *err == NULL)
		return;
	va_start(ap, fmt);
	ctx = util_vasprintf(fmt, ap);
	va_end(ap);
	msg = xasprintf("%s: %s", ctx, (*err)->msg);
	free(ctx);
	free((*err)->msg);
	(*err)->msg = msg;
}

void err_give(struct err **err, struct err *e)
{
	if (err != NULL && *err == NULL)
		*err = e;
	else
		err_free(e);
}

void err_free(struct err *e)
{
	if (e == NULL)
		return;
	free(e->api_code);
	free(e->msg);
	free(e);
}

void err_freep(struct err **e)
{
	err_free(*e);
	*e = NULL;
}

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	size_t want;

	if (n > b->max || b->len > b->max - n)
		return -1;
	want = b->len + n + 1;
	if (want > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap < want)
			cap = cap > SIZE_MAX / 2 ? want : cap * 2;
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
	} else {
		memmove(b->data, b->data + n, b->len - n);
		b->len -= n;
	}
	if (b->data != NULL)
		b->data[b->len] = '\0';
}

void buf_release(struct buf *b)
{
	free(b->data);
	buf_init(b, b->max);
}

char *buf_steal(struct buf *b, size_t *len)
{
	char *p;

	/* An empty buffer still yields a C string, so callers need no check. */
	if (b->data == NULL)
		buf_append(b, "", 0);
	p = b->data;
	if (len != NULL)
		*len = b->len;
	buf_init(b, b->max);
	return p;
}

int util_read_all(FILE *f, struct buf *out, const char *what, struct err **err)
{
	char chunk[65536];
	size_t n;

	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (buf_append(out, chunk, n) < 0) {
			err_set(err, CLI_EXIT_FAIL, 0, "%s: larger than %zu MiB", what,
				out->max >> 20);
			return -1;
		}
	}
	if (ferror(f)) {
		err_set(err, CLI_EXIT_FAIL, 0, "%s: %s", what, strerror(errno));
		return -1;
	}
	/* Make an empty input a valid empty C string too. */
	return buf_append(out, "", 0);
}

char *util_url_escape(const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = xmalloc(n * 3 + 1);
	char *o = out;

	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		/* RFC 3986 unreserved characters pass; everything else is encoded
		 * so that '?', '#', '%' and spaces in file names survive. */
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

static int util_base64_value(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

int util_base64_decode(const char *in, struct buf *out)
{
	unsigned int acc = 0;
	int bits = 0, pad = 0;

	for (; *in != '\0'; in++) {
		int v;

		if (*in == ' ' || *in == '\n' || *in == '\r' || *in == '\t')
			continue;
		if (*in == '=') {
			pad++;
			continue;
		}
		if (pad > 0)
			return -1; /* data after padding */
		v = util_base64_value((unsigned char)*in);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned int)v;
		bits += 6;
		if (bits >= 8) {
			unsigned char byte;

			bits -= 8;
			byte = (unsigned char)(acc >> bits);
			if (buf_append(out, &byte, 1) < 0)
				return -1;
			acc &= (1u << bits) - 1;
		}
	}
	/* Six leftover bits cannot come from any byte sequence. */
	return bits >= 6 || pad > 2 ? -1 : 0;
}

const char *util_basename(const char *p)
{
	const char *slash = strrchr(p, '/');

	return slash != NULL ? slash + 1 : p;
}

int util_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int util_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}
