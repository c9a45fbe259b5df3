/* http_server.h: a small HTTP/1.1 server on libevent bufferevents.
 *
 * Why not evhttp: libevent 2.1's evhttp reads a whole request body into
 * memory before the handler runs, answers an oversized body with its own HTML
 * page (the API promises a JSON error), and gives a streamed reply no
 * backpressure. Uploads of 100 MB, JSON errors everywhere and live NDJSON
 * output to slow clients need all three, so this server hands the request to
 * its handler as soon as the headers are in, and lets the handler choose how
 * to take the body. Requests are parsed with llhttp, strictly (a head two
 * parsers could read two ways is a 400; see http_request.c). The code is
 * http_server.c (connections), http_request.c and http_reply.c; see
 * http_internal.h and docs/architecture.md.
 *
 * Ownership: a request belongs to its connection. The handler must give every
 * request exactly one reply (http_req_reply, or http_req_reply_start ...
 * http_req_reply_end); the request is freed when the reply is done, so the
 * handler must not touch it afterwards. If the client goes away first, the
 * close callback says so; the handler still replies (a no-op that frees). */
#ifndef CI_HTTP_SERVER_H
#define CI_HTTP_SERVER_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define HTTP_MAX_HEADER_BYTES (16 * 1024)
#define HTTP_MAX_HEADERS 64
#define HTTP_MAX_CONNECTIONS 4096

/* What slow or numerous clients may hold (the defaults of http_server_new).
 *
 * A connection waiting for a request (a new one, or a keep-alive one
 * between requests) is closed after idle_timeout_s without a byte; once a
 * request head has begun, the whole head must arrive within head_timeout_s
 * of its first byte, however the bytes trickle in (slowloris).
 *
 * No TCP peer (a source address; for IPv6 its /64, which one host usually
 * has whole) holds more than max_conns_per_peer connections, and nobody more
 * than max_conns in all; the descriptor budget (fdbudget.h) may stop new
 * connections earlier. At either cap, the oldest connection still waiting
 * for a request head (the peer's own, at the peer cap) is closed to make
 * room: a connection that has not sent a request yet costs its client the
 * least to lose, and without this a trickle spread over many addresses would
 * lock new clients out until the deadlines ran. Only when every connection
 * is busy with a request is the new one refused (429 at the peer cap, else
 * 503), with a short JSON answer written straight to the socket.
 *
 * At the global cap, after the connections waiting for a head, a long-lived
 * stream the handler marked evictable (http_req_set_evictable: GET
 * /v1/events) that has written nothing for idle_timeout_s is closed too,
 * the one idle longest first: such a stream costs its client a reconnect.
 *
 * Beyond max_conns, reserved_conns more are accepted for the probes: a
 * request on one of them is flagged (http_req_on_reserve) for the handler
 * to serve only what it must (/healthz, /readyz), and the connection closes
 * after it. When the reserve is full its oldest connection still waiting for
 * a head makes room.
 *
 * A request body must arrive within body_timeout_s of the handler claiming
 * it, plus one second for each body_min_rate bytes received (time the
 * handler paused the body does not count): a body trickled a byte at a time
 * is answered 408 and its connection closed, however its bytes are spaced. */
struct http_server_limits {
	int head_timeout_s;
	int idle_timeout_s;
	int max_conns;
	int max_conns_per_peer;
	int reserved_conns;
	int body_timeout_s;
	int body_min_rate; /* bytes a second */
};

struct http_server;
struct http_req;

/* Called once per request, when its headers are complete. */
typedef void (*http_request_cb)(struct http_req *req, void *arg);
/* The whole body (buffered, capped), NUL-terminated for convenience; or
 * body NULL when it was refused (too large, malformed): the server has then
 * already answered the request, and the handler only releases its state. */
typedef void (*http_body_cb)(struct http_req *req, const char *body, size_t len, void *arg);
enum http_body_state { HTTP_BODY_MORE, HTTP_BODY_END, HTTP_BODY_FAILED };
/* A piece of a streamed body (MORE), its end (END, len 0), or FAILED: the
 * body was malformed and the server has answered the request. */
typedef void (*http_chunk_cb)(struct http_req *req, const char *data, size_t len,
			      enum http_body_state state, void *arg);
typedef void (*http_close_cb)(struct http_req *req, void *arg);

struct http_server *http_server_new(struct event_base *base, http_request_cb cb, void *arg);

/* Listen on "HOST:PORT" or "unix:PATH"; may be called more than once. */
int http_server_listen(struct http_server *srv, const char *spec, struct err **errp);

/* Serve an already connected socket (socket activation, tests, fuzzing). */
void http_server_adopt(struct http_server *srv, int fd);

/* Replace the limits (before listening, or on a reload): caps apply to
 * connections accepted from then on, timeouts to waits begun from then on. */
void http_server_set_limits(struct http_server *srv, const struct http_server_limits *lim);

/* Serve TLS on the listeners made from now on (tls.h; not ours, it must
 * outlive the server). A reload of tls changes what new connections get.
 * Over TLS a refused connection (the caps above) is closed without an
 * answer, and the head deadline runs from the start of the wait (see
 * http_server.c's conn_start_waiting). */
struct tls;
void http_server_set_tls(struct http_server *srv, struct tls *tls);

/* Connections refused or closed early, since start (for /metrics and tests). */
struct http_server_stats {
	uint64_t refused_peer;           /* 429: the peer's connections were all busy */
	uint64_t refused_full;           /* 503: every connection busy, or no descriptors */
	uint64_t evicted;                /* waiting for a head, closed to make room */
	uint64_t evicted_streams;        /* idle evictable streams closed to make room */
	uint64_t head_timeouts;          /* request head not complete within head_timeout_s */
	uint64_t body_timeouts;          /* request body slower than body_min_rate (408) */
	uint64_t reserve_accepted;       /* accepted on the probes' reserve, past max_conns */
	uint64_t refused_emfile;         /* answered through the spare descriptor at EMFILE */
	uint64_t tls_handshake_failures; /* bad TLS, or plain HTTP to the TLS port */
};
const struct http_server_stats *http_server_get_stats(const struct http_server *srv);

/* Stop accepting new connections (drain). */
void http_server_stop_accepting(struct http_server *srv);

void http_server_free(struct http_server *srv);

const char *http_req_method(const struct http_req *req);
/* The path without the query, still percent-encoded. */
const char *http_req_path(const struct http_req *req);
/* The query string without '?', or "" when there is none. */
const char *http_req_query(const struct http_req *req);
/* A request header by name (case-insensitive), or NULL. */
const char *http_req_header(const struct http_req *req, const char *name);
/* The request's headers in the order they came: how many, and the i-th
 * (0 <= i < count; name and value borrowed, valid as long as req). */
int http_req_header_count(const struct http_req *req);
void http_req_header_at(const struct http_req *req, int i, const char **name, const char **value);
/* Content-Length, or -1 when the body is chunked; 0 when there is none. */
int64_t http_req_content_length(const struct http_req *req);
bool http_req_client_gone(const struct http_req *req);
/* The request came on a connection of the probes' reserve (the server was
 * full): the handler answers only a probe, and refuses anything else. */
bool http_req_on_reserve(const struct http_req *req);
/* Close the connection once this request's reply is out (no keep-alive). */
void http_req_close_after(struct http_req *req);
/* The reply is a long-lived stream its client can reconnect to: at the
 * connection cap, when it has written nothing for the idle timeout, it may
 * be closed to make room (its close callback runs, as when the client
 * leaves). */
void http_req_set_evictable(struct http_req *req);

/* Buffer the body up to cap bytes, then call cb exactly once. A larger body
 * gets a 413 JSON error from the server itself, and cb(req, NULL, 0, arg).
 * cb may run before this returns (no body, or one refused by its length). */
void http_req_read_body(struct http_req *req, size_t cap, http_body_cb cb, void *arg);

/* Deliver the body piece by piece. Between pause and resume no chunk is
 * delivered and the socket is not read (backpressure toward the client). */
void http_req_stream_body(struct http_req *req, http_chunk_cb cb, void *arg);
void http_req_pause_body(struct http_req *req);
void http_req_resume_body(struct http_req *req);

void http_req_set_close_cb(struct http_req *req, http_close_cb cb, void *arg);

/* Called once when the request's reply is finished (status 0 when the
 * client left before any), with the body bytes written; req is still
 * valid inside it. For the access log and the request metrics. */
typedef void (*http_done_cb)(struct http_req *req, int status, uint64_t body_bytes, void *arg);
void http_req_set_done_cb(struct http_req *req, http_done_cb cb, void *arg);

/* The client's address, "IP:PORT" ("[IPv6]:PORT"), or "unix" for a unix
 * socket client, into buf; "" once the client has gone. */
void http_req_peer(const struct http_req *req, char *buf, size_t size);

/* Add a response header (before the reply starts). */
void http_req_add_header(struct http_req *req, const char *name, const char *value);

void http_req_reply(struct http_req *req, int status, const char *content_type, const char *body,
		    size_t len);
/* A JSON error reply {"error":{"code","message"}} with the code's status. */
void http_req_reply_error(struct http_req *req, enum err_code code, const char *message);
/* The same with one more string member in the error object (a 429's
 * "quota": which quota refused). */
void http_req_reply_error_field(struct http_req *req, enum err_code code, const char *message,
				const char *key, const char *value);

/* A streamed reply: chunked when length is -1, else exactly length bytes
 * (Content-Length) must follow. */
void http_req_reply_start(struct http_req *req, int status, const char *content_type,
			  int64_t length);
void http_req_reply_chunk(struct http_req *req, const char *data, size_t len);
void http_req_reply_end(struct http_req *req);
/* End a streamed reply that failed half-way: the connection is closed so the
 * client sees a short body rather than a complete one. */
void http_req_reply_abort(struct http_req *req);
/* Bytes written to the client's socket buffer but not yet sent. */
size_t http_req_output_backlog(const struct http_req *req);
/* Called each time the output backlog drains below low (streaming). */
typedef void (*http_drain_cb)(struct http_req *req, void *arg);
void http_req_set_drain_cb(struct http_req *req, size_t low, http_drain_cb cb, void *arg);

/* Percent-decode src into a new string; NULL when malformed or when it
 * decodes to a NUL byte. Caller frees. */
char *http_percent_decode(const char *src, size_t len);

#endif
