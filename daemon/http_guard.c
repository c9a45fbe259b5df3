/* http_guard.c: the request guards of http_guard.h. */
#include "http_guard.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool http_guard_origin_listed(const char *list, const char *origin)
{
	if (origin == NULL)
		return false;
	size_t n = strlen(origin);
	for (const char *p = list ? list : ""; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *end = p + strcspn(p, ",");
		size_t len = (size_t)(end - p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len && len == n && strncasecmp(p, origin, n) == 0)
			return true;
		p = end;
	}
	return false;
}

bool http_guard_origin_is_host(const char *origin, const char *host)
{
	if (origin == NULL || host == NULL || host[0] == '\0')
		return false;
	const char *rest;
	if (strncasecmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	else
		return false;
	return strcasecmp(rest, host) == 0;
}

/* ":PORT" (1 to 5 digits), or nothing. */
static bool port_ok(const char *p)
{
	if (*p == '\0')
		return true;
	if (*p++ != ':')
		return false;
	size_t n = 0;
	for (; p[n]; n++)
		if (!isdigit((unsigned char)p[n]))
			return false;
	return n >= 1 && n <= 5;
}

bool http_guard_host_is_loopback(const char *host)
{
	if (host == NULL || host[0] == '\0')
		return false;
	char buf[INET6_ADDRSTRLEN + 1];
	if (host[0] == '[') {
		const char *close = strchr(host, ']');
		size_t n = close ? (size_t)(close - host - 1) : 0;
		if (close == NULL || n == 0 || n >= sizeof(buf) || !port_ok(close + 1))
			return false;
		memcpy(buf, host + 1, n);
		buf[n] = '\0';
		struct in6_addr a6;
		if (inet_pton(AF_INET6, buf, &a6) != 1)
			return false;
		return IN6_IS_ADDR_LOOPBACK(&a6) ||
		       (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	}
	size_t n = strcspn(host, ":");
	if (!port_ok(host + n))
		return false;
	if (n == 9 && strncasecmp(host, "localhost", 9) == 0)
		return true;
	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, host, n);
	buf[n] = '\0';
	struct in_addr a4;
	return inet_pton(AF_INET, buf, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

bool http_guard_content_type_is_json(const char *ct)
{
	if (ct == NULL)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	if (strncasecmp(ct, "application/json", 16) != 0)
		return false;
	const char *p = ct + 16;
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '\0' || *p == ';';
}
