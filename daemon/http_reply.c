/* http_reply.c: the API server's replies, and the end of a request's life.
 *
 * Every request gets exactly one reply; the reply's end marks the request
 * finished, and the request is freed when its output has drained
 * (http_server.c), or on the next loop turn when the client has gone, never
 * inside the handler's call. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "defer.h"
#include "http_internal.h"
#include "json.h"
#include "xalloc.h"

static const char *status_text(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 413: return "Payload Too Large";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Status";
	}
}

void http_req_free(struct http_req *req)
{
	free(req->strings);
	if (req->body)
		evbuffer_free(req->body);
	if (req->extra_headers)
		evbuffer_free(req->extra_headers);
	if (req->resume_ev)
		event_free(req->resume_ev);
	if (req->body_timer)
		event_free(req->body_timer);
	free(req);
}

static void req_free_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	http_req_free(arg);
}

void http_reply_canned(int fd, int status, enum err_code code, const char *message)
{
	char body[384], head[640];
	int blen = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
			    err_code_name(code), message);
	int hlen = snprintf(head, sizeof(head),
			    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			    "Content-Length: %d\r\n%sConnection: close\r\n\r\n%s",
			    status, status_text(status), blen,
			    status == 429 || status == 503 ? "Retry-After: 1\r\n" : "", body);
	if (hlen > 0 && (size_t)hlen < sizeof(head))
		send(fd, head, (size_t)hlen, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void http_reply_conn_fail(struct http_conn *c, int status, const char *code, const char *message)
{
	char body[512];
	int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
			 code, message);
	evbuffer_add_printf(bufferevent_get_output(c->bev),
			    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			    "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
			    status, status_text(status), n, body);
	bufferevent_disable(c->bev, EV_READ);
	c->state = CS_HANDLING; /* nothing more is read */
	struct http_req *req = xcalloc(1, sizeof(*req));
	req->conn = c;
	req->base = bufferevent_get_base(c->bev);
	req->finished = true;
	req->keep_alive = false;
	c->req = req;
}

void http_req_add_header(struct http_req *req, const char *name, const char *value)
{
	if (req->extra_headers == NULL)
		req->extra_headers = evbuffer_new();
	evbuffer_add_printf(req->extra_headers, "%s: %s\r\n", name, value);
}

void http_req_set_done_cb(struct http_req *req, http_done_cb cb, void *arg)
{
	req->done_cb = cb;
	req->done_arg = arg;
}

void http_req_fire_done(struct http_req *req)
{
	http_done_cb cb = req->done_cb;
	req->done_cb = NULL;
	if (cb)
		cb(req, req->status, req->body_bytes_out, req->done_arg);
}

/* The request is answered: free it now if nobody can read the answer, else
 * when the output drains (http_server.c), never inside the handler's call. */
static void req_finish(struct http_req *req)
{
	req->finished = true;
	http_req_fire_done(req);
	if (req->conn == NULL) {
		if (!req->freeing) {
			req->freeing = true;
			defer_call(req->base, req_free_deferred, req);
		}
		return;
	}
	/* A body nobody read cannot be skipped safely: close after the reply. */
	if (!req->body_complete)
		req->keep_alive = false;
	bufferevent_setwatermark(req->conn->bev, EV_WRITE, 0, 0);
	if (!req->keep_alive)
		bufferevent_disable(req->conn->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(req->conn->bev)) == 0)
		defer_event(req->conn->kick);
}

static void write_head(struct http_req *req, int status, const char *content_type, int64_t length)
{
	struct evbuffer *out = bufferevent_get_output(req->conn->bev);
	if (!req->body_complete)
		req->keep_alive = false;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, status_text(status));
	if (content_type)
		evbuffer_add_printf(out, "Content-Type: %s\r\n", content_type);
	if (length >= 0)
		evbuffer_add_printf(out, "Content-Length: %lld\r\n", (long long)length);
	else if (length == -2)
		; /* 204: no body, no length */
	else if (req->chunked_reply)
		evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
	else
		req->keep_alive = false; /* HTTP/1.0 stream: ends with the connection */
	if (req->extra_headers)
		evbuffer_add_buffer(out, req->extra_headers);
	evbuffer_add_printf(out, "Connection: %s\r\n\r\n",
			    req->keep_alive ? "keep-alive" : "close");
	req->started = true;
}

void http_req_reply(struct http_req *req, int status, const char *content_type, const char *body,
		    size_t len)
{
	if (req->finished || req->started)
		return;
	req->status = status;
	if (req->conn) {
		bool no_body = status == 204 || status == 304;
		write_head(req, status, content_type, no_body ? -2 : (int64_t)len);
		if (!no_body && len && strcmp(req->method ? req->method : "", "HEAD") != 0) {
			evbuffer_add(bufferevent_get_output(req->conn->bev), body, len);
			req->body_bytes_out += len;
		}
	}
	req_finish(req);
}

void http_req_reply_error(struct http_req *req, enum err_code code, const char *message)
{
	http_req_reply_error_field(req, code, message, NULL, NULL);
}

static void reply_error(struct http_req *req, int status, enum err_code code, const char *message,
			const char *key, const char *value)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "error");
	jg_obj(g);
	jg_kv_str(g, "code", err_code_name(code));
	jg_kv_str(g, "message", message);
	if (key)
		jg_kv_str(g, key, value);
	jg_obj_end(g);
	jg_obj_end(g);
	size_t len;
	const char *text = jg_text(g, &len);
	http_req_reply(req, status, "application/json", text, len);
}

void http_req_reply_error_field(struct http_req *req, enum err_code code, const char *message,
				const char *key, const char *value)
{
	reply_error(req, err_code_status(code), code, message, key, value);
}

void http_req_reply_error_status(struct http_req *req, int status, enum err_code code,
				 const char *message)
{
	reply_error(req, status, code, message, NULL, NULL);
}

void http_req_reply_start(struct http_req *req, int status, const char *content_type,
			  int64_t length)
{
	if (req->finished || req->started)
		return;
	req->chunked_reply = length < 0 && req->minor >= 1;
	req->status = status;
	if (req->conn)
		write_head(req, status, content_type, length);
	req->started = true;
}

void http_req_reply_chunk(struct http_req *req, const char *data, size_t len)
{
	if (req->conn == NULL || req->finished || len == 0)
		return;
	struct evbuffer *out = bufferevent_get_output(req->conn->bev);
	if (req->chunked_reply)
		evbuffer_add_printf(out, "%zx\r\n", len);
	evbuffer_add(out, data, len);
	req->body_bytes_out += len;
	if (req->evictable)
		req->last_write_us = clock_mono_us();
	if (req->chunked_reply)
		evbuffer_add(out, "\r\n", 2);
}

void http_req_reply_end(struct http_req *req)
{
	if (req->finished)
		return;
	if (req->conn && req->chunked_reply)
		evbuffer_add(bufferevent_get_output(req->conn->bev), "0\r\n\r\n", 5);
	req_finish(req);
}

void http_req_reply_abort(struct http_req *req)
{
	if (req->finished)
		return;
	req->keep_alive = false;
	req_finish(req);
}

size_t http_req_output_backlog(const struct http_req *req)
{
	if (req->conn == NULL)
		return 0;
	return evbuffer_get_length(bufferevent_get_output(req->conn->bev));
}

void http_req_set_drain_cb(struct http_req *req, size_t low, http_drain_cb cb, void *arg)
{
	req->drain_cb = cb;
	req->drain_arg = arg;
	req->drain_low = low;
	if (req->conn)
		bufferevent_setwatermark(req->conn->bev, EV_WRITE, low, 0);
}
