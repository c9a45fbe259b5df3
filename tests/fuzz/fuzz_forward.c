/* fuzz_forward.c: an owner's answer head as the forwarder reads it
 * (forward_headers.h), from any bytes, line by line as curl hands them
 * over: the status line and the header lines are read without crashing,
 * what comes out has the shapes promised (a status of 100..599, a name of
 * header bytes within its buffer, a value inside the line without CR or LF),
 * and the request-side rules and X-Forwarded-For take any name or chain. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "forward_headers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		int s = forward_headers_status(p, len);
		if (s != -1 && (s < 100 || s > 599))
			abort();
		char name[64];
		const char *v;
		size_t vl;
		if (forward_headers_split(p, len, name, sizeof(name), &v, &vl) == 0) {
			if (strlen(name) == 0 || strlen(name) >= sizeof(name) || v < p ||
			    v + vl > p + len || memchr(v, '\r', vl) || memchr(v, '\n', vl))
				abort();
			(void)forward_headers_keep_response(name);
			(void)forward_headers_drop_request(name, name);
		}
		p += len;
	}
	/* Any bytes as the caller's own chain and as a peer address. */
	char *s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	char out[512];
	forward_headers_xff(s, s, out, sizeof(out));
	if (strlen(out) >= sizeof(out))
		abort();
	char *u = forward_headers_url(s, "/p", s);
	free(u);
	free(s);
	return 0;
}
