/* capbuf.h: an output buffer with a cap that keeps the head and the tail.
 *
 * A program that prints a gigabyte must not cost the daemon a gigabyte, and an
 * agent fixing its code needs both the first lines and the last ones (where
 * the error usually is). The kernel sends the first half of the cap live and
 * the last half at the end; this buffer enforces the cap on whatever arrives. */
#ifndef CI_CAPBUF_H
#define CI_CAPBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct capbuf {
	char *head;
	size_t head_len;
	char *tail;
	size_t tail_len;
	size_t cap;
	uint64_t dropped;
	bool truncated;
	bool tail_lost; /* the producer died holding the tail */
};

void capbuf_init(struct capbuf *cb, size_t cap);
void capbuf_release(struct capbuf *cb);

/* Append live bytes. Returns how many were kept (the rest count as dropped). */
size_t capbuf_append(struct capbuf *cb, const char *data, size_t len);

/* The closing tail: the producer dropped `dropped` bytes, then sent these.
 * At most cap/2 of them are kept. */
void capbuf_set_tail(struct capbuf *cb, const char *data, size_t len, uint64_t dropped);

/* The producer died: if the head had reached cap/2 (where the producer
 * starts keeping the tail to itself), what followed is lost; say so. */
void capbuf_producer_died(struct capbuf *cb);

/* Head, a marker when truncated, tail; malloc'd and NUL-terminated, length in
 * *len. Caller frees. */
char *capbuf_render(const struct capbuf *cb, size_t *len);

#endif
