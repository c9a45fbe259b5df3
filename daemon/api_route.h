/* api_route.h: matching a request against the API's route table (pure,
 * unit-tested; the table itself is api.c's).
 *
 * A route is a method, a path pattern and a handler. A pattern is literal
 * text with these parameters:
 *   {id}       one segment (up to the next '/'): a session id. The matcher
 *              checks it (session_id_valid), so no handler sees a bad one.
 *   {key}      one segment of 1 to API_KEY_PARAM_MAX letters and digits: an
 *              API key's id, checked by its handler (a key id that is not
 *              one is a 404 there, like an unknown one).
 *   {tenant}   one segment: a tenant name (apikey_tenant_valid), checked by
 *              the matcher like {id}.
 *   {signature} one segment: a failure signature (failure_sig_valid),
 *              checked by the matcher like {id}.
 *   {path...}  the rest of the path, possibly empty, still percent-encoded:
 *              a file path in the session (the caller decodes and checks it).
 *   {...}      the rest of the path, whatever it is (not captured).
 * A pattern ending in "/?" matches with or without that trailing slash.
 * Method "*" is any method. Patterns are matched against the raw path, so a
 * parameter never spans a '/' it was not meant to. */
#ifndef CI_API_ROUTE_H
#define CI_API_ROUTE_H

#include <stddef.h>

#include "failure_sig.h"
#include "session.h"

struct call;
typedef void (*api_handler)(struct call *c);

/* Who may call a route once API keys exist (--admin-key-file): a tenant's
 * key (the default), the admin key, or anyone (the probes). Without keys
 * every caller is the tenant "default" and admin alike, on loopback. */
enum api_auth {
	API_AUTH_TENANT,
	API_AUTH_ADMIN,
	API_AUTH_NONE,
};

struct api_route {
	const char *method;
	const char *pattern;
	api_handler handler;
	enum api_auth auth;
};

enum api_match_kind {
	API_MATCH_FOUND,         /* route serves this method and path */
	API_MATCH_METHOD,        /* the path is known, with other methods (allow) */
	API_MATCH_BAD_ID,        /* no route matched; one would have with a valid {id} */
	API_MATCH_BAD_TENANT,    /* ... or with a valid {tenant} */
	API_MATCH_BAD_SIGNATURE, /* ... or with a valid {signature} */
	API_MATCH_NONE,          /* no such route */
};

#define API_KEY_PARAM_MAX 64

/* Room for the longest Allow value the table needs ("PUT, GET, DELETE"). */
#define API_ALLOW_MAX 64

struct api_match {
	enum api_match_kind kind;
	const struct api_route *route; /* FOUND */
	/* FOUND and METHOD: the parameters, of the chosen route (FOUND) or of
	 * the first route whose pattern matched (METHOD). */
	char id[SESSION_ID_LEN + 1];     /* the {id}; "" when the pattern has none */
	const char *path;                /* the {path...}, a pointer into path; NULL when none */
	char key[API_KEY_PARAM_MAX + 1]; /* the {key}; "" when the pattern has none */
	char tenant[64];                 /* the {tenant}; "" when the pattern has none */
	char signature[FAILURE_SIG_HEX + 1]; /* the {signature}; "" when none */
	/* FOUND and METHOD: the methods the path has, in table order,
	 * ", "-separated ("GET, PATCH, DELETE"); "*" routes are not listed. */
	char allow[API_ALLOW_MAX];
};

/* Match method and path (the request path, without the query) against the
 * n routes. The first route in table order whose pattern and method match
 * wins. */
void api_route_match(const struct api_route *routes, size_t n, const char *method, const char *path,
		     struct api_match *m);

#endif
