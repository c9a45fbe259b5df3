/* buf.c: growing byte buffers with a hard cap. */
#include "buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "xalloc.h"

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	if (n > b->max || b->len > b->max - n)
		return -1;
	size_t want = b->len + n + 1;
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
	/* An empty buffer still yields a C string, so callers need no check. */
	if (b->data == NULL)
		buf_append(b, "", 0);
	char *p = b->data;
	if (len != NULL)
		*len = b->len;
	buf_init(b, b->max);
	return p;
}

int buf_read_file(struct buf *b, FILE *f, const char *what, struct err **errp)
{
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (buf_append(b, chunk, n) < 0)
			return err_set(errp, ERR_PAYLOAD_TOO_LARGE, "%s: larger than %zu MiB", what,
				       b->max >> 20);
	}
	if (ferror(f))
		return err_set(errp, ERR_INTERNAL, "%s: %s", what, strerror(errno));
	/* Make an empty input a valid empty C string too. */
	return buf_append(b, "", 0);
}
