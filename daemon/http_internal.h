/* http_internal.h: what the API server's three files share (nobody else
 * includes this; the interface is http_server.h).
 *
 *   http_server.c   connections: listeners, caps, eviction, deadlines, the
 *                   state machine of one connection, keep-alive, linger
 *   http_request.c  the request: its head and body read with llhttp (the
 *                   only one of the three that includes it), the body
 *                   buffered or streamed, the handler's view of the request
 *   http_reply.c    the reply: status line, headers, chunks, the end of a
 *                   request's life, and the canned answers
 *
 * Calls go one way: http_server.c uses the other two, http_request.c uses
 * http_reply.c, and http_reply.c uses neither. */
#ifndef CI_HTTP_INTERNAL_H
#define CI_HTTP_INTERNAL_H

#include <event2/bufferevent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "err.h"
#include "http_server.h"

#define HTTP_BODY_TIMEOUT_S 60
#define HTTP_WRITE_TIMEOUT_S 120
/* Pipelined bytes we hold while a request is handled. */
#define HTTP_HANDLING_READ_HIGH (64 * 1024)
/* What a streamed or buffered body may have read ahead of its consumer. */
#define HTTP_BODY_READ_HIGH (256 * 1024)

/* CS_LINGER: the answer went out before the client finished sending its
 * body (a 413, say). Closing at once would reset the connection and the
 * client, still writing, would never read the answer; so the rest is read
 * and discarded, within bounds, before closing. */
enum http_conn_state { CS_HEADERS, CS_HANDLING, CS_LINGER };
enum http_body_mode { BODY_UNCLAIMED, BODY_BUFFER, BODY_STREAM };

struct http_header {
	const char *name, *value; /* in the request's strings */
};

struct http_conn;
struct http_parser; /* http_request.c: llhttp and the head being read */
struct http_peer;   /* http_server.c */

struct http_req {
	struct http_conn *conn; /* NULL once the client has gone */
	struct event_base *base;
	const char *method; /* llhttp's name for it; NULL for a canned answer */
	const char *path, *query;
	char *strings; /* one block: path, query, header names and values */
	struct http_header headers[HTTP_MAX_HEADERS];
	int n_headers;
	int minor;
	bool keep_alive;
	int64_t content_length; /* -1 = chunked */
	bool body_complete;
	bool expect_continue;
	enum http_body_mode mode;
	size_t cap;
	struct evbuffer *body;
	bool paused;
	http_body_cb body_cb;
	http_chunk_cb chunk_cb;
	void *body_arg;
	http_close_cb close_cb;
	void *close_arg;
	http_drain_cb drain_cb;
	void *drain_arg;
	size_t drain_low;
	struct evbuffer *extra_headers;
	bool started; /* status line sent */
	int status;   /* of the reply (0: none yet) */
	uint64_t body_bytes_out;
	http_done_cb done_cb; /* once, when the reply is finished */
	void *done_arg;
	bool chunked_reply;
	bool finished; /* the handler's reply is complete */
	bool handled;  /* the server's handler has returned (a body claimed later is moved by
			* http_request.c itself) */
	bool freeing;
	struct event *resume_ev;
	bool reserve;          /* came on a connection of the probes' reserve */
	bool evictable;        /* a long-lived stream that may be closed at the cap */
	int64_t last_write_us; /* monotonic: the stream's last chunk (or its start) */
	/* The body's deadline (http_server_limits): from when it was claimed,
	 * body_timeout_s plus a second per body_min_rate bytes, not counting
	 * time paused. Set by http_server.c when the head is complete. */
	int body_timeout_s, body_min_rate;
	struct event *body_timer;
	uint64_t *body_timeouts; /* the server's count of them (its stats) */
	int64_t body_start_us, paused_at_us, paused_us;
	uint64_t body_bytes_in;
};

struct http_conn {
	struct http_server *srv;
	struct bufferevent *bev;
	enum http_conn_state state;
	struct http_req *req;
	struct http_parser *parser;
	struct event *kick; /* completes a reply that left nothing to write */
	size_t lingered;
	LIST_ENTRY(http_conn) link;
	/* Waiting for a request head: in the server's queue and its peer's,
	 * oldest first, so either cap can close the oldest (see the header). */
	bool waiting;
	TAILQ_ENTRY(http_conn) wait_link;
	TAILQ_ENTRY(http_conn) peer_wait_link;
	struct event *head_timer; /* armed at a head's first byte */
	bool head_started;
	struct http_peer *peer; /* NULL for unix-socket clients */
	bool charged;           /* counted in the descriptor budget */
	bool tls;               /* a TLS connection (an OpenSSL bufferevent) */
	bool handshaken;        /* ... whose handshake is done */
	bool reserve;           /* one of the probes' reserve (not in max_conns) */
	bool in_streams;        /* its request is an evictable stream */
	LIST_ENTRY(http_conn) stream_link;
};

static inline void http_conn_set_read_timeout(struct http_conn *c, int secs)
{
	struct timeval r = {secs, 0}, w = {HTTP_WRITE_TIMEOUT_S, 0};
	bufferevent_set_timeouts(c->bev, secs ? &r : NULL, &w);
}

/* ---- http_request.c ---- */

/* The parser of one connection; http_parser_free undoes it. */
struct http_parser *http_parser_new(void);
void http_parser_free(struct http_parser *p);
/* Forget the request read before: the next bytes start a new one. */
void http_parser_reset(struct http_parser *p);

/* Read the request head from the connection's input. 1: c->req is the new
 * request, its head consumed; 0: more bytes are needed; -1: the head was
 * refused, and the connection answers and closes (http_reply_conn_fail). */
int http_request_read_head(struct http_conn *c);

/* Move body bytes from the connection's input to the consumer, as far as
 * the mode and a pause allow. */
void http_request_process_body(struct http_req *req);

/* The client has gone (c->req was detached): tell whoever still waits on
 * the request, and free it when nobody will reply. */
void http_request_orphaned(struct http_req *req);

/* ---- http_reply.c ---- */

/* The request's done callback, if any, once (the reply's end, or the
 * client gone before one). */
void http_req_fire_done(struct http_req *req);

/* Free a request and all it holds. */
void http_req_free(struct http_req *req);

/* Answer a request we could not even parse, then close: the connection
 * stops reading and holds a stand-in request, already finished. */
void http_reply_conn_fail(struct http_conn *c, int status, const char *code, const char *message);

/* A complete short JSON error answer, written straight to a socket that is
 * closed next (no buffers, no events). The message is ours, not escaped. */
void http_reply_canned(int fd, int status, enum err_code code, const char *message);

/* A JSON error reply with a status of its own (a 408 says bad_request). */
void http_req_reply_error_status(struct http_req *req, int status, enum err_code code,
				 const char *message);

#endif
