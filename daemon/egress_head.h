/* egress_head.h: a sandbox's request to the egress proxy, parsed strictly.
 *
 * llhttp parses (daemon/egress_head.c is the only file that includes it).
 * On top of it we refuse whatever two HTTP implementations could read two
 * ways, since the upstream server is one and the proxy the other: bare LF or
 * CR line ends, obs-fold continuation lines, whitespace before a colon,
 * control bytes, duplicate Host or Content-Length, Content-Length together
 * with Transfer-Encoding, versions other than HTTP/1.0 and 1.1, and a Host
 * header that names another host than the request target.
 *
 * The head sent upstream is rebuilt from what was checked: origin form, Host
 * from the target, hop-by-hop headers (Connection and the headers it names,
 * Keep-Alive, Proxy-*, TE, Trailer, Upgrade) dropped, the body framing
 * re-stated, and Connection: close. The body (Content-Length or chunked) is
 * passed on re-framed, and the request ends there: one request per upstream
 * connection, so nothing the proxy did not check reaches the server. */
#ifndef CI_EGRESS_HEAD_H
#define CI_EGRESS_HEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define EGRESS_HEAD_MAX (16 * 1024)

enum egress_head_status { EGRESS_HEAD_ERROR = -1, EGRESS_HEAD_MORE = 0, EGRESS_HEAD_DONE = 1 };

struct egress_head;

/* A parser for one request; egress_head_free undoes it. */
struct egress_head *egress_head_new(void);
void egress_head_free(struct egress_head *h);

/* Feed client bytes until the head is complete. MORE: all of buf was taken,
 * send more. DONE: the first *used bytes were the head; what follows is the
 * body (plain HTTP) or tunnel data (CONNECT). ERROR: *status is the HTTP
 * status to answer (400, 431) and *errp says why. */
int egress_head_feed(struct egress_head *h, const char *buf, size_t len, size_t *used, int *status,
		     struct err **errp);

/* After DONE: the target, lowercased, without brackets. */
bool egress_head_is_connect(const struct egress_head *h);
const char *egress_head_host(const struct egress_head *h);
int egress_head_port(const struct egress_head *h);
/* After DONE, plain HTTP: the head to send upstream; borrowed from h. */
const char *egress_head_upstream(const struct egress_head *h, size_t *len);

/* Where the body bytes for the upstream go. */
typedef void (*egress_head_out_fn)(const char *data, size_t len, void *arg);

/* Plain HTTP, after DONE: feed the bytes that follow the head. The body goes
 * to out (Content-Length bytes as they are, chunked re-chunked without
 * extensions or trailers). MORE: all of buf was the body so far. DONE: the
 * request ended after *used bytes, and whatever follows is not for the
 * upstream. ERROR: a malformed body (*errp). */
int egress_head_body(struct egress_head *h, const char *buf, size_t len, size_t *used,
		     egress_head_out_fn out, void *arg, struct err **errp);

/* Plain HTTP: watch the upstream's answer as it passes (unchanged). DONE:
 * the final answer (not a 1xx) ended after *used bytes, so the connection
 * has served its one request. MORE: all of buf belongs to it so far. ERROR:
 * it does not parse; the caller stops watching and relays until EOF. */
int egress_head_response(struct egress_head *h, const char *buf, size_t len, size_t *used);

#endif
