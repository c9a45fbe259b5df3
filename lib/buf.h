/* buf.h: a growing byte buffer with a hard cap.
 *
 * Every buffer fed from outside input is bounded: `max` is fixed when the
 * buffer is set up and an append that would pass it fails and changes
 * nothing, so the caller decides what "too large" means (an error, a cut).
 * `data` is always NUL-terminated once non-NULL, so a text body can be handed
 * to code that wants a C string. (The daemon's exec output, which keeps a
 * head and a tail and counts what it dropped, is daemon/capbuf.c.) */
#ifndef CI_BUF_H
#define CI_BUF_H

#include <stddef.h>
#include <stdio.h>

struct err;

struct buf {
	char *data; /* owned; NULL until the first append */
	size_t len;
	size_t cap; /* allocated */
	size_t max; /* the cap on len */
};

/* An empty buffer that will hold at most max bytes. */
void buf_init(struct buf *b, size_t max);

/* Append n bytes; -1 (buffer unchanged) when len would exceed max. */
int buf_append(struct buf *b, const void *p, size_t n);

/* Drop the first n bytes (all of them when n >= len). */
void buf_consume(struct buf *b, size_t n);

/* Free the data; the buffer is empty again, with the same max. */
void buf_release(struct buf *b);

/* Hand the data to the caller (who frees it; "" for an empty buffer, never
 * NULL) and leave the buffer empty. *len gets the length when len is set. */
char *buf_steal(struct buf *b, size_t *len);

/* Read f to its end into b. -1 with *errp set when b->max is passed
 * (payload_too_large) or reading fails (internal); `what` names f in the
 * message ("stdin: larger than 64 MiB"). */
int buf_read_file(struct buf *b, FILE *f, const char *what, struct err **errp);

#endif
