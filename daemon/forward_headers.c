/* forward_headers.c: the header rules of a forwarded call (forward_headers.h). */
#include "forward_headers.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "xalloc.h"

/* RFC 9110 7.6.1's hop-by-hop headers, and what curl frames itself. */
static const char *const drop_always[] = {
    "Connection",
    "Keep-Alive",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
    "Host",
    "Content-Length",
    "Expect",
    FORWARD_TOKEN_HEADER,
    FORWARD_BY_HEADER,
    "X-Forwarded-For",
    "X-Request-Id",
    "traceparent",
    /* Checked where the call entered (api.c): the owner's own Host differs,
     * so the entry node's page would not be its own there. */
    "Origin",
};

/* Whether the comma-separated list names name (case-insensitive). */
static bool list_names(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;
	while (p && *p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		size_t len = strcspn(p, ",");
		size_t e = len;
		while (e > 0 && (p[e - 1] == ' ' || p[e - 1] == '\t'))
			e--;
		if (e == n && e > 0 && strncasecmp(p, name, n) == 0)
			return true;
		p += len;
	}
	return false;
}

bool forward_headers_drop_request(const char *name, const char *connection)
{
	for (size_t i = 0; i < sizeof(drop_always) / sizeof(drop_always[0]); i++)
		if (strcasecmp(name, drop_always[i]) == 0)
			return true;
	if (strncasecmp(name, "Proxy-", 6) == 0)
		return true;
	return connection != NULL && list_names(connection, name);
}

static const char *const keep_response[] = {
    "Retry-After",
    "Allow",
    "Location",
    "WWW-Authenticate",
    "Cache-Control",
    "Content-Disposition",
    "ETag",
    "Last-Modified",
    "Vary",
    "X-Content-Type-Options",
    "X-Frame-Options",
    "Content-Security-Policy",
    "Referrer-Policy",
};

bool forward_headers_keep_response(const char *name)
{
	for (size_t i = 0; i < sizeof(keep_response) / sizeof(keep_response[0]); i++)
		if (strcasecmp(name, keep_response[i]) == 0)
			return true;
	return strncasecmp(name, "X-CI-", 5) == 0 && strcasecmp(name, FORWARD_TOKEN_HEADER) != 0;
}

int forward_headers_status(const char *line, size_t len)
{
	/* "HTTP/1.x SSS" at least; HTTP/2 answers ("HTTP/2 200") are not
	 * asked for, so they are not taken either. */
	if (len < 12 || strncmp(line, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)line[7]) ||
	    line[8] != ' ')
		return -1;
	int s = 0;
	for (int i = 9; i < 12; i++) {
		if (!isdigit((unsigned char)line[i]))
			return -1;
		s = s * 10 + (line[i] - '0');
	}
	if (len > 12 && line[12] != ' ' && line[12] != '\r' && line[12] != '\n')
		return -1;
	return s >= 100 && s <= 599 ? s : -1;
}

/* RFC 9110's tchar: what a header name may hold. */
static bool is_tchar(unsigned char ch)
{
	return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

int forward_headers_split(const char *line, size_t len, char *name, size_t size, const char **value,
			  size_t *vlen)
{
	const char *colon = memchr(line, ':', len);
	if (colon == NULL || colon == line || (size_t)(colon - line) >= size)
		return -1;
	size_t n = (size_t)(colon - line);
	for (size_t i = 0; i < n; i++)
		if (!is_tchar((unsigned char)line[i]))
			return -1;
	memcpy(name, line, n);
	name[n] = '\0';
	const char *v = colon + 1, *end = line + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	for (const char *p = v; p < end; p++)
		if ((unsigned char)*p < 0x20 && *p != '\t')
			return -1; /* a bare CR or a control byte: not passed on */
	*value = v;
	*vlen = (size_t)(end - v);
	return 0;
}

void forward_headers_xff(const char *own, const char *peer, char *out, size_t size)
{
	char ip[64] = "";
	if (peer && peer[0] == '[') {
		const char *close = strchr(peer, ']');
		if (close && (size_t)(close - peer - 1) < sizeof(ip))
			snprintf(ip, sizeof(ip), "%.*s", (int)(close - peer - 1), peer + 1);
	} else if (peer && strcmp(peer, "unix") != 0) {
		const char *colon = strrchr(peer, ':');
		size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
		if (n < sizeof(ip))
			snprintf(ip, sizeof(ip), "%.*s", (int)n, peer);
	}
	if (ip[0] == '\0')
		snprintf(ip, sizeof(ip), "unknown");
	/* The caller's own chain only when it fits whole: cut, it would lose
	 * the one address that is ours to vouch for, the last. */
	if (own && own[0] && strlen(own) + 2 + strlen(ip) < size)
		snprintf(out, size, "%s, %s", own, ip);
	else
		snprintf(out, size, "%s", ip);
}

char *forward_headers_url(const char *base_url, const char *path, const char *query)
{
	size_t n = strlen(base_url);
	while (n > 0 && base_url[n - 1] == '/')
		n--;
	bool q = query && query[0];
	size_t len = n + strlen(path) + (q ? 1 + strlen(query) : 0) + 1;
	char *url = xmalloc(len);
	snprintf(url, len, "%.*s%s%s%s", (int)n, base_url, path, q ? "?" : "", q ? query : "");
	return url;
}
