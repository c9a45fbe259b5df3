/* http_server.c: the API server's connections, one request at a time each.
 *
 * A connection is a small state machine: read a request head
 * (http_request.c), hand the request to the handler, let the body move the
 * way the handler asked, wait for the reply to drain (http_reply.c), then
 * either read the next request (keep-alive, pipelining) or close. Around it:
 * the listeners, the caps on what clients may hold (per peer, in all, the
 * descriptor budget), eviction of idle connections, the head deadline and
 * the idle timeout, and the spare descriptor for EMFILE. */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "defer.h"
#include "fdbudget.h"
#include "http_internal.h"
#include "listen_guard.h"
#include "log.h"
#include "tls.h"
#include "xalloc.h"

#define HEAD_TIMEOUT_S 10
#define IDLE_TIMEOUT_S 30
#define MAX_CONNS_PER_PEER 512
#define RESERVED_CONNS 16
#define BODY_TIMEOUT_S 30
#define BODY_MIN_RATE 1024
#define LINGER_MAX_BYTES (64u << 20)
#define LINGER_TIMEOUT_S 5

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
	struct http_server *srv;
	struct evconnlistener *l;
	char *unix_path;
	bool tls; /* its connections start with a TLS handshake */
	LIST_ENTRY(http_listener) link;
};

struct http_server {
	struct event_base *base;
	http_request_cb cb;
	void *arg;
	int n_conns;   /* counted in max_conns */
	int n_reserve; /* on the probes' reserve, beyond it */
	LIST_HEAD(, http_conn) conns;
	LIST_HEAD(, http_listener) listeners;
	struct http_server_limits limits;
	TAILQ_HEAD(http_conn_queue, http_conn) waiting; /* of the n_conns, oldest first */
	struct http_conn_queue reserve_waiting;         /* of the reserve, oldest first */
	LIST_HEAD(, http_conn) streams;                 /* serving an evictable stream */
	struct http_peer *peers[PEER_BUCKETS];
	uint32_t hash_seed;
	/* Kept open so that at EMFILE one descriptor can be freed to accept a
	 * waiting client and tell it so, rather than leave it hanging. */
	int spare_fd;
	bool want_spare; /* listening: keep the spare */
	struct http_server_stats stats;
	struct tls *tls; /* not ours; NULL = plain HTTP */
};

static void conn_process(struct http_conn *c);

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

/* Answer a connection we will not serve, and close it. A TLS client could
 * not read a plain answer: it only sees the connection close. */
static void refuse_socket(int fd, bool tls, int status, enum err_code code, const char *message)
{
	/* Read what the client already sent: closing with unread bytes resets
	 * the connection, and the reset can overtake the answer. */
	char sink[4096];
	for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	if (!tls)
		http_reply_canned(fd, status, code, message);
	close(fd);
}

static void conn_stop_waiting(struct http_conn *c)
{
	if (c->waiting) {
		TAILQ_REMOVE(c->reserve ? &c->srv->reserve_waiting : &c->srv->waiting, c,
			     wait_link);
		if (c->peer)
			TAILQ_REMOVE(&c->peer->waiting, c, peer_wait_link);
		c->waiting = false;
	}
	c->head_started = false;
	evtimer_del(c->head_timer);
}

/* The connection waits for a request (new, or kept alive after one).
 *
 * Over TLS the head's deadline cannot wait for the first byte: a handshake,
 * or a TLS record, trickled a byte at a time yields no byte of request and
 * keeps the idle timeout from running out. So a TLS connection gets the
 * idle and head timeouts together, from now, to show the first byte of a
 * request (then head-timeout-s for the rest of the head, as in clear). */
static void conn_start_waiting(struct http_conn *c)
{
	conn_stop_waiting(c);
	TAILQ_INSERT_TAIL(c->reserve ? &c->srv->reserve_waiting : &c->srv->waiting, c, wait_link);
	if (c->peer)
		TAILQ_INSERT_TAIL(&c->peer->waiting, c, peer_wait_link);
	c->waiting = true;
	if (c->tls) {
		struct timeval tv = {c->srv->limits.idle_timeout_s + c->srv->limits.head_timeout_s,
				     0};
		evtimer_add(c->head_timer, &tv);
	}
}

/* The connection's request is no longer a stream that may be evicted. */
static void conn_unstream(struct http_conn *c)
{
	if (c->in_streams) {
		LIST_REMOVE(c, stream_link);
		c->in_streams = false;
	}
}

static void conn_free(struct http_conn *c)
{
	struct http_server *srv = c->srv;
	conn_stop_waiting(c);
	conn_unstream(c);
	LIST_REMOVE(c, link);
	if (c->reserve)
		srv->n_reserve--;
	else
		srv->n_conns--;
	event_free(c->kick);
	event_free(c->head_timer);
	bufferevent_free(c->bev);
	http_parser_free(c->parser);
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
	if (req)
		http_request_orphaned(req);
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
			int rc = http_request_read_head(c);
			if (rc == 0)
				return;
			conn_stop_waiting(c);
			if (rc < 0)
				return; /* answered (400, 431): closes once written */
			c->state = CS_HANDLING;
			http_conn_set_read_timeout(c, 0);
			bufferevent_setwatermark(c->bev, EV_READ, 0, HTTP_HANDLING_READ_HIGH);
			struct http_req *req = c->req;
			req->body_timeout_s = c->srv->limits.body_timeout_s;
			req->body_min_rate = c->srv->limits.body_min_rate;
			req->body_timeouts = &c->srv->stats.body_timeouts;
			if (c->reserve) { /* one request, then the slot is free again */
				req->reserve = true;
				req->keep_alive = false;
			}
			c->srv->cb(req, c->srv->arg);
			/* The handler may have replied already; the request
			 * stays allocated until its reply drains. */
			if (c->req == req)
				req->handled = true;
			if (c->req == req && !req->finished)
				http_request_process_body(req);
			return;
		}
		if (c->req && !c->req->finished)
			http_request_process_body(c->req);
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
	bool unread_body = !req->body_complete && req->method != NULL; /* not canned */
	c->req = NULL;
	conn_unstream(c);
	http_req_free(req);
	if (!keep && unread_body) {
		c->state = CS_LINGER;
		shutdown(bufferevent_getfd(c->bev), SHUT_WR);
		bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
		http_conn_set_read_timeout(c, LINGER_TIMEOUT_S);
		/* In all, too: a trickle would keep the read timeout from
		 * running out (conn_head_timeout_cb ends it). */
		struct timeval tv = {LINGER_TIMEOUT_S, 0};
		evtimer_add(c->head_timer, &tv);
		bufferevent_enable(c->bev, EV_READ);
		return;
	}
	if (!keep) {
		conn_free(c);
		return;
	}
	c->state = CS_HEADERS;
	http_parser_reset(c->parser);
	conn_start_waiting(c);
	http_conn_set_read_timeout(c, c->srv->limits.idle_timeout_s);
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

/* The TLS handshake failed: count it, and say why once in a while. A
 * client that spoke plain HTTP to the TLS port is told so, in plain HTTP. */
static void conn_tls_failed(struct http_conn *c)
{
	struct http_server *srv = c->srv;
	unsigned long e = bufferevent_get_openssl_error(c->bev);
	bool plain = tls_error_is_plain_http(e);
	while (bufferevent_get_openssl_error(c->bev) != 0)
		;
	srv->stats.tls_handshake_failures++;
	log_info_limited("http: TLS handshake with %s failed: %s", c->peer ? c->peer->text : "unix",
			 plain ? "the client spoke plain HTTP" : "bad or no TLS from the client");
	if (plain) {
		int fd = bufferevent_getfd(c->bev);
		char sink[4096]; /* unread bytes would turn the close into a reset */
		for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
			;
		http_reply_canned(fd, 400, ERR_BAD_REQUEST, "this port speaks TLS: use https://");
	}
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	struct http_conn *c = arg;
	if (what & BEV_EVENT_CONNECTED) { /* the TLS handshake is done */
		c->handshaken = true;
		return;
	}
	if (c->tls && !c->handshaken && (what & BEV_EVENT_ERROR))
		conn_tls_failed(c);
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
	if (c->state == CS_LINGER) {
		conn_free(c); /* the rest of a refused body, trickled */
		return;
	}
	if (c->state != CS_HEADERS || c->req != NULL)
		return;
	struct http_server *srv = c->srv;
	srv->stats.head_timeouts++;
	char msg[96];
	if (c->head_started)
		snprintf(msg, sizeof(msg), "request head not complete within %d s",
			 srv->limits.head_timeout_s);
	else
		snprintf(msg, sizeof(msg), "%sno request within %d s",
			 c->handshaken ? "" : "TLS handshake not done, ",
			 srv->limits.idle_timeout_s + srv->limits.head_timeout_s);
	log_info_limited("http: closed a connection from %s: %s", c->peer ? c->peer->text : "unix",
			 msg);
	/* Over TLS a clear answer would be noise in the client's stream. */
	if (!c->tls)
		http_reply_canned(bufferevent_getfd(c->bev), 408, ERR_BAD_REQUEST, msg);
	conn_free(c);
}

/* Bytes wait in the connection's socket that the loop has not read yet. */
static bool conn_has_unread_bytes(struct http_conn *c)
{
	char b;
	return recv(bufferevent_getfd(c->bev), &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* How far down the waiting queue eviction looks for a silent connection. */
#define EVICT_SCAN_MAX 16

/* Close the oldest connection of the queue that waits for a head (one of
 * the peer's when peer is set); false when none waits.
 *
 * A connection whose request already sits in its socket is not idle, only
 * not read yet: on a busy machine the loop may accept a backlog of
 * connections, each evicting one, before it reads a client that sent its
 * whole request at once. Evicting that client reset a legitimate /healthz
 * under a flood (issue 27). So the oldest of the first EVICT_SCAN_MAX that
 * has nothing unread goes; if all of them have bytes waiting, the oldest. */
static bool conn_evict_oldest(struct http_server *srv, struct http_peer *peer)
{
	struct http_conn *first = peer ? TAILQ_FIRST(&peer->waiting) : TAILQ_FIRST(&srv->waiting);
	if (first == NULL)
		return false;
	struct http_conn *old = first;
	for (int i = 0; old && i < EVICT_SCAN_MAX && conn_has_unread_bytes(old); i++)
		old = peer ? TAILQ_NEXT(old, peer_wait_link) : TAILQ_NEXT(old, wait_link);
	if (old == NULL || conn_has_unread_bytes(old))
		old = first;
	srv->stats.evicted++;
	log_info_limited("http: closed an idle connection from %s to make room (%s)",
			 old->peer ? old->peer->text : "unix",
			 peer ? "max-conns-per-peer" : "max-connections or the descriptor budget");
	conn_free(old); /* waiting: no request, no handler */
	return true;
}

/* Close the evictable stream that has written nothing for longest, if it
 * has been silent for the idle timeout at least; false when none has. Its
 * handler hears it as a client gone (the close callback). */
static bool conn_evict_stream(struct http_server *srv)
{
	int64_t idle_us = (int64_t)srv->limits.idle_timeout_s * 1000000;
	int64_t now = clock_mono_us();
	struct http_conn *c, *old = NULL;
	LIST_FOREACH (c, &srv->streams, stream_link)
		if (c->req && now - c->req->last_write_us >= idle_us &&
		    (old == NULL || c->req->last_write_us < old->req->last_write_us))
			old = c;
	if (old == NULL)
		return false;
	srv->stats.evicted_streams++;
	log_info_limited("http: closed an idle stream from %s to make room (max-connections)",
			 old->peer ? old->peer->text : "unix");
	conn_drop(old);
	return true;
}

/* Take a slot of the probes' reserve (the oldest reserve connection still
 * waiting for a head makes room when it is full), and a descriptor. */
static bool conn_take_reserve(struct http_server *srv)
{
	if (srv->n_reserve >= srv->limits.reserved_conns) {
		struct http_conn *old = TAILQ_FIRST(&srv->reserve_waiting);
		if (old == NULL)
			return false;
		srv->stats.evicted++;
		conn_free(old);
	}
	return fdbudget_take(&fdbudget_daemon, FDBUDGET_HTTP, 1);
}

/* Serve fd; sa is the TCP peer (NULL for unix sockets and adopted ones).
 * An accepted connection may be refused; an adopted one is only counted.
 * tls: the connection starts with a handshake (srv->tls is set). */
static void conn_new(struct http_server *srv, evutil_socket_t fd, const struct sockaddr *sa,
		     bool refusable, bool tls)
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
			refuse_socket(fd, tls, 429, ERR_QUOTA_EXCEEDED,
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
		if (tries >= 2 || !(conn_evict_oldest(srv, NULL) || conn_evict_stream(srv)))
			break;
	}
	/* Full of busy connections: the probes' reserve. */
	bool reserve = false;
	if (!charged && srv->n_conns >= srv->limits.max_conns && refusable &&
	    conn_take_reserve(srv)) {
		charged = reserve = true;
		srv->stats.reserve_accepted++;
	}
	if (!charged) {
		srv->stats.refused_full++;
		log_warn_limited("http: refused a connection from %s: %d connections, %lld "
				 "descriptors in use of %lld",
				 peer ? peer->text : "unix", srv->n_conns,
				 (long long)fdbudget_in_use(&fdbudget_daemon),
				 (long long)fdbudget_daemon.limit);
		refuse_socket(fd, tls, 503, ERR_UNAVAILABLE,
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
	c->tls = tls;
	c->reserve = reserve;
	if (tls) {
		/* The bufferevent owns the SSL object and frees it with itself. */
		c->bev = bufferevent_openssl_socket_new(srv->base, fd, tls_ssl_new(srv->tls),
							BUFFEREVENT_SSL_ACCEPTING,
							BEV_OPT_CLOSE_ON_FREE);
		if (c->bev)
			/* A client that closes without close_notify has only
			 * ended the connection, as in clear. */
			bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
	} else {
		c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	}
	if (c->bev == NULL)
		abort();
	if (peer) {
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
	c->parser = http_parser_new();
	c->kick = evtimer_new(srv->base, conn_kick_cb, c);
	c->head_timer = evtimer_new(srv->base, conn_head_timeout_cb, c);
	LIST_INSERT_HEAD(&srv->conns, c, link);
	if (reserve)
		srv->n_reserve++;
	else
		srv->n_conns++;
	conn_start_waiting(c);
	http_conn_set_read_timeout(c, srv->limits.idle_timeout_s);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	(void)l;
	(void)len;
	struct http_listener *hl = arg;
	conn_new(hl->srv, fd, sa, true, hl->tls);
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
			/* The spare's answer is plain: over TLS, a close. */
			refuse_socket(fd, srv->tls != NULL, 503, ERR_UNAVAILABLE,
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
	conn_new(srv, fd, NULL, false, false); /* handed to us, already open */
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
	TAILQ_INIT(&srv->reserve_waiting);
	LIST_INIT(&srv->streams);
	srv->limits = (struct http_server_limits){
	    .head_timeout_s = HEAD_TIMEOUT_S,
	    .idle_timeout_s = IDLE_TIMEOUT_S,
	    .max_conns = HTTP_MAX_CONNECTIONS,
	    .max_conns_per_peer = MAX_CONNS_PER_PEER,
	    .reserved_conns = RESERVED_CONNS,
	    .body_timeout_s = BODY_TIMEOUT_S,
	    .body_min_rate = BODY_MIN_RATE,
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

void http_server_set_tls(struct http_server *srv, struct tls *tls)
{
	srv->tls = tls;
}

const struct http_server_stats *http_server_get_stats(const struct http_server *srv)
{
	return &srv->stats;
}

void http_req_set_evictable(struct http_req *req)
{
	req->evictable = true;
	req->last_write_us = clock_mono_us();
	struct http_conn *c = req->conn;
	if (c && c->req == req && !c->in_streams) {
		LIST_INSERT_HEAD(&c->srv->streams, c, stream_link);
		c->in_streams = true;
	}
}

int http_server_listen(struct http_server *srv, const char *spec, struct err **errp)
{
	struct http_listener *hl = xcalloc(1, sizeof(*hl));
	hl->srv = srv;
	hl->tls = srv->tls != NULL;
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
		hl->l = evconnlistener_new(srv->base, accept_cb, hl,
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
		hl->l = evconnlistener_new_bind(srv->base, accept_cb, hl,
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
				http_req_free(c->req);
			/* else: owned by a handler that is being torn down too */
		}
		c->req = NULL;
		conn_free(c);
	}
	if (srv->spare_fd >= 0)
		close(srv->spare_fd);
	free(srv);
}
