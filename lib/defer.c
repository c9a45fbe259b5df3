/* defer.c: callbacks from the event loop rather than from the caller. */
#include "defer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void defer_call(struct event_base *base, event_callback_fn fn, void *arg)
{
	/* A zero timeout is a timer libevent fires in the loop's next timer
	 * pass, never inside this call. It only fails to allocate. */
	static const struct timeval zero = {0, 0};
	if (event_base_once(base, -1, EV_TIMEOUT, fn, arg, &zero) < 0) {
		fprintf(stderr, "%s: out of memory (event_base_once)\n",
			program_invocation_short_name);
		abort();
	}
}

void defer_event(struct event *ev)
{
	static const struct timeval zero = {0, 0};
	evtimer_add(ev, &zero);
}
