/* api_route.c: the route matcher. Patterns are walked against the path byte
 * by byte: a table of twenty short patterns costs less to scan than any
 * precompiled structure would cost to explain. */
#include "api_route.h"

#include <stdbool.h>
#include <string.h>

#include "apikey.h"

enum shape { SHAPE_NO, SHAPE_YES, SHAPE_BAD_ID, SHAPE_BAD_TENANT, SHAPE_BAD_SIGNATURE };

struct captures {
	const char *id; /* the {id} segment (SESSION_ID_LEN bytes), in the path */
	const char *path;
	const char *key; /* the {key} segment, keylen bytes */
	size_t keylen;
	const char *tenant; /* the {tenant} segment, in the path */
	size_t tenant_len;
	const char *signature; /* the {signature} segment (FAILURE_SIG_HEX bytes) */
};

/* A {key} segment: letters and digits only, 1..API_KEY_PARAM_MAX. */
static size_t key_at(const char *s)
{
	size_t n = 0;
	while ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'z') ||
	       (s[n] >= 'A' && s[n] <= 'Z'))
		n++;
	return n <= API_KEY_PARAM_MAX && (s[n] == '\0' || s[n] == '/') ? n : 0;
}

/* Every pattern with an {id} has it at the same place in a given path, so
 * the segment there is measured and checked once per request, not once per
 * route. */
struct id_check {
	const char *at; /* the segment checked; NULL before the first */
	size_t len;
	bool valid;
};

static bool id_at(const char *s, struct id_check *ck, size_t *len)
{
	if (ck->at != s) {
		ck->at = s;
		ck->len = strcspn(s, "/");
		char id[SESSION_ID_LEN + 1] = "";
		if (ck->len == SESSION_ID_LEN)
			memcpy(id, s, SESSION_ID_LEN);
		ck->valid = session_id_valid(id);
	}
	*len = ck->len;
	return ck->valid;
}

/* Whether path has pattern's shape; its parameters into *cap. Only a '{'
 * or a final "/?" in the pattern is more than a byte to compare. */
static enum shape match_shape(const char *p, const char *s, struct captures *cap,
			      struct id_check *ck)
{
	cap->id = NULL;
	cap->path = NULL;
	cap->key = NULL;
	cap->keylen = 0;
	cap->tenant = NULL;
	cap->signature = NULL;
	for (;; p++, s++) {
		if (*p == '{' && strcmp(p, "{path...}") == 0) {
			cap->path = s;
			return SHAPE_YES;
		}
		if (*p == '{' && strcmp(p, "{...}") == 0)
			return SHAPE_YES;
		if (*p == '{' && strncmp(p, "{id}", 4) == 0) {
			size_t n;
			if (!id_at(s, ck, &n))
				return SHAPE_BAD_ID;
			cap->id = s;
			p += strlen("{id}");
			s += n;
		}
		if (*p == '{' && strncmp(p, "{key}", 5) == 0) {
			size_t n = key_at(s);
			if (n == 0)
				return SHAPE_NO;
			cap->key = s;
			cap->keylen = n;
			p += strlen("{key}");
			s += n;
		}
		if (*p == '{' && strncmp(p, "{tenant}", 8) == 0) {
			size_t n = strcspn(s, "/");
			char name[64] = "";
			if (n < sizeof(name))
				memcpy(name, s, n);
			if (!apikey_tenant_valid(name))
				return SHAPE_BAD_TENANT;
			cap->tenant = s;
			cap->tenant_len = n;
			p += strlen("{tenant}");
			s += n;
		}
		if (*p == '{' && strncmp(p, "{signature}", 11) == 0) {
			size_t n = strcspn(s, "/");
			char sig[FAILURE_SIG_HEX + 1] = "";
			if (n == FAILURE_SIG_HEX)
				memcpy(sig, s, n);
			if (!failure_sig_valid(sig))
				return SHAPE_BAD_SIGNATURE;
			cap->signature = s;
			p += strlen("{signature}");
			s += n;
		}
		if (*p == '/' && p[1] == '?' && p[2] == '\0')
			return *s == '\0' || (s[0] == '/' && s[1] == '\0') ? SHAPE_YES : SHAPE_NO;
		if (*p != *s)
			return SHAPE_NO;
		if (*p == '\0')
			return SHAPE_YES;
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
	bool shaped = false, bad_id = false, bad_tenant = false, bad_signature = false;
	struct id_check ck = {0};
	for (size_t i = 0; i < n; i++) {
		const struct api_route *r = &routes[i];
		struct captures cap;
		enum shape sh = match_shape(r->pattern, path, &cap, &ck);
		if (sh == SHAPE_BAD_ID)
			bad_id = true;
		if (sh == SHAPE_BAD_TENANT)
			bad_tenant = true;
		if (sh == SHAPE_BAD_SIGNATURE)
			bad_signature = true;
		if (sh != SHAPE_YES)
			continue;
		bool any = strcmp(r->method, "*") == 0;
		/* A catch-all serves names no route has: a path an earlier route
		 * has the shape of answers 405 with that path's methods. */
		if (any && shaped && m->route == NULL)
			continue;
		if (!any)
			allow_add(m->allow, r->method);
		if (m->route == NULL && (any || strcmp(r->method, method) == 0)) {
			m->route = r;
		} else if (shaped) {
			continue;
		}
		/* The chosen route's parameters, or the first shape's until one is. */
		memset(m->id, 0, sizeof(m->id));
		if (cap.id)
			memcpy(m->id, cap.id, SESSION_ID_LEN);
		m->path = cap.path;
		memset(m->key, 0, sizeof(m->key));
		if (cap.key)
			memcpy(m->key, cap.key, cap.keylen);
		memset(m->tenant, 0, sizeof(m->tenant));
		if (cap.tenant)
			memcpy(m->tenant, cap.tenant, cap.tenant_len);
		memset(m->signature, 0, sizeof(m->signature));
		if (cap.signature)
			memcpy(m->signature, cap.signature, FAILURE_SIG_HEX);
		shaped = true;
	}
	/* A catch-all ("*") does not hide a malformed tenant name from the
	 * route that would have taken it. */
	if (bad_tenant && m->route && strcmp(m->route->method, "*") == 0) {
		m->route = NULL;
		shaped = false;
		memset(m->allow, 0, sizeof(m->allow));
	}
	m->kind = m->route        ? API_MATCH_FOUND
		  : shaped        ? API_MATCH_METHOD
		  : bad_id        ? API_MATCH_BAD_ID
		  : bad_tenant    ? API_MATCH_BAD_TENANT
		  : bad_signature ? API_MATCH_BAD_SIGNATURE
				  : API_MATCH_NONE;
}
