/* defer.h: run a callback on the next turn of the event loop.
 *
 * The house rule (style.md) is that a callback never runs inside the call
 * that registered it, and that an object is never freed while one of its
 * callbacks is on the stack. Both come down to "do this from the loop, not
 * from here", which is what these say, instead of a zero timeval and a raw
 * event_base_once at each place.
 *
 * The callback has libevent's shape (fd is -1, what is EV_TIMEOUT), so a
 * function already written for a timer needs no change. It runs exactly
 * once, from event_base_loop, after the current callback has returned. */
#ifndef CI_DEFER_H
#define CI_DEFER_H

#include <event2/event.h>

/* Run fn(-1, EV_TIMEOUT, arg) from the loop, soon. It cannot be cancelled:
 * arg must stay valid until fn has run (the usual case: fn frees it, or
 * reports its failure). Aborts when libevent cannot allocate. */
void defer_call(struct event_base *base, event_callback_fn fn, void *arg);

/* Arm ev, a timer the caller owns (evtimer_new), to fire on the next loop
 * turn: the cancellable form. event_del(ev) (or event_free) cancels it;
 * arming an armed timer again still runs it once. */
void defer_event(struct event *ev);

#endif
