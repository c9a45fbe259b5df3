/* fuzz_egress_head.c: the egress proxy's request parsing on hostile bytes.
 * The first byte picks the size of the pieces the rest arrives in (as reads
 * from a socket would cut it); after the head, the rest is fed as the body,
 * and what follows the request as the upstream's answer (the whole input
 * again when nothing follows: the answer must start where the request
 * ended, or the answer parser never gets past "GET").
 * Memory errors, leaks and broken invariants are what this looks for. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(const char *data, size_t len, void *arg)
{
	size_t *total = arg;
	if (len > 0 && (data[0] == 0x7f || data[len - 1] == 0x7f))
		*total += 1; /* touch every end of what came out */
	*total += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	size_t step = data[0] ? data[0] : size;
	const char *in = (const char *)data + 1;
	size_t len = size - 1, off = 0;
	struct egress_head *h = egress_head_new();
	int rc = EGRESS_HEAD_MORE;
	while (off < len && rc == EGRESS_HEAD_MORE) {
		size_t n = len - off < step ? len - off : step, used = 0;
		int status = 0;
		struct err *e = NULL;
		rc = egress_head_feed(h, in + off, n, &used, &status, &e);
		if (used > n || (rc == EGRESS_HEAD_ERROR && (e == NULL || status < 400)))
			abort();
		err_free(e);
		off += used;
	}
	if (rc == EGRESS_HEAD_DONE) {
		size_t hl;
		const char *up = egress_head_upstream(h, &hl);
		if (!egress_head_is_connect(h) && (up == NULL || strlen(up) != hl))
			abort();
		if (egress_head_port(h) < 1 || egress_head_port(h) > 65535 ||
		    egress_head_host(h)[0] == '\0')
			abort();
		size_t total = 0;
		while (off < len && rc != EGRESS_HEAD_ERROR) {
			size_t n = len - off < step ? len - off : step, used = 0;
			struct err *e = NULL;
			rc = egress_head_body(h, in + off, n, &used, sink, &total, &e);
			err_free(e);
			if (used > n)
				abort();
			off += used;
			if (rc == EGRESS_HEAD_DONE)
				break;
		}
		/* and what is left as the upstream's answer */
		size_t o = off < len ? off : 0;
		while (o < len) {
			size_t n = len - o < step ? len - o : step, used = 0;
			int r = egress_head_response(h, in + o, n, &used);
			if (used > n)
				abort();
			if (r != EGRESS_HEAD_MORE)
				break;
			o += used;
		}
	}
	egress_head_free(h);
	return 0;
}
