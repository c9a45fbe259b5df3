/* forward_headers.h: which headers a forwarded call carries to the owner
 * and back, and the small parsing the proxy does on the owner's answer
 * (forward.c). Pure: no I/O, no state, unit-tested
 * (tests/unit/test_forward_headers.c). */
#ifndef CI_FORWARD_HEADERS_H
#define CI_FORWARD_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

/* The headers forward.c sets itself on a forwarded request. */
#define FORWARD_TOKEN_HEADER "X-CI-Cluster-Token"
#define FORWARD_BY_HEADER "X-CI-Forwarded-By"

/* Whether a request header called name stays behind: hop-by-hop ones
 * (Connection, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade,
 * Proxy-*, Host, and any the request's Connection header names; connection
 * may be NULL), the framing curl writes again (Content-Length, Expect),
 * and the ones the proxy sets itself (the cluster token, whoever claims to
 * have forwarded it, X-Forwarded-For, X-Request-Id, traceparent), so a
 * client's own can never reach the owner. */
bool forward_headers_drop_request(const char *name, const char *connection);

/* Whether a header of the owner's answer is passed to the caller: the
 * ones a client acts on (Retry-After, Allow, Location, WWW-Authenticate,
 * Cache-Control, Content-Disposition, ...), and X-CI-* ones but the token.
 * Content-Type and Content-Length are not in it: the proxy passes them
 * through the reply's start; X-Request-Id neither: the caller has it
 * already (the same id, sent to the owner). */
bool forward_headers_keep_response(const char *name);

/* The status of an answer's status line ("HTTP/1.1 200 OK\r\n", len
 * bytes): 100 to 599, or -1 when it is not one. */
int forward_headers_status(const char *line, size_t len);

/* Split an answer's header line ("Name: value\r\n") into its name (copied
 * into name, at most size - 1 bytes) and its value (trimmed; *value points
 * into line, *vlen bytes). 0, or -1 when it is not a header line (no
 * colon, an empty or oversized name, a byte a name cannot hold). */
int forward_headers_split(const char *line, size_t len, char *name, size_t size, const char **value,
			  size_t *vlen);

/* X-Forwarded-For for a request that came from peer (http_req_peer's
 * "IP:PORT", "[IPv6]:PORT" or "unix") with the caller's own value (NULL
 * when none): "own, IP" (the port dropped), into out; just "IP" when own
 * does not fit. */
void forward_headers_xff(const char *own, const char *peer, char *out, size_t size);

/* base_url without its trailing slashes, then path and, when query is not
 * empty, "?" query: the owner's URL for the call (caller frees). */
char *forward_headers_url(const char *base_url, const char *path, const char *query);

#endif
