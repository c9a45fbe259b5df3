/* httpc.c: outgoing HTTP POSTs to the daemon's own peers (httpc.h), on
 * the loop through curl_loop.c.
 *
 * Where a call may go is fixed before it starts: the URL must be http or
 * https, redirects are not followed, and the environment's proxy settings
 * (http_proxy, ALL_PROXY) are ignored, since an operator's proxy variables
 * for other tools must not reroute the daemon's calls. Every call has a
 * deadline (curl's whole-transfer timeout) and a cap on what it keeps. */
#include "httpc.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include "clock.h"
#include "curl_loop.h"
#include "defer.h"
#include "xalloc.h"

struct httpc_call {
	struct httpc *h;
	CURL *easy;
	struct curl_slist *headers;
	char *body;
	char *resp;
	size_t resp_len, max_response;
	bool overflow;
	int64_t timeout_ms, started_ms;
	struct err *early;   /* a failure found at the start, delivered from the loop */
	struct event *defer; /* ... by this timer */
	httpc_done_cb cb;
	void *arg;
	LIST_ENTRY(httpc_call) link;
};

struct httpc {
	struct event_base *base;
	struct curl_loop *loop;
	size_t pending;
	LIST_HEAD(, httpc_call) calls;
};

static void call_free(struct httpc_call *c)
{
	if (c->easy)
		curl_easy_cleanup(c->easy);
	curl_slist_free_all(c->headers);
	if (c->defer)
		event_free(c->defer);
	err_free(c->early);
	free(c->body);
	free(c->resp);
	free(c);
}

/* Unlink c from its client and run its callback with r, then free it. c
 * is off the list first, so the callback may free the client. */
static void call_finish(struct httpc_call *c, struct httpc_response *r)
{
	LIST_REMOVE(c, link);
	c->h->pending--;
	r->elapsed_ms = clock_mono_ms() - c->started_ms;
	c->cb(r, c->arg);
	call_free(c);
}

static void transfer_done(CURL *easy, CURLcode res, void *arg)
{
	(void)arg;
	struct httpc_call *c = NULL;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&c);
	struct httpc_response r = {.body = "", .len = 0};
	AUTOERR struct err *e = NULL;
	if (res == CURLE_OK) {
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r.status);
		r.body = c->resp ? c->resp : "";
		r.len = c->resp_len;
	} else if (c->overflow) {
		e = err_new(ERR_UNAVAILABLE, "the answer is larger than the cap of %zu bytes",
			    c->max_response);
	} else if (res == CURLE_OPERATION_TIMEDOUT) {
		e = err_new(ERR_UNAVAILABLE, "no answer within the deadline of %lld ms",
			    (long long)c->timeout_ms);
	} else if (res == CURLE_COULDNT_CONNECT) {
		e = err_new(ERR_UNAVAILABLE, "unreachable (connection refused)");
	} else if (res == CURLE_COULDNT_RESOLVE_HOST) {
		e = err_new(ERR_UNAVAILABLE, "unreachable (its host name does not resolve)");
	} else {
		e = err_new(ERR_UNAVAILABLE, "the connection failed (%s)", curl_easy_strerror(res));
	}
	r.error = e;
	if (e)
		r.status = 0;
	call_finish(c, &r);
}

static void early_fail_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct httpc_call *c = arg;
	struct httpc_response r = {.error = c->early, .body = ""};
	call_finish(c, &r);
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct httpc_call *c = userdata;
	size_t n = size * nmemb;
	if (n > c->max_response - c->resp_len) {
		c->overflow = true;
		return 0; /* aborts the transfer: the cap is enforced as it arrives */
	}
	c->resp = xrealloc(c->resp, c->resp_len + n + 1);
	memcpy(c->resp + c->resp_len, ptr, n);
	c->resp_len += n;
	c->resp[c->resp_len] = '\0';
	return n;
}

struct httpc *httpc_new(struct event_base *base)
{
	struct httpc *h = xmalloc(sizeof(*h));
	*h = (struct httpc){.base = base, .loop = curl_loop_new(base, transfer_done, h)};
	LIST_INIT(&h->calls);
	return h;
}

/* Take c out of its client and curl, and free it, without its callback. */
static void call_drop(struct httpc_call *c)
{
	LIST_REMOVE(c, link);
	c->h->pending--;
	if (!c->early)
		curl_loop_remove(c->h->loop, c->easy);
	call_free(c);
}

void httpc_free(struct httpc *h)
{
	if (h == NULL)
		return;
	struct httpc_call *c;
	while ((c = LIST_FIRST(&h->calls)) != NULL)
		call_drop(c);
	curl_loop_free(h->loop);
	free(h);
}

static bool url_is_http(const char *url)
{
	return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

struct httpc_call *httpc_post(struct httpc *h, const char *url, const char *const *headers,
			      size_t n_headers, const char *body, size_t len, int64_t timeout_ms,
			      size_t max_response, httpc_done_cb cb, void *arg, struct err **errp)
{
	if (url == NULL || !url_is_http(url)) {
		err_set(errp, ERR_BAD_REQUEST, "not an http:// or https:// URL");
		return NULL;
	}
	if (timeout_ms <= 0) {
		err_set(errp, ERR_INTERNAL, "httpc: a call needs a deadline");
		return NULL;
	}
	struct httpc_call *c = xmalloc(sizeof(*c));
	*c = (struct httpc_call){.h = h,
				 .cb = cb,
				 .arg = arg,
				 .max_response = max_response,
				 .timeout_ms = timeout_ms,
				 .started_ms = clock_mono_ms(),
				 .body = xmalloc(len + 1)};
	if (len)
		memcpy(c->body, body, len);
	c->body[len] = '\0';
	c->easy = curl_easy_init();
	if (c->easy == NULL)
		abort();
	for (size_t i = 0; i < n_headers; i++)
		c->headers = curl_slist_append(c->headers, headers[i]);
	/* No "Expect: 100-continue" wait on a large body. */
	c->headers = curl_slist_append(c->headers, "Expect:");
	CURL *e = c->easy;
	CURLcode rc = CURLE_OK;
	rc |= curl_easy_setopt(e, CURLOPT_URL, url);
	rc |= curl_loop_http_only(e);
	rc |= curl_easy_setopt(e, CURLOPT_PROXY, "");
	rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
	rc |= curl_easy_setopt(e, CURLOPT_POST, 1L);
	rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
	rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, c);
	LIST_INSERT_HEAD(&h->calls, c, link);
	h->pending++;
	if (rc != CURLE_OK)
		c->early = err_new(ERR_INTERNAL, "httpc: curl refused the call's options");
	else if (curl_loop_add(h->loop, e) < 0)
		c->early = err_new(ERR_INTERNAL, "httpc: curl refused the call");
	if (c->early) {
		/* The answer is known now, but it is given from the loop. */
		c->defer = evtimer_new(h->base, early_fail_cb, c);
		defer_event(c->defer);
	}
	return c;
}

void httpc_cancel(struct httpc_call *c)
{
	if (c)
		call_drop(c);
}

size_t httpc_pending(const struct httpc *h)
{
	return h->pending;
}
