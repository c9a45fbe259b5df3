/* docker.c: the driver's transport: curl multi on the loop (curl_loop.c), talking to
 * dockerd's unix socket; API version negotiation, the liveness ping, calls
 * and their cancellation. The typed calls are in docker_api.c. */
#include "docker.h"
#include "docker_internal.h"

#include <curl/curl.h>
#include <sys/queue.h>
#include <stdio.h>
#include <string.h>

#include "curl_loop.h"
#include "defer.h"
#include "json.h"
#include "log.h"
#include "xalloc.h"

/* Newest API we have been tested against; older engines down to the minimum
 * are spoken to in their own version. */
#define DOCKER_API_MAX_MINOR 43
#define DOCKER_API_MIN_MINOR 40

struct docker_call {
	struct docker *d;
	CURL *easy;
	struct curl_slist *headers;
	char *method, *path, *body;
	size_t blen;
	char *resp;
	size_t resp_len;
	bool overflow;
	docker_raw_cb cb;
	void *ctx;
	void (*free_ctx)(void *ctx);
	bool cancelled;
	long timeout_ms;                /* 0: the default */
	struct docker_call *next;       /* queued before negotiation */
	LIST_ENTRY(docker_call) active; /* in curl's hands */
};

struct docker {
	struct event_base *base;
	struct curl_loop *loop;
	struct event *retry;
	struct event *ping;
	bool pinging;
	char *sock_path;
	char version[16];
	bool negotiating;
	bool reachable;
	struct docker_call *queue, **queue_tail;
	LIST_HEAD(, docker_call) active;
};

static void negotiate(struct docker *d);

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct docker_call *r = userdata;
	size_t n = size * nmemb;
	if (r->resp_len + n > DOCKER_MAX_RESPONSE) {
		r->overflow = true;
		return 0; /* aborts the transfer */
	}
	r->resp = xrealloc(r->resp, r->resp_len + n + 1);
	memcpy(r->resp + r->resp_len, ptr, n);
	r->resp_len += n;
	r->resp[r->resp_len] = '\0';
	return n;
}

static void req_free(struct docker_call *r)
{
	if (r->free_ctx)
		r->free_ctx(r->ctx);
	if (r->easy)
		curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->headers);
	free(r->method);
	free(r->path);
	free(r->body);
	free(r->resp);
	free(r);
}

struct deferred_fail {
	struct docker_call *r;
	char error[256];
};

static void fail_deferred_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct deferred_fail *f = arg;
	struct docker_response resp = {.status = 0, .body = "", .len = 0, .error = f->error};
	f->r->cb(&resp, f->r->cancelled, f->r->ctx);
	req_free(f->r);
	free(f);
}

/* Fail a request through the loop, so the callback never runs inside the
 * call that made the request. */
static void req_fail_later(struct docker_call *r, const char *error)
{
	struct deferred_fail *f = xcalloc(1, sizeof(*f));
	f->r = r;
	snprintf(f->error, sizeof(f->error), "%s", error);
	defer_call(r->d->base, fail_deferred_cb, f);
}

static void req_start(struct docker_call *r, const char *version)
{
	struct docker *d = r->d;
	char url[2048];
	if (version)
		snprintf(url, sizeof(url), "http://docker/v%s%s", version, r->path);
	else
		snprintf(url, sizeof(url), "http://docker%s", r->path);
	r->easy = curl_easy_init();
	if (r->easy == NULL)
		abort();
	curl_easy_setopt(r->easy, CURLOPT_UNIX_SOCKET_PATH, d->sock_path);
	curl_easy_setopt(r->easy, CURLOPT_URL, url);
	curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, r->method);
	curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	/* Lifecycle calls finish in seconds; a hung engine must not hold a
	 * session's create or teardown forever. */
	curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, r->timeout_ms ? r->timeout_ms : 120000L);
	r->headers = curl_slist_append(r->headers, "Content-Type: application/json");
	r->headers = curl_slist_append(r->headers, "Expect:");
	curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
	if (r->body) {
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, (long)r->blen);
	} else if (strcmp(r->method, "POST") == 0) {
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, 0L);
	}
	if (curl_loop_add(d->loop, r->easy) < 0) {
		req_fail_later(r, "curl_multi_add_handle failed");
		return;
	}
	LIST_INSERT_HEAD(&d->active, r, active);
}

/* A transfer ended (curl_loop took it out of the multi already). */
static void transfer_done(CURL *easy, CURLcode res, void *arg)
{
	struct docker *d = arg;
	struct docker_call *r = NULL;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
	LIST_REMOVE(r, active);
	struct docker_response resp = {0};
	char errbuf[256];
	if (res == CURLE_OK) {
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &resp.status);
		resp.body = r->resp ? r->resp : "";
		resp.len = r->resp_len;
		d->reachable = true;
	} else {
		snprintf(errbuf, sizeof(errbuf), "%s",
			 r->overflow ? "response larger than the cap" : curl_easy_strerror(res));
		resp.error = errbuf;
		resp.body = "";
		if (res == CURLE_COULDNT_CONNECT)
			d->reachable = false;
	}
	r->cb(&resp, r->cancelled, r->ctx);
	req_free(r);
}

static void flush_queue(struct docker *d, const char *error)
{
	struct docker_call *q = d->queue;
	d->queue = NULL;
	d->queue_tail = &d->queue;
	while (q) {
		struct docker_call *next = q->next;
		q->next = NULL;
		if (error)
			req_fail_later(q, error);
		else
			req_start(q, d->version);
		q = next;
	}
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	negotiate(arg);
}

static void negotiate_done(const struct docker_response *resp, bool cancelled, void *arg)
{
	(void)cancelled;
	struct docker *d = arg;
	d->negotiating = false;
	struct err *e = NULL;
	yajl_val v = resp->status == 200 ? json_parse(resp->body, resp->len, &e) : NULL;
	const char *api = json_get_str(v, "ApiVersion");
	int major = 0, minor = 0;
	if (api && sscanf(api, "%d.%d", &major, &minor) == 2 && major == 1 &&
	    minor >= DOCKER_API_MIN_MINOR) {
		if (minor > DOCKER_API_MAX_MINOR)
			minor = DOCKER_API_MAX_MINOR;
		snprintf(d->version, sizeof(d->version), "1.%d", minor);
		d->reachable = true;
		log_info("docker: engine at %s speaks API %s; using %s", d->sock_path, api,
			 d->version);
		flush_queue(d, NULL);
	} else {
		char why[256];
		snprintf(why, sizeof(why), "docker engine at %s: %s", d->sock_path,
			 resp->error ? resp->error
			 : api       ? "API version older than 1.40"
				     : "no API version in /version");
		d->reachable = false;
		log_warn("%s; retrying in 1 s", why);
		flush_queue(d, why);
		struct timeval one = {1, 0};
		evtimer_add(d->retry, &one);
	}
	err_free(e);
	if (v)
		yajl_tree_free(v);
}

static void negotiate(struct docker *d)
{
	if (d->negotiating || d->version[0])
		return;
	d->negotiating = true;
	struct docker_call *r = xcalloc(1, sizeof(*r));
	r->d = d;
	r->method = xstrdup("GET");
	r->path = xstrdup("/version");
	r->cb = negotiate_done;
	r->ctx = d;
	req_start(r, NULL);
}

static void ping_done(const struct docker_response *resp, bool cancelled, void *arg)
{
	(void)cancelled;
	struct docker *d = arg;
	d->pinging = false;
	bool was = d->reachable;
	d->reachable = resp->status == 200;
	if (was != d->reachable)
		log_warn("docker: engine %s", d->reachable ? "reachable again" : "unreachable");
}

/* A ping a second keeps /readyz honest while the engine restarts, even
 * when no session is being created. */
static void ping_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct docker *d = arg;
	if (!d->version[0] || d->pinging)
		return;
	d->pinging = true;
	/* An engine that accepts but never answers is down too: 2 s, not 120. */
	struct docker_call *r = xcalloc(1, sizeof(*r));
	r->d = d;
	r->method = xstrdup("GET");
	r->path = xstrdup("/_ping");
	r->timeout_ms = 2000;
	r->cb = ping_done;
	r->ctx = d;
	req_start(r, d->version);
}

struct docker *docker_new(struct event_base *base, const char *sock_path)
{
	struct docker *d = xcalloc(1, sizeof(*d));
	d->base = base;
	d->sock_path = xstrdup(sock_path);
	d->queue_tail = &d->queue;
	LIST_INIT(&d->active);
	d->loop = curl_loop_new(base, transfer_done, d);
	d->retry = evtimer_new(base, retry_cb, d);
	d->ping = event_new(base, -1, EV_PERSIST, ping_cb, d);
	struct timeval one = {1, 0};
	event_add(d->ping, &one);
	negotiate(d);
	return d;
}

void docker_free(struct docker *d)
{
	if (d == NULL)
		return;
	/* Take every handle out before the multi goes, or curl would call our
	 * socket callback on a half-freed client. */
	while (!LIST_EMPTY(&d->active)) {
		struct docker_call *r = LIST_FIRST(&d->active);
		LIST_REMOVE(r, active);
		curl_loop_remove(d->loop, r->easy);
		req_free(r);
	}
	struct docker_call *q = d->queue;
	while (q) {
		struct docker_call *next = q->next;
		req_free(q);
		q = next;
	}
	curl_loop_free(d->loop);
	event_free(d->retry);
	event_free(d->ping);
	free(d->sock_path);
	free(d);
}

struct docker_call *docker_call_start(struct docker *d, const char *method, const char *path,
				      const char *body, size_t blen, docker_raw_cb on_response,
				      void *ctx, void (*free_ctx)(void *ctx))
{
	struct docker_call *r = xcalloc(1, sizeof(*r));
	r->d = d;
	r->method = xstrdup(method);
	r->path = xstrdup(path);
	if (body) {
		r->body = xmalloc(blen + 1);
		memcpy(r->body, body, blen);
		r->body[blen] = '\0';
		r->blen = blen;
	}
	r->cb = on_response;
	r->ctx = ctx;
	r->free_ctx = free_ctx;
	if (d->version[0]) {
		req_start(r, d->version);
		return r;
	}
	*d->queue_tail = r;
	d->queue_tail = &r->next;
	negotiate(d);
	return r;
}

/* The transfer goes on: the engine may already be acting on it, and what
 * it made may have to be undone (docker_api.c sees cancelled). */
void docker_cancel(struct docker_call *c)
{
	if (c)
		c->cancelled = true;
}

size_t docker_pending(const struct docker *d)
{
	size_t n = 0;
	const struct docker_call *r;
	LIST_FOREACH (r, &d->active, active)
		n++;
	for (r = d->queue; r; r = r->next)
		n++;
	return n;
}

bool docker_reachable(const struct docker *d)
{
	return d->reachable && d->version[0];
}

const char *docker_api_version(const struct docker *d)
{
	return d->version[0] ? d->version : NULL;
}
