/* egress.h: the allowlist proxy through which sandboxes with network.allow
 * reach the network (and nothing else: their Docker network is internal).
 *
 * It runs on the daemon's event loop, speaks CONNECT and absolute-URI HTTP,
 * knows each session by its source address, checks the destination name and
 * port against that session's allowlist, resolves the name itself (evdns, or
 * an operator's hosts-style override file) and refuses any address that is
 * loopback, private, link-local or the host's own unless the operator trusted
 * it. Every decision is logged and counted. */
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
};

struct egress;

/* hosts_file: "IP name..." lines consulted before DNS (may be NULL or "").
 * trusted: "IP[:PORT],..." destinations allowed even when private or local. */
struct egress *egress_new(struct event_base *base, const char *hosts_file, const char *trusted,
			  egress_lookup_fn lookup, void *arg, struct err **errp);
void egress_free(struct egress *eg);

/* Listen on ip:port (the internal network's gateway); port 0 picks one.
 * The chosen port is returned in *bound. */
int egress_listen(struct egress *eg, const char *ip, int port, int *bound, struct err **errp);

const struct egress_stats *egress_get_stats(const struct egress *eg);

#endif
