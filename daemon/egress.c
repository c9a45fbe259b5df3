/* egress.c: CONNECT / absolute-URI HTTP proxy with per-session allowlists.
 *
 * One concern, over 700 lines: the life of a proxy connection, from accept
 * through the checked request head, the allowlist, the resolution and the
 * address policy, the upstream connect, to the one forwarded request (or the
 * tunnel) and the close; plus its listeners. Parsing is egress_head.c's,
 * names resolver.c's, rules netpolicy.c's. */
#include "egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include "clock.h"
#include "egress_head.h"
#include "fdbudget.h"
#include "listen_guard.h"
#include "log.h"
#include "log_keyed.h"
#include "netpolicy.h"
#include "resolver.h"
#include "session.h"
#include "xalloc.h"

#define SPLICE_HIGH (256 * 1024)
#define MAX_CONNS 4096
/* One sandbox must not starve the others of proxy connections. */
#define MAX_CONNS_PER_SESSION 64
#define HEAD_TIMEOUT_S 10
#define CONNECT_TIMEOUT_S 10
#define IDLE_TIMEOUT_S 300
#define MAX_ADDRS RESOLVER_MAX_ADDRS
#define MAX_TRUSTED 64
#define MAX_LOCAL 64
/* Interfaces come and go (Docker adds bridges): re-read this often at most. */
#define LOCAL_REFRESH_MS 5000
/* Refusal lines a session may write per window (its code can ask for
 * refusals as fast as the loop answers them); the counters count all. */
#define REFUSAL_LOG_BURST 10
#define REFUSAL_LOG_WINDOW_MS 10000

struct egress_listener {
	struct evconnlistener *l;
	struct sockaddr_storage addr;
	int port;
	LIST_ENTRY(egress_listener) link;
};

struct egress {
	struct event_base *base;
	struct resolver *resolver;
	egress_lookup_fn lookup;
	void *arg;
	struct netpolicy_trusted trusted[MAX_TRUSTED];
	size_t n_trusted;
	struct sockaddr_storage local[MAX_LOCAL]; /* the host's own addresses */
	size_t n_local;
	int64_t local_read_ms;
	struct egress_stats stats;
	struct log_keyed refusal_log; /* per session ("-": no session) */
	size_t n_conns;
	LIST_HEAD(, egress_listener) listeners;
	LIST_HEAD(, egress_conn) conns;
};

enum conn_state {
	EC_HEAD,       /* reading the request head */
	EC_RESOLVING,  /* the destination passed the allowlist; resolving it */
	EC_CONNECTING, /* ... connecting to one of its addresses */
	EC_SPLICING,   /* tunnel or forwarded request open */
	EC_REFUSING,   /* the refusal is being written, then it closes */
};

struct egress_conn {
	struct egress *eg;
	struct bufferevent *client, *upstream;
	enum conn_state state;
	char src[INET6_ADDRSTRLEN];
	char session[SESSION_ID_LEN + 1];
	char host[NETPOLICY_HOST_MAX + 1];
	int port;
	bool is_connect;
	struct egress_head *head;
	struct resolver_query *dns_req;
	struct sockaddr_storage addrs[MAX_ADDRS];
	size_t n_addrs, next_addr;
	bool request_sent;       /* plain HTTP: the one request and its body went upstream */
	bool response_unwatched; /* its answer did not parse: relayed until EOF */
	size_t dropped;          /* client bytes after it, not forwarded */
	LIST_ENTRY(egress_conn) link;
	bool fd_charged; /* fdbudget: client and upstream, both from the accept on */
};

static void conn_free(struct egress_conn *c)
{
	LIST_REMOVE(c, link);
	c->eg->n_conns--;
	if (c->fd_charged)
		fdbudget_give(&fdbudget_daemon, FDBUDGET_EGRESS, 2);
	resolver_cancel(c->dns_req); /* its callback will not run */
	if (c->client)
		bufferevent_free(c->client);
	if (c->upstream)
		bufferevent_free(c->upstream);
	egress_head_free(c->head);
	free(c);
}

static const char *reason_phrase(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 414: return "URI Too Long";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	default: return "Error";
	}
}

/* A refusal's message as a reason phrase: what a status line may hold
 * (visible ASCII and spaces: the message can quote the client's bytes),
 * cut to REFUSAL_PHRASE_MAX. */
#define REFUSAL_PHRASE_MAX 200

static void phrase_of(const char *msg, char *out, size_t size)
{
	size_t n = 0;
	for (; msg[n] && n + 1 < size; n++) {
		unsigned char ch = (unsigned char)msg[n];
		out[n] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	out[n] = '\0';
}

/* Answer the client with a plain-text refusal and close once it is sent. */
static void conn_refuse(struct egress_conn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void close_after_write(struct bufferevent *bev, void *arg)
{
	/* Drop what the client sent and we never read: a close with unread
	 * bytes is a reset, which can destroy the refusal still in flight. */
	char sink[4096];
	for (int i = 0;
	     i < 16 && recv(bufferevent_getfd(bev), sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	conn_free(arg);
}

static void close_on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_free(arg);
}

static void conn_refuse(struct egress_conn *c, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (status == 403)
		c->eg->stats.denied++;
	else
		c->eg->stats.failed++;
	const char *session = c->session[0] ? c->session : "-";
	uint32_t left_out = 0;
	char more[96] = "";
	if (log_keyed_allow(&c->eg->refusal_log, session, clock_mono_ms(), REFUSAL_LOG_WINDOW_MS,
			    REFUSAL_LOG_BURST, &left_out)) {
		if (left_out)
			snprintf(more, sizeof(more),
				 " (%" PRIu32
				 " refusals of this session not logged before this one)",
				 left_out);
		log_info("egress: session %s (%s) %s %s:%d: %s%s", session, c->src,
			 status == 403 ? "DENIED" : "FAILED", c->host[0] ? c->host : "?", c->port,
			 msg, more);
	}
	c->state = EC_REFUSING;
	if (c->upstream) {
		bufferevent_free(c->upstream);
		c->upstream = NULL;
	}
	/* A client never shows a refused tunnel's body (Python's http.client
	 * reads "Tunnel connection failed: 403 <reason phrase>"), so a CONNECT
	 * refusal says why in its status line too; a plain request's refusal
	 * keeps the standard phrase, like a server's own answer. */
	char reason[REFUSAL_PHRASE_MAX + 1];
	if (c->is_connect)
		phrase_of(msg, reason, sizeof(reason));
	else
		snprintf(reason, sizeof(reason), "%s", reason_phrase(status));
	struct evbuffer *out = bufferevent_get_output(c->client);
	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			    "Content-Length: %zu\r\n\r\nci egress proxy: %s\n",
			    status, reason, strlen(msg) + 18, msg);
	bufferevent_disable(c->client, EV_READ);
	bufferevent_setcb(c->client, NULL, close_after_write, close_on_event, c);
}

/* ---- splicing ---- */

/* After the plain-HTTP request: the client may send more, it goes nowhere. */
static void drop_client_input(struct egress_conn *c, struct evbuffer *in)
{
	size_t n = evbuffer_get_length(in);
	if (n == 0)
		return;
	if (c->dropped == 0)
		log_info("egress: session %s (%s) %s:%d: bytes after the request are not "
			 "forwarded (one request per connection)",
			 c->session, c->src, c->host, c->port);
	c->dropped += n;
	evbuffer_drain(in, n);
}

static void body_out(const char *data, size_t len, void *arg)
{
	struct egress_conn *c = arg;
	evbuffer_add(bufferevent_get_output(c->upstream), data, len);
}

/* Plain HTTP, client to upstream: the body of the one request, re-framed,
 * then nothing. Returns -1 when c was freed. */
static int forward_request(struct egress_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->client);
	while (!c->request_sent) {
		char buf[16384];
		ev_ssize_t n = evbuffer_copyout(in, buf, sizeof(buf));
		if (n < 0)
			n = 0;
		size_t used = 0;
		struct err *e = NULL;
		int rc = egress_head_body(c->head, buf, (size_t)n, &used, body_out, c, &e);
		if (rc == EGRESS_HEAD_ERROR) {
			c->eg->stats.failed++;
			log_info("egress: session %s (%s) FAILED %s:%d: %s; connection closed",
				 c->session, c->src, c->host, c->port, e->message);
			err_free(e);
			conn_free(c);
			return -1;
		}
		evbuffer_drain(in, used);
		if (rc == EGRESS_HEAD_DONE)
			c->request_sent = true;
		else if (used == 0 || evbuffer_get_length(in) == 0)
			break;
	}
	if (c->request_sent)
		drop_client_input(c, in);
	return 0;
}

static void finish_then_close(struct bufferevent *bev, void *arg);
static void close_on_event(struct bufferevent *bev, short what, void *arg);

/* Plain HTTP, upstream to client: the answer passes unchanged, and once it
 * is complete the connection has done its one request: the upstream goes,
 * the client gets the rest of the answer and is closed (so a keep-alive
 * client opens a new connection for its next request instead of waiting on
 * this one). Returns -1 when the connection is closing (or gone). */
static int forward_response(struct egress_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->upstream);
	struct evbuffer *out = bufferevent_get_output(c->client);
	bool done = false;
	while (evbuffer_get_length(in) > 0) {
		char buf[16384];
		ev_ssize_t n = evbuffer_copyout(in, buf, sizeof(buf));
		size_t used = 0;
		int rc = egress_head_response(c->head, buf, n > 0 ? (size_t)n : 0, &used);
		if (rc == EGRESS_HEAD_ERROR) {
			c->response_unwatched = true;
			evbuffer_add_buffer(out, in);
			return 0;
		}
		evbuffer_remove_buffer(in, out, used);
		if (rc == EGRESS_HEAD_DONE) {
			done = true;
			break;
		}
	}
	if (!done)
		return 0;
	evbuffer_drain(in, evbuffer_get_length(in)); /* nothing after the answer */
	bufferevent_free(c->upstream);
	c->upstream = NULL;
	if (evbuffer_get_length(out) == 0) {
		conn_free(c);
		return -1;
	}
	bufferevent_disable(c->client, EV_READ);
	bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
	bufferevent_setcb(c->client, NULL, finish_then_close, close_on_event, c);
	return -1;
}

/* Move what from sent to the other side; -1 when c was freed or is closing
 * (the caller touches neither side then). */
static int splice_move(struct egress_conn *c, struct bufferevent *from)
{
	struct bufferevent *to = from == c->client ? c->upstream : c->client;
	if (to == NULL)
		return 0;
	struct evbuffer *out = bufferevent_get_output(to);
	if (from == c->client && !c->is_connect) {
		if (forward_request(c) < 0)
			return -1;
	} else if (from == c->upstream && !c->is_connect && !c->response_unwatched) {
		if (forward_response(c) < 0)
			return -1;
	} else {
		evbuffer_add_buffer(out, bufferevent_get_input(from));
	}
	if (evbuffer_get_length(out) >= SPLICE_HIGH) {
		/* The other side is slow: stop reading until it drains. */
		bufferevent_disable(from, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, SPLICE_HIGH / 2, SPLICE_HIGH / 2);
	}
	return 0;
}

static void splice_read(struct bufferevent *from, void *arg)
{
	splice_move(arg, from);
}

static void splice_drained(struct bufferevent *to, void *arg)
{
	struct egress_conn *c = arg;
	struct bufferevent *from = to == c->client ? c->upstream : c->client;
	bufferevent_setwatermark(to, EV_WRITE, 0, 0);
	if (from)
		bufferevent_enable(from, EV_READ);
}

static void finish_then_close(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_free(arg);
}

static void splice_event(struct bufferevent *bev, short what, void *arg)
{
	struct egress_conn *c = arg;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	struct bufferevent *other = bev == c->client ? c->upstream : c->client;
	/* Flush what the closing side sent, then close both. */
	if (splice_move(c, bev) < 0)
		return;
	if (bev == c->client) {
		bufferevent_free(c->client);
		c->client = NULL;
	} else {
		bufferevent_free(c->upstream);
		c->upstream = NULL;
	}
	if (other && evbuffer_get_length(bufferevent_get_output(other)) > 0) {
		bufferevent_disable(other, EV_READ);
		bufferevent_setwatermark(other, EV_WRITE, 0, 0);
		bufferevent_setcb(other, NULL, finish_then_close, close_on_event, c);
		return;
	}
	conn_free(c);
}

static void start_splice(struct egress_conn *c)
{
	c->state = EC_SPLICING;
	struct timeval idle = {IDLE_TIMEOUT_S, 0};
	bufferevent_set_timeouts(c->client, &idle, &idle);
	bufferevent_set_timeouts(c->upstream, &idle, &idle);
	bufferevent_setcb(c->client, splice_read, splice_drained, splice_event, c);
	bufferevent_setcb(c->upstream, splice_read, splice_drained, splice_event, c);
	bufferevent_enable(c->client, EV_READ | EV_WRITE);
	bufferevent_enable(c->upstream, EV_READ | EV_WRITE);
	/* Bytes the client sent after its request head go along (a request
	 * without a body is complete right away). c may be gone after this. */
	splice_move(c, c->client);
}

/* ---- connecting ---- */

static void try_next_addr(struct egress_conn *c);

static void upstream_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	struct egress_conn *c = arg;
	if (what & BEV_EVENT_CONNECTED) {
		c->eg->stats.allowed++;
		log_info("egress: session %s (%s) ALLOWED %s:%d", c->session, c->src, c->host,
			 c->port);
		if (c->is_connect) {
			evbuffer_add_printf(bufferevent_get_output(c->client),
					    "HTTP/1.1 200 Connection established\r\n\r\n");
		} else {
			size_t len;
			const char *head = egress_head_upstream(c->head, &len);
			evbuffer_add(bufferevent_get_output(c->upstream), head, len);
		}
		start_splice(c);
		return;
	}
	bufferevent_free(c->upstream);
	c->upstream = NULL;
	try_next_addr(c);
}

static void try_next_addr(struct egress_conn *c)
{
	if (c->next_addr >= c->n_addrs) {
		conn_refuse(c, 502, "cannot connect to %s:%d", c->host, c->port);
		return;
	}
	struct sockaddr_storage *sa = &c->addrs[c->next_addr++];
	c->state = EC_CONNECTING;
	c->upstream = bufferevent_socket_new(c->eg->base, -1, BEV_OPT_CLOSE_ON_FREE);
	struct timeval tv = {CONNECT_TIMEOUT_S, 0};
	bufferevent_set_timeouts(c->upstream, &tv, &tv);
	bufferevent_setcb(c->upstream, NULL, NULL, upstream_event, c);
	socklen_t len =
	    sa->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	if (bufferevent_socket_connect(c->upstream, (struct sockaddr *)sa, (int)len) < 0) {
		bufferevent_free(c->upstream);
		c->upstream = NULL;
		try_next_addr(c);
	}
}

static void load_local_addrs(struct egress *eg)
{
	struct ifaddrs *ifs = NULL;
	eg->local_read_ms = clock_mono_ms();
	if (getifaddrs(&ifs) < 0)
		return;
	eg->n_local = 0;
	for (struct ifaddrs *i = ifs; i && eg->n_local < MAX_LOCAL; i = i->ifa_next) {
		if (i->ifa_addr == NULL ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		memset(&eg->local[eg->n_local], 0, sizeof(eg->local[0]));
		memcpy(&eg->local[eg->n_local++], i->ifa_addr,
		       i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
							 : sizeof(struct sockaddr_in6));
	}
	freeifaddrs(ifs);
}

/* Keep the resolved addresses that policy allows; explain a refusal. */
static void filter_addrs(struct egress_conn *c, const struct sockaddr_storage *in, size_t n)
{
	struct egress *eg = c->eg;
	if (clock_mono_ms() - eg->local_read_ms > LOCAL_REFRESH_MS)
		load_local_addrs(eg);
	const char *why = NULL;
	c->n_addrs = 0;
	for (size_t i = 0; i < n && c->n_addrs < MAX_ADDRS; i++) {
		const char *no =
		    netpolicy_refusal((const struct sockaddr *)&in[i], c->port, eg->trusted,
				      eg->n_trusted, eg->local, eg->n_local);
		if (no) {
			why = no;
			continue;
		}
		/* ::ffff:a.b.c.d is connected to as a.b.c.d, the address judged. */
		struct sockaddr_storage *sa = &c->addrs[c->n_addrs++];
		netpolicy_canonical((const struct sockaddr *)&in[i], sa);
		if (sa->ss_family == AF_INET)
			((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)c->port);
		else
			((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)c->port);
	}
	if (c->n_addrs == 0) {
		conn_refuse(c, 403,
			    "%s resolves only to %s addresses, which sandboxes may not reach",
			    c->host, why ? why : "no usable");
		return;
	}
	try_next_addr(c);
}

static void dns_done(const struct err *e, const struct sockaddr_storage *addrs, size_t n, void *arg)
{
	struct egress_conn *c = arg;
	c->dns_req = NULL; /* the resolver frees it */
	if (e) {
		conn_refuse(c, 502, "cannot resolve %s: %s", c->host, e->message);
		return;
	}
	filter_addrs(c, addrs, n);
}

static void resolve(struct egress_conn *c)
{
	struct egress *eg = c->eg;
	struct sockaddr_storage addrs[MAX_ADDRS];
	c->state = EC_RESOLVING;
	/* An IP literal (canonical: checked with the head), or the operator's
	 * hosts file, needs no DNS. */
	enum netpolicy_host_kind kind = netpolicy_host_kind(c->host);
	if (kind == NETPOLICY_IPV4 || kind == NETPOLICY_IPV6) {
		if (netpolicy_parse_ip(c->host, &addrs[0]) == 0)
			filter_addrs(c, addrs, 1);
		else
			conn_refuse(c, 400, "'%s' is not an IP address", c->host);
		return;
	}
	size_t n = resolver_hosts_lookup(eg->resolver, c->host, addrs, MAX_ADDRS);
	if (n > 0) {
		filter_addrs(c, addrs, n);
		return;
	}
	struct err *e = NULL;
	c->dns_req = resolver_query(eg->resolver, c->host, dns_done, c, &e);
	if (c->dns_req == NULL) {
		conn_refuse(c, 502, "cannot resolve %s: %s", c->host, e->message);
		err_free(e);
	}
}

/* ---- the request head ---- */

/* The head is complete and well formed: is this destination allowed? */
static void head_done(struct egress_conn *c)
{
	bufferevent_disable(c->client, EV_READ);
	c->is_connect = egress_head_is_connect(c->head);
	snprintf(c->host, sizeof(c->host), "%s", egress_head_host(c->head));
	c->port = egress_head_port(c->head);
	enum netpolicy_host_kind kind = netpolicy_host_kind(c->host);
	if (kind == NETPOLICY_AMBIGUOUS || kind == NETPOLICY_INVALID) {
		/* 0177.0.0.1, 127.1, 0x7f.1: every client library reads these its
		 * own way; only the plain dotted-decimal form is taken. */
		conn_refuse(c, 400, "'%s' is not a canonical IP address or a host name", c->host);
		return;
	}
	/* The allowlist as it is now (a PATCH may have come since accept), and
	 * the session that owns the address now. */
	struct egress_peer peer = {0};
	if (!c->eg->lookup(c->src, &peer, c->eg->arg) || strcmp(peer.session_id, c->session) != 0) {
		conn_refuse(c, 403, "no session owns source address %s", c->src);
		return;
	}
	if (!netpolicy_allowed(peer.allow, peer.n_allow, c->host, c->port)) {
		/* The host quoted: a failure's signature masks it (failure_sig.c),
		 * so every host refused is the same mistake. */
		conn_refuse(c, 403, "host '%s:%d' is not in the allowlist (network.allow)", c->host,
			    c->port);
		return;
	}
	resolve(c);
}

static void head_read(struct bufferevent *bev, void *arg)
{
	struct egress_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	while (evbuffer_get_length(in) > 0) {
		char buf[4096];
		ev_ssize_t n = evbuffer_copyout(in, buf, sizeof(buf));
		size_t used = 0;
		int status = 400;
		struct err *e = NULL;
		int rc = egress_head_feed(c->head, buf, n > 0 ? (size_t)n : 0, &used, &status, &e);
		evbuffer_drain(in, used);
		if (rc == EGRESS_HEAD_ERROR) {
			conn_refuse(c, status, "%s", e->message);
			err_free(e);
			return;
		}
		if (rc == EGRESS_HEAD_DONE) {
			head_done(c);
			return;
		}
	}
}

static void head_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_free(arg);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	(void)l;
	(void)len;
	struct egress *eg = arg;
	if (eg->n_conns >= MAX_CONNS) {
		evutil_closesocket(fd);
		return;
	}
	/* Both descriptors of a tunnel are counted at once, so none is refused
	 * half-way (fdbudget.h); a refusal is answered after the checks below. */
	bool fd_room = fdbudget_take(&fdbudget_daemon, FDBUDGET_EGRESS, 2);
	struct egress_conn *c = xcalloc(1, sizeof(*c));
	c->eg = eg;
	c->fd_charged = fd_room;
	LIST_INSERT_HEAD(&eg->conns, c, link);
	eg->n_conns++;
	c->client = bufferevent_socket_new(eg->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, c->src, sizeof(c->src));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, c->src,
			  sizeof(c->src));
	struct egress_peer peer = {0};
	if (!eg->lookup(c->src, &peer, eg->arg)) {
		conn_refuse(c, 403, "no session owns source address %s", c->src);
		return;
	}
	snprintf(c->session, sizeof(c->session), "%s", peer.session_id);
	size_t mine = 0;
	struct egress_conn *o;
	LIST_FOREACH (o, &eg->conns, link)
		mine += o != c && strcmp(o->session, c->session) == 0;
	if (mine >= MAX_CONNS_PER_SESSION) {
		conn_refuse(c, 429, "this session already has %d proxy connections open",
			    MAX_CONNS_PER_SESSION);
		return;
	}
	if (!fd_room) {
		conn_refuse(c, 503, "the daemon is near its file-descriptor limit; retry later");
		return;
	}
	c->head = egress_head_new();
	struct timeval tv = {HEAD_TIMEOUT_S, 0};
	bufferevent_set_timeouts(c->client, &tv, &tv);
	bufferevent_setwatermark(c->client, EV_READ, 0, EGRESS_HEAD_MAX + 1024);
	bufferevent_setcb(c->client, head_read, NULL, head_event, c);
	bufferevent_enable(c->client, EV_READ | EV_WRITE);
}

/* ---- policy changes ---- */

size_t egress_session_allow_changed(struct egress *eg, const char *session_id, char *const *allow,
				    size_t n_allow)
{
	if (eg == NULL)
		return 0;
	size_t closed = 0;
	for (struct egress_conn *c = LIST_FIRST(&eg->conns), *next; c; c = next) {
		next = LIST_NEXT(c, link);
		/* Connections still reading their head look the list up when it
		 * is complete; refusals are closing anyway. */
		if (strcmp(c->session, session_id) != 0 || c->state == EC_HEAD ||
		    c->state == EC_REFUSING || netpolicy_allowed(allow, n_allow, c->host, c->port))
			continue;
		log_info("egress: session %s (%s) CLOSED %s %s:%d: no longer on the allowlist",
			 c->session, c->src, c->is_connect ? "tunnel" : "request", c->host,
			 c->port);
		eg->stats.closed_by_policy++;
		conn_free(c);
		closed++;
	}
	return closed;
}

size_t egress_session_ended(struct egress *eg, const char *session_id)
{
	if (eg == NULL)
		return 0;
	size_t closed = 0;
	for (struct egress_conn *c = LIST_FIRST(&eg->conns), *next; c; c = next) {
		next = LIST_NEXT(c, link);
		if (strcmp(c->session, session_id) != 0)
			continue;
		if (c->state != EC_REFUSING)
			eg->stats.closed_by_policy++;
		conn_free(c);
		closed++;
	}
	if (closed)
		log_info("egress: session %s ended: %zu proxy connections closed", session_id,
			 closed);
	uint32_t left_out = log_keyed_forget(&eg->refusal_log, session_id);
	if (left_out)
		log_info("egress: session %s ended: %" PRIu32 " refusals of it were not logged "
			 "(rate-limited; ci_egress_decisions_total counts them all)",
			 session_id, left_out);
	return closed;
}

/* ---- set-up ---- */

/* Parse "IP[:PORT],..." into out (MAX_TRUSTED entries); *n is how many. */
static int parse_trusted(const char *list, struct netpolicy_trusted *out, size_t *n,
			 struct err **errp)
{
	AUTOFREE char *copy = xstrdup(list);
	char *save = NULL;
	*n = 0;
	for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (*n >= MAX_TRUSTED)
			return err_set(errp, ERR_BAD_REQUEST,
				       "egress-trusted: more than %d entries", MAX_TRUSTED);
		struct netpolicy_trusted *t = &out[*n];
		char host[NETPOLICY_HOST_MAX + 1];
		int port = 0;
		if (netpolicy_split(tok, 0, host, sizeof(host), &port, NULL) < 0 ||
		    (strchr(host, ':') && tok[0] != '[') || netpolicy_parse_ip(host, &t->addr) < 0)
			return err_set(errp, ERR_BAD_REQUEST,
				       "egress-trusted: '%s' is not IP[:PORT] ([IPv6][:PORT])",
				       tok);
		t->port = port;
		(*n)++;
	}
	return 0;
}

int egress_set_trusted(struct egress *eg, const char *list, struct err **errp)
{
	struct netpolicy_trusted parsed[MAX_TRUSTED];
	size_t n = 0;
	if (parse_trusted(list ? list : "", parsed, &n, errp) < 0)
		return -1;
	/* Checked when a tunnel's addresses are resolved (filter_addrs), so tunnels opened from now
	 * on follow the new list; open ones are not cut. */
	memcpy(eg->trusted, parsed, n * sizeof(parsed[0]));
	eg->n_trusted = n;
	return 0;
}

struct egress *egress_new(struct event_base *base, const char *hosts_file, const char *trusted,
			  egress_lookup_fn lookup, void *arg, struct err **errp)
{
	struct egress *eg = xcalloc(1, sizeof(*eg));
	eg->base = base;
	eg->lookup = lookup;
	eg->arg = arg;
	LIST_INIT(&eg->listeners);
	LIST_INIT(&eg->conns);
	/* hosts-only until told otherwise: whoever forgets egress_set_resolver
	 * gets no DNS rather than DNS nobody configured. */
	eg->resolver = resolver_new(base, "hosts-only", hosts_file, errp);
	if (eg->resolver == NULL || egress_set_trusted(eg, trusted, errp) < 0) {
		resolver_free(eg->resolver);
		free(eg);
		return NULL;
	}
	load_local_addrs(eg);
	return eg;
}

int egress_set_resolver(struct egress *eg, const char *spec, struct err **errp)
{
	if (resolver_set_spec(eg->resolver, spec, errp) < 0)
		return -1;
	log_info("egress: resolver %s", spec);
	return 0;
}

int egress_reload_hosts(struct egress *eg, struct err **errp)
{
	size_t names = 0;
	if (resolver_reload(eg->resolver, &names, errp) < 0) {
		log_warn("egress: hosts file not reloaded, the previous one stays in use: %s",
			 (errp && *errp) ? (*errp)->message : "?");
		return -1;
	}
	load_local_addrs(eg);
	log_info("egress: hosts file reloaded (%zu names)", names);
	return 0;
}

int egress_listen(struct egress *eg, const char *ip, int port, int *bound, struct err **errp)
{
	struct sockaddr_storage ss;
	if (netpolicy_parse_ip(ip, &ss) < 0)
		return err_set(errp, ERR_INTERNAL, "egress: bad listen address %s", ip);
	struct egress_listener *el;
	LIST_FOREACH (el, &eg->listeners, link) {
		struct sockaddr_storage a = el->addr, b = ss;
		if (port != 0 && el->port == port && memcmp(&a, &b, sizeof(a)) == 0) {
			*bound = port; /* already there (a retried network set-up) */
			return 0;
		}
	}
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
	socklen_t len =
	    ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	struct evconnlistener *l = evconnlistener_new_bind(
	    eg->base, accept_cb, eg,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 256,
	    (struct sockaddr *)&ss, (int)len);
	if (l == NULL)
		return err_set(errp, ERR_UNAVAILABLE,
			       "egress: listen on %s:%d: %s (another proxy on that port? see "
			       "--egress-proxy-port)",
			       ip, port, strerror(errno));
	struct sockaddr_storage got;
	socklen_t glen = sizeof(got);
	getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&got, &glen);
	*bound = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
						: ((struct sockaddr_in6 *)&got)->sin6_port);
	listen_guard_watch(l, "egress proxy", NULL, NULL); /* EMFILE: back off */
	el = xcalloc(1, sizeof(*el));
	el->l = l;
	netpolicy_parse_ip(ip, &el->addr);
	el->port = *bound;
	LIST_INSERT_HEAD(&eg->listeners, el, link);
	load_local_addrs(eg); /* the new bridge address is one of ours now */
	return 0;
}

void egress_unlisten(struct egress *eg, const char *ip)
{
	struct sockaddr_storage ss;
	if (netpolicy_parse_ip(ip, &ss) < 0)
		return;
	for (struct egress_listener *el = LIST_FIRST(&eg->listeners), *next; el; el = next) {
		next = LIST_NEXT(el, link);
		struct sockaddr_storage a = el->addr;
		if (memcmp(&a, &ss, sizeof(a)) != 0)
			continue;
		LIST_REMOVE(el, link);
		listen_guard_unwatch(el->l);
		evconnlistener_free(el->l);
		free(el);
	}
}

const struct egress_stats *egress_get_stats(struct egress *eg)
{
	eg->stats.dns_queries = resolver_queries_sent(eg->resolver);
	return &eg->stats;
}

void egress_free(struct egress *eg)
{
	if (eg == NULL)
		return;
	while (!LIST_EMPTY(&eg->listeners)) {
		struct egress_listener *el = LIST_FIRST(&eg->listeners);
		LIST_REMOVE(el, link);
		listen_guard_unwatch(el->l);
		evconnlistener_free(el->l);
		free(el);
	}
	while (!LIST_EMPTY(&eg->conns))
		conn_free(LIST_FIRST(&eg->conns));
	resolver_free(eg->resolver);
	log_keyed_release(&eg->refusal_log);
	free(eg);
}
