/* test_httpc.c: the outgoing HTTP client against a small HTTP server on
 * 127.0.0.1 in the same loop: an answer and its status, the headers and
 * body sent, the answer cap, the deadline, a refused port, a URL that is
 * not http(s), cancellation, and that every callback runs once and never
 * inside httpc_post. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpc.h"
#include "unit.h"

enum srv_mode { SRV_ANSWER, SRV_BIG, SRV_SILENT, SRV_REDIRECT };

struct srv {
	struct event_base *base;
	struct evconnlistener *lis;
	int port;
	enum srv_mode mode;
	char request[8192];
	size_t request_len;
	struct bufferevent *conns[8];
};

static void srv_read_cb(struct bufferevent *bev, void *arg)
{
	struct srv *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);
	if (s->request_len + n >= sizeof(s->request))
		n = sizeof(s->request) - 1 - s->request_len;
	evbuffer_remove(in, s->request + s->request_len, n);
	s->request_len += n;
	s->request[s->request_len] = '\0';
	char *head_end = strstr(s->request, "\r\n\r\n");
	if (head_end == NULL)
		return;
	const char *cl = strcasestr(s->request, "content-length:");
	size_t want = cl ? (size_t)atol(cl + 15) : 0;
	if ((size_t)(s->request + s->request_len - (head_end + 4)) < want)
		return;
	struct evbuffer *out = bufferevent_get_output(bev);
	switch (s->mode) {
	case SRV_ANSWER:
		evbuffer_add_printf(out, "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n"
					 "Connection: close\r\n\r\nhello");
		break;
	case SRV_BIG:
		evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n"
					 "Connection: close\r\n\r\n");
		for (int i = 0; i < 1000; i++)
			evbuffer_add_printf(out, "%0100d", i);
		break;
	case SRV_REDIRECT:
		evbuffer_add_printf(out,
				    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%d/x\r\n"
				    "Content-Length: 0\r\nConnection: close\r\n\r\n",
				    s->port);
		break;
	case SRV_SILENT: break;
	}
}

static void srv_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)what;
	struct srv *s = arg;
	for (size_t i = 0; i < 8; i++)
		if (s->conns[i] == bev)
			s->conns[i] = NULL;
	bufferevent_free(bev);
}

static void srv_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
			  int socklen, void *arg)
{
	(void)l;
	(void)sa;
	(void)socklen;
	struct srv *s = arg;
	struct bufferevent *bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(bev, srv_read_cb, NULL, srv_event_cb, s);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	for (size_t i = 0; i < 8; i++)
		if (s->conns[i] == NULL) {
			s->conns[i] = bev;
			return;
		}
	bufferevent_free(bev);
}

static void srv_start(struct srv *s, struct event_base *base, enum srv_mode mode)
{
	memset(s, 0, sizeof(*s));
	s->base = base;
	s->mode = mode;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	s->lis = evconnlistener_new_bind(base, srv_accept_cb, s,
					 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
					 (struct sockaddr *)&sin, sizeof(sin));
	struct sockaddr_in got;
	socklen_t gl = sizeof(got);
	getsockname(evconnlistener_get_fd(s->lis), (struct sockaddr *)&got, &gl);
	s->port = ntohs(got.sin_port);
}

static void srv_stop(struct srv *s)
{
	for (size_t i = 0; i < 8; i++)
		if (s->conns[i])
			bufferevent_free(s->conns[i]);
	evconnlistener_free(s->lis);
}

/* A port on 127.0.0.1 that nothing listens on: bound, then closed. */
static int refused_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bind(fd, (struct sockaddr *)&sin, sizeof(sin));
	socklen_t l = sizeof(sin);
	getsockname(fd, (struct sockaddr *)&sin, &l);
	close(fd);
	return ntohs(sin.sin_port);
}

struct outcome {
	int runs;
	bool inside;
	bool ran_inside;
	long status;
	char body[256];
	size_t len;
	char error[256];
	struct event_base *base;
};

static void done_cb(const struct httpc_response *r, void *arg)
{
	struct outcome *o = arg;
	o->runs++;
	if (o->inside)
		o->ran_inside = true;
	o->status = r->status;
	o->len = r->len;
	snprintf(o->body, sizeof(o->body), "%s", r->body ? r->body : "(null)");
	snprintf(o->error, sizeof(o->error), "%s", r->error ? r->error->message : "");
	CHECK(r->elapsed_ms >= 0);
	event_base_loopbreak(o->base);
}

static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

/* Run the loop until the callback ran (bounded by a 10 s watchdog). */
static void run_until_done(struct event_base *base, struct outcome *o)
{
	struct event *dog = evtimer_new(base, watchdog_cb, base);
	struct timeval ten = {10, 0};
	evtimer_add(dog, &ten);
	while (o->runs == 0 && evtimer_pending(dog, NULL))
		event_base_loop(base, EVLOOP_ONCE);
	event_free(dog);
}

static struct httpc_call *post(struct httpc *h, const char *url, struct outcome *o,
			       int64_t timeout_ms, size_t cap, struct err **e)
{
	const char *hdrs[] = {"Authorization: Bearer sekrit", "Content-Type: application/json"};
	o->inside = true;
	struct httpc_call *c =
	    httpc_post(h, url, hdrs, 2, "{\"a\":1}", 7, timeout_ms, cap, done_cb, o, e);
	o->inside = false;
	return c;
}

/* One call to a server in mode (port 0: a refused port), run to its end;
 * what the server received is in *request when given. */
static void one_call(enum srv_mode mode, bool refused, int64_t timeout_ms, size_t cap,
		     struct outcome *o, char *request, size_t request_size)
{
	struct event_base *base = event_base_new();
	struct srv s;
	srv_start(&s, base, mode);
	struct httpc *h = httpc_new(base);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/x", refused ? refused_port() : s.port);
	*o = (struct outcome){.base = base};
	CHECK(post(h, url, o, timeout_ms, cap, NULL) != NULL);
	CHECK(httpc_pending(h) == 1 && o->runs == 0);
	run_until_done(base, o);
	CHECK(o->runs == 1 && !o->ran_inside);
	CHECK(httpc_pending(h) == 0);
	if (request)
		snprintf(request, request_size, "%s", s.request);
	httpc_free(h);
	srv_stop(&s);
	event_base_free(base);
}

TEST(httpc_posts_headers_and_body_and_reads_the_answer)
{
	struct outcome o;
	char req[8192];
	one_call(SRV_ANSWER, false, 5000, 1024, &o, req, sizeof(req));
	CHECK(o.status == 201);
	CHECK_STR(o.body, "hello");
	CHECK(o.len == 5);
	CHECK_STR(o.error, "");
	CHECK(strncmp(req, "POST /v1/x HTTP/1.1\r\n", 21) == 0);
	CHECK(strstr(req, "\r\nAuthorization: Bearer sekrit\r\n") != NULL);
	CHECK(strstr(req, "\r\nContent-Type: application/json\r\n") != NULL);
	CHECK(strstr(req, "\r\n\r\n{\"a\":1}") != NULL);
}

/* The ways a call ends without a 2xx: each has its status, or an error
 * that says which way it failed. */
TEST(httpc_cap_redirect_deadline_and_refusal)
{
	static const struct {
		enum srv_mode mode;
		bool refused;
		int64_t timeout_ms;
		long status;
		const char *error;
	} cases[] = {
	    {SRV_BIG, false, 5000, 0, "larger than the cap of 4096 bytes"},
	    {SRV_REDIRECT, false, 5000, 302, ""}, /* not followed */
	    {SRV_SILENT, false, 200, 0, "deadline of 200 ms"},
	    {SRV_ANSWER, true, 5000, 0, "connection refused"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct outcome o;
		one_call(cases[i].mode, cases[i].refused, cases[i].timeout_ms, 4096, &o, NULL, 0);
		CHECK(o.status == cases[i].status);
		CHECK(strstr(o.error, cases[i].error) != NULL);
		if (!cases[i].error[0])
			CHECK_STR(o.error, "");
	}
}

TEST(httpc_refuses_urls_that_are_not_http)
{
	struct event_base *base = event_base_new();
	struct httpc *h = httpc_new(base);
	const char *bad[] = {"file:///etc/passwd",
			     "gopher://127.0.0.1/",
			     "ftp://127.0.0.1/",
			     "127.0.0.1:80",
			     "",
			     "dict://127.0.0.1:6379/info"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct outcome o = {.base = base};
		struct err *e = NULL;
		CHECK(post(h, bad[i], &o, 5000, 4096, &e) == NULL);
		CHECK(e != NULL && e->code == ERR_BAD_REQUEST);
		err_free(e);
		CHECK(o.runs == 0);
	}
	CHECK(httpc_pending(h) == 0);
	httpc_free(h);
	event_base_free(base);
}

TEST(httpc_cancel_and_free_drop_calls_without_callbacks)
{
	struct event_base *base = event_base_new();
	struct srv s;
	srv_start(&s, base, SRV_SILENT);
	struct httpc *h = httpc_new(base);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", s.port);
	struct outcome o1 = {.base = base}, o2 = {.base = base};
	struct httpc_call *c1 = post(h, url, &o1, 5000, 4096, NULL);
	CHECK(post(h, url, &o2, 5000, 4096, NULL) != NULL);
	CHECK(httpc_pending(h) == 2);
	event_base_loop(base, EVLOOP_NONBLOCK);
	httpc_cancel(c1);
	CHECK(httpc_pending(h) == 1);
	event_base_loop(base, EVLOOP_NONBLOCK);
	httpc_free(h);
	event_base_loop(base, EVLOOP_NONBLOCK);
	CHECK(o1.runs == 0 && o2.runs == 0);
	httpc_free(NULL);
	httpc_cancel(NULL);
	srv_stop(&s);
	event_base_free(base);
}
