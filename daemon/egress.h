/* egress.h: the allowlist proxy through which sandboxes with network.allow
 * reach the network (and nothing else: their Docker network is internal).
 *
 * It runs on the daemon's event loop, speaks CONNECT and absolute-URI HTTP
 * (one request per upstream connection, heads parsed strictly: egress_head.h),
 * knows each session by its source address, checks the destination name and
 * port against that session's allowlist, resolves the name itself (an
 * operator's hosts file, then its own stub resolver unless hosts-only:
 * resolver.h) and refuses any address that is loopback, private,
 * link-local, special-purpose or the host's own unless the operator trusted
 * it (netpolicy.h). Every decision is logged and counted. */
#ifndef CI_EGRESS_H
#define CI_EGRESS_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* What the proxy needs to know about the session behind a source address.
 * The strings are borrowed for the call and copied. */
struct egress_peer {
	const char *session_id;
	char *const *allow;
	size_t n_allow;
};

/* Fill *peer for the sandbox at src_ip; false when no session has it. */
typedef bool (*egress_lookup_fn)(const char *src_ip, struct egress_peer *peer, void *arg);

struct egress_stats {
	uint64_t allowed, denied, failed;
	uint64_t closed_by_policy; /* open connections closed by a PATCH or the session's end */
	uint64_t dns_queries;      /* DNS datagrams sent (0 in hosts-only mode) */
};

struct egress;

/* hosts_file: "IP name..." lines consulted before DNS (may be NULL or "").
 * trusted: "IP[:PORT],..." destinations allowed even when private or local.
 * The resolver starts hosts-only (no DNS) until egress_set_resolver. */
struct egress *egress_new(struct event_base *base, const char *hosts_file, const char *trusted,
			  egress_lookup_fn lookup, void *arg, struct err **errp);
void egress_free(struct egress *eg);

/* How names beyond the hosts file are resolved: "system", "hosts-only" or
 * "IP:PORT" (--egress-resolver). On -1 the resolver stays as it was. */
/* Replace the trusted list ("IP[:PORT],..."; SIGHUP): connections made
 * from now on are checked against it. On a bad list the old one stays. */
int egress_set_trusted(struct egress *eg, const char *list, struct err **errp);

int egress_set_resolver(struct egress *eg, const char *spec, struct err **errp);

/* Re-read the hosts file (and resolv.conf in system mode); on -1 the old
 * tables stay in use. Logs what it did. For SIGHUP. */
int egress_reload_hosts(struct egress *eg, struct err **errp);

/* Listen on ip:port (the internal network's gateway); port 0 picks one. The
 * port is returned in *bound. Listening again on the same address is a
 * no-op, so a retried network set-up keeps its port. */
int egress_listen(struct egress *eg, const char *ip, int port, int *bound, struct err **errp);

/* A session's allowlist changed: close each of its open tunnels and plain
 * HTTP connections whose destination the new list no longer permits.
 * Returns how many were closed. eg may be NULL. */
size_t egress_session_allow_changed(struct egress *eg, const char *session_id, char *const *allow,
				    size_t n_allow);

/* A session ended: close all of its proxy connections at once. */
size_t egress_session_ended(struct egress *eg, const char *session_id);

/* The counters, current as of the call. */
/* Stop listening on ip (its network is being removed). */
void egress_unlisten(struct egress *eg, const char *ip);

const struct egress_stats *egress_get_stats(struct egress *eg);

#endif
