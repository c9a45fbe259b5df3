/* listen_guard.h: a listener that cannot accept backs off instead of spinning.
 *
 * libevent's evconnlistener stays enabled when accept() fails with EMFILE:
 * the pending connection stays in the backlog, the socket stays readable,
 * and the loop calls accept() again at once, for ever (the daemon once
 * logged 1.7 million accept errors in a minute). A watched listener is
 * paused instead, for a backoff that doubles from 10 ms to 1 s while the
 * errors go on, and resumed; the error is logged a few times per window,
 * not once per accept.
 *
 * The watch is found by the listener's address (libevent hands the error
 * callback the accept callback's argument, not ours); the lookup runs only
 * on errors, so a list is enough. */
#ifndef CI_LISTEN_GUARD_H
#define CI_LISTEN_GUARD_H

#include <event2/listener.h>
#include <stdint.h>

/* Called when accept fails for lack of descriptors, before the pause, with
 * the listening socket: the API answers waiting clients through a spare
 * descriptor here (http_server.c). */
typedef void (*listen_guard_exhausted_cb)(evutil_socket_t listen_fd, void *arg);

/* Watch l's accept errors; what names it in log lines ("api", "egress
 * proxy", "ipc"). cb may be NULL. The watch ends with listen_guard_unwatch,
 * which must come before evconnlistener_free(l). */
void listen_guard_watch(struct evconnlistener *l, const char *what, listen_guard_exhausted_cb cb,
			void *arg);
void listen_guard_unwatch(struct evconnlistener *l);

/* The pause after an accept error: 10 ms at first, doubled (up to 1 s) when
 * the error comes back within a second of the last resume, else 10 ms
 * again. Pure, for the unit tests. */
#define LISTEN_GUARD_MIN_MS 10
#define LISTEN_GUARD_MAX_MS 1000
int64_t listen_guard_next_backoff(int64_t prev_ms, int64_t ms_since_resume);

/* Accept errors seen and pauses made since start (all listeners). */
uint64_t listen_guard_errors(void);

#endif
