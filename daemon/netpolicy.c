/* netpolicy.c: allowlist validation and matching, address classes. */
#include "netpolicy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int split(const char *authority, int default_port, char *host, size_t size, int *port,
		 bool pattern, struct err **errp)
{
	const char *h = authority, *end, *colon;
	if (*h == '[') {
		end = strchr(h, ']');
		if (end == NULL)
			return err_set(errp, ERR_BAD_REQUEST, "bad IPv6 literal in '%.64s'",
				       authority);
		h++;
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return err_set(errp, ERR_BAD_REQUEST, "bad authority '%.64s'", authority);
	} else {
		colon = strrchr(h, ':');
		end = colon ? colon : h + strlen(h);
	}
	size_t len = (size_t)(end - h);
	if (len > 0 && h[len - 1] == '.')
		len--; /* "example.com." is example.com */
	if (len == 0 || len >= size || len > NETPOLICY_HOST_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "bad host in '%.64s'", authority);
	for (size_t i = 0; i < len; i++) {
		char c = h[i];
		/* A pattern may start with "*." (any name below the suffix). */
		bool star = pattern && i == 0 && c == '*' && len > 2 && h[1] == '.';
		if (!(isalnum((unsigned char)c) || c == '.' || c == '-' || c == ':' || c == '_' ||
		      star))
			return err_set(errp, ERR_BAD_REQUEST, "bad host in '%.64s'", authority);
		host[i] = (char)tolower((unsigned char)c);
	}
	host[len] = '\0';
	*port = default_port;
	if (colon) {
		char *e = NULL;
		long p = strtol(colon + 1, &e, 10);
		if (e == colon + 1 || *e != '\0' || p < 1 || p > 65535 || colon[1] == '+' ||
		    colon[1] == '-' || isspace((unsigned char)colon[1]))
			return err_set(errp, ERR_BAD_REQUEST, "bad port in '%.64s'", authority);
		*port = (int)p;
	}
	return 0;
}

int netpolicy_split(const char *authority, int default_port, char *host, size_t size, int *port,
		    struct err **errp)
{
	return split(authority, default_port, host, size, port, false, errp);
}

/* ---- host kinds ---- */

/* A label inet_aton (or a URL parser) reads as a number: decimal or octal
 * digits, or 0x followed by hex digits (or nothing). */
static bool numeric_label(const char *s, size_t n)
{
	if (n == 0)
		return false;
	size_t i = 0;
	bool hex = n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	if (hex)
		i = 2;
	for (; i < n; i++)
		if (!(hex ? isxdigit((unsigned char)s[i]) : isdigit((unsigned char)s[i])))
			return false;
	return true;
}

static bool canonical_v4(const char *host)
{
	int parts = 0;
	const char *p = host;
	for (;;) {
		size_t n = 0;
		unsigned v = 0;
		while (isdigit((unsigned char)p[n]) && n < 4) {
			v = v * 10 + (unsigned)(p[n] - '0');
			n++;
		}
		if (n == 0 || n > 3 || v > 255 || (n > 1 && p[0] == '0'))
			return false;
		parts++;
		p += n;
		if (*p == '\0')
			return parts == 4;
		if (*p != '.' || parts == 4)
			return false;
		p++;
	}
}

enum netpolicy_host_kind netpolicy_host_kind(const char *host)
{
	if (strchr(host, ':')) {
		struct in6_addr a6;
		return inet_pton(AF_INET6, host, &a6) == 1 ? NETPOLICY_IPV6 : NETPOLICY_INVALID;
	}
	/* As the WHATWG URL parser does: a host whose last label is a number
	 * is meant as an IPv4 address, so it must be one, written plainly. */
	const char *last = strrchr(host, '.');
	last = last ? last + 1 : host;
	if (!numeric_label(last, strlen(last)))
		return NETPOLICY_NAME;
	return canonical_v4(host) ? NETPOLICY_IPV4 : NETPOLICY_AMBIGUOUS;
}

int netpolicy_check_entry(const char *entry, struct err **errp)
{
	size_t n = strlen(entry);
	char host[NETPOLICY_HOST_MAX + 1];
	int port = 0;
	if (n == 0 || n > NETPOLICY_HOST_MAX + 8 ||
	    split(entry, 0, host, sizeof(host), &port, true, NULL) < 0)
		return err_set(errp, ERR_BAD_REQUEST,
			       "'%.64s' is not HOST[:PORT], *.SUFFIX[:PORT] or [IPv6][:PORT]",
			       entry);
	bool bracketed = entry[0] == '[';
	bool wildcard = host[0] == '*';
	const char *name = wildcard ? host + 2 : host;
	/* split() drops one trailing dot; an entry keeps none (nor a leading
	 * dot, an empty label or an underscore: names are letters, digits,
	 * dashes and dots). */
	const char *colon = bracketed ? NULL : strrchr(entry, ':');
	size_t hl = colon ? (size_t)(colon - entry) : n;
	if (!bracketed && hl > 0 && entry[hl - 1] == '.')
		return err_set(errp, ERR_BAD_REQUEST, "'%.64s': a trailing dot is not allowed",
			       entry);
	enum netpolicy_host_kind kind = netpolicy_host_kind(name);
	if (bracketed != (kind == NETPOLICY_IPV6) || kind == NETPOLICY_INVALID)
		return err_set(errp, ERR_BAD_REQUEST,
			       bracketed ? "'%.64s' is not a valid [IPv6] literal"
					 : "'%.64s': an IPv6 literal goes in brackets ([::1]:443)",
			       entry);
	if (kind == NETPOLICY_AMBIGUOUS)
		return err_set(
		    errp, ERR_BAD_REQUEST,
		    "'%.64s' is an ambiguous IPv4 literal (leading zeros, shorthand such "
		    "as 127.1, hex or a single number); write an IPv4 address as four "
		    "decimal numbers 0-255 without leading zeros",
		    entry);
	if (wildcard && kind != NETPOLICY_NAME)
		return err_set(errp, ERR_BAD_REQUEST,
			       "'%.64s': a wildcard covers names, not IP addresses", entry);
	if (kind == NETPOLICY_NAME) {
		if (name[0] == '.' || strstr(name, ".."))
			return err_set(errp, ERR_BAD_REQUEST, "'%.64s' has an empty label", entry);
		for (const char *p = name; *p; p++)
			if (!(isalnum((unsigned char)*p) || *p == '.' || *p == '-'))
				return err_set(
				    errp, ERR_BAD_REQUEST,
				    "'%.64s': a name is letters, digits, dashes and dots", entry);
	}
	return 0;
}

/* ---- matching ---- */

/* host (kind NETPOLICY_IPV4 or _IPV6) as a canonical address. */
static bool literal_addr(const char *host, struct sockaddr_storage *out)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	if (strchr(host, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return false;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return false;
	}
	netpolicy_canonical((struct sockaddr *)&ss, out);
	return true;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
	return false;
}

static bool host_matches(const char *pattern, const char *host, enum netpolicy_host_kind kind)
{
	bool literal = kind == NETPOLICY_IPV4 || kind == NETPOLICY_IPV6;
	if (pattern[0] == '*' && pattern[1] == '.') {
		if (kind != NETPOLICY_NAME)
			return false; /* *.0.0.1 is no way to allow 127.0.0.1 */
		size_t pl = strlen(pattern + 1), hl = strlen(host); /* ".suffix" */
		return hl > pl && strcasecmp(host + hl - pl, pattern + 1) == 0;
	}
	enum netpolicy_host_kind pkind = netpolicy_host_kind(pattern);
	if (literal || pkind == NETPOLICY_IPV4 || pkind == NETPOLICY_IPV6) {
		struct sockaddr_storage a, b;
		return literal && (pkind == NETPOLICY_IPV4 || pkind == NETPOLICY_IPV6) &&
		       literal_addr(pattern, &a) && literal_addr(host, &b) && same_addr(&a, &b);
	}
	return kind == NETPOLICY_NAME && pkind == NETPOLICY_NAME && strcasecmp(pattern, host) == 0;
}

bool netpolicy_allowed(char *const *allow, size_t n, const char *host, int port)
{
	enum netpolicy_host_kind kind = netpolicy_host_kind(host);
	if (kind == NETPOLICY_AMBIGUOUS || kind == NETPOLICY_INVALID)
		return false;
	for (size_t i = 0; i < n; i++) {
		char phost[NETPOLICY_HOST_MAX + 1];
		int pport = 0;
		if (netpolicy_check_entry(allow[i], NULL) < 0 ||
		    split(allow[i], 0, phost, sizeof(phost), &pport, true, NULL) < 0)
			continue;
		bool port_ok = pport ? pport == port : (port == 80 || port == 443);
		if (port_ok && host_matches(phost, host, kind))
			return true;
	}
	return false;
}

/* ---- addresses ---- */

/* a in host byte order. */
static enum addr_class classify_v4(uint32_t a)
{
	uint8_t b0 = (uint8_t)(a >> 24), b1 = (uint8_t)(a >> 16), b2 = (uint8_t)(a >> 8);
	if (b0 == 127)
		return ADDR_LOOPBACK;
	if (b0 == 10 || (b0 == 172 && (b1 & 0xf0) == 16) || (b0 == 192 && b1 == 168) ||
	    (b0 == 100 && (b1 & 0xc0) == 64))
		return ADDR_PRIVATE;
	if (b0 == 169 && b1 == 254)
		return ADDR_LINK_LOCAL;
	if (b0 == 0 || b0 >= 224 || /* this network, multicast, reserved */
	    (b0 == 192 && b1 == 0 && (b2 == 0 || b2 == 2)) || /* IETF assignments, TEST-NET-1 */
	    (b0 == 192 && b1 == 88 && b2 == 99) ||            /* 6to4 relay anycast */
	    (b0 == 198 && (b1 & 0xfe) == 18) ||               /* benchmarking */
	    (b0 == 198 && b1 == 51 && b2 == 100) ||           /* TEST-NET-2 */
	    (b0 == 203 && b1 == 0 && b2 == 113))              /* TEST-NET-3 */
		return ADDR_SPECIAL;
	return ADDR_PUBLIC;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

enum v6_range {
	V6_OTHER,  /* no embedded address */
	V6_MAPPED, /* ::ffff:a.b.c.d */
	V6_XLAT,   /* ::ffff:0:a.b.c.d (SIIT) */
	V6_COMPAT, /* ::a.b.c.d (deprecated) */
	V6_NAT64,  /* 64:ff9b::a.b.c.d */
	V6_6TO4,   /* 2002:aabb:ccdd::/48 */
	V6_ISATAP, /* PREFIX:0:5efe:a.b.c.d */
};

static enum v6_range v6_embedding(const uint8_t *a, uint32_t *v4)
{
	static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
	if (zero(a, 10) && a[10] == 0xff && a[11] == 0xff) {
		*v4 = be32(a + 12);
		return V6_MAPPED;
	}
	if (zero(a, 8) && a[8] == 0xff && a[9] == 0xff && a[10] == 0 && a[11] == 0) {
		*v4 = be32(a + 12);
		return V6_XLAT;
	}
	if (zero(a, 12) && be32(a + 12) > 1) {
		*v4 = be32(a + 12);
		return V6_COMPAT;
	}
	if (memcmp(a, nat64, 12) == 0) {
		*v4 = be32(a + 12);
		return V6_NAT64;
	}
	if (a[0] == 0x20 && a[1] == 0x02) {
		*v4 = be32(a + 2);
		return V6_6TO4;
	}
	if ((a[8] & ~0x02) == 0 && a[9] == 0 && a[10] == 0x5e && a[11] == 0xfe) {
		*v4 = be32(a + 12);
		return V6_ISATAP;
	}
	return V6_OTHER;
}

bool netpolicy_embedded_v4(const struct sockaddr *sa, struct in_addr *v4)
{
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in in;
		memcpy(&in, sa, sizeof(in));
		*v4 = in.sin_addr;
		return true;
	}
	if (sa->sa_family != AF_INET6)
		return false;
	struct sockaddr_in6 in6;
	memcpy(&in6, sa, sizeof(in6));
	uint32_t a;
	if (v6_embedding(in6.sin6_addr.s6_addr, &a) == V6_OTHER)
		return false;
	v4->s_addr = htonl(a);
	return true;
}

/* The class of an IPv6 range, leaving the embedded address aside. Public
 * means global unicast (2000::/3) outside the special-purpose blocks: the
 * rest of the space is unassigned or for other uses, and nothing a sandbox
 * should reach lives there. */
static enum addr_class classify_v6_range(const uint8_t *a, enum v6_range r)
{
	uint16_t w0 = (uint16_t)(a[0] << 8 | a[1]), w1 = (uint16_t)(a[2] << 8 | a[3]);
	switch (r) {
	case V6_MAPPED:
	case V6_NAT64:
	case V6_6TO4:
	case V6_ISATAP: break; /* as public as the IPv4 address it carries (or its prefix) */
	case V6_XLAT:
	case V6_COMPAT: return ADDR_SPECIAL; /* no use on today's networks */
	case V6_OTHER: break;
	}
	if (r == V6_MAPPED || r == V6_NAT64)
		return ADDR_PUBLIC;
	if (zero(a, 15) && a[15] == 1)
		return ADDR_LOOPBACK;
	if (w0 == 0x0064 && w1 == 0xff9b && a[4] == 0 && a[5] == 1)
		return ADDR_PRIVATE; /* 64:ff9b:1::/48, local-use NAT64 (RFC 8215) */
	if ((a[0] & 0xfe) == 0xfc)
		return ADDR_PRIVATE; /* fc00::/7 */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return ADDR_LINK_LOCAL; /* fe80::/10 */
	if ((a[0] & 0xe0) != 0x20)
		return ADDR_SPECIAL; /* outside 2000::/3: unspecified, multicast, site-local, ... */
	if (w0 == 0x2001 && w1 < 0x0200)
		return ADDR_SPECIAL; /* 2001::/23: Teredo 2001::/32, benchmarking, ORCHID */
	if (w0 == 0x2001 && w1 == 0x0db8)
		return ADDR_SPECIAL; /* documentation */
	if (w0 == 0x3fff && (w1 & 0xf000) == 0)
		return ADDR_SPECIAL; /* 3fff::/20, documentation */
	if (w0 == 0x5f00)
		return ADDR_SPECIAL; /* SRv6 SIDs */
	return ADDR_PUBLIC;
}

static enum addr_class stricter(enum addr_class a, enum addr_class b)
{
	return a == ADDR_PUBLIC ? b : a;
}

enum addr_class netpolicy_classify(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in in;
		memcpy(&in, sa, sizeof(in));
		return classify_v4(ntohl(in.sin_addr.s_addr));
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 in6;
		memcpy(&in6, sa, sizeof(in6));
		const uint8_t *a = in6.sin6_addr.s6_addr;
		uint32_t v4 = 0;
		enum v6_range r = v6_embedding(a, &v4);
		enum addr_class own = classify_v6_range(a, r);
		/* ::ffff:127.0.0.1 is 127.0.0.1, 64:ff9b::a00:1 is 10.0.0.1 behind
		 * a translator, 2002:a00:1:: the 6to4 site of 10.0.0.1. */
		return r == V6_OTHER ? own : stricter(classify_v4(v4), own);
	}
	return ADDR_SPECIAL;
}

const char *netpolicy_class_name(enum addr_class c)
{
	static const char *const names[] = {"public", "loopback", "private", "link-local",
					    "special-purpose"};
	return names[c];
}

void netpolicy_canonical(const struct sockaddr *sa, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET) {
		memcpy(out, sa, sizeof(struct sockaddr_in));
		return;
	}
	if (sa->sa_family != AF_INET6) {
		out->ss_family = sa->sa_family;
		return;
	}
	struct sockaddr_in6 in6;
	memcpy(&in6, sa, sizeof(in6));
	uint32_t v4;
	if (v6_embedding(in6.sin6_addr.s6_addr, &v4) == V6_MAPPED) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)out;
		s4->sin_family = AF_INET;
		s4->sin_port = in6.sin6_port;
		s4->sin_addr.s_addr = htonl(v4);
		return;
	}
	memcpy(out, &in6, sizeof(in6));
}

const char *netpolicy_refusal(const struct sockaddr *sa, int port,
			      const struct netpolicy_trusted *trusted, size_t n_trusted,
			      const struct sockaddr_storage *own, size_t n_own)
{
	struct sockaddr_storage dst;
	netpolicy_canonical(sa, &dst);
	for (size_t t = 0; t < n_trusted; t++) {
		struct sockaddr_storage ta;
		netpolicy_canonical((const struct sockaddr *)&trusted[t].addr, &ta);
		if (same_addr(&dst, &ta) && (trusted[t].port == 0 || trusted[t].port == port))
			return NULL;
	}
	enum addr_class cls = netpolicy_classify((const struct sockaddr *)&dst);
	if (cls != ADDR_PUBLIC)
		return netpolicy_class_name(cls);
	struct in_addr v4;
	bool has_v4 = netpolicy_embedded_v4((const struct sockaddr *)&dst, &v4);
	for (size_t i = 0; i < n_own; i++) {
		struct sockaddr_storage o;
		netpolicy_canonical((const struct sockaddr *)&own[i], &o);
		if (same_addr(&dst, &o) ||
		    (has_v4 && o.ss_family == AF_INET &&
		     ((struct sockaddr_in *)&o)->sin_addr.s_addr == v4.s_addr))
			return "one of this host's own";
	}
	return NULL;
}

int netpolicy_parse_ip(const char *s, struct sockaddr_storage *out)
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
