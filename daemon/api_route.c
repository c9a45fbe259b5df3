/* api_route.c: the route matcher. Patterns are walked against the path byte
 * by byte: a table of twenty short patterns costs less to scan than any
 * precompiled structure would cost to explain. */
#include "api_route.h"

#include <stdbool.h>
#include <string.h>

enum shape { SHAPE_NO, SHAPE_YES, SHAPE_BAD_ID };

struct captures {
	char id[SESSION_ID_LEN + 1];
	const char *path;
};

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether path has pattern's shape; its parameters into *cap. */
static enum shape match_shape(const char *p, const char *s, struct captures *cap)
{
	memset(cap, 0, sizeof(*cap));
	for (;;) {
		if (starts(p, "{id}")) {
			size_t n = strcspn(s, "/");
			if (n != SESSION_ID_LEN)
				return SHAPE_BAD_ID;
			memcpy(cap->id, s, n);
			if (!session_id_valid(cap->id))
				return SHAPE_BAD_ID;
			s += n;
			p += 4;
		} else if (strcmp(p, "{path...}") == 0) {
			cap->path = s;
			return SHAPE_YES;
		} else if (strcmp(p, "{...}") == 0) {
			return SHAPE_YES;
		} else if (strcmp(p, "/?") == 0) {
			return *s == '\0' || strcmp(s, "/") == 0 ? SHAPE_YES : SHAPE_NO;
		} else if (*p == '\0') {
			return *s == '\0' ? SHAPE_YES : SHAPE_NO;
		} else if (*p == *s) {
			p++;
			s++;
		} else {
			return SHAPE_NO;
		}
	}
}

/* Add method to the ", "-separated list unless it is there; a list that
 * would not fit is cut (a table bug, which the unit tests would show). */
static void allow_add(char *allow, const char *method)
{
	size_t len = strlen(allow), mlen = strlen(method);
	for (const char *a = allow; *a;) {
		size_t n = strcspn(a, ",");
		if (n == mlen && strncmp(a, method, n) == 0)
			return;
		a += n;
		a += strspn(a, ", ");
	}
	if (len + (len ? 2 : 0) + mlen + 1 > API_ALLOW_MAX)
		return;
	if (len) {
		memcpy(allow + len, ", ", 2);
		len += 2;
	}
	memcpy(allow + len, method, mlen + 1);
}

void api_route_match(const struct api_route *routes, size_t n, const char *method, const char *path,
		     struct api_match *m)
{
	memset(m, 0, sizeof(*m));
	bool shaped = false, bad_id = false;
	for (size_t i = 0; i < n; i++) {
		const struct api_route *r = &routes[i];
		struct captures cap;
		enum shape sh = match_shape(r->pattern, path, &cap);
		if (sh == SHAPE_BAD_ID)
			bad_id = true;
		if (sh != SHAPE_YES)
			continue;
		bool any = strcmp(r->method, "*") == 0;
		if (!any)
			allow_add(m->allow, r->method);
		if (m->route == NULL && (any || strcmp(r->method, method) == 0)) {
			m->route = r;
		} else if (shaped) {
			continue;
		}
		/* The chosen route's parameters, or the first shape's until one is. */
		memcpy(m->id, cap.id, sizeof(m->id));
		m->path = cap.path;
		shaped = true;
	}
	m->kind = m->route ? API_MATCH_FOUND
		  : shaped ? API_MATCH_METHOD
		  : bad_id ? API_MATCH_BAD_ID
			   : API_MATCH_NONE;
}
