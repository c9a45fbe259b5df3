/* store_sentinel.c: finding the Redis master through Redis Sentinel, and
 * following it when it moves (issue 15, item 6).
 *
 * With --redis sentinel://H:P[,H:P...]/NAME[/DB], store.c does not connect
 * to an address of its own: it asks here. One resolution asks the sentinels
 * in turn (starting with the last one that answered) for NAME's master with
 * SENTINEL get-master-addr-by-name, each attempt bounded by a deadline, and
 * hands the first well-formed address to store.c, which connects and checks
 * ROLE before it uses the connection. A sentinel that hangs, refuses, lies
 * (a bogus address, garbage) or does not know NAME costs one deadline and
 * the next one is asked; a round where none answers goes back to store.c's
 * reconnect backoff.
 *
 * A subscription to one sentinel's +switch-master channel tells us of a
 * failover as it happens; store.c also re-resolves on a lost connection, a
 * ROLE that is no longer master, and READONLY/LOADING errors. The address a
 * +switch-master message carries is not used: it only starts a resolution,
 * so every address we connect to is one a sentinel of the operator's list
 * gave in answer to our own question.
 *
 * Everything runs through hiredis async on the loop; nothing blocks. A
 * sentinel given by name is resolved here, on the loop (resolver.c: the
 * hosts file, then the system's nameservers), never by hiredis (whose
 * getaddrinfo blocks); an address from a sentinel must be an IP literal, so
 * following one needs no DNS at all. */
#include "store.h"
#include "store_internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "resolver.h"
#include "xalloc.h"

/* ---- the URL and the addresses (pure; tests/unit/test_store_sentinel.c) ---- */

void store_sentinel_url_clear(struct store_sentinel_url *u)
{
	for (size_t i = 0; i < u->n; i++)
		free(u->host[i]);
	free(u->master);
	memset(u, 0, sizeof(*u));
}

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* One HOST[:PORT] or [V6]:PORT of the list, [s, e). */
static int parse_one(const char *url, const char *s, const char *e, struct store_sentinel_url *u,
		     struct err **errp)
{
	if (u->n == STORE_SENTINELS_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "redis url %s: more than %d sentinels", url,
			       STORE_SENTINELS_MAX);
	if (e <= s)
		return err_set(errp, ERR_BAD_REQUEST, "redis url %s: an empty sentinel", url);
	size_t len = (size_t)(e - s);
	const char *hs = s, *he, *colon;
	if (*s == '[') {
		hs = s + 1;
		he = memchr(hs, ']', len - 1);
		if (he == NULL)
			return err_set(errp, ERR_BAD_REQUEST, "redis url %s: unclosed [ in a host",
				       url);
		colon = he + 1 < e ? he + 1 : NULL;
		if (colon && *colon != ':')
			return err_set(errp, ERR_BAD_REQUEST,
				       "redis url %s: expected :PORT after ]", url);
	} else {
		colon = memchr(s, ':', len);
		he = colon ? colon : e;
	}
	if (he == hs)
		return err_set(errp, ERR_BAD_REQUEST, "redis url %s: a sentinel without a host",
			       url);
	if (he - hs > 253)
		return err_set(errp, ERR_BAD_REQUEST, "redis url %s: a sentinel host is too long",
			       url);
	for (const char *p = hs; p < he; p++)
		if (!name_char(*p) && !(*s == '[' && *p == ':'))
			return err_set(errp, ERR_BAD_REQUEST,
				       "redis url %s: bad character in sentinel host", url);
	int port = 26379;
	if (colon) {
		char *pe = NULL;
		if (colon + 1 == e || !isdigit((unsigned char)colon[1]))
			return err_set(errp, ERR_BAD_REQUEST, "redis url %s: bad sentinel port",
				       url);
		long p = strtol(colon + 1, &pe, 10);
		if (pe != e || p < 1 || p > 65535)
			return err_set(errp, ERR_BAD_REQUEST, "redis url %s: bad sentinel port",
				       url);
		port = (int)p;
	}
	u->host[u->n] = xstrndup(hs, (size_t)(he - hs));
	for (char *c = u->host[u->n]; *c; c++)
		*c = (char)tolower((unsigned char)*c); /* as the hosts file is looked up */
	u->port[u->n++] = port;
	return 0;
}

int store_sentinel_parse_url(const char *url, struct store_sentinel_url *u, struct err **errp)
{
	memset(u, 0, sizeof(*u));
	static const char scheme[] = "sentinel://";
	if (strncmp(url, scheme, sizeof(scheme) - 1) != 0)
		return err_set(
		    errp, ERR_BAD_REQUEST,
		    "redis url %s: expected sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB]", url);
	const char *list = url + sizeof(scheme) - 1, *slash = strchr(list, '/');
	if (slash == NULL || slash == list) {
		err_set(errp, ERR_BAD_REQUEST,
			"redis url %s: expected sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB]",
			url);
		goto fail;
	}
	for (const char *s = list; s < slash;) {
		const char *comma = memchr(s, ',', (size_t)(slash - s)), *e = comma ? comma : slash;
		if (parse_one(url, s, e, u, errp) < 0)
			goto fail;
		s = comma ? comma + 1 : slash;
		if (comma && s == slash) {
			err_set(errp, ERR_BAD_REQUEST, "redis url %s: empty sentinel after ,", url);
			goto fail;
		}
	}
	const char *name = slash + 1, *nend = strchr(name, '/');
	if (nend == NULL)
		nend = name + strlen(name);
	if (nend == name) {
		err_set(errp, ERR_BAD_REQUEST, "redis url %s: no master name", url);
		goto fail;
	}
	if (nend - name > STORE_SENTINEL_NAME_MAX) {
		err_set(errp, ERR_BAD_REQUEST, "redis url %s: master name longer than %d", url,
			STORE_SENTINEL_NAME_MAX);
		goto fail;
	}
	for (const char *p = name; p < nend; p++)
		if (!name_char(*p)) {
			err_set(errp, ERR_BAD_REQUEST,
				"redis url %s: master name may hold letters, digits, - _ . only",
				url);
			goto fail;
		}
	u->master = xstrndup(name, (size_t)(nend - name));
	if (*nend == '/' && nend[1]) {
		char *e = NULL;
		long d = strtol(nend + 1, &e, 10);
		if (!isdigit((unsigned char)nend[1]) || *e != '\0' || d < 0 || d > 1000) {
			err_set(errp, ERR_BAD_REQUEST, "redis url %s: bad database number", url);
			goto fail;
		}
		u->db = (int)d;
	}
	return 0;
fail:
	store_sentinel_url_clear(u);
	return -1;
}

int store_sentinel_check_addr(const char *host, size_t hlen, const char *port, size_t plen,
			      char out[STORE_SENTINEL_ADDR_MAX], int *out_port)
{
	char h[INET6_ADDRSTRLEN], p[8];
	if (hlen == 0 || hlen >= sizeof(h) || memchr(host, '\0', hlen) || plen == 0 ||
	    plen >= sizeof(p))
		return -1;
	memcpy(h, host, hlen);
	h[hlen] = '\0';
	memcpy(p, port, plen);
	p[plen] = '\0';
	for (size_t i = 0; i < plen; i++)
		if (!isdigit((unsigned char)p[i]))
			return -1;
	long n = strtol(p, NULL, 10);
	if (n < 1 || n > 65535)
		return -1;
	/* An IP literal only: a name would need DNS (hiredis resolves
	 * blocking), and a sentinel names what it saw, as an address. */
	struct in6_addr a6;
	struct in_addr a4;
	bool v4 = inet_pton(AF_INET, h, &a4) == 1;
	if (!v4 && inet_pton(AF_INET6, h, &a6) != 1)
		return -1;
	if (v4 ? (a4.s_addr == htonl(INADDR_ANY) || a4.s_addr == htonl(INADDR_BROADCAST))
	       : IN6_IS_ADDR_UNSPECIFIED(&a6) || IN6_IS_ADDR_MULTICAST(&a6))
		return -1;
	if (v4 && (ntohl(a4.s_addr) >> 28) == 14) /* 224.0.0.0/4: multicast */
		return -1;
	snprintf(out, STORE_SENTINEL_ADDR_MAX, "%s", h);
	*out_port = (int)n;
	return 0;
}

/* ---- resolution and the subscription (on the loop) ---- */

struct store_sentinel {
	struct store *st;
	struct store_sentinel_url u;
	int timeout_ms;
	/* The resolution in progress: the sentinel asked (idx), how many of
	 * this round were asked, the query's context and its deadline. */
	bool resolving;
	size_t idx, asked;
	redisAsyncContext *q;
	struct resolver_query *dnsq; /* the name of sentinel idx, being resolved */
	struct event *deadline, *step;
	struct resolver *res;                           /* made for the first name */
	char ip[STORE_SENTINELS_MAX][INET6_ADDRSTRLEN]; /* each one's address ("": none yet) */
	size_t first;    /* asked first: the one that answered last, unless that
			  * answer did not work out */
	size_t given_by; /* the sentinel that named the master in use */
	/* The +switch-master subscription. */
	redisAsyncContext *sub;
	size_t sub_idx;
	struct event *sub_retry;
	/* What /readyz and /metrics say. */
	char master[STORE_SENTINEL_ADDR_MAX + 8]; /* "HOST:PORT" in use, "" before */
	uint64_t failovers;
	char problem[256];
	/* What was logged last for each sentinel, and for the master. */
	char logged[STORE_SENTINELS_MAX + 1][256];
};

static void subscribe_start(struct store_sentinel *ss);
static void query_next(struct store_sentinel *ss);
static void query_end(struct store_sentinel *ss, bool hiredis_frees);
static void sub_retry_later(struct store_sentinel *ss);
static void note_problem(struct store_sentinel *ss, size_t who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What a sentinel may send before it is cut off: an honest answer is under
 * 100 bytes, a +switch-master message a little more. hiredis 0.14 buffers
 * a bulk string whole however long it claims to be, so the cap is kept
 * here: the libevent adapter's read event is ours, and checks the reader's
 * unparsed bytes before each read (a read adds at most 16 KiB). */
#define SENTINEL_READ_CAP (64u << 10)

static void capped_read(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	redisLibeventEvents *e = arg;
	redisAsyncContext *ac = e->context;
	struct store_sentinel *ss = ac->data;
	redisReader *rd = ac->c.reader;
	if (ss == NULL || rd == NULL || rd->len - rd->pos <= SENTINEL_READ_CAP) {
		redisAsyncHandleRead(ac);
		return;
	}
	/* Outside any hiredis callback: the context can go at once. */
	size_t who = ac == ss->q ? ss->idx : ss->sub_idx;
	note_problem(ss, who, "sentinel %s:%d sent more than %u KiB; cut off", ss->u.host[who],
		     ss->u.port[who], SENTINEL_READ_CAP >> 10);
	if (ac == ss->q) {
		query_end(ss, false);
		query_next(ss);
	} else {
		ss->sub = NULL;
		ac->data = NULL;
		redisAsyncFree(ac);
		sub_retry_later(ss);
	}
}

/* redisLibeventAttach, with capped_read as the read event. */
static void attach_capped(redisAsyncContext *ac, struct event_base *base)
{
	redisLibeventAttach(ac, base);
	redisLibeventEvents *e = ac->ev.data;
	event_free(e->rev);
	e->rev = event_new(base, ac->c.fd, EV_READ, capped_read, e);
	event_add(e->rev, NULL);
}

/* Log a problem of sentinel `who` (STORE_SENTINELS_MAX: the master's)
 * once, until it says something else (or a master is found): sentinels that
 * keep failing must not fill the log at the retry rate. */
static void note_problem(struct store_sentinel *ss, size_t who, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ss->problem, sizeof(ss->problem), fmt, ap);
	va_end(ap);
	if (strcmp(ss->problem, ss->logged[who]) != 0) {
		log_warn("redis: %s", ss->problem);
		snprintf(ss->logged[who], sizeof(ss->logged[who]), "%s", ss->problem);
	}
}

/* End the current query. hiredis_frees: hiredis frees the context itself
 * (a failed connect's callback). */
static void query_end(struct store_sentinel *ss, bool hiredis_frees)
{
	evtimer_del(ss->deadline);
	if (ss->dnsq) {
		resolver_cancel(ss->dnsq);
		ss->dnsq = NULL;
	}
	redisAsyncContext *ac = ss->q;
	ss->q = NULL;
	if (ac == NULL)
		return;
	ac->data = NULL; /* its callbacks, if any still come, are ignored */
	if (!hiredis_frees)
		redisAsyncFree(ac); /* deferred by hiredis when inside its callback */
}

/* This sentinel gave nothing usable: the next one, from the loop. */
static void query_next(struct store_sentinel *ss)
{
	struct timeval now = {0, 0};
	ss->asked++;
	ss->idx = (ss->idx + 1) % ss->u.n;
	evtimer_add(ss->step, &now);
}

static void query_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_sentinel *ss = privdata;
	if (ac->data != ss || ac != ss->q)
		return; /* an attempt that already ended */
	redisReply *r = reply;
	const char *h = ss->u.host[ss->idx];
	int p = ss->u.port[ss->idx];
	char addr[STORE_SENTINEL_ADDR_MAX];
	int port = 0;
	if (r == NULL)
		note_problem(ss, ss->idx, "sentinel %s:%d: connection lost before it answered", h,
			     p);
	else if (r->type == REDIS_REPLY_ERROR)
		note_problem(ss, ss->idx, "sentinel %s:%d answered an error: %.120s", h, p, r->str);
	else if (r->type == REDIS_REPLY_NIL)
		note_problem(ss, ss->idx, "sentinel %s:%d does not know a master named %s", h, p,
			     ss->u.master);
	else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		 r->element[0]->type != REDIS_REPLY_STRING ||
		 r->element[1]->type != REDIS_REPLY_STRING)
		note_problem(ss, ss->idx,
			     "sentinel %s:%d answered garbage to get-master-addr-by-name", h, p);
	else if (store_sentinel_check_addr(r->element[0]->str, r->element[0]->len,
					   r->element[1]->str, r->element[1]->len, addr, &port) < 0)
		note_problem(ss, ss->idx,
			     "sentinel %s:%d gave a bogus master address (not IP:PORT)", h, p);
	else {
		query_end(ss, false);
		ss->resolving = false;
		ss->first = ss->given_by = ss->idx;
		if (ss->sub == NULL && !evtimer_pending(ss->sub_retry, NULL)) {
			ss->sub_idx = ss->idx;
			subscribe_start(ss);
		}
		store_connect_addr(ss->st, addr, port);
		return;
	}
	query_end(ss, false);
	query_next(ss);
}

static void query_connected(const redisAsyncContext *ac, int status)
{
	struct store_sentinel *ss = ac->data;
	if (ss == NULL || ac != ss->q || status == REDIS_OK)
		return;
	note_problem(ss, ss->idx, "sentinel %s:%d: %s", ss->u.host[ss->idx], ss->u.port[ss->idx],
		     ac->errstr);
	query_end(ss, true);
	query_next(ss);
}

static void query_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct store_sentinel *ss = arg;
	note_problem(ss, ss->idx, "sentinel %s:%d did not answer within %d ms", ss->u.host[ss->idx],
		     ss->u.port[ss->idx], ss->timeout_ms);
	query_end(ss, false);
	query_next(ss);
}

/* Ask sentinel idx, at its address ss->ip[idx]. */
static void query_send(struct store_sentinel *ss)
{
	const char *h = ss->u.host[ss->idx];
	int p = ss->u.port[ss->idx];
	redisAsyncContext *ac = redisAsyncConnect(ss->ip[ss->idx], p);
	if (ac == NULL)
		abort();
	if (ac->err) {
		note_problem(ss, ss->idx, "sentinel %s:%d: %s", h, p, ac->errstr);
		redisAsyncFree(ac);
		query_end(ss, false);
		query_next(ss);
		return;
	}
	ac->data = ss;
	ss->q = ac;
	attach_capped(ac, ss->st->base);
	redisAsyncSetConnectCallback(ac, query_connected);
	redisAsyncCommand(ac, query_reply, ss, "SENTINEL get-master-addr-by-name %s", ss->u.master);
}

/* The first address of a list, IPv4 preferred (a sentinel bound to
 * 127.0.0.1 is not on ::1). */
static bool first_addr(const struct sockaddr_storage *a, size_t n, char *out, size_t size)
{
	const struct sockaddr_storage *pick = NULL;
	for (size_t i = 0; i < n && pick == NULL; i++)
		if (a[i].ss_family == AF_INET)
			pick = &a[i];
	for (size_t i = 0; i < n && pick == NULL; i++)
		if (a[i].ss_family == AF_INET6)
			pick = &a[i];
	if (pick == NULL)
		return false;
	const void *raw = pick->ss_family == AF_INET
			      ? (const void *)&((const struct sockaddr_in *)pick)->sin_addr
			      : (const void *)&((const struct sockaddr_in6 *)pick)->sin6_addr;
	return inet_ntop(pick->ss_family, raw, out, (socklen_t)size) != NULL;
}

static void query_resolved(const struct err *e, const struct sockaddr_storage *addrs, size_t n,
			   void *arg)
{
	struct store_sentinel *ss = arg;
	ss->dnsq = NULL;
	if (e || !first_addr(addrs, n, ss->ip[ss->idx], sizeof(ss->ip[ss->idx]))) {
		note_problem(ss, ss->idx, "sentinel %s:%d: cannot resolve its name: %s",
			     ss->u.host[ss->idx], ss->u.port[ss->idx],
			     e ? e->message : "no address");
		query_end(ss, false);
		query_next(ss);
		return;
	}
	query_send(ss);
}

static void query_step(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct store_sentinel *ss = arg;
	if (ss->asked >= ss->u.n) {
		/* A round without a master: store.c's backoff, then again. */
		ss->resolving = false;
		store_retry_later(ss->st);
		return;
	}
	const char *h = ss->u.host[ss->idx];
	int p = ss->u.port[ss->idx];
	/* The deadline covers the name's resolution too. */
	struct timeval tv = {ss->timeout_ms / 1000, (ss->timeout_ms % 1000) * 1000};
	evtimer_add(ss->deadline, &tv);
	struct in6_addr a6;
	if (inet_pton(AF_INET, h, &a6) == 1 || inet_pton(AF_INET6, h, &a6) == 1) {
		snprintf(ss->ip[ss->idx], sizeof(ss->ip[ss->idx]), "%s", h);
		query_send(ss);
		return;
	}
	struct err *e = NULL;
	if (ss->res == NULL &&
	    (ss->res = resolver_new(ss->st->base, "system", "/etc/hosts", &e)) == NULL) {
		note_problem(ss, ss->idx, "sentinel %s:%d: no resolver: %s", h, p, e->message);
		err_free(e);
		query_end(ss, false);
		query_next(ss);
		return;
	}
	struct sockaddr_storage found[RESOLVER_MAX_ADDRS];
	size_t n = resolver_hosts_lookup(ss->res, h, found, RESOLVER_MAX_ADDRS);
	if (n > 0 && first_addr(found, n, ss->ip[ss->idx], sizeof(ss->ip[ss->idx]))) {
		query_send(ss);
		return;
	}
	ss->dnsq = resolver_query(ss->res, h, query_resolved, ss, &e);
	if (ss->dnsq == NULL) {
		note_problem(ss, ss->idx, "sentinel %s:%d: cannot resolve its name: %s", h, p,
			     e->message);
		err_free(e);
		query_end(ss, false);
		query_next(ss);
	}
}

void store_sentinel_resolve(struct store_sentinel *ss)
{
	if (ss->resolving)
		return;
	ss->resolving = true;
	ss->asked = 0;
	ss->idx = ss->first;
	struct timeval now = {0, 0};
	evtimer_add(ss->step, &now); /* from the loop: never inside the caller */
}

void store_sentinel_master_ok(struct store_sentinel *ss, const char *host, int port)
{
	char now[sizeof(ss->master)];
	snprintf(now, sizeof(now), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
	if (ss->master[0] && strcmp(now, ss->master) != 0) {
		ss->failovers++;
		log_warn("redis: master %s moved to %s (failover %" PRIu64 " seen; sentinel)",
			 ss->master, now, ss->failovers);
	} else
		log_info("redis: connected to master %s of %s (sentinel)", now, ss->u.master);
	snprintf(ss->master, sizeof(ss->master), "%s", now);
	ss->problem[0] = '\0';
	memset(ss->logged, 0, sizeof(ss->logged));
}

void store_sentinel_not_master(struct store_sentinel *ss, const char *host, int port,
			       const char *why)
{
	/* Its word did not hold: the next sentinel is asked first, so one
	 * that keeps naming a replica (or a dead master) is not the only one
	 * heard. */
	ss->first = (ss->given_by + 1) % ss->u.n;
	note_problem(ss, STORE_SENTINELS_MAX,
		     "%s:%d, given by the sentinels as the master of %s, %s", host, port,
		     ss->u.master, why);
}

/* ---- +switch-master ---- */

static void sub_retry_later(struct store_sentinel *ss)
{
	/* The next sentinel, in a second: one that keeps dropping us is not
	 * hammered, and another may be up. */
	ss->sub_idx = (ss->sub_idx + 1) % ss->u.n;
	struct timeval tv = {1, 0};
	evtimer_add(ss->sub_retry, &tv);
}

static void sub_message(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_sentinel *ss = privdata;
	redisReply *r = reply;
	if (ac->data != ss || ac != ss->sub || r == NULL)
		return; /* a lost subscription is the disconnect callback's */
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(r->element[0]->str, "message") != 0 || r->element[2]->type != REDIS_REPLY_STRING)
		return; /* the subscribe confirmation, or noise */
	/* "<name> <old ip> <old port> <new ip> <new port>": only the name is
	 * used; the new master is asked for, not taken from the message. */
	const char *m = r->element[2]->str;
	size_t nl = strlen(ss->u.master);
	if (r->element[2]->len <= nl || strncmp(m, ss->u.master, nl) != 0 || m[nl] != ' ')
		return;
	log_info("redis: sentinel %s:%d announced a new master for %s; asking the sentinels",
		 ss->u.host[ss->sub_idx], ss->u.port[ss->sub_idx], ss->u.master);
	store_master_changed(ss->st, "a sentinel announced +switch-master");
}

static void sub_connected(const redisAsyncContext *ac, int status)
{
	struct store_sentinel *ss = ac->data;
	if (ss == NULL || ac != ss->sub || status == REDIS_OK)
		return;
	ss->sub = NULL; /* hiredis frees it after this callback */
	sub_retry_later(ss);
}

static void sub_disconnected(const redisAsyncContext *ac, int status)
{
	(void)status;
	struct store_sentinel *ss = ac->data;
	if (ss == NULL || ac != ss->sub)
		return;
	ss->sub = NULL;
	sub_retry_later(ss);
}

static void subscribe_start(struct store_sentinel *ss)
{
	redisAsyncContext *ac = redisAsyncConnect(ss->u.host[ss->sub_idx], ss->u.port[ss->sub_idx]);
	if (ac == NULL)
		abort();
	if (ac->err) {
		redisAsyncFree(ac);
		sub_retry_later(ss);
		return;
	}
	ac->data = ss;
	ss->sub = ac;
	attach_capped(ac, ss->st->base);
	redisAsyncSetConnectCallback(ac, sub_connected);
	redisAsyncSetDisconnectCallback(ac, sub_disconnected);
	redisAsyncCommand(ac, sub_message, ss, "SUBSCRIBE +switch-master");
}

static void sub_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct store_sentinel *ss = arg;
	if (ss->sub == NULL)
		subscribe_start(ss);
}

/* ---- lifetime and what the probes read ---- */

struct store_sentinel *store_sentinel_new(struct store *st, struct store_sentinel_url *u)
{
	struct store_sentinel *ss = xcalloc(1, sizeof(*ss));
	ss->st = st;
	ss->u = *u;
	memset(u, 0, sizeof(*u)); /* now ours */
	ss->timeout_ms = 1000;
	ss->deadline = evtimer_new(st->base, query_deadline, ss);
	ss->step = evtimer_new(st->base, query_step, ss);
	ss->sub_retry = evtimer_new(st->base, sub_retry_cb, ss);
	return ss;
}

void store_sentinel_free(struct store_sentinel *ss)
{
	if (ss == NULL)
		return;
	query_end(ss, false);
	if (ss->sub) {
		ss->sub->data = NULL;
		redisAsyncFree(ss->sub);
	}
	resolver_free(ss->res);
	event_free(ss->deadline);
	event_free(ss->step);
	event_free(ss->sub_retry);
	store_sentinel_url_clear(&ss->u);
	free(ss);
}

void store_sentinel_set_timeout(struct store_sentinel *ss, int ms)
{
	ss->timeout_ms = ms;
}

const char *store_sentinel_master(const struct store_sentinel *ss)
{
	return ss->master[0] ? ss->master : NULL;
}

const char *store_sentinel_problem(const struct store_sentinel *ss)
{
	return ss->problem[0] ? ss->problem : NULL;
}

bool store_sentinel_resolving(const struct store_sentinel *ss)
{
	return ss->resolving;
}

uint64_t store_sentinel_failovers(const struct store_sentinel *ss)
{
	return ss->failovers;
}

const char *store_sentinel_name(const struct store_sentinel *ss)
{
	return ss->u.master;
}
