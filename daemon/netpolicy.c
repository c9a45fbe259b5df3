/* netpolicy.c: allowlist matching and address classes. */
#include "netpolicy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
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
		if (e == colon + 1 || *e != '\0' || p < 1 || p > 65535)
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

static bool host_matches(const char *pattern, const char *host)
{
	if (pattern[0] == '*' && pattern[1] == '.') {
		size_t pl = strlen(pattern + 1), hl = strlen(host); /* ".suffix" */
		return hl > pl && strcasecmp(host + hl - pl, pattern + 1) == 0;
	}
	return strcasecmp(pattern, host) == 0;
}

bool netpolicy_allowed(char *const *allow, size_t n, const char *host, int port)
{
	for (size_t i = 0; i < n; i++) {
		char phost[NETPOLICY_HOST_MAX + 1];
		int pport = 0;
		if (split(allow[i], 0, phost, sizeof(phost), &pport, true, NULL) < 0)
			continue;
		bool port_ok = pport ? pport == port : (port == 80 || port == 443);
		if (port_ok && host_matches(phost, host))
			return true;
	}
	return false;
}

/* a in host byte order. */
static enum addr_class classify_v4(uint32_t a)
{
	uint8_t b0 = (uint8_t)(a >> 24), b1 = (uint8_t)(a >> 16);
	if (b0 == 127)
		return ADDR_LOOPBACK;
	if (b0 == 10 || (b0 == 172 && (b1 & 0xf0) == 16) || (b0 == 192 && b1 == 168) ||
	    (b0 == 100 && (b1 & 0xc0) == 64))
		return ADDR_PRIVATE;
	if (b0 == 169 && b1 == 254)
		return ADDR_LINK_LOCAL;
	if (b0 == 0 || b0 >= 224 || (b0 == 192 && b1 == 0 && (uint8_t)(a >> 8) == 0) ||
	    (b0 == 198 && (b1 & 0xfe) == 18))
		return ADDR_SPECIAL;
	return ADDR_PUBLIC;
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
		const struct in6_addr *a = &in6.sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return ADDR_LOOPBACK;
		if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a)) {
			/* ::ffff:127.0.0.1 is 127.0.0.1: judge it as IPv4. */
			uint32_t v4;
			memcpy(&v4, &a->s6_addr[12], 4);
			return classify_v4(ntohl(v4));
		}
		if (IN6_IS_ADDR_LINKLOCAL(a))
			return ADDR_LINK_LOCAL;
		if ((a->s6_addr[0] & 0xfe) == 0xfc)
			return ADDR_PRIVATE;
		if (IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_MULTICAST(a) ||
		    IN6_IS_ADDR_SITELOCAL(a))
			return ADDR_SPECIAL;
		return ADDR_PUBLIC;
	}
	return ADDR_SPECIAL;
}

const char *netpolicy_class_name(enum addr_class c)
{
	static const char *const names[] = {"public", "loopback", "private", "link-local",
					    "special-purpose"};
	return names[c];
}
