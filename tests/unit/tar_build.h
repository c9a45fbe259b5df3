/* tar_build.h: tar bytes for the tar scanner's and the manifest's unit tests.
 *
 * A tiny writer of ustar/pax archives (headers with a right checksum, data
 * padded to 512, the end blocks) so a test can make every hostile shape by
 * hand, plus the fixtures that Python's tarfile and GNU tar wrote
 * (tests/unit/fixtures/, rebuilt by make_fixtures.sh). */
#ifndef CI_TEST_TAR_BUILD_H
#define CI_TEST_TAR_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

struct tb {
	unsigned char *buf;
	size_t len, cap;
	uint64_t mtime;
};

static inline void tb_grow(struct tb *t, size_t n)
{
	if (t->len + n > t->cap) {
		t->cap = (t->len + n) * 2;
		t->buf = xrealloc(t->buf, t->cap);
	}
}

static inline void tb_raw(struct tb *t, const void *p, size_t n)
{
	tb_grow(t, n);
	memcpy(t->buf + t->len, p, n);
	t->len += n;
}

static inline void tb_zeros(struct tb *t, size_t n)
{
	tb_grow(t, n);
	memset(t->buf + t->len, 0, n);
	t->len += n;
}

/* value as n-1 octal digits and a NUL (the way tarfile writes it). */
static inline void tb_octal(unsigned char *f, size_t n, uint64_t value)
{
	f[n - 1] = '\0';
	for (size_t i = n - 1; i-- > 0; value >>= 3)
		f[i] = (unsigned char)('0' + (value & 7));
}

/* The checksum of the header at h, written into it. */
static inline void tb_sum(unsigned char *h)
{
	unsigned sum = 0;
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

/* A header; name goes in the 100-byte name field (truncated there). Returns
 * its offset, for a test that then breaks it (and maybe calls tb_sum). */
static inline size_t tb_header(struct tb *t, const char *name, char type, uint64_t size,
			       unsigned mode)
{
	size_t at = t->len;
	tb_zeros(t, 512);
	unsigned char *h = t->buf + at;
	strncpy((char *)h, name, 100);
	tb_octal(h + 100, 8, mode);
	tb_octal(h + 108, 8, 0);
	tb_octal(h + 116, 8, 0);
	tb_octal(h + 124, 12, size);
	tb_octal(h + 136, 12, t->mtime);
	h[156] = (unsigned char)type;
	memcpy(h + 257,
	       "ustar\0"
	       "00",
	       8);
	tb_sum(h);
	return at;
}

/* n bytes of data and the padding to the next block. */
static inline void tb_data(struct tb *t, const void *p, size_t n)
{
	tb_raw(t, p, n);
	tb_zeros(t, (512 - n % 512) % 512);
}

static inline void tb_file(struct tb *t, const char *name, const char *content, unsigned mode)
{
	size_t n = strlen(content);
	tb_header(t, name, '0', n, mode);
	tb_data(t, content, n);
}

static inline void tb_dir(struct tb *t, const char *name)
{
	tb_header(t, name, '5', 0, 0755);
}

/* An 'x' header holding records exactly as given ("%d key=value\n"...). */
static inline void tb_pax_raw(struct tb *t, const char *records, size_t n)
{
	tb_header(t, "././@PaxHeader", 'x', n, 0644);
	tb_data(t, records, n);
}

/* One well-formed record "LEN key=value\n" (LEN counting itself). */
static inline void tb_pax(struct tb *t, const char *key, const char *value, size_t vlen)
{
	size_t body = 1 + strlen(key) + 1 + vlen + 1, len = body + 1;
	while (snprintf(NULL, 0, "%zu", len) + body != len)
		len++;
	char *rec = xmalloc(len + 1);
	int off = snprintf(rec, len + 1, "%zu %s=", len, key);
	memcpy(rec + off, value, vlen);
	rec[len - 1] = '\n';
	tb_pax_raw(t, rec, len);
	free(rec);
}

/* The two end blocks and tarfile's padding to 10240. */
static inline void tb_end(struct tb *t)
{
	tb_zeros(t, 1024);
	if (t->len % 10240)
		tb_zeros(t, 10240 - t->len % 10240);
}

static inline void tb_free(struct tb *t)
{
	free(t->buf);
	*t = (struct tb){0};
}

/* A fixture under tests/unit/fixtures/ (found from this file's path, which
 * the build gives relative to the repository). Caller frees it. */
static inline unsigned char *tb_fixture(const char *name, size_t *len)
{
	char path[512];
	const char *here = __FILE__, *slash = strrchr(here, '/');
	snprintf(path, sizeof(path), "%.*s/fixtures/%s", slash ? (int)(slash - here) : 1,
		 slash ? here : ".", name);
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		fprintf(stderr, "  cannot open fixture %s\n", path);
		*len = 0;
		return NULL;
	}
	unsigned char *buf = xmalloc(1 << 20);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

#endif
