/* resolver.c: the hosts file and a stub DNS resolver for the egress proxy.
 *
 * Why not evdns: libevent's resolver probes a nameserver it marked down with
 * a query for a well-known public name, and applies resolv.conf search
 * domains; both send queries nobody asked for, out of a host that may not
 * send any. This one sends exactly the A and AAAA queries for the names the
 * proxy was asked to reach, nothing else.
 *
 * One concern, a little over 700 lines: turning a name into addresses for the
 * proxy (the hosts file, the nameservers of resolv.conf or one given, the
 * queries on the loop, and the strict reading of the answers). */
#include "resolver.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <unistd.h>

#include "defer.h"
#include "netpolicy.h"
#include "xalloc.h"

#define RESOLV_CONF "/etc/resolv.conf"
#define TRY_TIMEOUT_MS 2000
#define TRIES_PER_SERVER 2
#define MAX_TRIES 4
#define MAX_IN_FLIGHT 512 /* queries; each holds up to two sockets */
#define MAX_HOSTS 4096
#define MAX_BAD_DATAGRAMS 16 /* ignored datagrams per try before it counts as failed */
#define PKT_MAX 4096
#define EDNS_PAYLOAD 1232
#define MAX_ANSWERS 64
#define MAX_CNAMES 8
#define MAX_POINTER_JUMPS 32
#define NAME_MAX_LEN 255

struct host_entry {
	char name[NETPOLICY_HOST_MAX + 1];
	struct sockaddr_storage addr;
};

struct resolver {
	struct event_base *base;
	enum resolver_mode mode;
	char *hosts_file;
	struct host_entry *hosts;
	size_t n_hosts;
	struct sockaddr_storage servers[RESOLVER_MAX_SERVERS];
	size_t n_servers;
	uint64_t sent;
	size_t in_flight;
	TAILQ_HEAD(, resolver_query) queries;
};

enum try_state { T_PENDING, T_ANSWERED, T_FAILED };

/* One question (A or AAAA) of a query, on its own socket. */
struct dns_try {
	struct resolver_query *q;
	uint16_t qtype;
	int fd;
	struct event *ev;
	uint16_t id;
	int bad;
	enum try_state state;
	struct resolver_answer ans;
};

struct resolver_query {
	struct resolver *r;
	char name[NETPOLICY_HOST_MAX + 1];
	resolver_cb cb;
	void *arg;
	struct dns_try t[2];                                   /* A, AAAA */
	struct sockaddr_storage servers[RESOLVER_MAX_SERVERS]; /* as when it was asked */
	size_t n_servers;
	int tries;
	size_t server;
	struct event *timer;
	char why[160]; /* the last failure */
	TAILQ_ENTRY(resolver_query) link;
};

/* ---- the wire format ---- */

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

size_t resolver_build_query(uint8_t *buf, size_t size, uint16_t id, const char *name,
			    uint16_t qtype)
{
	size_t nlen = strlen(name);
	/* header 12 + name (nlen + 2) + question 4 + OPT record 11 */
	if (nlen == 0 || nlen > 253 || size < 12 + nlen + 2 + 4 + 11)
		return 0;
	memset(buf, 0, 12);
	put16(buf, id);
	put16(buf + 2, 0x0100); /* recursion desired */
	put16(buf + 4, 1);      /* one question */
	put16(buf + 10, 1);     /* one additional: EDNS0 */
	size_t pos = 12;
	const char *label = name;
	while (*label) {
		const char *dot = strchr(label, '.');
		size_t l = dot ? (size_t)(dot - label) : strlen(label);
		if (l == 0 || l > 63)
			return 0;
		for (size_t i = 0; i < l; i++) {
			unsigned char c = (unsigned char)label[i];
			if (!(isalnum(c) || c == '-' || c == '_'))
				return 0;
		}
		buf[pos++] = (uint8_t)l;
		memcpy(buf + pos, label, l);
		pos += l;
		if (dot == NULL)
			break;
		label = dot + 1;
		if (*label == '\0')
			return 0; /* no trailing dot here: names come without one */
	}
	buf[pos++] = 0;
	put16(buf + pos, qtype);
	put16(buf + pos + 2, 1); /* IN */
	pos += 4;
	buf[pos++] = 0;       /* root */
	put16(buf + pos, 41); /* OPT */
	put16(buf + pos + 2, EDNS_PAYLOAD);
	memset(buf + pos + 4, 0, 6); /* ttl (extended rcode, flags), rdlength */
	pos += 10;
	return pos;
}

/* Read the (possibly compressed) name at *pos into out (lowercase, dotted,
 * at most 255 bytes) and move *pos past it. Pointers must point backwards
 * and are followed at most MAX_POINTER_JUMPS times, so a loop ends. */
static int read_name(const uint8_t *pkt, size_t len, size_t *pos, char *out)
{
	size_t p = *pos, olen = 0, after = 0;
	int jumps = 0;
	for (;;) {
		if (p >= len)
			return -1;
		uint8_t l = pkt[p];
		if ((l & 0xc0) == 0xc0) {
			if (p + 1 >= len)
				return -1;
			size_t target = (size_t)(l & 0x3f) << 8 | pkt[p + 1];
			if (target >= p || ++jumps > MAX_POINTER_JUMPS)
				return -1;
			if (after == 0)
				after = p + 2;
			p = target;
			continue;
		}
		if (l & 0xc0)
			return -1; /* extended label types: not in answers we accept */
		if (l == 0) {
			p++;
			break;
		}
		if (p + 1 + l > len || olen + l + (olen ? 1 : 0) > NAME_MAX_LEN)
			return -1;
		if (olen)
			out[olen++] = '.';
		for (size_t i = 0; i < l; i++) {
			unsigned char c = pkt[p + 1 + i];
			/* A dot or a control byte inside a label would make two
			 * different names print alike. */
			if (c <= ' ' || c >= 0x7f || c == '.')
				return -1;
			out[olen++] = (char)tolower(c);
		}
		p += 1 + l;
	}
	out[olen] = '\0';
	*pos = after ? after : p;
	return 0;
}

int resolver_parse_response(const uint8_t *pkt, size_t len, uint16_t id, const char *name,
			    uint16_t qtype, struct resolver_answer *out, struct err **errp)
{
	memset(out, 0, sizeof(*out));
	if (len < 12 || len > 65535)
		return err_set(errp, ERR_BAD_REQUEST, "DNS response of %zu bytes", len);
	uint16_t flags = be16(pkt + 2);
	if (be16(pkt) != id)
		return err_set(errp, ERR_BAD_REQUEST, "DNS response with another id");
	if (!(flags & 0x8000) || ((flags >> 11) & 0xf) != 0)
		return err_set(errp, ERR_BAD_REQUEST, "not a DNS response to a query");
	if (be16(pkt + 4) != 1)
		return err_set(errp, ERR_BAD_REQUEST, "DNS response without our one question");
	size_t pos = 12;
	char qn[NAME_MAX_LEN + 1];
	if (read_name(pkt, len, &pos, qn) < 0 || strcasecmp(qn, name) != 0 || pos + 4 > len ||
	    be16(pkt + pos) != qtype || be16(pkt + pos + 2) != 1)
		return err_set(errp, ERR_BAD_REQUEST, "DNS response to another question");
	pos += 4;
	out->rcode = flags & 0xf;
	out->truncated = (flags & 0x0200) != 0;
	if (out->rcode != 0)
		return 0;
	/* The names whose addresses count: ours, and the CNAME chain from it. */
	char owners[MAX_CNAMES + 1][NAME_MAX_LEN + 1];
	size_t n_owners = 1;
	snprintf(owners[0], sizeof(owners[0]), "%s", qn);
	unsigned an = be16(pkt + 6);
	for (unsigned i = 0; i < an && i < MAX_ANSWERS; i++) {
		char owner[NAME_MAX_LEN + 1];
		if (read_name(pkt, len, &pos, owner) < 0 || pos + 10 > len)
			goto cut;
		uint16_t type = be16(pkt + pos), cls = be16(pkt + pos + 2);
		size_t rdlen = be16(pkt + pos + 8), rdata = pos + 10;
		if (rdata + rdlen > len)
			goto cut;
		pos = rdata + rdlen;
		bool ours = false;
		for (size_t k = 0; k < n_owners && !ours; k++)
			ours = strcmp(owners[k], owner) == 0;
		if (!ours || cls != 1)
			continue;
		if (type == RESOLVER_TYPE_CNAME) {
			size_t p = rdata;
			char target[NAME_MAX_LEN + 1];
			if (read_name(pkt, len, &p, target) < 0 || p > rdata + rdlen)
				return err_set(errp, ERR_BAD_REQUEST,
					       "bad CNAME in a DNS response");
			if (n_owners <= MAX_CNAMES)
				snprintf(owners[n_owners++], sizeof(owners[0]), "%s", target);
			continue;
		}
		if (type != qtype || out->n >= RESOLVER_MAX_ADDRS)
			continue;
		struct sockaddr_storage *ss = &out->addrs[out->n];
		memset(ss, 0, sizeof(*ss));
		if (type == RESOLVER_TYPE_A && rdlen == 4) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
			s4->sin_family = AF_INET;
			memcpy(&s4->sin_addr, pkt + rdata, 4);
			out->n++;
		} else if (type == RESOLVER_TYPE_AAAA && rdlen == 16) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
			s6->sin6_family = AF_INET6;
			memcpy(&s6->sin6_addr, pkt + rdata, 16);
			out->n++;
		}
	}
	return 0;
cut:
	/* A truncated response may end inside a record: keep what came whole. */
	if (out->truncated)
		return 0;
	return err_set(errp, ERR_BAD_REQUEST, "malformed answer in a DNS response");
}

/* ---- configuration ---- */

static void set_port(struct sockaddr_storage *ss, int port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
}

int resolver_parse_spec(const char *spec, enum resolver_mode *mode, struct sockaddr_storage *server,
			struct err **errp)
{
	if (strcmp(spec, "system") == 0) {
		*mode = RESOLVER_SYSTEM;
		return 0;
	}
	if (strcmp(spec, "hosts-only") == 0) {
		*mode = RESOLVER_HOSTS_ONLY;
		return 0;
	}
	char host[NETPOLICY_HOST_MAX + 1];
	int port = 0;
	/* An IPv6 address goes in brackets: ::1:53 could be either. */
	if (netpolicy_split(spec, 0, host, sizeof(host), &port, NULL) < 0 || port == 0 ||
	    (strchr(host, ':') && spec[0] != '[') || netpolicy_parse_ip(host, server) < 0)
		return err_set(errp, ERR_BAD_REQUEST,
			       "egress-resolver: '%.64s' is not system, hosts-only or IP:PORT "
			       "([IPv6]:PORT)",
			       spec);
	set_port(server, port);
	*mode = RESOLVER_SERVER;
	return 0;
}

static int load_hosts(const char *path, struct host_entry **out, size_t *n_out, struct err **errp)
{
	*out = NULL;
	*n_out = 0;
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "egress hosts file %s: %s", path,
			       strerror(errno));
	struct host_entry *v = NULL;
	size_t n = 0, cap = 0;
	char line[1024];
	int lineno = 0;
	int rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			rc = err_set(errp, ERR_BAD_REQUEST, "%s:%d: line longer than %zu bytes",
				     path, lineno, sizeof(line) - 2);
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *save = NULL, *ip = strtok_r(line, " \t\r\n", &save);
		if (ip == NULL)
			continue;
		struct sockaddr_storage addr;
		if (netpolicy_parse_ip(ip, &addr) < 0) {
			rc = err_set(errp, ERR_BAD_REQUEST,
				     "%s:%d: '%.64s' is not an IP address (dotted decimal or IPv6)",
				     path, lineno, ip);
			break;
		}
		for (char *name = strtok_r(NULL, " \t\r\n", &save); name;
		     name = strtok_r(NULL, " \t\r\n", &save)) {
			size_t l = strlen(name);
			if (l > 1 && name[l - 1] == '.')
				name[--l] = '\0';
			if (l == 0 || l > NETPOLICY_HOST_MAX ||
			    netpolicy_host_kind(name) != NETPOLICY_NAME) {
				rc = err_set(errp, ERR_BAD_REQUEST, "%s:%d: '%.64s' is not a name",
					     path, lineno, name);
				break;
			}
			if (n >= MAX_HOSTS) {
				rc = err_set(errp, ERR_BAD_REQUEST, "%s: more than %d names", path,
					     MAX_HOSTS);
				break;
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				v = xrealloc(v, cap * sizeof(*v));
			}
			for (size_t i = 0; i <= l; i++)
				v[n].name[i] = (char)tolower((unsigned char)name[i]);
			v[n].addr = addr;
			n++;
		}
		if (rc < 0)
			break;
	}
	fclose(f);
	if (rc < 0) {
		free(v);
		return -1;
	}
	*out = v;
	*n_out = n;
	return 0;
}

/* The nameservers of resolv.conf; nothing else of it (no search, domain or
 * options: names are asked exactly as given). */
static size_t load_resolv_conf(struct sockaddr_storage *out)
{
	FILE *f = fopen(RESOLV_CONF, "re");
	if (f == NULL)
		return 0;
	size_t n = 0;
	char line[512];
	while (fgets(line, sizeof(line), f) && n < RESOLVER_MAX_SERVERS) {
		char *save = NULL, *key = strtok_r(line, " \t\r\n", &save);
		if (key == NULL || strcmp(key, "nameserver") != 0)
			continue;
		char *ip = strtok_r(NULL, " \t\r\n", &save);
		if (ip && strchr(ip, '%') == NULL && netpolicy_parse_ip(ip, &out[n]) == 0) {
			set_port(&out[n], 53);
			n++;
		}
	}
	fclose(f);
	return n;
}

struct resolver *resolver_new(struct event_base *base, const char *spec, const char *hosts_file,
			      struct err **errp)
{
	struct resolver *r = xcalloc(1, sizeof(*r));
	r->base = base;
	TAILQ_INIT(&r->queries);
	if (resolver_parse_spec(spec ? spec : "system", &r->mode, &r->servers[0], errp) < 0) {
		free(r);
		return NULL;
	}
	if (r->mode == RESOLVER_SERVER)
		r->n_servers = 1;
	else if (r->mode == RESOLVER_SYSTEM)
		r->n_servers = load_resolv_conf(r->servers);
	if (hosts_file && *hosts_file) {
		r->hosts_file = xstrdup(hosts_file);
		if (load_hosts(hosts_file, &r->hosts, &r->n_hosts, errp) < 0) {
			free(r->hosts_file);
			free(r);
			return NULL;
		}
	}
	return r;
}

int resolver_set_spec(struct resolver *r, const char *spec, struct err **errp)
{
	enum resolver_mode mode;
	struct sockaddr_storage server;
	if (resolver_parse_spec(spec, &mode, &server, errp) < 0)
		return -1;
	r->mode = mode;
	r->n_servers = 0;
	if (mode == RESOLVER_SERVER) {
		r->servers[0] = server;
		r->n_servers = 1;
	} else if (mode == RESOLVER_SYSTEM) {
		r->n_servers = load_resolv_conf(r->servers);
	}
	return 0;
}

int resolver_reload(struct resolver *r, size_t *names, struct err **errp)
{
	if (r->mode == RESOLVER_SYSTEM) {
		struct sockaddr_storage servers[RESOLVER_MAX_SERVERS];
		size_t n = load_resolv_conf(servers);
		memcpy(r->servers, servers, sizeof(servers));
		r->n_servers = n;
	}
	if (r->hosts_file) {
		struct host_entry *v;
		size_t n;
		if (load_hosts(r->hosts_file, &v, &n, errp) < 0)
			return -1;
		free(r->hosts);
		r->hosts = v;
		r->n_hosts = n;
	}
	if (names)
		*names = r->n_hosts;
	return 0;
}

size_t resolver_hosts_lookup(const struct resolver *r, const char *name,
			     struct sockaddr_storage *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n_hosts && n < max; i++)
		if (strcasecmp(r->hosts[i].name, name) == 0)
			out[n++] = r->hosts[i].addr;
	return n;
}

enum resolver_mode resolver_mode(const struct resolver *r)
{
	return r->mode;
}

uint64_t resolver_queries_sent(const struct resolver *r)
{
	return r->sent;
}

/* ---- queries ---- */

static void try_close(struct dns_try *t)
{
	if (t->ev) {
		event_free(t->ev);
		t->ev = NULL;
	}
	if (t->fd >= 0) {
		close(t->fd);
		t->fd = -1;
	}
}

static void query_free(struct resolver_query *q)
{
	try_close(&q->t[0]);
	try_close(&q->t[1]);
	event_free(q->timer);
	TAILQ_REMOVE(&q->r->queries, q, link);
	q->r->in_flight--;
	free(q);
}

static void query_finish(struct resolver_query *q)
{
	struct sockaddr_storage addrs[RESOLVER_MAX_ADDRS];
	size_t n = 0;
	bool nxdomain = false, nodata = true;
	for (int k = 0; k < 2; k++) {
		const struct dns_try *t = &q->t[k];
		if (t->state != T_ANSWERED) {
			nodata = false;
			continue;
		}
		nxdomain |= t->ans.rcode == 3;
		for (size_t i = 0; i < t->ans.n && n < RESOLVER_MAX_ADDRS; i++)
			addrs[n++] = t->ans.addrs[i];
	}
	struct err e = {.code = ERR_UNAVAILABLE};
	char msg[256];
	if (n == 0) {
		if (nxdomain)
			snprintf(msg, sizeof(msg), "no such name (NXDOMAIN)");
		else if (nodata)
			snprintf(msg, sizeof(msg), "the name has no address");
		else
			snprintf(msg, sizeof(msg), "%s", q->why[0] ? q->why : "no answer");
		e.message = msg;
	}
	resolver_cb cb = q->cb;
	void *arg = q->arg;
	query_free(q);
	cb(n ? NULL : &e, addrs, n, arg);
}

static void query_timer(evutil_socket_t fd, short what, void *arg);

static void try_read(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct dns_try *t = arg;
	struct resolver_query *q = t->q;
	uint8_t buf[PKT_MAX + 1];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		snprintf(q->why, sizeof(q->why), "nameserver unreachable: %s", strerror(errno));
		t->state = T_FAILED;
	} else {
		struct err *e = NULL;
		if ((size_t)n > PKT_MAX || resolver_parse_response(buf, (size_t)n, t->id, q->name,
								   t->qtype, &t->ans, &e) < 0) {
			err_free(e);
			if (++t->bad < MAX_BAD_DATAGRAMS)
				return; /* not ours (or forged): keep waiting */
			snprintf(q->why, sizeof(q->why), "no valid DNS response");
			t->state = T_FAILED;
		} else if (t->ans.rcode == 0 || t->ans.rcode == 3) {
			if (t->ans.truncated && t->ans.n == 0 && t->ans.rcode == 0) {
				snprintf(q->why, sizeof(q->why),
					 "truncated DNS response (TCP is not used)");
				t->state = T_FAILED;
			} else {
				t->state = T_ANSWERED;
			}
		} else {
			snprintf(q->why, sizeof(q->why), "the nameserver answered rcode %d",
				 t->ans.rcode);
			t->state = T_FAILED;
		}
	}
	try_close(t);
	/* Both questions settled: go on from the loop, not from inside this
	 * event's callback. */
	if (q->t[0].state != T_PENDING && q->t[1].state != T_PENDING) {
		defer_event(q->timer);
	}
}

static void try_send(struct dns_try *t, const struct sockaddr_storage *server)
{
	struct resolver_query *q = t->q;
	try_close(t);
	t->bad = 0;
	t->state = T_FAILED;
	uint8_t pkt[512];
	if (getrandom(&t->id, sizeof(t->id), GRND_NONBLOCK) != sizeof(t->id)) {
		snprintf(q->why, sizeof(q->why), "no randomness for a query id");
		return;
	}
	size_t len = resolver_build_query(pkt, sizeof(pkt), t->id, q->name, t->qtype);
	socklen_t slen =
	    server->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	/* A fresh socket per query: a new random source port each time, and
	 * connect() makes the kernel drop datagrams from anyone else. */
	t->fd = socket(server->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (t->fd < 0 || connect(t->fd, (const struct sockaddr *)server, slen) < 0 ||
	    send(t->fd, pkt, len, 0) != (ssize_t)len) {
		snprintf(q->why, sizeof(q->why), "cannot send a DNS query: %s", strerror(errno));
		try_close(t);
		return;
	}
	q->r->sent++;
	t->ev = event_new(q->r->base, t->fd, EV_READ | EV_PERSIST, try_read, t);
	event_add(t->ev, NULL);
	t->state = T_PENDING;
}

/* Ask the questions not answered yet, of the next nameserver. */
static void query_try(struct resolver_query *q)
{
	const struct sockaddr_storage *server = &q->servers[q->server % q->n_servers];
	q->tries++;
	bool pending = false;
	for (int k = 0; k < 2; k++)
		if (q->t[k].state != T_ANSWERED) {
			try_send(&q->t[k], server);
			pending |= q->t[k].state == T_PENDING;
		}
	struct timeval tv = {0, 0};
	if (pending)
		tv = (struct timeval){TRY_TIMEOUT_MS / 1000, (TRY_TIMEOUT_MS % 1000) * 1000};
	evtimer_add(q->timer, &tv);
}

static void query_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct resolver_query *q = arg;
	for (int k = 0; k < 2; k++)
		if (q->t[k].state == T_PENDING) {
			try_close(&q->t[k]);
			q->t[k].state = T_FAILED;
			snprintf(q->why, sizeof(q->why),
				 "no answer from the nameserver (timed out)");
		}
	bool all = q->t[0].state == T_ANSWERED && q->t[1].state == T_ANSWERED;
	size_t limit = q->n_servers * TRIES_PER_SERVER;
	if (!all && q->tries < (int)(limit < MAX_TRIES ? limit : MAX_TRIES)) {
		q->server++;
		query_try(q);
		return;
	}
	query_finish(q);
}

struct resolver_query *resolver_query(struct resolver *r, const char *name, resolver_cb cb,
				      void *arg, struct err **errp)
{
	if (r->mode == RESOLVER_HOSTS_ONLY) {
		err_set(errp, ERR_UNAVAILABLE,
			"not in the egress hosts file, and the resolver is hosts-only (no DNS)");
		return NULL;
	}
	if (r->n_servers == 0) {
		err_set(errp, ERR_UNAVAILABLE, "no nameserver in %s", RESOLV_CONF);
		return NULL;
	}
	uint8_t probe[512];
	if (strlen(name) > NETPOLICY_HOST_MAX ||
	    resolver_build_query(probe, sizeof(probe), 0, name, RESOLVER_TYPE_A) == 0) {
		err_set(errp, ERR_BAD_REQUEST, "'%.64s' is not a DNS name", name);
		return NULL;
	}
	if (r->in_flight >= MAX_IN_FLIGHT) {
		err_set(errp, ERR_UNAVAILABLE, "too many names being resolved");
		return NULL;
	}
	struct resolver_query *q = xcalloc(1, sizeof(*q));
	q->r = r;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->cb = cb;
	q->arg = arg;
	q->t[0] = (struct dns_try){.q = q, .qtype = RESOLVER_TYPE_A, .fd = -1};
	q->t[1] = (struct dns_try){.q = q, .qtype = RESOLVER_TYPE_AAAA, .fd = -1};
	memcpy(q->servers, r->servers, sizeof(q->servers));
	q->n_servers = r->n_servers;
	q->timer = evtimer_new(r->base, query_timer, q);
	TAILQ_INSERT_TAIL(&r->queries, q, link);
	r->in_flight++;
	query_try(q); /* the callback comes from the loop, at the earliest on the next turn */
	return q;
}

void resolver_cancel(struct resolver_query *q)
{
	if (q)
		query_free(q);
}

void resolver_free(struct resolver *r)
{
	if (r == NULL)
		return;
	while (!TAILQ_EMPTY(&r->queries))
		query_free(TAILQ_FIRST(&r->queries));
	free(r->hosts);
	free(r->hosts_file);
	free(r);
}
