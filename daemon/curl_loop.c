/* curl_loop.c: curl multi on libevent (the shape of curl's
 * docs/examples/multi-event.c): curl says which sockets to watch and when
 * to wake it; libevent watches them and tells curl; finished transfers are
 * handed to the owner. */
#include "curl_loop.h"

#include <stdbool.h>
#include <stdlib.h>

#include "xalloc.h"

struct curl_loop {
	struct event_base *base;
	CURLM *multi;
	struct event *timer;
	curl_loop_done_cb done;
	void *arg;
	int dispatching; /* done callbacks on the stack */
	bool dead;       /* freed by the owner during a dispatch */
};

struct curl_loop_sock {
	struct event *ev;
};

static void curl_loop_destroy(struct curl_loop *l)
{
	curl_multi_cleanup(l->multi);
	event_free(l->timer);
	free(l);
}

/* Hand every finished transfer to the owner, who may free the loop from
 * its callback (it is destroyed here then, once nothing is on the stack). */
static void check_multi_info(struct curl_loop *l)
{
	CURLMsg *msg;
	int left;
	l->dispatching++;
	while (!l->dead && (msg = curl_multi_info_read(l->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		CURL *easy = msg->easy_handle;
		CURLcode res = msg->data.result;
		curl_multi_remove_handle(l->multi, easy);
		l->done(easy, res, l->arg);
	}
	l->dispatching--;
	if (l->dead && l->dispatching == 0)
		curl_loop_destroy(l);
}

static void sock_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct curl_loop *l = arg;
	int running, flags = (what & EV_READ ? CURL_CSELECT_IN : 0) |
			     (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
	curl_multi_socket_action(l->multi, fd, flags, &running);
	check_multi_info(l);
}

static int socket_cb(CURL *easy, curl_socket_t s, int action, void *userp, void *socketp)
{
	(void)easy;
	struct curl_loop *l = userp;
	struct curl_loop_sock *ls = socketp;
	if (action == CURL_POLL_REMOVE) {
		if (ls) {
			event_free(ls->ev);
			free(ls);
			curl_multi_assign(l->multi, s, NULL);
		}
		return 0;
	}
	short kind = (short)((action & CURL_POLL_IN ? EV_READ : 0) |
			     (action & CURL_POLL_OUT ? EV_WRITE : 0) | EV_PERSIST);
	if (ls == NULL) {
		ls = xcalloc(1, sizeof(*ls));
		curl_multi_assign(l->multi, s, ls);
	} else {
		event_free(ls->ev);
	}
	ls->ev = event_new(l->base, s, kind, sock_event_cb, l);
	event_add(ls->ev, NULL);
	return 0;
}

static void timer_event_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct curl_loop *l = arg;
	int running;
	curl_multi_socket_action(l->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_multi_info(l);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	(void)multi;
	struct curl_loop *l = userp;
	if (timeout_ms < 0) {
		evtimer_del(l->timer);
		return 0;
	}
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
	evtimer_add(l->timer, &tv);
	return 0;
}

struct curl_loop *curl_loop_new(struct event_base *base, curl_loop_done_cb done, void *arg)
{
	struct curl_loop *l = xcalloc(1, sizeof(*l));
	l->base = base;
	l->done = done;
	l->arg = arg;
	l->multi = curl_multi_init();
	if (l->multi == NULL)
		abort();
	l->timer = evtimer_new(base, timer_event_cb, l);
	curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
	curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);
	return l;
}

void curl_loop_free(struct curl_loop *l)
{
	if (l == NULL)
		return;
	if (l->dispatching) {
		l->dead = true; /* check_multi_info frees it when the owner returns */
		return;
	}
	curl_loop_destroy(l);
}

int curl_loop_add(struct curl_loop *l, CURL *easy)
{
	return curl_multi_add_handle(l->multi, easy) == CURLM_OK ? 0 : -1;
}

void curl_loop_remove(struct curl_loop *l, CURL *easy)
{
	curl_multi_remove_handle(l->multi, easy);
}

CURLcode curl_loop_http_only(CURL *easy)
{
	CURLcode rc = CURLE_OK;
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the string forms */
	rc |= curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
	rc |= curl_easy_setopt(easy, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
	rc |= curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS,
			       (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	rc |= curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	return rc;
}
