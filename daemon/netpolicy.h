/* netpolicy.h: who a sandbox may reach through the egress proxy.
 *
 * Pure rules, unit-tested: validating and matching a session's allowlist,
 * telling canonical IP literals from ambiguous ones, and judging resolved
 * addresses so that a name which resolves to loopback, private, link-local
 * (cloud metadata), special-purpose or the host's own addresses is refused
 * (DNS rebinding) unless the operator trusted it. An IPv6 address that
 * embeds an IPv4 address (mapped, compatible, NAT64, 6to4, ISATAP) is
 * judged by that IPv4 address too, in every check. */
#ifndef CI_NETPOLICY_H
#define CI_NETPOLICY_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "err.h"

#define NETPOLICY_HOST_MAX 255

/* Split "host:port", "[v6]:port" or "host" (then *port = default_port).
 * The host is lowercased, without brackets or a trailing dot. */
int netpolicy_split(const char *authority, int default_port, char *host, size_t size, int *port,
		    struct err **errp);

enum netpolicy_host_kind {
	NETPOLICY_NAME,
	NETPOLICY_IPV4, /* canonical: four decimal parts 0..255, no leading zeros */
	NETPOLICY_IPV6,
	/* Something inet_aton or a URL parser reads as an IPv4 address in a way
	 * a reader would not: 0177.0.0.1 (octal), 127.1 (shorthand), 0x7f.1
	 * (hex), 2130706433 (one integer), 1.2.3.04, or any name whose last
	 * label is a number. */
	NETPOLICY_AMBIGUOUS,
	NETPOLICY_INVALID, /* has a ':' but is no IPv6 address */
};

/* What a host (as netpolicy_split leaves it) is. */
enum netpolicy_host_kind netpolicy_host_kind(const char *host);

/* Whether entry is a valid allowlist entry: "name[:port]", "*.suffix[:port]",
 * a canonical IPv4 literal or "[IPv6]", with an optional port. On -1 the
 * message names the entry and says what is wrong with it. */
int netpolicy_check_entry(const char *entry, struct err **errp);

/* Whether host:port is on the allowlist. An entry is "name", "name:port",
 * "*.suffix[:port]" (any name below suffix, not suffix itself, and never an
 * IP literal), an IPv4 literal or "[IPv6]" (compared as addresses). An entry
 * without a port allows 80 and 443. Invalid entries match nothing. */
bool netpolicy_allowed(char *const *allow, size_t n, const char *host, int port);

enum addr_class {
	ADDR_PUBLIC,
	ADDR_LOOPBACK,
	ADDR_PRIVATE,    /* RFC 1918, CGNAT, unique-local, local-use NAT64 */
	ADDR_LINK_LOCAL, /* 169.254/16 (metadata services), fe80::/10 */
	ADDR_SPECIAL, /* unspecified, multicast, broadcast, reserved, documentation, Teredo, ... */
};

/* The IPv4 address sa stands for or carries, in *v4 (network order): sa
 * itself when it is IPv4; the last 32 bits of IPv4-mapped ::ffff:0:0/96,
 * IPv4-translated ::ffff:0:0:0/96, IPv4-compatible ::/96 (not :: or ::1)
 * and NAT64 64:ff9b::/96; bits 16..47 of 6to4 2002::/16; the last 32 bits
 * of an ISATAP interface id (::0:5efe:a.b.c.d, ::200:5efe:a.b.c.d). */
bool netpolicy_embedded_v4(const struct sockaddr *sa, struct in_addr *v4);

/* The class of an address: the stricter of its own range's class and that
 * of the IPv4 address it embeds. */
enum addr_class netpolicy_classify(const struct sockaddr *sa);
const char *netpolicy_class_name(enum addr_class c);

/* *out = sa with an IPv4-mapped address turned into the IPv4 one (the same
 * destination for the kernel); anything else copied. The port is kept. */
void netpolicy_canonical(const struct sockaddr *sa, struct sockaddr_storage *out);

/* A destination the operator trusted (--egress-trusted); port 0 = any. */
struct netpolicy_trusted {
	struct sockaddr_storage addr;
	int port;
};

/* NULL when a sandbox may connect to sa on port; else why not ("loopback",
 * "private", ..., "one of this host's own"). A trusted entry matches the
 * address itself or its IPv4-mapped form, never another embedding (NAT64,
 * 6to4 go elsewhere). own: the host's addresses; an address equal to one,
 * or embedding one of its IPv4 addresses, is refused. */
const char *netpolicy_refusal(const struct sockaddr *sa, int port,
			      const struct netpolicy_trusted *trusted, size_t n_trusted,
			      const struct sockaddr_storage *own, size_t n_own);

/* A canonical IP literal (IPv4 dotted decimal, or IPv6 without brackets)
 * into *out, port 0; -1 for anything else. */
int netpolicy_parse_ip(const char *s, struct sockaddr_storage *out);

#endif
