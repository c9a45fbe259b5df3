/* fuzz_http.c: the HTTP server on hostile bytes. The input is written into
 * one end of a socket pair served by http_server; a handler reads bodies
 * (buffered with a cap, or streamed) and answers; the loop runs until the
 * connection is done. Memory errors and leaks are what this looks for. */
#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void body_cb(struct http_req *req, const char *body, size_t len, void *arg)
{
	(void)arg;
	if (body)
		http_req_reply(req, 200, "text/plain", body, len < 16 ? len : 16);
}

static void chunk_cb(struct http_req *req, const char *data, size_t len, enum http_body_state state,
		     void *arg)
{
	(void)data;
	(void)len;
	(void)arg;
	if (state == HTTP_BODY_END)
		http_req_reply(req, 204, NULL, NULL, 0);
}

static void close_cb(struct http_req *req, void *arg)
{
	(void)arg;
	http_req_reply_error(req, ERR_BAD_REQUEST, "gone");
}

static void on_request(struct http_req *req, void *arg)
{
	(void)arg;
	const char *path = http_req_path(req);
	if (strcmp(path, "/stream") == 0) {
		http_req_set_close_cb(req, close_cb, NULL);
		http_req_stream_body(req, chunk_cb, NULL);
	} else if (strcmp(path, "/chunked") == 0) {
		http_req_reply_start(req, 200, "text/plain", -1);
		http_req_reply_chunk(req, "abc", 3);
		http_req_reply_end(req);
	} else {
		http_req_read_body(req, 1024, body_cb, NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return 0;
	struct event_base *base = event_base_new();
	struct http_server *srv = http_server_new(base, on_request, NULL);
	http_server_adopt(srv, sv[0]);
	size_t off = 0;
	for (int round = 0; round < 64; round++) {
		if (off < size) {
			ssize_t n = write(sv[1], data + off, size - off);
			if (n > 0)
				off += (size_t)n;
		} else if (off == size) {
			shutdown(sv[1], SHUT_WR);
			off++;
		}
		char sink[65536];
		while (read(sv[1], sink, sizeof(sink)) > 0)
			;
		event_base_loop(base, EVLOOP_NONBLOCK);
	}
	close(sv[1]);
	event_base_loop(base, EVLOOP_NONBLOCK);
	http_server_free(srv);
	/* Requests freed from the loop (deferred) need one more turn. */
	event_base_loop(base, EVLOOP_NONBLOCK);
	event_base_free(base);
	return 0;
}
