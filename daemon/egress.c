/* egress.c: CONNECT / absolute-URI HTTP proxy with per-session allowlists. */
#include "egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include "log.h"
#include "netpolicy.h"
#include "session.h"
#include "xalloc.h"

#define REQUEST_HEAD_MAX (16 * 1024)
#define SPLICE_HIGH (256 * 1024)
#define MAX_CONNS 4096
/* One sandbox must not starve the others of proxy connections. */
#define MAX_CONNS_PER_SESSION 64
#define HEAD_TIMEOUT_S 10
#define CONNECT_TIMEOUT_S 10
#define IDLE_TIMEOUT_S 300
#define MAX_ADDRS 8
#define MAX_OVERRIDES 256
#define MAX_TRUSTED 64

struct override {
	char name[NETPOLICY_HOST_MAX + 1];
	struct sockaddr_storage addr;
};

struct egress_listener {
	struct evconnlistener *l;
	LIST_ENTRY(egress_listener) link;
};

struct egress {
	struct event_base *base;
	struct evdns_base *dns;
	egress_lookup_fn lookup;
	void *arg;
	struct override overrides[MAX_OVERRIDES];
	size_t n_overrides;
	struct netpolicy_trusted trusted[MAX_TRUSTED];
	size_t n_trusted;
	struct sockaddr_storage local[64]; /* the host's own addresses */
	size_t n_local;
	struct egress_stats stats;
	size_t n_conns;
	LIST_HEAD(, egress_listener) listeners;
	LIST_HEAD(, egress_conn) conns;
};

enum conn_state { EC_HEAD, EC_RESOLVING, EC_CONNECTING, EC_SPLICING };

struct egress_conn {
	struct egress *eg;
	struct bufferevent *client, *upstream;
	enum conn_state state;
	char src[INET6_ADDRSTRLEN];
	char session[SESSION_ID_LEN + 1];
	char host[NETPOLICY_HOST_MAX + 1];
	int port;
	bool is_connect;
	struct evbuffer *head; /* rewritten request head (absolute-URI form) */
	struct evdns_getaddrinfo_request *dns_req;
	struct sockaddr_storage addrs[MAX_ADDRS];
	size_t n_addrs, next_addr;
	char **allow;
	size_t n_allow;
	LIST_ENTRY(egress_conn) link;
};

static void conn_free(struct egress_conn *c)
{
	LIST_REMOVE(c, link);
	c->eg->n_conns--;
	if (c->dns_req)
		evdns_getaddrinfo_cancel(c->dns_req); /* its callback frees nothing of ours */
	if (c->client)
		bufferevent_free(c->client);
	if (c->upstream)
		bufferevent_free(c->upstream);
	if (c->head)
		evbuffer_free(c->head);
	for (size_t i = 0; i < c->n_allow; i++)
		free(c->allow[i]);
	free(c->allow);
	free(c);
}

/* Answer the client with a plain-text refusal and close once it is sent. */
static void conn_refuse(struct egress_conn *c, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void close_after_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_free(arg);
}

static void close_on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_free(arg);
}

static void conn_refuse(struct egress_conn *c, int status, const char *reason, const char *fmt, ...)
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
	log_info("egress: session %s (%s) %s %s:%d: %s", c->session[0] ? c->session : "-", c->src,
		 status == 403 ? "DENIED" : "FAILED", c->host[0] ? c->host : "?", c->port, msg);
	if (c->upstream) {
		bufferevent_free(c->upstream);
		c->upstream = NULL;
	}
	struct evbuffer *out = bufferevent_get_output(c->client);
	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			    "Content-Length: %zu\r\n\r\nci egress proxy: %s\n",
			    status, reason, strlen(msg) + 18, msg);
	bufferevent_disable(c->client, EV_READ);
	bufferevent_setcb(c->client, NULL, close_after_write, close_on_event, c);
}

/* ---- splicing ---- */

static void splice_read(struct bufferevent *from, void *arg)
{
	struct egress_conn *c = arg;
	struct bufferevent *to = from == c->client ? c->upstream : c->client;
	struct evbuffer *out = bufferevent_get_output(to);
	evbuffer_add_buffer(out, bufferevent_get_input(from));
	if (evbuffer_get_length(out) >= SPLICE_HIGH) {
		/* The other side is slow: stop reading until it drains. */
		bufferevent_disable(from, EV_READ);
		bufferevent_setwatermark(to, EV_WRITE, SPLICE_HIGH / 2, SPLICE_HIGH / 2);
	}
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
	splice_read(bev, c);
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
	/* Bytes the client sent after its request head go along. */
	if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0)
		splice_read(c->client, c);
}

static int parse_ip(const char *s, struct sockaddr_storage *out);

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
		if (c->is_connect)
			evbuffer_add_printf(bufferevent_get_output(c->client),
					    "HTTP/1.1 200 Connection established\r\n\r\n");
		else
			evbuffer_add_buffer(bufferevent_get_output(c->upstream), c->head);
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
		conn_refuse(c, 502, "Bad Gateway", "cannot connect to %s:%d", c->host, c->port);
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

/* Keep the resolved addresses that policy allows; explain a refusal. */
static void filter_addrs(struct egress_conn *c, struct sockaddr_storage *in, size_t n)
{
	struct egress *eg = c->eg;
	const char *why = NULL;
	c->n_addrs = 0;
	for (size_t i = 0; i < n; i++) {
		const char *no = netpolicy_refusal((struct sockaddr *)&in[i], c->port, eg->trusted,
						   eg->n_trusted, eg->local, eg->n_local);
		if (no) {
			why = no;
			continue;
		}
		/* ::ffff:a.b.c.d is connected to as a.b.c.d, the address judged. */
		struct sockaddr_storage *sa = &c->addrs[c->n_addrs++];
		netpolicy_canonical((struct sockaddr *)&in[i], sa);
		if (sa->ss_family == AF_INET)
			((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)c->port);
		else
			((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)c->port);
	}
	if (c->n_addrs == 0) {
		conn_refuse(c, 403, "Forbidden",
			    "%s resolves only to %s addresses, which sandboxes may not reach",
			    c->host, why ? why : "no usable");
		return;
	}
	try_next_addr(c);
}

static void dns_done(int result, struct evutil_addrinfo *res, void *arg)
{
	struct egress_conn *c = arg;
	if (result == EVUTIL_EAI_CANCEL)
		return; /* c is already gone */
	c->dns_req = NULL;
	if (result != 0) {
		conn_refuse(c, 502, "Bad Gateway", "cannot resolve %s: %s", c->host,
			    evutil_gai_strerror(result));
		return;
	}
	struct sockaddr_storage addrs[MAX_ADDRS];
	size_t n = 0;
	for (struct evutil_addrinfo *ai = res; ai && n < MAX_ADDRS; ai = ai->ai_next)
		if (ai->ai_addrlen <= sizeof(struct sockaddr_storage)) {
			memset(&addrs[n], 0, sizeof(addrs[n]));
			memcpy(&addrs[n++], ai->ai_addr, ai->ai_addrlen);
		}
	evutil_freeaddrinfo(res);
	filter_addrs(c, addrs, n);
}

static void resolve(struct egress_conn *c)
{
	struct egress *eg = c->eg;
	struct sockaddr_storage addrs[MAX_ADDRS];
	size_t n = 0;
	/* An IP literal (canonical: checked with the head), or the operator's
	 * override, needs no DNS. */
	enum netpolicy_host_kind kind = netpolicy_host_kind(c->host);
	if (kind == NETPOLICY_IPV4 || kind == NETPOLICY_IPV6) {
		struct sockaddr_storage lit;
		if (parse_ip(c->host, &lit) == 0) {
			filter_addrs(c, &lit, 1);
			return;
		}
	}
	for (size_t i = 0; i < eg->n_overrides && n < MAX_ADDRS; i++)
		if (strcasecmp(eg->overrides[i].name, c->host) == 0)
			addrs[n++] = eg->overrides[i].addr;
	if (n > 0) {
		filter_addrs(c, addrs, n);
		return;
	}
	if (eg->dns == NULL) {
		eg->dns = evdns_base_new(eg->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
		if (eg->dns == NULL) {
			conn_refuse(c, 502, "Bad Gateway",
				    "no DNS resolver is configured on the host");
			return;
		}
	}
	struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	c->state = EC_RESOLVING;
	char port[8];
	snprintf(port, sizeof(port), "%d", c->port);
	c->dns_req = evdns_getaddrinfo(eg->dns, c->host, port, &hints, dns_done, c);
}

/* ---- the request head ---- */

static void head_read(struct bufferevent *bev, void *arg)
{
	struct egress_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos < 0) {
		if (evbuffer_get_length(in) > REQUEST_HEAD_MAX)
			conn_refuse(c, 431, "Request Header Fields Too Large",
				    "request head too large");
		return;
	}
	if ((size_t)end.pos + 4 > REQUEST_HEAD_MAX) {
		conn_refuse(c, 431, "Request Header Fields Too Large", "request head too large");
		return;
	}
	size_t hlen = (size_t)end.pos + 4;
	AUTOFREE char *block = xmalloc(hlen + 1);
	evbuffer_remove(in, block, hlen);
	block[hlen] = '\0';
	bufferevent_disable(bev, EV_READ);
	char *save = NULL, *line = strtok_r(block, "\r\n", &save);
	char method[16], target[8192], version[16];
	if (line == NULL || strlen(line) >= sizeof(target) ||
	    sscanf(line, "%15s %8191s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0) {
		conn_refuse(c, 400, "Bad Request", "malformed proxy request");
		return;
	}
	const char *authority;
	const char *path = "/";
	char auth_buf[NETPOLICY_HOST_MAX + 16];
	int default_port;
	c->is_connect = strcasecmp(method, "CONNECT") == 0;
	if (c->is_connect) {
		authority = target;
		default_port = 443;
	} else if (strncasecmp(target, "http://", 7) == 0) {
		const char *h = target + 7, *slash = strchr(h, '/');
		size_t alen = slash ? (size_t)(slash - h) : strlen(h);
		if (alen >= sizeof(auth_buf) || memchr(h, '@', alen)) {
			conn_refuse(c, 400, "Bad Request", "bad URL authority");
			return;
		}
		memcpy(auth_buf, h, alen);
		auth_buf[alen] = '\0';
		authority = auth_buf;
		path = slash ? slash : "/";
		default_port = 80;
	} else {
		conn_refuse(c, 400, "Bad Request",
			    "only CONNECT and absolute http:// URLs are proxied (use HTTPS_PROXY "
			    "for https)");
		return;
	}
	struct err *e = NULL;
	if (netpolicy_split(authority, default_port, c->host, sizeof(c->host), &c->port, &e) < 0) {
		conn_refuse(c, 400, "Bad Request", "%s", e->message);
		err_free(e);
		return;
	}
	enum netpolicy_host_kind kind = netpolicy_host_kind(c->host);
	if (kind == NETPOLICY_AMBIGUOUS || kind == NETPOLICY_INVALID) {
		/* 0177.0.0.1, 127.1, 0x7f.1: every client library reads these its
		 * own way; only the plain dotted-decimal form is taken. */
		conn_refuse(c, 400, "Bad Request",
			    "'%s' is not a canonical IP address or a host name", c->host);
		return;
	}
	if (!netpolicy_allowed(c->allow, c->n_allow, c->host, c->port)) {
		conn_refuse(c, 403, "Forbidden",
			    "%s:%d is not on this session's allowlist (network.allow)", c->host,
			    c->port);
		return;
	}
	if (!c->is_connect) {
		/* Origin form toward the server; one request per connection, so a
		 * second request cannot ride to a host that was never checked. */
		c->head = evbuffer_new();
		evbuffer_add_printf(c->head, "%s %s %s\r\n", method, path, version);
		while ((line = strtok_r(NULL, "\r\n", &save)) != NULL) {
			if (strncasecmp(line, "Proxy-", 6) == 0 ||
			    strncasecmp(line, "Connection:", 11) == 0)
				continue;
			evbuffer_add_printf(c->head, "%s\r\n", line);
		}
		evbuffer_add_printf(c->head, "Connection: close\r\n\r\n");
	}
	resolve(c);
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
	struct egress_conn *c = xcalloc(1, sizeof(*c));
	c->eg = eg;
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
		conn_refuse(c, 403, "Forbidden", "no session owns source address %s", c->src);
		return;
	}
	snprintf(c->session, sizeof(c->session), "%s", peer.session_id);
	size_t mine = 0;
	struct egress_conn *o;
	LIST_FOREACH (o, &eg->conns, link)
		mine += o != c && strcmp(o->session, c->session) == 0;
	if (mine >= MAX_CONNS_PER_SESSION) {
		conn_refuse(c, 429, "Too Many Requests",
			    "this session already has %d proxy connections open",
			    MAX_CONNS_PER_SESSION);
		return;
	}
	c->allow = xcalloc(peer.n_allow, sizeof(char *));
	for (size_t i = 0; i < peer.n_allow; i++)
		c->allow[c->n_allow++] = xstrdup(peer.allow[i]);
	struct timeval tv = {HEAD_TIMEOUT_S, 0};
	bufferevent_set_timeouts(c->client, &tv, &tv);
	bufferevent_setwatermark(c->client, EV_READ, 0, REQUEST_HEAD_MAX + 1024);
	bufferevent_setcb(c->client, head_read, NULL, head_event, c);
	bufferevent_enable(c->client, EV_READ | EV_WRITE);
}

/* ---- set-up ---- */

static int parse_ip(const char *s, struct sockaddr_storage *out)
{
	/* inet_pton, not inet_aton: dotted decimal only (no 0177.0.0.1, 127.1). */
	memset(out, 0, sizeof(*out));
	if (strchr(s, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
		s6->sin6_family = AF_INET6;
		return inet_pton(AF_INET6, s, &s6->sin6_addr) == 1 ? 0 : -1;
	}
	struct sockaddr_in *s4 = (struct sockaddr_in *)out;
	s4->sin_family = AF_INET;
	return netpolicy_host_kind(s) == NETPOLICY_IPV4 && inet_pton(AF_INET, s, &s4->sin_addr) == 1
		   ? 0
		   : -1;
}

static int load_overrides(struct egress *eg, const char *path, struct err **errp)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "egress hosts file %s: %s", path,
			       strerror(errno));
	char line[1024];
	int lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *save = NULL, *ip = strtok_r(line, " \t\r\n", &save);
		if (ip == NULL)
			continue;
		struct sockaddr_storage addr;
		if (parse_ip(ip, &addr) < 0) {
			fclose(f);
			return err_set(errp, ERR_BAD_REQUEST, "%s:%d: '%s' is not an IP address",
				       path, lineno, ip);
		}
		for (char *name = strtok_r(NULL, " \t\r\n", &save); name;
		     name = strtok_r(NULL, " \t\r\n", &save)) {
			if (eg->n_overrides >= MAX_OVERRIDES || strlen(name) > NETPOLICY_HOST_MAX)
				continue;
			struct override *o = &eg->overrides[eg->n_overrides++];
			snprintf(o->name, sizeof(o->name), "%s", name);
			o->addr = addr;
		}
	}
	fclose(f);
	return 0;
}

static int parse_trusted(struct egress *eg, const char *list, struct err **errp)
{
	AUTOFREE char *copy = xstrdup(list);
	char *save = NULL;
	for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (eg->n_trusted >= MAX_TRUSTED)
			break;
		struct netpolicy_trusted *t = &eg->trusted[eg->n_trusted];
		char host[NETPOLICY_HOST_MAX + 1];
		int port = 0;
		if (netpolicy_split(tok, 0, host, sizeof(host), &port, errp) < 0 ||
		    parse_ip(host, &t->addr) < 0)
			return err_set(errp, ERR_BAD_REQUEST,
				       "egress-trusted: '%s' is not IP[:PORT]", tok);
		t->port = port;
		eg->n_trusted++;
	}
	return 0;
}

static void load_local_addrs(struct egress *eg)
{
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) < 0)
		return;
	for (struct ifaddrs *i = ifs; i && eg->n_local < 64; i = i->ifa_next) {
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

struct egress *egress_new(struct event_base *base, const char *hosts_file, const char *trusted,
			  egress_lookup_fn lookup, void *arg, struct err **errp)
{
	struct egress *eg = xcalloc(1, sizeof(*eg));
	eg->base = base;
	eg->lookup = lookup;
	eg->arg = arg;
	LIST_INIT(&eg->listeners);
	LIST_INIT(&eg->conns);
	if ((hosts_file && *hosts_file && load_overrides(eg, hosts_file, errp) < 0) ||
	    (trusted && *trusted && parse_trusted(eg, trusted, errp) < 0)) {
		free(eg);
		return NULL;
	}
	load_local_addrs(eg);
	return eg;
}

int egress_listen(struct egress *eg, const char *ip, int port, int *bound, struct err **errp)
{
	struct sockaddr_storage ss;
	if (parse_ip(ip, &ss) < 0)
		return err_set(errp, ERR_INTERNAL, "egress: bad listen address %s", ip);
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
		return err_set(errp, ERR_UNAVAILABLE, "egress: listen on %s:%d: %s", ip, port,
			       strerror(errno));
	struct sockaddr_storage got;
	socklen_t glen = sizeof(got);
	getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&got, &glen);
	*bound = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
						: ((struct sockaddr_in6 *)&got)->sin6_port);
	struct egress_listener *el = xcalloc(1, sizeof(*el));
	el->l = l;
	LIST_INSERT_HEAD(&eg->listeners, el, link);
	load_local_addrs(eg); /* the new bridge address is one of ours now */
	return 0;
}

const struct egress_stats *egress_get_stats(const struct egress *eg)
{
	return &eg->stats;
}

void egress_free(struct egress *eg)
{
	if (eg == NULL)
		return;
	while (!LIST_EMPTY(&eg->listeners)) {
		struct egress_listener *el = LIST_FIRST(&eg->listeners);
		LIST_REMOVE(el, link);
		evconnlistener_free(el->l);
		free(el);
	}
	while (!LIST_EMPTY(&eg->conns))
		conn_free(LIST_FIRST(&eg->conns));
	if (eg->dns)
		evdns_base_free(eg->dns, 1);
	free(eg);
}
