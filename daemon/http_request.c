/* http_request.c: an API request read with llhttp: the head, then the body,
 * buffered with a cap or streamed with backpressure.
 *
 * llhttp is built in its strict mode (the Makefile) with every lenient flag
 * left off: headers keep their token and value checks (no control bytes),
 * Content-Length with Transfer-Encoding stays an error, nothing is parsed
 * after a message that ends the connection, Transfer-Encoding must end in
 * chunked, and only real HTTP versions pass. What strict llhttp 8.1 still
 * takes (bare LF line ends, obs-fold) is refused by http_head_scan.c first,
 * and what it leaves to us (one framing header of each kind, no coding but
 * chunked, HTTP/1.x, a path as target) by on_headers_complete. Two readings
 * of one request are how requests are smuggled past a front proxy.
 *
 * llhttp is paused after the head and after each piece of body, so the
 * handler and the body's consumer are called from here, never from inside
 * llhttp_execute: they may pause, answer or drop the request as they like. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <llhttp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "http_head_scan.h"
#include "clock.h"
#include "defer.h"
#include "http_internal.h"
#include "log.h"
#include "xalloc.h"

#define URL_MAX 8191
/* A chunk's extensions are read past, never kept; without a cap a client
 * could send them forever without a byte of body. */
#define CHUNK_EXT_MAX 1024
#define CHUNK_SIZE_MAX (1ull << 40)

struct span {
	uint32_t off, len; /* in the parser's store (< HTTP_MAX_HEADER_BYTES) */
};

struct http_parser {
	llhttp_t ll;
	struct http_head_scan scan;
	/* The head as llhttp reports it, grown as it comes (thousands of idle
	 * connections must not hold a whole head's worth each): the target,
	 * then header names and values. */
	char *store;
	size_t store_len, store_cap;
	struct span url;
	struct span name[HTTP_MAX_HEADERS], value[HTTP_MAX_HEADERS];
	int n_hdr;
	bool in_field, in_value;
	bool head_done;
	/* set by a callback that refused the request */
	int fail_status;
	char why[192];
	/* the body: a piece llhttp paused at, or the message's end */
	const char *piece;
	size_t piece_len;
	bool msg_done;
	size_t ext_bytes, trailer_bytes;
};

static int fail(struct http_parser *p, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct http_parser *p, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	p->fail_status = status;
	return -1;
}

static void store_add(struct http_parser *p, const char *at, size_t len)
{
	if (p->store_len + len + 1 > p->store_cap) {
		size_t cap = p->store_cap ? p->store_cap : 256;
		while (cap < p->store_len + len + 1)
			cap *= 2;
		p->store = xrealloc(p->store, cap);
		p->store_cap = cap;
	}
	memcpy(p->store + p->store_len, at, len);
	p->store_len += len;
}

static bool span_is(const struct http_parser *p, struct span s, const char *text)
{
	return s.len == strlen(text) && strncasecmp(p->store + s.off, text, s.len) == 0;
}

/* ---- llhttp callbacks ---- */

static int on_url(llhttp_t *ll, const char *at, size_t len)
{
	struct http_parser *p = ll->data;
	if (len > URL_MAX - p->url.len)
		return fail(p, 400, "request target longer than %d bytes", URL_MAX);
	if (p->url.len == 0)
		p->url.off = (uint32_t)p->store_len;
	store_add(p, at, len);
	p->url.len += (uint32_t)len;
	return 0;
}

/* The head's size is capped by the scan; a trailer section's here. */
static int trailer_bytes(struct http_parser *p, size_t len)
{
	p->trailer_bytes += len;
	if (p->trailer_bytes > HTTP_MAX_HEADER_BYTES)
		return fail(p, 400, "chunked body trailers larger than %d bytes",
			    HTTP_MAX_HEADER_BYTES);
	return 0;
}

static int on_header_field(llhttp_t *ll, const char *at, size_t len)
{
	struct http_parser *p = ll->data;
	if (p->head_done)
		return trailer_bytes(p, len);
	if (!p->in_field) {
		if (p->n_hdr >= HTTP_MAX_HEADERS)
			return fail(p, 431, "more than %d request header fields", HTTP_MAX_HEADERS);
		p->name[p->n_hdr] = (struct span){.off = (uint32_t)p->store_len};
		p->value[p->n_hdr] = (struct span){.off = (uint32_t)p->store_len};
		p->n_hdr++;
		p->in_field = true;
	}
	store_add(p, at, len);
	p->name[p->n_hdr - 1].len += (uint32_t)len;
	return 0;
}

static int on_header_field_complete(llhttp_t *ll)
{
	struct http_parser *p = ll->data;
	if (p->head_done)
		return 0;
	p->in_field = false;
	if (p->name[p->n_hdr - 1].len == 0)
		return fail(p, 400, "a header field without a name");
	return 0;
}

static int on_header_value(llhttp_t *ll, const char *at, size_t len)
{
	struct http_parser *p = ll->data;
	if (p->head_done)
		return trailer_bytes(p, len);
	struct span *v = &p->value[p->n_hdr - 1];
	if (!p->in_value) {
		v->off = (uint32_t)p->store_len;
		p->in_value = true;
	}
	store_add(p, at, len);
	v->len += (uint32_t)len;
	return 0;
}

static int on_header_value_complete(llhttp_t *ll)
{
	struct http_parser *p = ll->data;
	if (p->head_done)
		return 0;
	struct span *v = &p->value[p->n_hdr - 1];
	if (!p->in_value)
		v->off = (uint32_t)p->store_len; /* an empty value */
	p->in_value = false;
	/* llhttp skips the whitespace before a value, not after it. */
	while (v->len > 0 &&
	       (p->store[v->off + v->len - 1] == ' ' || p->store[v->off + v->len - 1] == '\t'))
		v->len--;
	return 0;
}

/* A header that may come once only (see on_headers_complete). */
static bool once_only(const struct http_parser *p, struct span name)
{
	return span_is(p, name, "authorization") || span_is(p, name, "origin") ||
	       span_is(p, name, "cookie") ||
	       (name.len >= 5 && strncasecmp(p->store + name.off, "x-ci-", 5) == 0);
}

static int on_headers_complete(llhttp_t *ll)
{
	struct http_parser *p = ll->data;
	if (ll->http_major != 1 || ll->http_minor > 1)
		return fail(p, 400, "only HTTP/1.0 and HTTP/1.1 are served");
	if (p->url.len == 0 || p->store[p->url.off] != '/')
		return fail(p, 400, "the request target must be a path");
	int n_cl = 0, n_te = 0;
	for (int i = 0; i < p->n_hdr; i++) {
		if (span_is(p, p->name[i], "content-length")) {
			n_cl++;
		} else if (span_is(p, p->name[i], "transfer-encoding")) {
			n_te++;
			if (!span_is(p, p->value[i], "chunked"))
				return fail(p, 400, "Transfer-Encoding other than chunked");
		}
	}
	/* llhttp refuses most of these too; said again so the rule stands here. */
	if (n_cl > 1 || n_te > 1 || (n_cl && n_te))
		return fail(p, 400,
			    "more than one framing header (Content-Length, "
			    "Transfer-Encoding)");
	/* Who the caller is, and where it comes from, is said once: of two
	 * Authorization (or Origin, Cookie, X-CI-*) lines, one part of a chain
	 * (a proxy, a check, the handler) could read the first and another the
	 * last. */
	for (int i = 0; i < p->n_hdr; i++) {
		if (!once_only(p, p->name[i]))
			continue;
		for (int j = i + 1; j < p->n_hdr; j++)
			if (p->name[j].len == p->name[i].len &&
			    strncasecmp(p->store + p->name[i].off, p->store + p->name[j].off,
					p->name[i].len) == 0)
				return fail(p, 400, "header %.*s given more than once",
					    (int)(p->name[i].len > 64 ? 64 : p->name[i].len),
					    p->store + p->name[i].off);
	}
	if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > INT64_MAX)
		return fail(p, 400, "Content-Length out of range");
	p->head_done = true;
	return HPE_PAUSED;
}

static int on_chunk_extension(llhttp_t *ll, const char *at, size_t len)
{
	(void)at;
	struct http_parser *p = ll->data;
	p->ext_bytes += len;
	if (p->ext_bytes > CHUNK_EXT_MAX)
		return fail(p, 400, "chunk extensions longer than %d bytes", CHUNK_EXT_MAX);
	return 0;
}

static int on_chunk_header(llhttp_t *ll)
{
	struct http_parser *p = ll->data;
	p->ext_bytes = 0;
	if (ll->content_length > CHUNK_SIZE_MAX)
		return fail(p, 400, "malformed chunk size");
	return 0;
}

static int on_body(llhttp_t *ll, const char *at, size_t len)
{
	struct http_parser *p = ll->data;
	if (len == 0)
		return 0; /* an execute on no bytes inside the body reports an empty piece */
	p->piece = at;
	p->piece_len = len;
	return HPE_PAUSED;
}

static int on_message_complete(llhttp_t *ll)
{
	struct http_parser *p = ll->data;
	p->msg_done = true;
	return HPE_PAUSED;
}

static llhttp_settings_t parser_settings;

struct http_parser *http_parser_new(void)
{
	if (parser_settings.on_headers_complete == NULL) {
		llhttp_settings_init(&parser_settings);
		parser_settings.on_url = on_url;
		parser_settings.on_header_field = on_header_field;
		parser_settings.on_header_field_complete = on_header_field_complete;
		parser_settings.on_header_value = on_header_value;
		parser_settings.on_header_value_complete = on_header_value_complete;
		parser_settings.on_headers_complete = on_headers_complete;
		parser_settings.on_chunk_extension_name = on_chunk_extension;
		parser_settings.on_chunk_extension_value = on_chunk_extension;
		parser_settings.on_chunk_header = on_chunk_header;
		parser_settings.on_body = on_body;
		parser_settings.on_message_complete = on_message_complete;
	}
	struct http_parser *p = xcalloc(1, sizeof(*p));
	llhttp_init(&p->ll, HTTP_REQUEST, &parser_settings);
	p->ll.data = p;
	http_head_scan_init(&p->scan, HTTP_MAX_HEADER_BYTES, true);
	return p;
}

void http_parser_free(struct http_parser *p)
{
	if (p == NULL)
		return;
	free(p->store);
	free(p);
}

/* The head is in the request now (or refused): idle connections keep no
 * buffer. */
static void parser_drop_head(struct http_parser *p)
{
	free(p->store);
	p->store = NULL;
	p->store_len = p->store_cap = 0;
	p->url = (struct span){0};
	p->n_hdr = 0;
	p->in_field = p->in_value = false;
}

void http_parser_reset(struct http_parser *p)
{
	llhttp_reset(&p->ll); /* keeps the settings, the data pointer and the flags */
	http_head_scan_init(&p->scan, HTTP_MAX_HEADER_BYTES, true);
	parser_drop_head(p);
	p->head_done = false;
	p->fail_status = 0;
	p->why[0] = '\0';
	p->piece = NULL;
	p->piece_len = 0;
	p->msg_done = false;
	p->ext_bytes = p->trailer_bytes = 0;
}

/* ---- the head ---- */

static const char *req_header_span(const struct http_parser *p, const char *name, struct span *out)
{
	for (int i = 0; i < p->n_hdr; i++)
		if (span_is(p, p->name[i], name)) {
			*out = p->value[i];
			return p->store + out->off;
		}
	return NULL;
}

/* The request of a complete head: its strings copied into one block. */
static struct http_req *req_build(struct http_conn *c, struct http_parser *p)
{
	struct http_req *req = xcalloc(1, sizeof(*req));
	req->conn = c;
	req->base = bufferevent_get_base(c->bev);
	req->method = llhttp_method_name((llhttp_method_t)p->ll.method);
	req->minor = p->ll.http_minor;
	size_t need = p->url.len + 2;
	for (int i = 0; i < p->n_hdr; i++)
		need += p->name[i].len + p->value[i].len + 2;
	char *s = req->strings = xmalloc(need);
	const char *url = p->store + p->url.off;
	const char *q = memchr(url, '?', p->url.len);
	size_t plen = q ? (size_t)(q - url) : p->url.len;
	memcpy(s, url, plen);
	s[plen] = '\0';
	req->path = s;
	s += plen + 1;
	size_t qlen = q ? p->url.len - plen - 1 : 0;
	memcpy(s, q ? q + 1 : "", qlen);
	s[qlen] = '\0';
	req->query = s;
	s += qlen + 1;
	for (int i = 0; i < p->n_hdr; i++) {
		struct span parts[2] = {p->name[i], p->value[i]};
		const char **dst[2] = {&req->headers[i].name, &req->headers[i].value};
		for (int k = 0; k < 2; k++) {
			memcpy(s, p->store + parts[k].off, parts[k].len);
			s[parts[k].len] = '\0';
			*dst[k] = s;
			s += parts[k].len + 1;
		}
	}
	req->n_headers = p->n_hdr;
	if (p->ll.flags & F_CHUNKED)
		req->content_length = -1;
	else if (p->ll.flags & F_CONTENT_LENGTH)
		req->content_length = (int64_t)p->ll.content_length;
	req->body_complete = req->content_length == 0;
	/* RFC 9112 6.1: Transfer-Encoding in HTTP/1.0 is faulty framing (a 1.0
	 * proxy in front would not have read it): serve it, then close. */
	req->keep_alive =
	    llhttp_should_keep_alive(&p->ll) && !(req->minor == 0 && req->content_length < 0);
	struct span v;
	req->expect_continue = req_header_span(p, "expect", &v) && span_is(p, v, "100-continue");
	return req;
}

static int head_refused(struct http_conn *c, int status, const char *why)
{
	http_reply_conn_fail(c, status, "bad_request", why);
	parser_drop_head(c->parser);
	return -1;
}

int http_request_read_head(struct http_conn *c)
{
	struct http_parser *p = c->parser;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	while (evbuffer_get_length(in) > 0) {
		/* The head is read as it comes, one buffer segment at a time. */
		struct evbuffer_iovec v = {0};
		evbuffer_peek(in, -1, NULL, &v, 1);
		if (v.iov_len == 0) {
			v.iov_len = evbuffer_get_length(in);
			v.iov_base = evbuffer_pullup(in, -1);
		}
		const char *buf = v.iov_base;
		long upto = http_head_scan(&p->scan, buf, v.iov_len);
		if (upto < 0)
			return head_refused(c, p->scan.status, p->scan.why);
		llhttp_errno_t rc = llhttp_execute(&p->ll, buf, (size_t)upto);
		if (p->fail_status)
			return head_refused(c, p->fail_status, p->why);
		if (rc == HPE_PAUSED && p->head_done) {
			size_t used = (size_t)(llhttp_get_error_pos(&p->ll) - buf);
			llhttp_resume(&p->ll);
			c->req = req_build(c, p);
			parser_drop_head(p);
			evbuffer_drain(in, used);
			return 1;
		}
		if (rc == HPE_OK && !p->scan.ended) {
			evbuffer_drain(in, v.iov_len);
			continue;
		}
		char why[160];
		snprintf(why, sizeof(why), "malformed HTTP request: %s",
			 rc == HPE_OK ? "the head ended early" : llhttp_get_error_reason(&p->ll));
		return head_refused(c, 400, why);
	}
	return 0;
}

/* ---- the body ---- */

static void send_continue(struct http_req *req)
{
	if (req->expect_continue && req->conn && !req->body_complete) {
		evbuffer_add_printf(bufferevent_get_output(req->conn->bev),
				    "HTTP/1.1 100 Continue\r\n\r\n");
		req->expect_continue = false;
	}
}

static void req_resume_cb(evutil_socket_t fd, short what, void *arg);

/* A body claimed after the handler returned (it waited on Redis first: a
 * quota, a key) has bytes already read that no new read would move: move
 * them from the loop. */
static void body_late_orphan_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct http_req *req = arg;
	if (!req->finished && !req->body_complete)
		http_request_orphaned(req); /* the consumer hears it; req goes */
}

static void body_kick(struct http_req *req)
{
	if (!req->handled)
		return; /* inside the handler: the server moves the body after it */
	if (req->conn == NULL) {
		/* The client left before the body was claimed: what the consumer
		 * waits for will not come. Tell it from the loop, as when it
		 * leaves later. */
		if (req->resume_ev)
			event_free(req->resume_ev);
		req->resume_ev = evtimer_new(req->base, body_late_orphan_cb, req);
		defer_event(req->resume_ev);
		return;
	}
	if (req->resume_ev == NULL)
		req->resume_ev = evtimer_new(req->base, req_resume_cb, req);
	defer_event(req->resume_ev);
}

void http_req_read_body(struct http_req *req, size_t cap, http_body_cb cb, void *arg)
{
	if (req->content_length > 0 && (uint64_t)req->content_length > cap) {
		char msg[128];
		snprintf(msg, sizeof(msg),
			 "request body of %lld bytes exceeds the limit of %zu bytes",
			 (long long)req->content_length, cap);
		http_req_reply_error(req, ERR_PAYLOAD_TOO_LARGE, msg);
		cb(req, NULL, 0, arg);
		return;
	}
	req->mode = BODY_BUFFER;
	req->cap = cap;
	req->body_cb = cb;
	req->body_arg = arg;
	req->body = evbuffer_new();
	send_continue(req);
	/* Called from the handler: http_server.c moves the body after it
	 * returns, or at once when there is none. */
	if (req->body_complete && req->conn && req->conn->state == CS_HANDLING &&
	    req->content_length == 0) {
		cb(req, "", 0, arg);
		return;
	}
	body_kick(req);
}

void http_req_stream_body(struct http_req *req, http_chunk_cb cb, void *arg)
{
	req->mode = BODY_STREAM;
	req->chunk_cb = cb;
	req->body_arg = arg;
	if (req->conn)
		bufferevent_setwatermark(req->conn->bev, EV_READ, 0, HTTP_BODY_READ_HIGH);
	send_continue(req);
	if (req->content_length == 0) {
		cb(req, NULL, 0, HTTP_BODY_END, arg);
		return;
	}
	body_kick(req);
}

void http_req_pause_body(struct http_req *req)
{
	if (!req->paused)
		req->paused_at_us = clock_mono_us();
	req->paused = true;
	if (req->conn)
		bufferevent_disable(req->conn->bev, EV_READ);
}

static void req_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	http_request_process_body(arg);
}

void http_req_resume_body(struct http_req *req)
{
	if (!req->paused)
		return;
	req->paused = false;
	req->paused_us += clock_mono_us() - req->paused_at_us;
	if (req->conn == NULL)
		return;
	bufferevent_enable(req->conn->bev, EV_READ);
	/* Bytes already buffered would otherwise wait for new ones to arrive;
	 * deliver them from the loop, not inside the caller's stack. */
	if (req->resume_ev == NULL)
		req->resume_ev = evtimer_new(req->base, req_resume_cb, req);
	defer_event(req->resume_ev);
}

/* The body cannot be taken: answer the request with the error, then tell
 * the consumer so it can release its state. */
static void body_fail(struct http_req *req, enum err_code code, const char *msg)
{
	enum http_body_mode mode = req->mode;
	req->mode = BODY_UNCLAIMED;
	req->keep_alive = false;
	http_req_reply_error(req, code, msg);
	if (mode == BODY_BUFFER)
		req->body_cb(req, NULL, 0, req->body_arg);
	else if (mode == BODY_STREAM)
		req->chunk_cb(req, NULL, 0, HTTP_BODY_FAILED, req->body_arg);
}

/* The body's deadline (http_server.h): checked when it may have passed,
 * and moved on as long as the bytes keep the minimum rate. */
static void body_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct http_req *req = arg;
	if (req->conn == NULL || req->finished || req->body_complete || req->mode == BODY_UNCLAIMED)
		return;
	int64_t now = clock_mono_us();
	int64_t paused = req->paused_us + (req->paused ? now - req->paused_at_us : 0);
	int64_t allowed = (int64_t)req->body_timeout_s * 1000000 + paused +
			  (int64_t)(req->body_bytes_in * 1000000 / (uint64_t)req->body_min_rate);
	int64_t elapsed = now - req->body_start_us;
	if (req->paused || elapsed < allowed) {
		int64_t left =
		    req->paused ? (int64_t)req->body_timeout_s * 1000000 : allowed - elapsed;
		struct timeval tv = {(time_t)(left / 1000000), (suseconds_t)(left % 1000000)};
		evtimer_add(req->body_timer, &tv);
		return;
	}
	if (req->body_timeouts)
		(*req->body_timeouts)++;
	char msg[192];
	snprintf(msg, sizeof(msg),
		 "request body too slow: %llu bytes in %lld s (a body gets %d s, and one more "
		 "for each %d bytes)",
		 (unsigned long long)req->body_bytes_in, (long long)(elapsed / 1000000),
		 req->body_timeout_s, req->body_min_rate);
	log_info_limited("http: %s", msg);
	enum http_body_mode mode = req->mode;
	req->mode = BODY_UNCLAIMED;
	req->keep_alive = false;
	http_req_reply_error_status(req, 408, ERR_BAD_REQUEST, msg);
	if (mode == BODY_BUFFER)
		req->body_cb(req, NULL, 0, req->body_arg);
	else if (mode == BODY_STREAM)
		req->chunk_cb(req, NULL, 0, HTTP_BODY_FAILED, req->body_arg);
}

/* The deadline starts when the body is first moved toward its consumer. */
static void body_deadline_start(struct http_req *req)
{
	if (req->body_timer || req->body_timeout_s <= 0 || req->body_min_rate <= 0)
		return;
	req->body_start_us = clock_mono_us();
	req->body_timer = evtimer_new(req->base, body_deadline_cb, req);
	struct timeval tv = {req->body_timeout_s, 0};
	evtimer_add(req->body_timer, &tv);
}

/* Hand a piece of the body to its consumer. */
static void body_take(struct http_req *req, const char *data, size_t n)
{
	req->body_bytes_in += n;
	if (req->mode == BODY_BUFFER) {
		if (evbuffer_get_length(req->body) + n > req->cap) {
			/* Only a chunked body can get here: its length was unknown. */
			char msg[128];
			snprintf(msg, sizeof(msg), "request body exceeds the limit of %zu bytes",
				 req->cap);
			body_fail(req, ERR_PAYLOAD_TOO_LARGE, msg);
			return;
		}
		evbuffer_add(req->body, data, n);
		return;
	}
	req->chunk_cb(req, data, n, HTTP_BODY_MORE, req->body_arg);
}

static void body_complete(struct http_req *req)
{
	req->body_complete = true;
	if (req->mode == BODY_BUFFER) {
		size_t len = evbuffer_get_length(req->body);
		evbuffer_add(req->body, "", 1);
		const char *p = (const char *)evbuffer_pullup(req->body, -1);
		req->body_cb(req, p, len, req->body_arg);
	} else if (req->mode == BODY_STREAM) {
		req->chunk_cb(req, NULL, 0, HTTP_BODY_END, req->body_arg);
	}
}

void http_request_process_body(struct http_req *req)
{
	struct http_conn *c = req->conn;
	if (c == NULL || req->body_complete || req->mode == BODY_UNCLAIMED || req->finished)
		return;
	if (c->state != CS_HANDLING)
		return;
	struct http_parser *p = c->parser;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	body_deadline_start(req);
	http_conn_set_read_timeout(c, HTTP_BODY_TIMEOUT_S);
	bufferevent_setwatermark(c->bev, EV_READ, 0, HTTP_BODY_READ_HIGH);
	while (!req->paused && !req->body_complete && req->mode != BODY_UNCLAIMED &&
	       !req->finished && req->conn) {
		/* What was read is in one piece (at most the read watermark and one
		 * read more), as the consumer gets it; executing on no bytes at all
		 * still lets llhttp end a body it has seen the last byte of. */
		size_t avail = evbuffer_get_length(in);
		const char *buf = avail ? (const char *)evbuffer_pullup(in, -1) : "";
		llhttp_errno_t rc = llhttp_execute(&p->ll, buf, avail);
		if (rc == HPE_OK) {
			evbuffer_drain(in, avail);
			return;
		}
		if (rc != HPE_PAUSED) {
			char msg[224];
			if (p->fail_status)
				snprintf(msg, sizeof(msg), "%s", p->why);
			else
				snprintf(msg, sizeof(msg), "malformed chunked body: %s",
					 llhttp_get_error_reason(&p->ll));
			body_fail(req, ERR_BAD_REQUEST, msg);
			return;
		}
		size_t used = (size_t)(llhttp_get_error_pos(&p->ll) - buf);
		llhttp_resume(&p->ll);
		if (p->piece) {
			const char *piece = p->piece;
			size_t n = p->piece_len;
			p->piece = NULL;
			body_take(req, piece, n); /* before the drain: it points into in */
			evbuffer_drain(in, used);
			continue;
		}
		evbuffer_drain(in, used);
		if (p->msg_done) {
			http_conn_set_read_timeout(c, 0);
			if (req->body_timer)
				evtimer_del(req->body_timer);
			body_complete(req);
		}
	}
}

void http_request_orphaned(struct http_req *req)
{
	req->conn = NULL;
	if (req->finished) {
		http_req_free(req);
		return;
	}
	if (req->close_cb) {
		req->close_cb(req, req->close_arg);
		return;
	}
	if (req->mode == BODY_BUFFER && !req->body_complete) {
		/* The client left half-way through its body: the handler is waiting
		 * for a body that will never come. Tell it (its state goes), and
		 * the request needs no answer. */
		req->mode = BODY_UNCLAIMED;
		req->finished = true;
		http_req_fire_done(req);
		req->body_cb(req, NULL, 0, req->body_arg);
		http_req_free(req);
	}
}

/* ---- what the handler sees ---- */

void http_req_peer(const struct http_req *req, char *buf, size_t size)
{
	buf[0] = '\0';
	if (req->conn == NULL || req->conn->bev == NULL)
		return;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];
	if (getpeername(bufferevent_getfd(req->conn->bev), (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		if (inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip)))
			snprintf(buf, size, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		if (inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip)))
			snprintf(buf, size, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		snprintf(buf, size, "unix");
	}
}

const char *http_req_method(const struct http_req *req)
{
	return req->method;
}

const char *http_req_path(const struct http_req *req)
{
	return req->path;
}

const char *http_req_query(const struct http_req *req)
{
	return req->query;
}

const char *http_req_header(const struct http_req *req, const char *name)
{
	for (int i = 0; i < req->n_headers; i++)
		if (strcasecmp(req->headers[i].name, name) == 0)
			return req->headers[i].value;
	return NULL;
}

int http_req_header_count(const struct http_req *req)
{
	return req->n_headers;
}

void http_req_header_at(const struct http_req *req, int i, const char **name, const char **value)
{
	*name = req->headers[i].name;
	*value = req->headers[i].value;
}

int64_t http_req_content_length(const struct http_req *req)
{
	return req->content_length;
}

bool http_req_client_gone(const struct http_req *req)
{
	return req->conn == NULL;
}

bool http_req_on_reserve(const struct http_req *req)
{
	return req->reserve;
}

void http_req_close_after(struct http_req *req)
{
	req->keep_alive = false;
}

void http_req_set_close_cb(struct http_req *req, http_close_cb cb, void *arg)
{
	req->close_cb = cb;
	req->close_arg = arg;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *http_percent_decode(const char *src, size_t len)
{
	char *out = xmalloc(len + 1);
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		char ch = src[i];
		if (ch == '%') {
			int hi = i + 2 < len ? hexval(src[i + 1]) : -1;
			int lo = i + 2 < len ? hexval(src[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				free(out);
				return NULL;
			}
			ch = (char)(hi * 16 + lo);
			i += 2;
		}
		if (ch == '\0') {
			free(out);
			return NULL;
		}
		out[o++] = ch;
	}
	out[o] = '\0';
	return out;
}
