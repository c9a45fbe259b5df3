/* egress_head.c: strict parsing of proxy requests, over llhttp. */
#include "egress_head.h"

#include <ctype.h>
#include <llhttp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http_head_scan.h"
#include "netpolicy.h"
#include "xalloc.h"

#define URL_MAX 8192
#define MAX_HEADERS 128
#define MAX_CONNECTION_TOKENS 16

struct header {
	uint16_t name, name_len, value, value_len; /* offsets into store (< EGRESS_HEAD_MAX) */
};

enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED };

struct egress_head {
	llhttp_t parser;
	llhttp_settings_t settings;
	llhttp_t resp; /* the upstream's answer, watched to know where it ends */
	llhttp_settings_t resp_settings;
	bool resp_started, resp_done, is_head;

	/* our own scan of the raw head (shared with the API server) */
	struct http_head_scan scan;

	/* what llhttp reported; grown as it comes (thousands of idle proxy
	 * connections must not hold a whole head's worth each) */
	char *url;
	size_t url_len, url_cap;
	char *store; /* header names and values */
	size_t store_len, store_cap;
	struct header hdr[MAX_HEADERS];
	size_t n_hdr;
	bool in_field, in_value;
	const char *why; /* set by a callback that failed */
	char why_buf[320];
	int why_status;

	/* the result */
	bool done, is_connect;
	char host[NETPOLICY_HOST_MAX + 1];
	int port;
	char *upstream;
	size_t upstream_len;
	enum body_kind body;
	bool body_started, body_done;
	egress_head_out_fn out;
	void *out_arg;
};

static int fail(struct egress_head *h, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct egress_head *h, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h->why_buf, sizeof(h->why_buf), fmt, ap);
	va_end(ap);
	h->why = h->why_buf;
	h->why_status = status;
	return -1;
}

/* Append to a buffer that grows up to max bytes (plus a NUL). */
static bool grow_append(char **buf, size_t *len, size_t *cap, size_t max, const char *at, size_t n)
{
	if (n > max - *len)
		return false;
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 256;
		while (c < *len + n + 1)
			c *= 2;
		*buf = xrealloc(*buf, c);
		*cap = c;
	}
	memcpy(*buf + *len, at, n);
	*len += n;
	(*buf)[*len] = '\0';
	return true;
}

static bool store_append(struct egress_head *h, const char *at, size_t len)
{
	return grow_append(&h->store, &h->store_len, &h->store_cap, EGRESS_HEAD_MAX, at, len);
}

/* ---- llhttp callbacks ---- */

static int on_url(llhttp_t *p, const char *at, size_t len)
{
	struct egress_head *h = p->data;
	if (!grow_append(&h->url, &h->url_len, &h->url_cap, URL_MAX, at, len))
		return fail(h, 414, "request target longer than %d bytes", URL_MAX);
	return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct egress_head *h = p->data;
	if (!h->in_field) {
		if (h->n_hdr >= MAX_HEADERS)
			return fail(h, 431, "more than %d header fields", MAX_HEADERS);
		h->hdr[h->n_hdr++] = (struct header){.name = (uint16_t)h->store_len};
		h->in_field = true;
	}
	if (!store_append(h, at, len))
		return fail(h, 431, "request head too large");
	h->hdr[h->n_hdr - 1].name_len = (uint16_t)(h->hdr[h->n_hdr - 1].name_len + len);
	return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
	struct egress_head *h = p->data;
	h->in_field = false;
	return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct egress_head *h = p->data;
	struct header *hd = &h->hdr[h->n_hdr - 1];
	if (!h->in_value) {
		hd->value = (uint16_t)h->store_len;
		h->in_value = true;
	}
	if (!store_append(h, at, len))
		return fail(h, 431, "request head too large");
	hd->value_len = (uint16_t)(hd->value_len + len);
	return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
	struct egress_head *h = p->data;
	struct header *hd = &h->hdr[h->n_hdr - 1];
	if (!h->in_value)
		hd->value = (uint16_t)h->store_len; /* an empty value */
	h->in_value = false;
	/* Trailing whitespace is not part of the value. */
	while (hd->value_len > 0 && (h->store[hd->value + hd->value_len - 1] == ' ' ||
				     h->store[hd->value + hd->value_len - 1] == '\t'))
		hd->value_len--;
	for (size_t i = 0; i < hd->value_len; i++) {
		unsigned char c = (unsigned char)h->store[hd->value + i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return fail(h, 400, "a control byte in a header value");
	}
	return 0;
}

static bool name_is(const struct egress_head *h, const struct header *hd, const char *name)
{
	return hd->name_len == strlen(name) &&
	       strncasecmp(h->store + hd->name, name, hd->name_len) == 0;
}

static bool value_is(const struct egress_head *h, const struct header *hd, const char *v)
{
	return hd->value_len == strlen(v) &&
	       strncasecmp(h->store + hd->value, v, hd->value_len) == 0;
}

/* Headers that concern this hop only, or that we state ourselves. */
static bool dropped(const struct egress_head *h, const struct header *hd, char tokens[][64],
		    size_t n_tokens)
{
	static const char *const names[] = {
	    "host",    "connection",        "keep-alive",     "te", "trailer",
	    "upgrade", "transfer-encoding", "content-length", NULL};
	for (const char *const *n = names; *n; n++)
		if (name_is(h, hd, *n))
			return true;
	if (hd->name_len >= 6 && strncasecmp(h->store + hd->name, "proxy-", 6) == 0)
		return true;
	for (size_t i = 0; i < n_tokens; i++)
		if (name_is(h, hd, tokens[i]))
			return true;
	return false;
}

/* The tokens of a Connection header: the headers it names are hop-by-hop. */
static size_t connection_tokens(const struct egress_head *h, const struct header *hd,
				char tokens[][64], size_t n, size_t max)
{
	const char *v = h->store + hd->value, *end = v + hd->value_len;
	while (v < end && n < max) {
		while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
			v++;
		const char *s = v;
		while (v < end && *v != ',' && *v != ' ' && *v != '\t')
			v++;
		size_t l = (size_t)(v - s);
		if (l > 0 && l < 64) {
			memcpy(tokens[n], s, l);
			tokens[n][l] = '\0';
			n++;
		}
	}
	return n;
}

static void upstream_add(struct egress_head *h, size_t *cap, const char *data, size_t len)
{
	if (h->upstream_len + len + 1 > *cap) {
		while (h->upstream_len + len + 1 > *cap)
			*cap *= 2;
		h->upstream = xrealloc(h->upstream, *cap);
	}
	memcpy(h->upstream + h->upstream_len, data, len);
	h->upstream_len += len;
	h->upstream[h->upstream_len] = '\0';
}

static void upstream_printf(struct egress_head *h, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void upstream_printf(struct egress_head *h, size_t *cap, const char *fmt, ...)
{
	char line[URL_MAX + 512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		upstream_add(h, cap, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* The request target: the authority of CONNECT, or http://authority/path. */
static int parse_target(struct egress_head *h, const char **path)
{
	struct err *e = NULL;
	char authority[NETPOLICY_HOST_MAX + 16];
	if (h->url == NULL)
		return fail(h, 400, "no request target");
	if (h->is_connect) {
		if (h->url_len >= sizeof(authority))
			return fail(h, 400, "bad CONNECT target");
		memcpy(authority, h->url, h->url_len + 1);
		*path = NULL;
	} else {
		if (strncasecmp(h->url, "http://", 7) != 0)
			return fail(h, 400,
				    "only CONNECT and absolute http:// URLs are proxied (use "
				    "HTTPS_PROXY for https)");
		const char *a = h->url + 7;
		size_t alen = strcspn(a, "/?#");
		if (strchr(h->url, '#'))
			return fail(h, 400, "a fragment (#) in the request target");
		if (alen == 0 || alen >= sizeof(authority) || memchr(a, '@', alen))
			return fail(h, 400, "bad URL authority (no user info, no empty host)");
		memcpy(authority, a, alen);
		authority[alen] = '\0';
		*path = a + alen;
	}
	if (netpolicy_split(authority, h->is_connect ? 443 : 80, h->host, sizeof(h->host), &h->port,
			    &e) < 0) {
		fail(h, 400, "%s", e->message);
		err_free(e);
		return -1;
	}
	return 0;
}

static int on_headers_complete(llhttp_t *p)
{
	struct egress_head *h = p->data;
	if (p->http_major != 1 || p->http_minor > 1)
		return fail(h, 400, "only HTTP/1.0 and HTTP/1.1 are proxied");
	h->is_connect = p->method == HTTP_CONNECT;
	const char *path = NULL;
	if (parse_target(h, &path) < 0)
		return -1;
	const struct header *host = NULL;
	size_t n_cl = 0, n_te = 0, n_tokens = 0;
	char tokens[MAX_CONNECTION_TOKENS][64];
	for (size_t i = 0; i < h->n_hdr; i++) {
		const struct header *hd = &h->hdr[i];
		if (name_is(h, hd, "host")) {
			if (host)
				return fail(h, 400, "more than one Host header");
			host = hd;
		} else if (name_is(h, hd, "content-length")) {
			n_cl++;
		} else if (name_is(h, hd, "transfer-encoding")) {
			n_te++;
			if (!value_is(h, hd, "chunked"))
				return fail(h, 400, "Transfer-Encoding other than chunked");
		} else if (name_is(h, hd, "connection")) {
			n_tokens =
			    connection_tokens(h, hd, tokens, n_tokens, MAX_CONNECTION_TOKENS);
		}
	}
	if (n_cl > 1 || n_te > 1)
		return fail(h, 400, "more than one Content-Length or Transfer-Encoding header");
	if (n_cl && n_te)
		return fail(h, 400, "both Content-Length and Transfer-Encoding");
	if (n_te && p->http_minor == 0)
		return fail(h, 400, "Transfer-Encoding in an HTTP/1.0 request");
	if (host) {
		char hhost[NETPOLICY_HOST_MAX + 1], hv[NETPOLICY_HOST_MAX + 16];
		int hport;
		if (host->value_len >= sizeof(hv))
			return fail(h, 400, "bad Host header");
		memcpy(hv, h->store + host->value, host->value_len);
		hv[host->value_len] = '\0';
		if (netpolicy_split(hv, h->is_connect ? h->port : 80, hhost, sizeof(hhost), &hport,
				    NULL) < 0)
			return fail(h, 400, "bad Host header '%.64s'", hv);
		/* A server that routes by Host would otherwise serve a name the
		 * allowlist never saw. */
		if (strcmp(hhost, h->host) != 0 || hport != h->port)
			return fail(h, 400,
				    "the Host header '%.64s' does not match the request target "
				    "%.64s:%d",
				    hv, h->host, h->port);
	} else if (!h->is_connect && p->http_minor == 1) {
		return fail(h, 400, "an HTTP/1.1 request needs a Host header");
	}
	h->done = true;
	h->is_head = p->method == HTTP_HEAD;
	if (h->is_connect)
		return HPE_PAUSED;
	if (p->flags & F_CHUNKED)
		h->body = BODY_CHUNKED;
	else if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0)
		h->body = BODY_LENGTH;
	size_t cap = 1024;
	h->upstream = xmalloc(cap);
	h->upstream_len = 0;
	upstream_printf(h, &cap, "%s %s%s HTTP/1.%d\r\n",
			llhttp_method_name((llhttp_method_t)p->method), *path == '/' ? "" : "/",
			path, p->http_minor);
	bool v6 = strchr(h->host, ':') != NULL;
	if (h->port == 80)
		upstream_printf(h, &cap, v6 ? "Host: [%s]\r\n" : "Host: %s\r\n", h->host);
	else
		upstream_printf(h, &cap, v6 ? "Host: [%s]:%d\r\n" : "Host: %s:%d\r\n", h->host,
				h->port);
	for (size_t i = 0; i < h->n_hdr; i++) {
		const struct header *hd = &h->hdr[i];
		if (dropped(h, hd, tokens, n_tokens))
			continue;
		upstream_add(h, &cap, h->store + hd->name, hd->name_len);
		upstream_add(h, &cap, ": ", 2);
		upstream_add(h, &cap, h->store + hd->value, hd->value_len);
		upstream_add(h, &cap, "\r\n", 2);
	}
	if (p->flags & F_CONTENT_LENGTH)
		upstream_printf(h, &cap, "Content-Length: %llu\r\n",
				(unsigned long long)p->content_length);
	if (h->body == BODY_CHUNKED)
		upstream_printf(h, &cap, "Transfer-Encoding: chunked\r\n");
	upstream_printf(h, &cap, "Connection: close\r\n\r\n");
	return HPE_PAUSED;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
	struct egress_head *h = p->data;
	if (h->out == NULL || len == 0)
		return 0;
	if (h->body == BODY_CHUNKED) {
		char size[24];
		int n = snprintf(size, sizeof(size), "%zx\r\n", len);
		h->out(size, (size_t)n, h->out_arg);
		h->out(at, len, h->out_arg);
		h->out("\r\n", 2, h->out_arg);
	} else {
		h->out(at, len, h->out_arg);
	}
	return 0;
}

static int on_message_complete(llhttp_t *p)
{
	struct egress_head *h = p->data;
	if (h->out && h->body == BODY_CHUNKED)
		h->out("0\r\n\r\n", 5, h->out_arg); /* trailers are not passed on */
	return HPE_PAUSED;
}

static int on_resp_headers_complete(llhttp_t *p)
{
	struct egress_head *h = p->data;
	/* The answer to HEAD has a Content-Length but no body. */
	return h->is_head && p->status_code >= 200 ? 1 : 0;
}

static int on_resp_message_complete(llhttp_t *p)
{
	struct egress_head *h = p->data;
	if (p->status_code < 200)
		return 0; /* 100 Continue and other interim answers: the real one follows */
	h->resp_done = true;
	return HPE_PAUSED;
}

/* ---- the API ---- */

struct egress_head *egress_head_new(void)
{
	struct egress_head *h = xcalloc(1, sizeof(*h));
	llhttp_settings_init(&h->settings);
	h->settings.on_url = on_url;
	h->settings.on_header_field = on_header_field;
	h->settings.on_header_field_complete = on_header_field_complete;
	h->settings.on_header_value = on_header_value;
	h->settings.on_header_value_complete = on_header_value_complete;
	h->settings.on_headers_complete = on_headers_complete;
	h->settings.on_body = on_body;
	h->settings.on_message_complete = on_message_complete;
	llhttp_init(&h->parser, HTTP_REQUEST, &h->settings);
	h->parser.data = h;
	llhttp_settings_init(&h->resp_settings);
	h->resp_settings.on_headers_complete = on_resp_headers_complete;
	h->resp_settings.on_message_complete = on_resp_message_complete;
	llhttp_init(&h->resp, HTTP_RESPONSE, &h->resp_settings);
	h->resp.data = h;
	http_head_scan_init(&h->scan, EGRESS_HEAD_MAX, false);
	return h;
}

void egress_head_free(struct egress_head *h)
{
	if (h == NULL)
		return;
	free(h->upstream);
	free(h->url);
	free(h->store);
	free(h);
}

/* Our own pass over the raw bytes, before llhttp sees them: returns how
 * many bytes belong to the head (len when it has not ended yet), or -1. */
static long scan(struct egress_head *h, const char *buf, size_t len)
{
	long n = http_head_scan(&h->scan, buf, len);
	if (n < 0)
		return fail(h, h->scan.status, "%s", h->scan.why);
	return n;
}

int egress_head_feed(struct egress_head *h, const char *buf, size_t len, size_t *used, int *status,
		     struct err **errp)
{
	*used = 0;
	if (h->done)
		return EGRESS_HEAD_DONE;
	long upto = h->why ? -1 : scan(h, buf, len);
	if (upto >= 0) {
		llhttp_errno_t rc = llhttp_execute(&h->parser, buf, (size_t)upto);
		if (rc == HPE_PAUSED && h->done) {
			*used = (size_t)(llhttp_get_error_pos(&h->parser) - buf);
			return EGRESS_HEAD_DONE;
		}
		if (rc == HPE_OK && !h->scan.ended) {
			*used = len;
			return EGRESS_HEAD_MORE;
		}
		if (!h->why)
			fail(h, 400, "malformed request head: %s",
			     rc == HPE_OK || rc == HPE_PAUSED
				 ? "unexpected end"
				 : llhttp_get_error_reason(&h->parser));
	}
	*status = h->why_status;
	err_set(errp, ERR_BAD_REQUEST, "%s", h->why);
	return EGRESS_HEAD_ERROR;
}

bool egress_head_is_connect(const struct egress_head *h)
{
	return h->is_connect;
}

const char *egress_head_host(const struct egress_head *h)
{
	return h->host;
}

int egress_head_port(const struct egress_head *h)
{
	return h->port;
}

const char *egress_head_upstream(const struct egress_head *h, size_t *len)
{
	*len = h->upstream_len;
	return h->upstream;
}

int egress_head_body(struct egress_head *h, const char *buf, size_t len, size_t *used,
		     egress_head_out_fn out, void *arg, struct err **errp)
{
	*used = 0;
	if (!h->done || h->is_connect || h->body == BODY_NONE || h->body_done)
		return EGRESS_HEAD_DONE;
	if (!h->body_started) {
		llhttp_resume(&h->parser); /* paused at the end of the head */
		h->body_started = true;
	}
	h->out = out;
	h->out_arg = arg;
	llhttp_errno_t rc = llhttp_execute(&h->parser, buf, len);
	h->out = NULL;
	if (rc == HPE_OK) {
		*used = len;
		return EGRESS_HEAD_MORE;
	}
	if (rc == HPE_PAUSED || rc == HPE_PAUSED_UPGRADE) {
		*used = (size_t)(llhttp_get_error_pos(&h->parser) - buf);
		h->body_done = true;
		return EGRESS_HEAD_DONE;
	}
	err_set(errp, ERR_BAD_REQUEST, "malformed request body: %s",
		llhttp_get_error_reason(&h->parser));
	return EGRESS_HEAD_ERROR;
}

int egress_head_response(struct egress_head *h, const char *buf, size_t len, size_t *used)
{
	*used = 0;
	if (h->resp_done)
		return EGRESS_HEAD_DONE;
	llhttp_errno_t rc = llhttp_execute(&h->resp, buf, len);
	if (rc == HPE_OK) {
		*used = len;
		return EGRESS_HEAD_MORE;
	}
	if ((rc == HPE_PAUSED || rc == HPE_PAUSED_UPGRADE) && h->resp_done) {
		*used = (size_t)(llhttp_get_error_pos(&h->resp) - buf);
		return EGRESS_HEAD_DONE;
	}
	return EGRESS_HEAD_ERROR;
}
