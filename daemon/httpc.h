/* httpc.h: outgoing HTTP for the daemon's own peers (the fixer model, the
 * review webhook), on the event loop through libcurl's multi interface.
 *
 * Every call has a deadline and a cap on the answer it keeps; the callback
 * runs exactly once, never inside the call that started it, unless the
 * call is cancelled (then never). Redirects are not followed, and only
 * http:// and https:// URLs are taken: where a request goes is decided by
 * whoever gave the URL (an operator's flag, or an allowlist check before
 * this), never by the peer. */
#ifndef CI_HTTPC_H
#define CI_HTTPC_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct httpc;
struct httpc_call;

/* How a call ended. error is NULL when the peer answered (any status);
 * otherwise why it did not (refused, deadline, answer over the cap, bad
 * URL), with status 0. body is what the peer sent (NUL-terminated, len
 * bytes), borrowed for the callback. */
struct httpc_response {
	const struct err *error;
	long status;
	const char *body;
	size_t len;
	int64_t elapsed_ms;
};

typedef void (*httpc_done_cb)(const struct httpc_response *r, void *arg);

/* A client on base. Caller owns it (httpc_free). */
struct httpc *httpc_new(struct event_base *base);

/* Calls in flight are dropped without their callbacks. NULL-safe. */
void httpc_free(struct httpc *h);

/* POST body (len bytes) to url with the given header lines ("Name: value",
 * borrowed for the call), giving up after timeout_ms and keeping at most
 * max_response bytes of the answer (more is an error). Returns the call,
 * or NULL with *errp set when it cannot start (a URL that is not http or
 * https). */
struct httpc_call *httpc_post(struct httpc *h, const char *url, const char *const *headers,
			      size_t n_headers, const char *body, size_t len, int64_t timeout_ms,
			      size_t max_response, httpc_done_cb cb, void *arg, struct err **errp);

/* c's callback will not run. NULL-safe; c must not have completed. */
void httpc_cancel(struct httpc_call *c);

/* Calls in flight. */
size_t httpc_pending(const struct httpc *h);

#endif
