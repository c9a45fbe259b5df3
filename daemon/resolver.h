/* resolver.h: the egress proxy's own name resolution, on the event loop.
 *
 * Names come first from the operator's hosts file (--egress-hosts-file),
 * then, unless the mode is hosts-only, from a small stub resolver: UDP A and
 * AAAA queries, a fresh socket and a random id per query, strict validation
 * of every response (id, question, bounds, compression pointers, caps),
 * timeouts and retries over the nameservers. It sends nothing nobody asked
 * for: no search domains are appended, and no nameserver is ever probed.
 *
 * Modes (--egress-resolver): "system" (the nameservers of /etc/resolv.conf,
 * read at start and at resolver_reload), "IP:PORT" (that one server;
 * loopback allowed, for tests) and "hosts-only" (the hosts file and nothing
 * else: no DNS packet at all). */
#ifndef CI_RESOLVER_H
#define CI_RESOLVER_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "err.h"

#define RESOLVER_MAX_ADDRS 8
#define RESOLVER_MAX_SERVERS 3

enum resolver_mode { RESOLVER_SYSTEM, RESOLVER_HOSTS_ONLY, RESOLVER_SERVER };

/* Parse a --egress-resolver value; *server is set for RESOLVER_SERVER. */
int resolver_parse_spec(const char *spec, enum resolver_mode *mode, struct sockaddr_storage *server,
			struct err **errp);

struct resolver;
struct resolver_query;

/* The addresses of a name (A first, then AAAA), or e with why not; the
 * arrays are borrowed for the call. */
typedef void (*resolver_cb)(const struct err *e, const struct sockaddr_storage *addrs, size_t n,
			    void *arg);

/* hosts_file may be NULL or "" (none). spec as for resolver_parse_spec. */
struct resolver *resolver_new(struct event_base *base, const char *spec, const char *hosts_file,
			      struct err **errp);
/* Cancels every query in flight (their callbacks never run). */
void resolver_free(struct resolver *r);

/* Switch to the mode of spec (queries in flight finish as they were asked). */
int resolver_set_spec(struct resolver *r, const char *spec, struct err **errp);

/* Re-read the hosts file (and, in system mode, /etc/resolv.conf). On -1
 * the tables in use are kept. *names: how many names the hosts file has. */
int resolver_reload(struct resolver *r, size_t *names, struct err **errp);

/* The hosts file's addresses for name (lowercase, no trailing dot), up to
 * max; 0 when it has none. */
size_t resolver_hosts_lookup(const struct resolver *r, const char *name,
			     struct sockaddr_storage *out, size_t max);

/* Ask the nameservers; cb runs once, from the loop. NULL with *errp when
 * no query can be sent (hosts-only mode, no nameserver, a bad name, too
 * many in flight); then cb never runs. */
struct resolver_query *resolver_query(struct resolver *r, const char *name, resolver_cb cb,
				      void *arg, struct err **errp);
/* The callback of q will not run; q is freed. */
void resolver_cancel(struct resolver_query *q);

enum resolver_mode resolver_mode(const struct resolver *r);
/* DNS queries sent so far (each A or AAAA datagram counts). */
uint64_t resolver_queries_sent(const struct resolver *r);

/* ---- the wire format (pure, unit-tested and fuzzed) ---- */

#define RESOLVER_TYPE_A 1
#define RESOLVER_TYPE_CNAME 5
#define RESOLVER_TYPE_AAAA 28

/* A query for name and qtype with recursion desired and an EDNS0 record;
 * returns its length, or 0 when name is no valid DNS name or size too small. */
size_t resolver_build_query(uint8_t *buf, size_t size, uint16_t id, const char *name,
			    uint16_t qtype);

struct resolver_answer {
	int rcode; /* 0 NOERROR, 3 NXDOMAIN, ... */
	bool truncated;
	struct sockaddr_storage addrs[RESOLVER_MAX_ADDRS];
	size_t n;
};

/* Parse pkt as the response to our query (id, name, qtype). -1 when it is
 * not one (wrong id or question, malformed, out of bounds, a pointer loop):
 * such a datagram is ignored. Addresses are those of name or of the CNAME
 * chain that starts at it. */
int resolver_parse_response(const uint8_t *pkt, size_t len, uint16_t id, const char *name,
			    uint16_t qtype, struct resolver_answer *out, struct err **errp);

#endif
