/* codec.h: small exact text codecs: base64 both ways, percent-encoding for
 * URL paths, whole decimal numbers.
 *
 * Each decoder refuses what it cannot read exactly (junk, overflow, a value
 * out of the caller's range) rather than taking a prefix, because every text
 * they see comes from a user, a server or a sandbox. */
#ifndef CI_CODEC_H
#define CI_CODEC_H

#include <stddef.h>

struct buf;

/* Standard base64 (with padding) of len bytes; the caller frees. */
char *codec_base64_encode(const unsigned char *data, size_t len);

/* Decode base64 (standard or URL-safe alphabet, padding optional, whitespace
 * ignored) into out; -1 on malformed input or when out->max is passed (out
 * then holds what was decoded so far). */
int codec_base64_decode(const char *in, struct buf *out);

/* Percent-encode s for a URL path: RFC 3986 unreserved characters pass, so
 * '?', '#', '%' and spaces survive; '/' is kept when keep_slash is set, so
 * each segment of a file path is encoded on its own. The caller frees. */
char *codec_url_escape(const char *s, int keep_slash);

/* Parse all of s as a decimal number into *out; -1 on junk, overflow, an
 * empty string or a value out of [min, max] (and, for a double, infinity or
 * NaN). */
int codec_parse_long(const char *s, long min, long max, long *out);
int codec_parse_double(const char *s, double min, double max, double *out);

#endif
