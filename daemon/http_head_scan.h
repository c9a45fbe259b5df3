/* http_head_scan.h: the bytes of a request head, checked before llhttp reads them.
 *
 * llhttp 8.1 (Debian 12's node-llhttp), even built in its strict mode, takes
 * a bare LF as the end of the request line and of the head, and joins an
 * obs-fold continuation line to the header before it. Two HTTP
 * implementations can read such a head two ways (one splits on CRLF, the
 * other on LF), which is how requests are smuggled past a front proxy. This
 * scan refuses them, and whatever else the two readers of the head (the
 * API's clients' proxies, the egress proxy's upstream) might disagree on:
 * NUL bytes, CR without LF, LF without CR, whitespace at the start of a line.
 * It also caps the head's size, and says where the head ends (after the
 * blank line), so llhttp is fed the head and nothing more.
 *
 * Pure: no allocation, no I/O; the daemon's two llhttp users share it
 * (http_request.c for the API, egress_head.c for the proxy). */
#ifndef CI_HTTP_HEAD_SCAN_H
#define CI_HTTP_HEAD_SCAN_H

#include <stdbool.h>
#include <stddef.h>

struct http_head_scan {
	size_t seen, max;
	unsigned char prev;
	bool line_start, first_line, blank, ended;
	bool leading_ok; /* empty lines before the request line are skipped */
	bool in_leading; /* inside such an empty line */
	int status;      /* after a refusal: 400, or 431 for the size */
	const char *why; /* after a refusal: why (borrowed from the scan) */
	char why_buf[64];
};

/* Start a head of at most max bytes. RFC 9112 2.2 lets a server skip empty
 * lines before the request line (some clients send a CRLF after a body);
 * leading_empty_lines says whether they are skipped (the API) or refused
 * (the proxy, which passes nothing on that it did not need). */
void http_head_scan_init(struct http_head_scan *s, size_t max, bool leading_empty_lines);

/* Scan the next bytes of the head. Returns how many of them belong to the
 * head (len while it has not ended; s->ended once it has), or -1 when the
 * head is refused (s->status, s->why); after -1 or the end, do not call
 * again before http_head_scan_init. */
long http_head_scan(struct http_head_scan *s, const char *buf, size_t len);

#endif
