/* test_resolver.c: the egress proxy's stub resolver (finding 11): the wire
 * format, the spec, the hosts file, and one query against a UDP socket of
 * this test on 127.0.0.1. */
#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "resolver.h"
#include "unit.h"

/* ---- building responses ---- */

struct pkt {
	uint8_t b[1024];
	size_t n;
};

static void put(struct pkt *p, const void *data, size_t n)
{
	memcpy(p->b + p->n, data, n);
	p->n += n;
}

static void put16(struct pkt *p, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
	put(p, b, 2);
}

static void put_name(struct pkt *p, const char *name)
{
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);
		p->b[p->n++] = (uint8_t)l;
		put(p, name, l);
		name += l + (dot ? 1 : 0);
	}
	p->b[p->n++] = 0;
}

static void header(struct pkt *p, uint16_t id, uint16_t flags, uint16_t an)
{
	p->n = 0;
	put16(p, id);
	put16(p, flags);
	put16(p, 1);
	put16(p, an);
	put16(p, 0);
	put16(p, 0);
}

static void question(struct pkt *p, const char *name, uint16_t type)
{
	put_name(p, name);
	put16(p, type);
	put16(p, 1);
}

/* An answer record whose owner is a pointer to offset at. */
static void rr_ptr(struct pkt *p, uint16_t at, uint16_t type, const void *rdata, uint16_t rdlen)
{
	put16(p, (uint16_t)(0xc000 | at));
	put16(p, type);
	put16(p, 1);
	put16(p, 0);
	put16(p, 60);
	put16(p, rdlen);
	put(p, rdata, rdlen);
}

static int parse(const struct pkt *p, uint16_t id, const char *name, uint16_t type,
		 struct resolver_answer *a)
{
	struct err *e = NULL;
	int rc = resolver_parse_response(p->b, p->n, id, name, type, a, &e);
	err_free(e);
	return rc;
}

TEST(resolver_builds_queries)
{
	uint8_t b[512];
	size_t n = resolver_build_query(b, sizeof(b), 0xabcd, "api.example.test", 1);
	CHECK(n == 12 + 18 + 4 + 11);
	CHECK(b[0] == 0xab && b[1] == 0xcd && b[2] == 0x01 && b[3] == 0x00); /* RD */
	CHECK(b[5] == 1 && b[7] == 0 && b[11] == 1);                         /* QD 1, AR 1 */
	CHECK(memcmp(b + 12, "\3api\7example\4test\0", 18) == 0);
	CHECK(b[30] == 0 && b[31] == 1 && b[33] == 1);                      /* A, IN */
	CHECK(b[35] == 0 && b[36] == 41 && b[37] == 0x04 && b[38] == 0xd0); /* OPT, 1232 */
	CHECK(resolver_build_query(b, sizeof(b), 1, "", 1) == 0);
	CHECK(resolver_build_query(b, sizeof(b), 1, "a..b", 1) == 0);
	CHECK(resolver_build_query(b, sizeof(b), 1, "a.b.", 1) == 0);
	CHECK(resolver_build_query(b, sizeof(b), 1, "bad name", 1) == 0);
	char label[80];
	memset(label, 'a', 64);
	label[64] = '\0';
	CHECK(resolver_build_query(b, sizeof(b), 1, label, 1) == 0);
	CHECK(resolver_build_query(b, 20, 1, "a.test", 1) == 0);
}

TEST(resolver_parses_answers_and_cname_chains)
{
	struct pkt p;
	struct resolver_answer a;
	uint8_t v4[4] = {127, 0, 0, 7}, v4b[4] = {127, 0, 0, 8};
	header(&p, 7, 0x8180, 2);
	question(&p, "a.test", 1);
	rr_ptr(&p, 12, 1, v4, 4);
	rr_ptr(&p, 12, 1, v4b, 4);
	CHECK(parse(&p, 7, "a.test", 1, &a) == 0 && a.rcode == 0 && a.n == 2);
	CHECK(((struct sockaddr_in *)&a.addrs[0])->sin_addr.s_addr == htonl(0x7f000007));
	CHECK(a.addrs[1].ss_family == AF_INET);
	/* the question's case does not matter; the name does */
	CHECK(parse(&p, 7, "A.TEST", 1, &a) == 0 && a.n == 2);
	CHECK(parse(&p, 7, "b.test", 1, &a) < 0);
	CHECK(parse(&p, 8, "a.test", 1, &a) < 0);  /* another id */
	CHECK(parse(&p, 7, "a.test", 28, &a) < 0); /* another type */
	/* a CNAME chain: a.test -> c.test (compressed), c.test A; an A record of
	 * another name is ignored */
	header(&p, 9, 0x8180, 3);
	question(&p, "a.test", 1);
	struct pkt cname = {.n = 0};
	cname.b[cname.n++] = 1;
	cname.b[cname.n++] = 'c';
	put16(&cname, 0xc000 | 14); /* "test" of the question */
	rr_ptr(&p, 12, 5, cname.b, (uint16_t)cname.n);
	uint16_t c_at = (uint16_t)(p.n - cname.n);
	rr_ptr(&p, c_at, 1, v4, 4);
	put_name(&p, "evil.test");
	put16(&p, 1);
	put16(&p, 1);
	put16(&p, 0);
	put16(&p, 60);
	put16(&p, 4);
	put(&p, v4b, 4);
	CHECK(parse(&p, 9, "a.test", 1, &a) == 0 && a.n == 1);
	CHECK(((struct sockaddr_in *)&a.addrs[0])->sin_addr.s_addr == htonl(0x7f000007));
	/* AAAA */
	uint8_t v6[16] = {0};
	v6[15] = 1;
	header(&p, 3, 0x8180, 1);
	question(&p, "a.test", 28);
	rr_ptr(&p, 12, 28, v6, 16);
	rr_ptr(&p, 12, 1, v4, 4); /* an A record in an AAAA answer: not counted */
	p.b[7] = 2;
	CHECK(parse(&p, 3, "a.test", 28, &a) == 0 && a.n == 1 && a.addrs[0].ss_family == AF_INET6);
	/* NXDOMAIN */
	header(&p, 4, 0x8183, 0);
	question(&p, "a.test", 1);
	CHECK(parse(&p, 4, "a.test", 1, &a) == 0 && a.rcode == 3 && a.n == 0);
	/* more addresses than we keep */
	header(&p, 5, 0x8180, 20);
	question(&p, "a.test", 1);
	for (int i = 0; i < 20; i++)
		rr_ptr(&p, 12, 1, v4, 4);
	CHECK(parse(&p, 5, "a.test", 1, &a) == 0 && a.n == RESOLVER_MAX_ADDRS);
}

TEST(resolver_refuses_malformed_responses)
{
	struct pkt p;
	struct resolver_answer a;
	uint8_t v4[4] = {127, 0, 0, 7};
	/* too short, a query not a response, another opcode, two questions */
	header(&p, 1, 0x8180, 0);
	CHECK(resolver_parse_response(p.b, 11, 1, "a.test", 1, &a, NULL) < 0);
	header(&p, 1, 0x0100, 0);
	question(&p, "a.test", 1);
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	header(&p, 1, 0x8980, 0);
	question(&p, "a.test", 1);
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	header(&p, 1, 0x8180, 0);
	p.b[5] = 2;
	question(&p, "a.test", 1);
	question(&p, "a.test", 1);
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	/* an answer running past the end */
	header(&p, 1, 0x8180, 1);
	question(&p, "a.test", 1);
	rr_ptr(&p, 12, 1, v4, 4);
	p.n -= 2;
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	/* ... unless the response says it was truncated: what came whole counts */
	p.b[2] |= 0x02;
	CHECK(parse(&p, 1, "a.test", 1, &a) == 0 && a.truncated && a.n == 0);
	/* a pointer to itself, a forward pointer, a loop through a label */
	header(&p, 1, 0x8180, 1);
	question(&p, "a.test", 1);
	size_t at = p.n;
	put16(&p, (uint16_t)(0xc000 | at));
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	p.n = at;
	put16(&p, (uint16_t)(0xc000 | (at + 4)));
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	p.n = at;
	p.b[p.n++] = 1;
	p.b[p.n++] = 'x';
	put16(&p, (uint16_t)(0xc000 | at)); /* x.x.x.x... */
	put16(&p, 1);
	put16(&p, 1);
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	/* a question name with a pointer loop */
	header(&p, 1, 0x8180, 0);
	put16(&p, 0xc000 | 12);
	put16(&p, 1);
	put16(&p, 1);
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	/* a dot inside a label would print as two labels */
	header(&p, 1, 0x8180, 0);
	p.b[p.n++] = 6;
	put(&p, "a.test", 6);
	p.b[p.n++] = 0;
	put16(&p, 1);
	put16(&p, 1);
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	/* extended label types */
	header(&p, 1, 0x8180, 0);
	p.b[p.n++] = 0x41;
	CHECK(parse(&p, 1, "a.test", 1, &a) < 0);
	/* SERVFAIL is an answer with an rcode, no addresses */
	header(&p, 1, 0x8182, 0);
	question(&p, "a.test", 1);
	CHECK(parse(&p, 1, "a.test", 1, &a) == 0 && a.rcode == 2 && a.n == 0);
}

TEST(resolver_specs)
{
	enum resolver_mode m;
	struct sockaddr_storage ss;
	CHECK(resolver_parse_spec("system", &m, &ss, NULL) == 0 && m == RESOLVER_SYSTEM);
	CHECK(resolver_parse_spec("hosts-only", &m, &ss, NULL) == 0 && m == RESOLVER_HOSTS_ONLY);
	CHECK(resolver_parse_spec("127.0.0.1:5353", &m, &ss, NULL) == 0 && m == RESOLVER_SERVER);
	CHECK(ss.ss_family == AF_INET && ntohs(((struct sockaddr_in *)&ss)->sin_port) == 5353);
	CHECK(resolver_parse_spec("[::1]:53", &m, &ss, NULL) == 0 && ss.ss_family == AF_INET6);
	const char *bad[] = {"",         "System",      "127.0.0.1",   "0177.0.0.1:53",
			     "127.1:53", "dns.test:53", "127.0.0.1:0", "::1:53"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct err *e = NULL;
		CHECK(resolver_parse_spec(bad[i], &m, &ss, &e) < 0 && e &&
		      strstr(e->message, "egress-resolver"));
		err_free(e);
	}
}

static char *write_file(const char *text)
{
	char *path = strdup("/tmp/ci-unit-hosts-XXXXXX");
	int fd = mkstemp(path);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			perror("write");
		close(fd);
	}
	return path;
}

TEST(resolver_hosts_file_and_reload)
{
	struct event_base *base = event_base_new();
	char *path = write_file("# comment\n127.0.0.1 A.test b.test. # trailing\n\n"
				"::1 a.test\n");
	struct err *e = NULL;
	struct resolver *r = resolver_new(base, "hosts-only", path, &e);
	CHECK(r != NULL);
	struct sockaddr_storage out[8];
	CHECK(resolver_hosts_lookup(r, "a.test", out, 8) == 2);
	CHECK(out[0].ss_family == AF_INET && out[1].ss_family == AF_INET6);
	CHECK(resolver_hosts_lookup(r, "b.test", out, 8) == 1);
	CHECK(resolver_hosts_lookup(r, "c.test", out, 8) == 0);
	/* hosts-only: a name not in the file is refused at once, nothing sent */
	CHECK(resolver_query(r, "c.test", NULL, NULL, &e) == NULL && e &&
	      strstr(e->message, "hosts-only"));
	err_free(e);
	e = NULL;
	CHECK(resolver_queries_sent(r) == 0);
	/* reload: a new name; a broken file keeps the old table */
	FILE *f = fopen(path, "w");
	fputs("127.0.0.2 c.test\n", f);
	fclose(f);
	size_t names = 0;
	CHECK(resolver_reload(r, &names, &e) == 0 && names == 1);
	CHECK(resolver_hosts_lookup(r, "c.test", out, 8) == 1 &&
	      resolver_hosts_lookup(r, "a.test", out, 8) == 0);
	f = fopen(path, "w");
	fputs("0177.0.0.1 d.test\n", f);
	fclose(f);
	CHECK(resolver_reload(r, &names, &e) < 0 && e && strstr(e->message, "not an IP"));
	err_free(e);
	e = NULL;
	CHECK(resolver_hosts_lookup(r, "c.test", out, 8) == 1);
	resolver_free(r);
	/* bad files at start */
	f = fopen(path, "w");
	fputs("127.0.0.1 127.1\n", f);
	fclose(f);
	CHECK(resolver_new(base, "system", path, &e) == NULL && e);
	err_free(e);
	e = NULL;
	CHECK(resolver_new(base, "system", "/nonexistent/hosts", &e) == NULL && e);
	err_free(e);
	unlink(path);
	free(path);
	event_base_free(base);
}

/* ---- one live query, against a socket of ours on 127.0.0.1 ---- */

struct live {
	int srv;
	int answered;
	size_t n;
	char err[256];
	uint8_t last_query[512];
	size_t last_len;
	int queries;
};

static void live_cb(const struct err *e, const struct sockaddr_storage *addrs, size_t n, void *arg)
{
	(void)addrs;
	struct live *l = arg;
	l->answered++;
	l->n = n;
	if (e)
		snprintf(l->err, sizeof(l->err), "%s", e->message);
}

/* Answer every query on the server socket: first a forged reply with a
 * wrong id (ignored), then the real one (A: 127.0.0.9; AAAA: no data). */
static void serve(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct live *l = arg;
	uint8_t q[512];
	struct sockaddr_storage from;
	socklen_t flen = sizeof(from);
	ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &flen);
	if (n < 12)
		return;
	l->queries++;
	memcpy(l->last_query, q, (size_t)n);
	l->last_len = (size_t)n;
	/* the question ends after the name + 4 */
	size_t qend = 12;
	while (qend < (size_t)n && q[qend])
		qend += q[qend] + 1;
	qend += 5;
	uint16_t qtype = (uint16_t)(q[qend - 4] << 8 | q[qend - 3]);
	struct pkt p = {.n = 0};
	put(&p, q, qend);
	p.b[2] = 0x81;
	p.b[3] = 0x80;
	p.b[7] = qtype == 1 ? 1 : 0;
	p.b[11] = 0;
	if (qtype == 1) {
		uint8_t v4[4] = {127, 0, 0, 9};
		rr_ptr(&p, 12, 1, v4, 4);
	}
	struct pkt forged = p;
	forged.b[0] ^= 0xff;
	sendto(fd, forged.b, forged.n, 0, (struct sockaddr *)&from, flen);
	sendto(fd, p.b, p.n, 0, (struct sockaddr *)&from, flen);
}

TEST(resolver_asks_exactly_the_name_and_takes_only_its_answer)
{
	struct event_base *base = event_base_new();
	struct live l = {0};
	l.srv = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bind(l.srv, (struct sockaddr *)&sa, sizeof(sa));
	socklen_t slen = sizeof(sa);
	getsockname(l.srv, (struct sockaddr *)&sa, &slen);
	char spec[64];
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", ntohs(sa.sin_port));
	struct event *ev = event_new(base, l.srv, EV_READ | EV_PERSIST, serve, &l);
	event_add(ev, NULL);
	struct err *e = NULL;
	struct resolver *r = resolver_new(base, spec, NULL, &e);
	CHECK(r != NULL);
	struct resolver_query *q = resolver_query(r, "live.test", live_cb, &l, &e);
	CHECK(q != NULL);
	CHECK(l.answered == 0); /* never from inside the call */
	for (int i = 0; i < 200 && l.answered == 0; i++)
		event_base_loop(base, EVLOOP_ONCE);
	CHECK(l.answered == 1 && l.n == 1 && l.err[0] == '\0');
	CHECK(l.queries == 2 && resolver_queries_sent(r) == 2); /* A and AAAA, nothing else */
	/* the name as asked: no search domain */
	CHECK(l.last_len > 12 + 11 && memcmp(l.last_query + 12, "\4live\4test\0", 11) == 0);
	/* a cancelled query never calls back */
	q = resolver_query(r, "gone.test", live_cb, &l, &e);
	resolver_cancel(q);
	for (int i = 0; i < 5; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	CHECK(l.answered == 1);
	/* a query in flight when the resolver goes is cancelled too */
	CHECK(resolver_query(r, "late.test", live_cb, &l, &e) != NULL);
	resolver_free(r);
	CHECK(l.answered == 1);
	event_free(ev);
	close(l.srv);
	event_base_free(base);
}
