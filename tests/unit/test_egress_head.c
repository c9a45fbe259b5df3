/* test_egress_head.c: the egress proxy's strict request parsing (finding 8). */
#include <stdlib.h>

#include "egress_head.h"
#include "unit.h"

struct parsed {
	int rc, status;
	size_t used;
	char why[512];
	struct egress_head *h;
};

/* Feed text in pieces of step bytes (0: all at once). */
static struct parsed feed_n(const char *text, size_t len, size_t step)
{
	struct parsed p = {.h = egress_head_new(), .status = 0};
	size_t off = 0;
	do {
		size_t n = step ? (len - off < step ? len - off : step) : len - off;
		size_t used = 0;
		struct err *e = NULL;
		p.rc = egress_head_feed(p.h, text + off, n, &used, &p.status, &e);
		if (e) {
			snprintf(p.why, sizeof(p.why), "%s", e->message);
			err_free(e);
		}
		off += used;
		p.used = off;
	} while (p.rc == EGRESS_HEAD_MORE && off < len);
	return p;
}

static struct parsed feed(const char *text, size_t step)
{
	return feed_n(text, strlen(text), step);
}

static void refused_n(const char *text, size_t len, int status, const char *why)
{
	for (size_t step = 0; step <= 1; step++) {
		struct parsed p = feed_n(text, len, step);
		if (p.rc != EGRESS_HEAD_ERROR || p.status != status || !strstr(p.why, why))
			fprintf(stderr, "  [%.60s] step %zu: rc %d status %d why '%s' (want %s)\n",
				text, step, p.rc, p.status, p.why, why);
		CHECK(p.rc == EGRESS_HEAD_ERROR && p.status == status && strstr(p.why, why));
		egress_head_free(p.h);
	}
}

static void refused(const char *text, int status, const char *why)
{
	refused_n(text, strlen(text), status, why);
}

TEST(egress_head_rebuilds_a_plain_request)
{
	const char *req = "GET http://Allowed.Test:8080/a/b?c=d HTTP/1.1\r\n"
			  "Host: allowed.test:8080\r\n"
			  "User-Agent: t\r\n"
			  "Connection: keep-alive, X-Hop\r\n"
			  "X-Hop: 1\r\n"
			  "Keep-Alive: 5\r\n"
			  "Proxy-Authorization: secret\r\n"
			  "Upgrade: websocket\r\n"
			  "TE: trailers\r\n"
			  "Accept: */*  \r\n"
			  "\r\n";
	for (size_t step = 0; step <= 1; step++) {
		struct parsed p = feed(req, step);
		CHECK(p.rc == EGRESS_HEAD_DONE && p.used == strlen(req));
		CHECK(!egress_head_is_connect(p.h));
		CHECK_STR(egress_head_host(p.h), "allowed.test");
		CHECK(egress_head_port(p.h) == 8080);
		size_t len;
		const char *up = egress_head_upstream(p.h, &len);
		CHECK_STR(up, "GET /a/b?c=d HTTP/1.1\r\n"
			      "Host: allowed.test:8080\r\n"
			      "User-Agent: t\r\n"
			      "Accept: */*\r\n"
			      "Connection: close\r\n\r\n");
		CHECK(len == strlen(up));
		/* no body: the request is complete, and what follows is not ours */
		size_t used = 99;
		struct err *e = NULL;
		CHECK(egress_head_body(p.h, "GET / HTTP/1.1\r\n\r\n", 18, &used, NULL, NULL, &e) ==
		      EGRESS_HEAD_DONE);
		CHECK(used == 0);
		egress_head_free(p.h);
	}
	struct parsed p = feed("GET http://a.test HTTP/1.0\r\n\r\n", 0);
	CHECK(p.rc == EGRESS_HEAD_DONE);
	size_t len;
	CHECK_STR(egress_head_upstream(p.h, &len),
		  "GET / HTTP/1.0\r\nHost: a.test\r\nConnection: close\r\n\r\n");
	egress_head_free(p.h);
	p = feed("GET http://[::1]:81?x HTTP/1.1\r\nHost: [::1]:81\r\n\r\n", 0);
	CHECK(p.rc == EGRESS_HEAD_DONE && egress_head_port(p.h) == 81);
	CHECK_STR(egress_head_upstream(p.h, &len),
		  "GET /?x HTTP/1.1\r\nHost: [::1]:81\r\nConnection: close\r\n\r\n");
	egress_head_free(p.h);
}

TEST(egress_head_connect)
{
	struct parsed p = feed("CONNECT a.test:443 HTTP/1.0\r\n\r\n\x16\x03\x01", 0);
	CHECK(p.rc == EGRESS_HEAD_DONE && p.used == 31); /* the TLS bytes are tunnel data */
	CHECK(egress_head_is_connect(p.h));
	CHECK_STR(egress_head_host(p.h), "a.test");
	CHECK(egress_head_port(p.h) == 443);
	egress_head_free(p.h);
	p = feed("CONNECT a.test:8443 HTTP/1.1\r\nHost: a.test:8443\r\n\r\n", 0);
	CHECK(p.rc == EGRESS_HEAD_DONE && egress_head_port(p.h) == 8443);
	egress_head_free(p.h);
	p = feed("CONNECT a.test:8443 HTTP/1.1\r\nHost: a.test\r\n\r\n", 0);
	CHECK(p.rc == EGRESS_HEAD_DONE); /* a Host without port is the target's port */
	egress_head_free(p.h);
	refused("CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", 400, "does not match");
	refused("CONNECT a.test:99999 HTTP/1.1\r\n\r\n", 400, "bad port");
}

TEST(egress_head_refuses_ambiguous_heads)
{
	refused("GET http://a.test/ HTTP/1.1\nHost: a.test\n\n", 400, "bare LF");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\nConnection: keep-alive\r\n\r\n", 400,
		"bare LF");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: a\rb\r\n\r\n", 400,
		"CR without LF");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nConnection : close\r\n\r\n", 400,
		"malformed request head");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: a\r\n b\r\n\r\n", 400,
		"obs-fold");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", 400,
		"more than one Host");
	refused("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n"
		"Content-Length: 1\r\n\r\nx",
		400, "");
	refused("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n"
		"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		400, "");
	refused(
	    "POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip, chunked\r\n"
	    "\r\n",
	    400, "Transfer-Encoding other than chunked");
	refused("POST http://a.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
		"HTTP/1.0");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", 400, "does not match");
	refused("GET http://a.test:8080/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "does not match");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test:81\r\n\r\n", 400, "does not match");
	refused("GET http://a.test/ HTTP/1.1\r\n\r\n", 400, "needs a Host");
	refused("GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "only CONNECT");
	refused("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "only CONNECT");
	refused("GET http://u@a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "user info");
	refused("GET http://a.test/#x HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "");
	refused("GET http://a.test/ HTTP/2.0\r\nHost: a.test\r\n\r\n", 400,
		"HTTP/1.0 and HTTP/1.1");
	refused("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, "");
	refused("\r\nGET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "empty line");
	refused(" GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "whitespace");
	refused_n("GET http://a.test/ HTTP/1.1\r\nHost: a.t\0st\r\n\r\n", 41, 400, "NUL");
	refused_n("\x00\x01\x02 not http\r\n\r\n", 18, 400, "NUL");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: \x01\r\n\r\n", 400, "");
}

TEST(egress_head_caps)
{
	size_t n = 20000;
	char *big = malloc(n + 64);
	strcpy(big, "GET http://a.test/ HTTP/1.1\r\nX-A: ");
	size_t l = strlen(big);
	memset(big + l, 'a', n - l);
	strcpy(big + n, "\r\n\r\n");
	refused(big, 431, "larger than");
	strcpy(big, "GET http://a.test/");
	l = strlen(big);
	memset(big + l, 'a', 9000);
	strcpy(big + l + 9000, " HTTP/1.1\r\n\r\n");
	refused(big, 414, "request target longer");
	/* a head arriving one byte at a time up to the cap is still refused at it */
	char *many = malloc(EGRESS_HEAD_MAX + 64);
	strcpy(many, "GET http://a.test/ HTTP/1.1\r\n");
	l = strlen(many);
	while (l + 8 < EGRESS_HEAD_MAX + 32) {
		memcpy(many + l, "X: 1\r\n", 6);
		l += 6;
	}
	strcpy(many + l, "\r\n");
	struct parsed p = feed(many, 7);
	CHECK(p.rc == EGRESS_HEAD_ERROR && p.status == 431);
	egress_head_free(p.h);
	free(many);
	free(big);
}

struct sink {
	char data[1024];
	size_t len;
};

static void sink_out(const char *data, size_t len, void *arg)
{
	struct sink *s = arg;
	if (len <= sizeof(s->data) - s->len) {
		memcpy(s->data + s->len, data, len);
		s->len += len;
	}
}

/* Feed a body in pieces; returns the result of the last call. */
static int body(struct egress_head *h, const char *text, size_t step, struct sink *s, size_t *total)
{
	size_t len = strlen(text), off = 0;
	int rc;
	do {
		size_t n = step ? (len - off < step ? len - off : step) : len - off;
		size_t used = 0;
		struct err *e = NULL;
		rc = egress_head_body(h, text + off, n, &used, sink_out, s, &e);
		err_free(e);
		off += used;
	} while (rc == EGRESS_HEAD_MORE && off < len);
	*total = off;
	return rc;
}

TEST(egress_head_forwards_one_request_and_its_body_only)
{
	for (size_t step = 0; step <= 2; step++) {
		struct parsed p = feed(
		    "POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\n", 0);
		CHECK(p.rc == EGRESS_HEAD_DONE);
		size_t len;
		CHECK(strstr(egress_head_upstream(p.h, &len), "\r\nContent-Length: 5\r\n") != NULL);
		struct sink s = {0};
		size_t used;
		CHECK(body(p.h, "helloGET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", step,
			   &s, &used) == EGRESS_HEAD_DONE);
		CHECK(used == 5 && s.len == 5 && memcmp(s.data, "hello", 5) == 0);
		egress_head_free(p.h);

		p = feed("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\n"
			 "Transfer-Encoding: chunked\r\n\r\n",
			 0);
		CHECK(p.rc == EGRESS_HEAD_DONE);
		CHECK(
		    strstr(egress_head_upstream(p.h, &len), "\r\nTransfer-Encoding: chunked\r\n"));
		memset(&s, 0, sizeof(s));
		const char *chunked = "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n";
		char text[256];
		snprintf(text, sizeof(text), "%sGET /smuggled HTTP/1.1\r\n\r\n", chunked);
		CHECK(body(p.h, text, step, &s, &used) == EGRESS_HEAD_DONE);
		CHECK(used == strlen(chunked));
		/* re-chunked: no extension, no trailer; the same bytes */
		s.data[s.len] = '\0';
		if (step == 0)
			CHECK_STR(s.data, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
		CHECK(strstr(s.data, "ext") == NULL && strstr(s.data, "Trailer") == NULL &&
		      strstr(s.data, "smuggled") == NULL);
		egress_head_free(p.h);
	}
	/* a malformed chunk ends it */
	struct parsed p = feed("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\n"
			       "Transfer-Encoding: chunked\r\n\r\n",
			       0);
	struct sink s = {0};
	size_t used;
	CHECK(body(p.h, "3\nabc\n0\n\n", 0, &s, &used) == EGRESS_HEAD_ERROR);
	egress_head_free(p.h);
	/* Content-Length: 0 is a complete request */
	p = feed("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\n\r\n", 0);
	size_t len;
	CHECK(strstr(egress_head_upstream(p.h, &len), "Content-Length: 0\r\n"));
	CHECK(body(p.h, "GET / HTTP/1.1\r\n\r\n", 0, &s, &used) == EGRESS_HEAD_DONE && used == 0);
	egress_head_free(p.h);
}

static int response(struct egress_head *h, const char *text, size_t step, size_t *total)
{
	size_t len = strlen(text), off = 0;
	int rc;
	do {
		size_t n = step ? (len - off < step ? len - off : step) : len - off, used = 0;
		rc = egress_head_response(h, text + off, n, &used);
		off += used;
	} while (rc == EGRESS_HEAD_MORE && off < len);
	*total = off;
	return rc;
}

TEST(egress_head_sees_where_the_answer_ends)
{
	const char *get = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n";
	for (size_t step = 0; step <= 1; step++) {
		size_t used;
		struct parsed p = feed(get, 0);
		const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n";
		CHECK(response(p.h, r, step, &used) == EGRESS_HEAD_DONE && used == 40);
		egress_head_free(p.h);

		p = feed(get, 0);
		r = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: "
		    "chunked\r\n\r\n"
		    "2\r\nok\r\n0\r\n\r\nextra";
		CHECK(response(p.h, r, step, &used) == EGRESS_HEAD_DONE && used == strlen(r) - 5);
		egress_head_free(p.h);

		p = feed(get, 0); /* a body until EOF never ends here */
		r = "HTTP/1.0 200 OK\r\n\r\nall of it";
		CHECK(response(p.h, r, step, &used) == EGRESS_HEAD_MORE && used == strlen(r));
		egress_head_free(p.h);

		p = feed("HEAD http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 0);
		r = "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
		CHECK(response(p.h, r, step, &used) == EGRESS_HEAD_DONE && used == strlen(r));
		egress_head_free(p.h);

		p = feed(get, 0);
		CHECK(response(p.h, "SSH-2.0-not http\r\n", step, &used) == EGRESS_HEAD_ERROR);
		egress_head_free(p.h);
	}
}
