/* api_wait.c: a call waiting on a store operation that cannot be
 * cancelled. The operation's callback gets the wait and takes the call back
 * from it; when the daemon stopped meanwhile (http_api_free answered every
 * waiting call 503 and freed it), it gets NULL and only the wait is freed.
 * Without this, a late answer would write to a freed call. */
#include "api.h"

#include <stdlib.h>

#include "xalloc.h"

struct api_wait {
	LIST_ENTRY(api_wait) link;
	struct call *c; /* NULL once answered by api_waits_stop */
	void *ctx;
};

struct api_wait *api_wait_new(struct call *c, void *ctx)
{
	struct api_wait *w = xcalloc(1, sizeof(*w));
	w->c = c;
	w->ctx = ctx;
	LIST_INSERT_HEAD(&c->api->waits, w, link);
	return w;
}

struct call *api_wait_done(struct api_wait *w, void **ctx)
{
	struct call *c = w->c;
	if (c)
		LIST_REMOVE(w, link);
	if (ctx)
		*ctx = w->ctx;
	free(w);
	return c;
}

struct call *api_wait_answered(struct api_wait *w, const struct err *e)
{
	struct call *c = api_wait_done(w, NULL);
	if (c && e) {
		api_reply(c, 0, NULL, e);
		return NULL;
	}
	return c;
}

void api_waits_stop(struct http_api *api)
{
	while (!LIST_EMPTY(&api->waits)) {
		struct api_wait *w = LIST_FIRST(&api->waits);
		struct call *c = w->c;
		LIST_REMOVE(w, link);
		w->c = NULL;
		api_fail(c, ERR_UNAVAILABLE, "the daemon is shutting down");
	}
}
