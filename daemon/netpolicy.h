/* netpolicy.h: who a sandbox may reach through the egress proxy.
 *
 * Pure rules, unit-tested: matching a destination against a session's
 * allowlist, and classifying resolved addresses so that a name which resolves
 * to loopback, private, link-local (cloud metadata) or the host's own
 * addresses is refused (DNS rebinding) unless the operator trusted it. */
#ifndef CI_NETPOLICY_H
#define CI_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "err.h"

#define NETPOLICY_HOST_MAX 255

/* Split "host:port", "[v6]:port" or "host" (then *port = default_port).
 * The host is lowercased, without brackets or a trailing dot. */
int netpolicy_split(const char *authority, int default_port, char *host, size_t size, int *port,
		    struct err **errp);

/* Whether host:port is on the allowlist. An entry is "name", "name:port",
 * "*.suffix[:port]" (any name below suffix, not suffix itself), an IPv4
 * literal or "[IPv6]". An entry without a port allows 80 and 443. */
bool netpolicy_allowed(char *const *allow, size_t n, const char *host, int port);

enum addr_class {
	ADDR_PUBLIC,
	ADDR_LOOPBACK,
	ADDR_PRIVATE,    /* RFC 1918, CGNAT, unique-local */
	ADDR_LINK_LOCAL, /* 169.254/16 (metadata services), fe80::/10 */
	ADDR_SPECIAL,    /* unspecified, multicast, broadcast, reserved, documentation */
};

enum addr_class netpolicy_classify(const struct sockaddr *sa);
const char *netpolicy_class_name(enum addr_class c);

#endif
