/* http_server.c: HTTP/1.1 on bufferevents, one request at a time per connection.
 *
 * A connection is a small state machine: read the header block, hand the
 * request to the handler, move the body the way the handler asked (buffered
 * with a cap, or streamed with backpressure), wait for the reply to drain,
 * then either read the next request (keep-alive) or close. */
#include "http_server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "defer.h"
#include "fdbudget.h"
#include "json.h"
#include "listen_guard.h"
#include "log.h"
#include "xalloc.h"

#define HEAD_TIMEOUT_S 10
#define IDLE_TIMEOUT_S 30
#define MAX_CONNS_PER_PEER 512
#define BODY_TIMEOUT_S 60
#define WRITE_TIMEOUT_S 120
/* Pipelined bytes we hold while a request is handled. */
#define HANDLING_READ_HIGH (64 * 1024)

/* CS_LINGER: the answer went out before the client finished sending its
 * body (a 413, say). Closing at once would reset the connection and the
 * client, still writing, would never read the answer; so the rest is read
 * and discarded, within bounds, before closing. */
enum conn_state { CS_HEADERS, CS_HANDLING, CS_LINGER };
#define LINGER_MAX_BYTES (64u << 20)
#define LINGER_TIMEOUT_S 5
enum body_mode { BODY_UNCLAIMED, BODY_BUFFER, BODY_STREAM };
enum chunk_state { CH_SIZE, CH_DATA, CH_DATA_CRLF, CH_TRAILER };

struct http_header {
	char *name, *value;
};

struct http_conn;

struct http_req {
	struct http_conn *conn; /* NULL once the client has gone */
	struct event_base *base;
	char *method, *path, *query;
	struct http_header headers[HTTP_MAX_HEADERS];
	int n_headers;
	int minor;
	bool keep_alive;
	int64_t content_length; /* -1 = chunked */
	uint64_t body_left;     /* of Content-Length, or of the current chunk */
	enum chunk_state chunk_state;
	bool body_complete;
	bool expect_continue;
	enum body_mode mode;
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
	bool chunked_reply;
	bool finished; /* the handler's reply is complete */
	bool freeing;
	struct event *resume_ev;
};

struct http_peer;

struct http_conn {
	struct http_server *srv;
	struct bufferevent *bev;
	enum conn_state state;
	struct http_req *req;
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
};

/* A TCP source address and what it holds. */
#define PEER_BUCKETS 1024
struct http_peer {
	uint8_t key[17]; /* family, then 4 bytes of IPv4 or the 8 of an IPv6 /64 */
	char text[INET6_ADDRSTRLEN];
	uint32_t n_conns;
	TAILQ_HEAD(, http_conn) waiting;
	struct http_peer *next; /* in its bucket */
};

struct http_listener {
	struct evconnlistener *l;
	char *unix_path;
	LIST_ENTRY(http_listener) link;
};

struct http_server {
	struct event_base *base;
	http_request_cb cb;
	void *arg;
	int n_conns;
	LIST_HEAD(, http_conn) conns;
	LIST_HEAD(, http_listener) listeners;
	struct http_server_limits limits;
	TAILQ_HEAD(, http_conn) waiting;
	struct http_peer *peers[PEER_BUCKETS];
	uint32_t hash_seed;
	/* Kept open so that at EMFILE one descriptor can be freed to accept a
	 * waiting client and tell it so, rather than leave it hanging. */
	int spare_fd;
	bool want_spare; /* listening: keep the spare */
	struct http_server_stats stats;
};

static void conn_read_cb(struct bufferevent *bev, void *arg);
static void conn_process(struct http_conn *c);
static void req_process_body(struct http_req *req);

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
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Status";
	}
}

static void req_free(struct http_req *req)
{
	free(req->method);
	free(req->path);
	free(req->query);
	for (int i = 0; i < req->n_headers; i++) {
		free(req->headers[i].name);
		free(req->headers[i].value);
	}
	if (req->body)
		evbuffer_free(req->body);
	if (req->extra_headers)
		evbuffer_free(req->extra_headers);
	if (req->resume_ev)
		event_free(req->resume_ev);
	free(req);
}

static void req_free_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	req_free(arg);
}

/* ---- peers: per-address connection counts ---- */

static void peer_key(const struct sockaddr *sa, uint8_t key[17])
{
	memset(key, 0, 17);
	if (sa->sa_family == AF_INET) {
		key[0] = 4;
		memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return;
	}
	const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (memcmp(a, mapped, 12) == 0) { /* an IPv4 client of a dual-stack socket */
		key[0] = 4;
		memcpy(key + 1, a + 12, 4);
		return;
	}
	key[0] = 6;
	memcpy(key + 1, a, 8);
}

/* FNV-1a from a seed of the server's own: addresses chosen to collide in
 * one bucket would make every accept walk a long chain. */
static unsigned peer_hash(const struct http_server *srv, const uint8_t key[17])
{
	uint32_t h = 2166136261u ^ srv->hash_seed;
	for (int i = 0; i < 17; i++)
		h = (h ^ key[i]) * 16777619u;
	return h % PEER_BUCKETS;
}

/* The peer of sa, made when new (with no connections yet). */
static struct http_peer *peer_get(struct http_server *srv, const struct sockaddr *sa)
{
	uint8_t key[17];
	peer_key(sa, key);
	unsigned b = peer_hash(srv, key);
	for (struct http_peer *p = srv->peers[b]; p; p = p->next)
		if (memcmp(p->key, key, sizeof(key)) == 0)
			return p;
	struct http_peer *p = xcalloc(1, sizeof(*p));
	memcpy(p->key, key, sizeof(key));
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, p->text,
			  sizeof(p->text));
	else
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, p->text,
			  sizeof(p->text));
	TAILQ_INIT(&p->waiting);
	p->next = srv->peers[b];
	srv->peers[b] = p;
	return p;
}

/* Forget a peer once it holds nothing. */
static void peer_maybe_free(struct http_server *srv, struct http_peer *p)
{
	if (p == NULL || p->n_conns > 0)
		return;
	struct http_peer **pp = &srv->peers[peer_hash(srv, p->key)];
	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	free(p);
}

/* ---- connections ---- */

/* A complete short JSON error answer, written straight to a socket that is
 * closed next (no buffers, no events). The message is ours, not escaped. */
static void send_canned(int fd, int status, enum err_code code, const char *message)
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

/* Answer a connection we will not serve, and close it. */
static void refuse_socket(int fd, int status, enum err_code code, const char *message)
{
	/* Read what the client already sent: closing with unread bytes resets
	 * the connection, and the reset can overtake the answer. */
	char sink[4096];
	for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	send_canned(fd, status, code, message);
	close(fd);
}

static void conn_stop_waiting(struct http_conn *c)
{
	if (c->waiting) {
		TAILQ_REMOVE(&c->srv->waiting, c, wait_link);
		if (c->peer)
			TAILQ_REMOVE(&c->peer->waiting, c, peer_wait_link);
		c->waiting = false;
	}
	c->head_started = false;
	evtimer_del(c->head_timer);
}

/* The connection waits for a request (new, or kept alive after one). */
static void conn_start_waiting(struct http_conn *c)
{
	conn_stop_waiting(c);
	TAILQ_INSERT_TAIL(&c->srv->waiting, c, wait_link);
	if (c->peer)
		TAILQ_INSERT_TAIL(&c->peer->waiting, c, peer_wait_link);
	c->waiting = true;
}

static void conn_free(struct http_conn *c)
{
	struct http_server *srv = c->srv;
	conn_stop_waiting(c);
	LIST_REMOVE(c, link);
	srv->n_conns--;
	event_free(c->kick);
	event_free(c->head_timer);
	bufferevent_free(c->bev);
	if (c->charged)
		fdbudget_give(&fdbudget_daemon, FDBUDGET_HTTP, 1);
	if (c->peer) {
		c->peer->n_conns--;
		peer_maybe_free(srv, c->peer);
	}
	free(c);
	/* A descriptor was just freed: the spare may be had again. */
	if (srv->want_spare && srv->spare_fd < 0)
		srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* The client is gone (or we are closing): detach the request, which lives on
 * until its handler replies. */
static void conn_drop(struct http_conn *c)
{
	struct http_req *req = c->req;
	c->req = NULL;
	conn_free(c);
	if (req == NULL)
		return;
	req->conn = NULL;
	if (req->finished) {
		req_free(req);
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
		req->body_cb(req, NULL, 0, req->body_arg);
		req_free(req);
	}
}

static void conn_set_read_timeout(struct http_conn *c, int secs)
{
	struct timeval r = {secs, 0}, w = {WRITE_TIMEOUT_S, 0};
	bufferevent_set_timeouts(c->bev, secs ? &r : NULL, &w);
}

/* Write a complete response for a request we could not even parse, then close. */
static void conn_fail(struct http_conn *c, int status, const char *code, const char *message)
{
	char body[512];
	int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
			 code, message);
	evbuffer_add_printf(bufferevent_get_output(c->bev),
			    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			    "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
			    status, status_text(status), n, body);
	bufferevent_disable(c->bev, EV_READ);
	conn_stop_waiting(c);
	c->state = CS_HANDLING; /* nothing more is read */
	struct http_req *req = xcalloc(1, sizeof(*req));
	req->conn = c;
	req->base = c->srv->base;
	req->finished = true;
	req->keep_alive = false;
	c->req = req;
}

/* Parse the header block if it is complete. 1 = a request was started,
 * 0 = need more bytes, -1 = the connection was failed. */
static int conn_parse_headers(struct http_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos < 0) {
		if (evbuffer_get_length(in) > HTTP_MAX_HEADER_BYTES) {
			conn_fail(c, 431, "bad_request", "request headers larger than 16 KiB");
			return -1;
		}
		return 0;
	}
	if ((size_t)end.pos + 4 > HTTP_MAX_HEADER_BYTES) {
		conn_fail(c, 431, "bad_request", "request headers larger than 16 KiB");
		return -1;
	}
	size_t hlen = (size_t)end.pos + 4;
	AUTOFREE char *block = xmalloc(hlen + 1);
	evbuffer_remove(in, block, hlen);
	block[hlen] = '\0';

	struct http_req *req = xcalloc(1, sizeof(*req));
	req->conn = c;
	req->base = c->srv->base;
	c->req = req;
	char *save = NULL;
	char *line = strtok_r(block, "\r\n", &save);
	char method[16], target[8192];
	int major = 0, minor = 0;
	if (line == NULL || strlen(line) > sizeof(target) ||
	    sscanf(line, "%15s %8191s HTTP/%d.%d", method, target, &major, &minor) != 4 ||
	    major != 1 || (minor != 0 && minor != 1)) {
	conn_fail_req:
		c->req = NULL;
		req_free(req);
		conn_fail(c, 400, "bad_request", "malformed HTTP request");
		return -1;
	}
	req->method = xstrdup(method);
	req->minor = minor;
	char *q = strchr(target, '?');
	req->query = xstrdup(q ? q + 1 : "");
	if (q)
		*q = '\0';
	if (target[0] != '/')
		goto conn_fail_req;
	req->path = xstrdup(target);
	while ((line = strtok_r(NULL, "\r\n", &save)) != NULL) {
		char *colon = strchr(line, ':');
		if (req->n_headers >= HTTP_MAX_HEADERS) {
			c->req = NULL;
			req_free(req);
			conn_fail(c, 431, "bad_request", "more than 64 request header fields");
			return -1;
		}
		if (colon == NULL || colon == line)
			goto conn_fail_req;
		*colon = '\0';
		for (char *p = line; *p; p++)
			if (isspace((unsigned char)*p))
				goto conn_fail_req;
		char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		char *e = v + strlen(v);
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		req->headers[req->n_headers].name = xstrdup(line);
		req->headers[req->n_headers].value = xstrdup(v);
		req->n_headers++;
	}
	const char *te = http_req_header(req, "Transfer-Encoding");
	const char *cl = http_req_header(req, "Content-Length");
	/* Two lengths, or a length and chunking, is how requests are smuggled
	 * past a proxy that reads the other one: refuse. */
	int n_cl = 0, n_te = 0;
	for (int i = 0; i < req->n_headers; i++) {
		n_cl += strcasecmp(req->headers[i].name, "Content-Length") == 0;
		n_te += strcasecmp(req->headers[i].name, "Transfer-Encoding") == 0;
	}
	if (n_cl > 1 || n_te > 1 || (n_cl && n_te))
		goto conn_fail_req;
	if (te && strcasecmp(te, "chunked") == 0) {
		req->content_length = -1;
		req->chunk_state = CH_SIZE;
	} else if (te) {
		goto conn_fail_req;
	} else if (cl) {
		char *e = NULL;
		errno = 0;
		long long n = strtoll(cl, &e, 10);
		if (errno || *e != '\0' || n < 0)
			goto conn_fail_req;
		req->content_length = n;
		req->body_left = (uint64_t)n;
	}
	req->body_complete = req->content_length == 0;
	const char *conn_hdr = http_req_header(req, "Connection");
	req->keep_alive = minor == 1 ? !(conn_hdr && strcasecmp(conn_hdr, "close") == 0)
				     : (conn_hdr && strcasecmp(conn_hdr, "keep-alive") == 0);
	const char *expect = http_req_header(req, "Expect");
	req->expect_continue = expect && strcasecmp(expect, "100-continue") == 0;
	return 1;
}

static void conn_process(struct http_conn *c)
{
	for (;;) {
		if (c->state == CS_HEADERS) {
			/* The head's deadline counts from its first byte, not
			 * from the last one as the idle timeout does. */
			if (!c->head_started &&
			    evbuffer_get_length(bufferevent_get_input(c->bev)) > 0) {
				c->head_started = true;
				struct timeval tv = {c->srv->limits.head_timeout_s, 0};
				evtimer_add(c->head_timer, &tv);
			}
			int rc = conn_parse_headers(c);
			if (rc <= 0)
				return;
			conn_stop_waiting(c);
			c->state = CS_HANDLING;
			conn_set_read_timeout(c, 0);
			bufferevent_setwatermark(c->bev, EV_READ, 0, HANDLING_READ_HIGH);
			struct http_req *req = c->req;
			c->srv->cb(req, c->srv->arg);
			/* The handler may have replied already; the request
			 * stays allocated until its reply drains. */
			if (c->req == req && !req->finished)
				req_process_body(req);
			return;
		}
		if (c->req && !c->req->finished)
			req_process_body(c->req);
		return;
	}
}

static void conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	if (c->state == CS_LINGER) {
		struct evbuffer *in = bufferevent_get_input(bev);
		c->lingered += evbuffer_get_length(in);
		evbuffer_drain(in, evbuffer_get_length(in));
		if (c->lingered > LINGER_MAX_BYTES)
			conn_free(c);
		return;
	}
	conn_process(c);
}

static void req_done_writing(struct http_conn *c)
{
	struct http_req *req = c->req;
	bool keep = req->keep_alive && req->body_complete;
	bool unread_body = !req->body_complete && req->method != NULL;
	c->req = NULL;
	req_free(req);
	if (!keep && unread_body) {
		c->state = CS_LINGER;
		shutdown(bufferevent_getfd(c->bev), SHUT_WR);
		bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
		conn_set_read_timeout(c, LINGER_TIMEOUT_S);
		bufferevent_enable(c->bev, EV_READ);
		return;
	}
	if (!keep) {
		conn_free(c);
		return;
	}
	c->state = CS_HEADERS;
	conn_start_waiting(c);
	conn_set_read_timeout(c, c->srv->limits.idle_timeout_s);
	bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	bufferevent_enable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
		conn_process(c);
}

static void conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	struct http_req *req = c->req;
	if (req == NULL)
		return;
	size_t backlog = evbuffer_get_length(bufferevent_get_output(bev));
	if (req->finished && backlog == 0) {
		req_done_writing(c);
		return;
	}
	if (!req->finished && req->drain_cb && backlog <= req->drain_low)
		req->drain_cb(req, req->drain_arg);
}

static void conn_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct http_conn *c = arg;
	conn_write_cb(c->bev, c);
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	struct http_conn *c = arg;
	if ((what & BEV_EVENT_TIMEOUT && c->state == CS_HEADERS && c->req == NULL) ||
	    c->state == CS_LINGER) {
		conn_free(c); /* idle keep-alive, slow headers, or lingering done */
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		conn_drop(c);
}

static void conn_head_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct http_conn *c = arg;
	if (c->state != CS_HEADERS || c->req != NULL)
		return;
	struct http_server *srv = c->srv;
	srv->stats.head_timeouts++;
	char msg[96];
	snprintf(msg, sizeof(msg), "request head not complete within %d s",
		 srv->limits.head_timeout_s);
	log_info_limited("http: closed a connection from %s: %s", c->peer ? c->peer->text : "unix",
			 msg);
	send_canned(bufferevent_getfd(c->bev), 408, ERR_BAD_REQUEST, msg);
	conn_free(c);
}

/* Close the oldest connection of the queue that waits for a head (one of
 * the peer's when peer is set); false when none waits. */
static bool conn_evict_oldest(struct http_server *srv, struct http_peer *peer)
{
	struct http_conn *old = peer ? TAILQ_FIRST(&peer->waiting) : TAILQ_FIRST(&srv->waiting);
	if (old == NULL)
		return false;
	srv->stats.evicted++;
	log_info_limited("http: closed an idle connection from %s to make room (%s)",
			 old->peer ? old->peer->text : "unix",
			 peer ? "max-conns-per-peer" : "max-connections or the descriptor budget");
	conn_free(old); /* waiting: no request, no handler */
	return true;
}

/* Serve fd; sa is the TCP peer (NULL for unix sockets and adopted ones).
 * An accepted connection may be refused; an adopted one is only counted. */
static void conn_new(struct http_server *srv, evutil_socket_t fd, const struct sockaddr *sa,
		     bool refusable)
{
	struct http_peer *peer = NULL;
	if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
		peer = peer_get(srv, sa);
		peer->n_conns++; /* counted first: an eviction below cannot free it */
		if (peer->n_conns > (uint32_t)srv->limits.max_conns_per_peer &&
		    !conn_evict_oldest(srv, peer)) {
			srv->stats.refused_peer++;
			log_info_limited("http: refused a connection from %s: its %u connections "
					 "are all busy (max-conns-per-peer)",
					 peer->text, peer->n_conns - 1);
			refuse_socket(fd, 429, ERR_QUOTA_EXCEEDED,
				      "too many connections from your address");
			peer->n_conns--;
			peer_maybe_free(srv, peer);
			return;
		}
	}
	bool charged = false;
	if (!refusable) {
		fdbudget_charge(&fdbudget_daemon, FDBUDGET_HTTP, 1);
		charged = true;
	}
	for (int tries = 0; !charged; tries++) {
		if (srv->n_conns < srv->limits.max_conns &&
		    fdbudget_take(&fdbudget_daemon, FDBUDGET_HTTP, 1)) {
			charged = true;
			break;
		}
		/* Two at most: the budget may be short by more than the one
		 * descriptor a closed connection gives back. */
		if (tries >= 2 || !conn_evict_oldest(srv, NULL))
			break;
	}
	if (!charged) {
		srv->stats.refused_full++;
		log_warn_limited("http: refused a connection from %s: %d connections, %lld "
				 "descriptors in use of %lld",
				 peer ? peer->text : "unix", srv->n_conns,
				 (long long)fdbudget_in_use(&fdbudget_daemon),
				 (long long)fdbudget_daemon.limit);
		refuse_socket(fd, 503, ERR_UNAVAILABLE,
			      srv->n_conns >= srv->limits.max_conns
				  ? "the daemon serves as many connections as it may; retry shortly"
				  : "the daemon is near its file-descriptor limit; retry shortly");
		if (peer) {
			peer->n_conns--;
			peer_maybe_free(srv, peer);
		}
		return;
	}
	struct http_conn *c = xcalloc(1, sizeof(*c));
	c->srv = srv;
	c->state = CS_HEADERS;
	c->peer = peer;
	c->charged = true;
	c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL)
		abort();
	if (peer) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
	c->kick = evtimer_new(srv->base, conn_kick_cb, c);
	c->head_timer = evtimer_new(srv->base, conn_head_timeout_cb, c);
	LIST_INSERT_HEAD(&srv->conns, c, link);
	srv->n_conns++;
	conn_start_waiting(c);
	conn_set_read_timeout(c, srv->limits.idle_timeout_s);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	(void)l;
	(void)len;
	conn_new(arg, fd, sa, true);
}

/* EMFILE at the API listener: free the spare descriptor, accept one waiting
 * client with it, tell that client, close, take the spare back; a few times,
 * then the listener pauses (listen_guard.c). Clients learn that the daemon
 * is out of descriptors rather than hang in the backlog. */
static void api_exhausted(evutil_socket_t lfd, void *arg)
{
	struct http_server *srv = arg;
	if (srv->spare_fd < 0)
		srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < 32 && srv->spare_fd >= 0; i++) {
		close(srv->spare_fd);
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			srv->stats.refused_emfile++;
			refuse_socket(fd, 503, ERR_UNAVAILABLE,
				      "the daemon is out of file descriptors; retry shortly");
		}
		srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
	}
}

void http_server_adopt(struct http_server *srv, int fd)
{
	evutil_make_socket_nonblocking(fd);
	conn_new(srv, fd, NULL, false); /* handed to us, already open */
}

struct http_server *http_server_new(struct event_base *base, http_request_cb cb, void *arg)
{
	struct http_server *srv = xcalloc(1, sizeof(*srv));
	srv->base = base;
	srv->cb = cb;
	srv->arg = arg;
	LIST_INIT(&srv->conns);
	LIST_INIT(&srv->listeners);
	TAILQ_INIT(&srv->waiting);
	srv->limits = (struct http_server_limits){
	    .head_timeout_s = HEAD_TIMEOUT_S,
	    .idle_timeout_s = IDLE_TIMEOUT_S,
	    .max_conns = HTTP_MAX_CONNECTIONS,
	    .max_conns_per_peer = MAX_CONNS_PER_PEER,
	};
	srv->spare_fd = -1;
	if (getrandom(&srv->hash_seed, sizeof(srv->hash_seed), GRND_NONBLOCK) < 0)
		srv->hash_seed = (uint32_t)(uintptr_t)srv;
	return srv;
}

void http_server_set_limits(struct http_server *srv, const struct http_server_limits *lim)
{
	srv->limits = *lim;
}

const struct http_server_stats *http_server_get_stats(const struct http_server *srv)
{
	return &srv->stats;
}

int http_server_listen(struct http_server *srv, const char *spec, struct err **errp)
{
	struct http_listener *hl = xcalloc(1, sizeof(*hl));
	if (strncmp(spec, "unix:", 5) == 0) {
		const char *path = spec + 5;
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		if (strlen(path) >= sizeof(sun.sun_path)) {
			free(hl);
			return err_set(errp, ERR_BAD_REQUEST, "listen %s: path too long", spec);
		}
		strcpy(sun.sun_path, path);
		unlink(path);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
		    chmod(path, 0660) < 0 || listen(fd, 512) < 0) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			free(hl);
			return err_set(errp, ERR_UNAVAILABLE, "listen %s: %s", spec, strerror(e));
		}
		hl->unix_path = xstrdup(path);
		hl->l = evconnlistener_new(srv->base, accept_cb, srv,
					   LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	} else {
		struct sockaddr_storage ss;
		int sslen = sizeof(ss);
		if (evutil_parse_sockaddr_port(spec, (struct sockaddr *)&ss, &sslen) < 0) {
			free(hl);
			return err_set(errp, ERR_BAD_REQUEST,
				       "listen %s: expected HOST:PORT (an IP address) or unix:PATH",
				       spec);
		}
		hl->l = evconnlistener_new_bind(srv->base, accept_cb, srv,
						LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
						    LEV_OPT_CLOSE_ON_EXEC,
						512, (struct sockaddr *)&ss, sslen);
		if (hl->l == NULL) {
			int e = errno;
			free(hl);
			return err_set(errp, ERR_UNAVAILABLE, "listen %s: %s", spec, strerror(e));
		}
	}
	if (hl->l == NULL)
		abort();
	listen_guard_watch(hl->l, "api", api_exhausted, srv);
	LIST_INSERT_HEAD(&srv->listeners, hl, link);
	srv->want_spare = true;
	if (srv->spare_fd < 0)
		srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return 0;
}

void http_server_stop_accepting(struct http_server *srv)
{
	struct http_listener *hl;
	LIST_FOREACH (hl, &srv->listeners, link) {
		listen_guard_unwatch(hl->l); /* its backoff would enable it again */
		evconnlistener_disable(hl->l);
	}
}

void http_server_free(struct http_server *srv)
{
	if (srv == NULL)
		return;
	while (!LIST_EMPTY(&srv->listeners)) {
		struct http_listener *hl = LIST_FIRST(&srv->listeners);
		LIST_REMOVE(hl, link);
		listen_guard_unwatch(hl->l);
		evconnlistener_free(hl->l);
		if (hl->unix_path)
			unlink(hl->unix_path);
		free(hl->unix_path);
		free(hl);
	}
	srv->want_spare = false;
	while (!LIST_EMPTY(&srv->conns)) {
		struct http_conn *c = LIST_FIRST(&srv->conns);
		if (c->req) {
			c->req->conn = NULL;
			if (c->req->finished)
				req_free(c->req);
			/* else: owned by a handler that is being torn down too */
		}
		c->req = NULL;
		conn_free(c);
	}
	if (srv->spare_fd >= 0)
		close(srv->spare_fd);
	free(srv);
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

int64_t http_req_content_length(const struct http_req *req)
{
	return req->content_length;
}

bool http_req_client_gone(const struct http_req *req)
{
	return req->conn == NULL;
}

void http_req_set_close_cb(struct http_req *req, http_close_cb cb, void *arg)
{
	req->close_cb = cb;
	req->close_arg = arg;
}

static void send_continue(struct http_req *req)
{
	if (req->expect_continue && req->conn && !req->body_complete) {
		evbuffer_add_printf(bufferevent_get_output(req->conn->bev),
				    "HTTP/1.1 100 Continue\r\n\r\n");
		req->expect_continue = false;
	}
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
	/* Called from the handler: conn_process moves the body after it returns,
	 * or at once when there is none. */
	if (req->body_complete && req->conn && req->conn->state == CS_HANDLING &&
	    req->content_length == 0) {
		cb(req, "", 0, arg);
	}
}

void http_req_stream_body(struct http_req *req, http_chunk_cb cb, void *arg)
{
	req->mode = BODY_STREAM;
	req->chunk_cb = cb;
	req->body_arg = arg;
	if (req->conn)
		bufferevent_setwatermark(req->conn->bev, EV_READ, 0, 256 * 1024);
	send_continue(req);
	if (req->content_length == 0)
		cb(req, NULL, 0, HTTP_BODY_END, arg);
}

void http_req_pause_body(struct http_req *req)
{
	req->paused = true;
	if (req->conn)
		bufferevent_disable(req->conn->bev, EV_READ);
}

static void req_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	req_process_body(arg);
}

void http_req_resume_body(struct http_req *req)
{
	if (!req->paused)
		return;
	req->paused = false;
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
	enum body_mode mode = req->mode;
	req->mode = BODY_UNCLAIMED;
	req->keep_alive = false;
	http_req_reply_error(req, code, msg);
	if (mode == BODY_BUFFER)
		req->body_cb(req, NULL, 0, req->body_arg);
	else if (mode == BODY_STREAM)
		req->chunk_cb(req, NULL, 0, HTTP_BODY_FAILED, req->body_arg);
}

/* Hand `n` bytes at the head of `in` to the body consumer. */
static void body_take(struct http_req *req, struct evbuffer *in, size_t n)
{
	if (req->mode == BODY_BUFFER) {
		if (evbuffer_get_length(req->body) + n > req->cap) {
			/* Only a chunked body can get here: its length was unknown. */
			evbuffer_drain(in, n);
			char msg[128];
			snprintf(msg, sizeof(msg), "request body exceeds the limit of %zu bytes",
				 req->cap);
			body_fail(req, ERR_PAYLOAD_TOO_LARGE, msg);
			return;
		}
		evbuffer_remove_buffer(in, req->body, n);
		return;
	}
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
	req->chunk_cb(req, p, n, HTTP_BODY_MORE, req->body_arg);
	evbuffer_drain(in, n);
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

static void req_process_body(struct http_req *req)
{
	struct http_conn *c = req->conn;
	if (c == NULL || req->body_complete || req->mode == BODY_UNCLAIMED || req->finished)
		return;
	if (c->state != CS_HANDLING)
		return;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	if (req->mode == BODY_STREAM || req->mode == BODY_BUFFER) {
		conn_set_read_timeout(c, BODY_TIMEOUT_S);
		bufferevent_setwatermark(c->bev, EV_READ, 0, 256 * 1024);
	}
	while (!req->paused && !req->body_complete && req->mode != BODY_UNCLAIMED &&
	       !req->finished && req->conn) {
		size_t avail = evbuffer_get_length(in);
		if (req->content_length >= 0) {
			if (avail == 0)
				return;
			size_t n = avail < req->body_left ? avail : (size_t)req->body_left;
			req->body_left -= n;
			body_take(req, in, n);
			if (req->body_left == 0 && req->mode != BODY_UNCLAIMED && !req->finished) {
				conn_set_read_timeout(c, 0);
				body_complete(req);
			}
			continue;
		}
		/* Chunked transfer coding. */
		if (req->chunk_state == CH_SIZE || req->chunk_state == CH_TRAILER) {
			size_t llen = 0;
			char *line = evbuffer_readln(in, &llen, EVBUFFER_EOL_CRLF);
			if (line == NULL) {
				if (avail > 1024)
					body_fail(req, ERR_BAD_REQUEST, "malformed chunked body");
				return;
			}
			if (req->chunk_state == CH_TRAILER) {
				bool end = llen == 0;
				free(line);
				if (end) {
					conn_set_read_timeout(c, 0);
					body_complete(req);
				}
				continue;
			}
			char *e = NULL;
			unsigned long long size = strtoull(line, &e, 16);
			bool bad = e == line || (*e != '\0' && *e != ';') || size > (1ull << 40);
			free(line);
			if (bad) {
				body_fail(req, ERR_BAD_REQUEST, "malformed chunk size");
				return;
			}
			req->body_left = size;
			req->chunk_state = size == 0 ? CH_TRAILER : CH_DATA;
			continue;
		}
		if (req->chunk_state == CH_DATA) {
			if (avail == 0)
				return;
			size_t n = avail < req->body_left ? avail : (size_t)req->body_left;
			req->body_left -= n;
			body_take(req, in, n);
			if (req->body_left == 0)
				req->chunk_state = CH_DATA_CRLF;
			continue;
		}
		/* CH_DATA_CRLF */
		if (avail < 2)
			return;
		char crlf[2];
		evbuffer_remove(in, crlf, 2);
		if (crlf[0] != '\r' || crlf[1] != '\n') {
			body_fail(req, ERR_BAD_REQUEST, "malformed chunked body");
			return;
		}
		req->chunk_state = CH_SIZE;
	}
}

void http_req_add_header(struct http_req *req, const char *name, const char *value)
{
	if (req->extra_headers == NULL)
		req->extra_headers = evbuffer_new();
	evbuffer_add_printf(req->extra_headers, "%s: %s\r\n", name, value);
}

/* The request is answered: free it now if nobody can read the answer, else
 * when the output drains (conn_write_cb), never inside the handler's call. */
static void req_finish(struct http_req *req)
{
	req->finished = true;
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
	if (evbuffer_get_length(bufferevent_get_output(req->conn->bev)) == 0) {
		defer_event(req->conn->kick);
	}
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
	if (req->conn) {
		bool no_body = status == 204 || status == 304;
		write_head(req, status, content_type, no_body ? -2 : (int64_t)len);
		if (!no_body && len && strcmp(req->method ? req->method : "", "HEAD") != 0)
			evbuffer_add(bufferevent_get_output(req->conn->bev), body, len);
	}
	req_finish(req);
}

void http_req_reply_error(struct http_req *req, enum err_code code, const char *message)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "error");
	jg_obj(g);
	jg_kv_str(g, "code", err_code_name(code));
	jg_kv_str(g, "message", message);
	jg_obj_end(g);
	jg_obj_end(g);
	size_t len;
	const char *text = jg_text(g, &len);
	http_req_reply(req, err_code_status(code), "application/json", text, len);
}

void http_req_reply_start(struct http_req *req, int status, const char *content_type,
			  int64_t length)
{
	if (req->finished || req->started)
		return;
	req->chunked_reply = length < 0 && req->minor >= 1;
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
