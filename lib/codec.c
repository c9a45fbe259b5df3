/* codec.c: base64, percent-encoding and whole decimal numbers. */
#include "codec.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "xalloc.h"

char *codec_base64_encode(const unsigned char *data, size_t len)
{
	static const char tbl[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t olen = 4 * ((len + 2) / 3);
	char *out = xmalloc(olen + 1), *o = out;
	size_t i = 0;
	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
		*o++ = tbl[v >> 18];
		*o++ = tbl[(v >> 12) & 63];
		*o++ = tbl[(v >> 6) & 63];
		*o++ = tbl[v & 63];
	}
	if (i < len) {
		uint32_t v =
		    (uint32_t)data[i] << 16 | (i + 1 < len ? (uint32_t)data[i + 1] << 8 : 0);
		*o++ = tbl[v >> 18];
		*o++ = tbl[(v >> 12) & 63];
		*o++ = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

/* The 6-bit value of a base64 character of either alphabet, or -1. */
static int codec_base64_value(int c)
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

int codec_base64_decode(const char *in, struct buf *out)
{
	unsigned int acc = 0;
	int bits = 0, pad = 0;
	for (; *in != '\0'; in++) {
		if (*in == ' ' || *in == '\n' || *in == '\r' || *in == '\t')
			continue;
		if (*in == '=') {
			pad++;
			continue;
		}
		if (pad > 0)
			return -1; /* data after padding */
		int v = codec_base64_value((unsigned char)*in);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned int)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			unsigned char byte = (unsigned char)(acc >> bits);
			if (buf_append(out, &byte, 1) < 0)
				return -1;
			acc &= (1u << bits) - 1;
		}
	}
	/* Six leftover bits cannot come from any byte sequence. */
	return bits >= 6 || pad > 2 ? -1 : 0;
}

char *codec_url_escape(const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = xmalloc(strlen(s) * 3 + 1), *o = out;
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
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

int codec_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int codec_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}
