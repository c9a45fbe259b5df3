/* capbuf.c: head-and-tail capped output. */
#include "capbuf.h"

#include <stdio.h>
#include <string.h>

#include "xalloc.h"

void capbuf_init(struct capbuf *cb, size_t cap)
{
	memset(cb, 0, sizeof(*cb));
	cb->cap = cap;
}

void capbuf_release(struct capbuf *cb)
{
	free(cb->head);
	free(cb->tail);
	memset(cb, 0, sizeof(*cb));
}

size_t capbuf_append(struct capbuf *cb, const char *data, size_t len)
{
	size_t room = cb->cap - cb->head_len, keep = len < room ? len : room;
	if (keep > 0) {
		cb->head = xrealloc(cb->head, cb->head_len + keep);
		memcpy(cb->head + cb->head_len, data, keep);
		cb->head_len += keep;
	}
	if (keep < len) {
		cb->dropped += len - keep;
		cb->truncated = true;
	}
	return keep;
}

void capbuf_set_tail(struct capbuf *cb, const char *data, size_t len, uint64_t dropped)
{
	size_t max = cb->cap / 2;
	if (len > max) {
		dropped += len - max;
		data += len - max;
		len = max;
	}
	free(cb->tail);
	cb->tail = xmalloc(len);
	memcpy(cb->tail, data, len);
	cb->tail_len = len;
	cb->dropped += dropped;
	if (dropped > 0)
		cb->truncated = true;
}

void capbuf_producer_died(struct capbuf *cb)
{
	if (cb->tail_len == 0 && cb->head_len >= cb->cap / 2) {
		cb->truncated = true;
		cb->tail_lost = true;
	}
}

char *capbuf_render(const struct capbuf *cb, size_t *len)
{
	char marker[96] = "";
	if (cb->tail_lost)
		snprintf(
		    marker, sizeof(marker),
		    "\n[... output past this point was lost when the kernel was killed ...]\n");
	else if (cb->truncated)
		snprintf(marker, sizeof(marker), "\n[... %llu bytes truncated ...]\n",
			 (unsigned long long)cb->dropped);
	size_t mlen = strlen(marker);
	size_t n = cb->head_len + mlen + cb->tail_len;
	char *out = xmalloc(n + 1);
	if (cb->head_len)
		memcpy(out, cb->head, cb->head_len);
	memcpy(out + cb->head_len, marker, mlen);
	if (cb->tail_len)
		memcpy(out + cb->head_len + mlen, cb->tail, cb->tail_len);
	out[n] = '\0';
	*len = n;
	return out;
}
