/* test_defer.c: deferred calls run from the loop, once, never inside the
 * call that scheduled them (lib/defer.c). */
#include <event2/event.h>

#include "defer.h"
#include "unit.h"

struct defer_probe {
	int runs;
	int inside; /* set while the scheduling call is on the stack */
	int ran_inside;
	int order[4];
	int norder;
};

static void defer_probe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct defer_probe *p = arg;
	CHECK(fd == -1 && (what & EV_TIMEOUT));
	p->runs++;
	if (p->inside)
		p->ran_inside++;
}

TEST(defer_call_runs_once_from_the_loop_not_inside_the_caller)
{
	struct event_base *base = event_base_new();
	struct defer_probe p = {0};
	p.inside = 1;
	defer_call(base, defer_probe_cb, &p);
	p.inside = 0;
	CHECK(p.runs == 0); /* not yet: only the loop runs it */
	event_base_loop(base, EVLOOP_NONBLOCK);
	CHECK(p.runs == 1 && p.ran_inside == 0);
	event_base_loop(base, EVLOOP_NONBLOCK);
	CHECK(p.runs == 1); /* exactly once */
	event_base_free(base);
}

struct defer_chain {
	struct event_base *base;
	struct defer_probe *p;
	int id;
};

static void defer_chain_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct defer_chain *c = arg;
	c->p->order[c->p->norder++] = c->id;
}

TEST(defer_call_keeps_the_order_of_scheduling)
{
	struct event_base *base = event_base_new();
	struct defer_probe p = {0};
	struct defer_chain c[3];
	for (int i = 0; i < 3; i++) {
		c[i] = (struct defer_chain){base, &p, i + 1};
		defer_call(base, defer_chain_cb, &c[i]);
	}
	event_base_dispatch(base); /* returns once nothing is pending */
	CHECK(p.norder == 3);
	CHECK(p.order[0] == 1 && p.order[1] == 2 && p.order[2] == 3);
	event_base_free(base);
}

TEST(defer_event_fires_once_and_can_be_cancelled)
{
	struct event_base *base = event_base_new();
	struct defer_probe p = {0};
	struct event *ev = evtimer_new(base, defer_probe_cb, &p);

	p.inside = 1;
	defer_event(ev);
	defer_event(ev); /* armed twice: still one run */
	p.inside = 0;
	CHECK(p.runs == 0);
	event_base_dispatch(base);
	CHECK(p.runs == 1 && p.ran_inside == 0);

	/* Cancelled before the loop turns: never runs. */
	defer_event(ev);
	event_del(ev);
	event_base_dispatch(base);
	CHECK(p.runs == 1);

	/* Reusable afterwards. */
	defer_event(ev);
	event_base_dispatch(base);
	CHECK(p.runs == 2);
	event_free(ev);
	event_base_free(base);
}

TEST(defer_call_is_freed_with_the_base_when_it_never_ran)
{
	/* A daemon exiting with calls still queued must not leak them
	 * (valgrind runs this test). */
	struct event_base *base = event_base_new();
	struct defer_probe p = {0};
	defer_call(base, defer_probe_cb, &p);
	event_base_free(base);
	CHECK(p.runs == 0);
}
