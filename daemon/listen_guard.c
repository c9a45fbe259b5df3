/* listen_guard.c: pause a listener on accept errors, with a backoff. */
#include "listen_guard.h"

#include <errno.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>

#include "clock.h"
#include "fdbudget.h"
#include "log.h"
#include "xalloc.h"

/* Log lines are limited per kind of listener: one API listener at EMFILE
 * must not hide the proxy's, and a thousand sessions' IPC listeners must
 * not say it a thousand times. */
#define GUARD_KINDS 8
static struct guard_kind {
	char what[32];
	struct log_limit limit;
} guard_kinds[GUARD_KINDS];

static struct log_limit *guard_kind_limit(const char *what)
{
	for (int i = 0; i < GUARD_KINDS; i++) {
		if (guard_kinds[i].what[0] == '\0')
			snprintf(guard_kinds[i].what, sizeof(guard_kinds[i].what), "%s", what);
		if (strcmp(guard_kinds[i].what, what) == 0)
			return &guard_kinds[i].limit;
	}
	return &guard_kinds[GUARD_KINDS - 1].limit; /* more kinds than expected: share */
}

struct listen_guard {
	struct evconnlistener *l;
	char what[32];
	struct log_limit *limit;
	listen_guard_exhausted_cb cb;
	void *arg;
	struct event *resume;
	int64_t backoff_ms;
	int64_t resumed_ms; /* when the last pause ended; 0 = never paused */
	LIST_ENTRY(listen_guard) link;
};

static LIST_HEAD(, listen_guard) guards = LIST_HEAD_INITIALIZER(guards);
static uint64_t guard_errors;

int64_t listen_guard_next_backoff(int64_t prev_ms, int64_t ms_since_resume)
{
	if (prev_ms <= 0 || ms_since_resume > 1000)
		return LISTEN_GUARD_MIN_MS;
	int64_t next = prev_ms * 2;
	return next > LISTEN_GUARD_MAX_MS ? LISTEN_GUARD_MAX_MS : next;
}

uint64_t listen_guard_errors(void)
{
	return guard_errors;
}

static struct listen_guard *guard_find(struct evconnlistener *l)
{
	struct listen_guard *g;
	LIST_FOREACH (g, &guards, link)
		if (g->l == l)
			return g;
	return NULL;
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct listen_guard *g = arg;
	g->resumed_ms = clock_mono_ms();
	evconnlistener_enable(g->l);
}

static void accept_error_cb(struct evconnlistener *l, void *ctx)
{
	(void)ctx;
	int err = EVUTIL_SOCKET_ERROR();
	guard_errors++;
	struct listen_guard *g = guard_find(l);
	bool exhausted = err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
	if (exhausted)
		fdbudget_exhausted(&fdbudget_daemon);
	if (g == NULL) {
		/* Not watched (a bug): still never spin. */
		evconnlistener_disable(l);
		log_warn_limited("accept: %s; listener disabled", strerror(err));
		return;
	}
	if (exhausted && g->cb)
		g->cb(evconnlistener_get_fd(l), g->arg);
	int64_t now = clock_mono_ms();
	g->backoff_ms = listen_guard_next_backoff(g->backoff_ms,
						  g->resumed_ms ? now - g->resumed_ms : INT64_MAX);
	evconnlistener_disable(l);
	struct timeval tv = {g->backoff_ms / 1000, (g->backoff_ms % 1000) * 1000};
	evtimer_add(g->resume, &tv);
	if (LOG_LEVEL_WARN >= log_threshold)
		log_write_limited(
		    g->limit, LOG_LEVEL_WARN,
		    "%s listener: accept: %s; pausing it %lld ms (%lld descriptors in "
		    "use of %lld)",
		    g->what, strerror(err), (long long)g->backoff_ms,
		    (long long)fdbudget_in_use(&fdbudget_daemon), (long long)fdbudget_daemon.limit);
}

void listen_guard_watch(struct evconnlistener *l, const char *what, listen_guard_exhausted_cb cb,
			void *arg)
{
	struct listen_guard *g = xcalloc(1, sizeof(*g));
	g->l = l;
	snprintf(g->what, sizeof(g->what), "%s", what);
	g->limit = guard_kind_limit(g->what);
	g->cb = cb;
	g->arg = arg;
	g->resume = evtimer_new(evconnlistener_get_base(l), resume_cb, g);
	if (g->resume == NULL)
		abort();
	LIST_INSERT_HEAD(&guards, g, link);
	evconnlistener_set_error_cb(l, accept_error_cb);
}

void listen_guard_unwatch(struct evconnlistener *l)
{
	struct listen_guard *g = l ? guard_find(l) : NULL;
	if (g == NULL)
		return;
	LIST_REMOVE(g, link);
	event_free(g->resume);
	evconnlistener_set_error_cb(l, NULL);
	free(g);
}
