/* test_api_route.c: the route matcher, on a table of its own and on the
 * API's table (which routes exist, what 405 and 404 answer). */
#include <stdio.h>

#include "api.h"
#include "unit.h"

#define ID "0123abcd-0123-4567-89ab-cdef01234567"

static void h_a(struct call *c)
{
	(void)c;
}
static void h_b(struct call *c)
{
	(void)c;
}
static void h_c(struct call *c)
{
	(void)c;
}

static const struct api_route toy[] = {
    {"GET", "/things/?", h_a, API_AUTH_TENANT},
    {"POST", "/things/?", h_b, API_AUTH_TENANT},
    {"GET", "/things/{id}", h_c, API_AUTH_TENANT},
    {"PUT", "/things/{id}/blob/{path...}", h_a, API_AUTH_TENANT},
    {"GET", "/things/{id}/blob/{path...}", h_b, API_AUTH_TENANT},
    {"GET", "/x/exact", h_a, API_AUTH_TENANT},
    {"*", "/x/{...}", h_c, API_AUTH_TENANT},
    {"GET", "/t/{tenant}/q", h_a, API_AUTH_ADMIN},
    {"PUT", "/t/{tenant}/q", h_b, API_AUTH_ADMIN},
    {"*", "/t/{...}", h_c, API_AUTH_ADMIN},
};
#define TOY_N (sizeof(toy) / sizeof(toy[0]))

static struct api_match toy_match(const char *method, const char *path)
{
	struct api_match m;
	api_route_match(toy, TOY_N, method, path, &m);
	return m;
}

TEST(api_route_literal_and_optional_slash)
{
	struct api_match m = toy_match("GET", "/things");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_a);
	CHECK_STR(m.allow, "GET, POST");
	m = toy_match("POST", "/things/");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_b);
	CHECK(m.path == NULL && m.id[0] == '\0');
	CHECK(toy_match("GET", "/things//").kind == API_MATCH_BAD_ID);
	CHECK(toy_match("GET", "/thing").kind == API_MATCH_NONE);
	CHECK(toy_match("GET", "/thingsx").kind == API_MATCH_NONE);
	CHECK(toy_match("GET", "").kind == API_MATCH_NONE);
	CHECK(toy_match("GET", "/").kind == API_MATCH_NONE);
}

TEST(api_route_method_not_allowed_lists_the_path_s_methods)
{
	struct api_match m = toy_match("DELETE", "/things");
	CHECK(m.kind == API_MATCH_METHOD && m.route == NULL);
	CHECK_STR(m.allow, "GET, POST");
	m = toy_match("DELETE", "/things/" ID "/blob/a%2Fb");
	CHECK(m.kind == API_MATCH_METHOD);
	CHECK_STR(m.allow, "PUT, GET");
	/* The parameters are there for the caller to check before it answers. */
	CHECK_STR(m.id, ID);
	CHECK_STR(m.path, "a%2Fb");
	/* Methods are case-sensitive (RFC 9110). */
	CHECK(toy_match("get", "/things").kind == API_MATCH_METHOD);
}

TEST(api_route_id_is_checked_by_the_matcher)
{
	struct api_match m = toy_match("GET", "/things/" ID);
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_c);
	CHECK_STR(m.id, ID);
	CHECK(toy_match("GET", "/things/nope").kind == API_MATCH_BAD_ID);
	CHECK(toy_match("GET", "/things/" ID "0").kind == API_MATCH_BAD_ID);
	CHECK(toy_match("GET", "/things/0123ABCD-0123-4567-89ab-cdef01234567").kind ==
	      API_MATCH_BAD_ID);
	/* A bad id is reported even when nothing after it would match. */
	CHECK(toy_match("GET", "/things/nope/whatever/else").kind == API_MATCH_BAD_ID);
	/* A good id with an unknown rest is no route. */
	CHECK(toy_match("GET", "/things/" ID "/whatever").kind == API_MATCH_NONE);
	CHECK(toy_match("GET", "/things/" ID "/").kind == API_MATCH_NONE);
	CHECK(toy_match("GET", "/things/" ID "/blob").kind == API_MATCH_NONE);
}

TEST(api_route_tails)
{
	struct api_match m = toy_match("GET", "/things/" ID "/blob/a/b/c");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_b);
	CHECK_STR(m.path, "a/b/c");
	m = toy_match("PUT", "/things/" ID "/blob/");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_a);
	CHECK_STR(m.path, "");
	/* "*" takes any method and is not listed in Allow; a literal route
	 * before it wins for its own method, and the path it has answers 405
	 * for another (the catch-all is for names no route has). */
	m = toy_match("GET", "/x/exact");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_a);
	m = toy_match("POST", "/x/exact");
	CHECK(m.kind == API_MATCH_METHOD && m.route == NULL);
	CHECK_STR(m.allow, "GET");
	m = toy_match("POST", "/x/other");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_c);
	m = toy_match("BREW", "/x/");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_c && m.path == NULL);
	CHECK(toy_match("GET", "/x").kind == API_MATCH_NONE);
}

TEST(api_route_tenant_is_checked_by_the_matcher)
{
	struct api_match m = toy_match("GET", "/t/acme-1_x/q");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_a);
	CHECK_STR(m.tenant, "acme-1_x");
	CHECK(m.id[0] == '\0');
	m = toy_match("PUT", "/t/default/q");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_b);
	CHECK_STR(m.tenant, "default");
	CHECK_STR(m.allow, "GET, PUT");
	/* A malformed name is reported, even with a catch-all behind it. */
	const char *bad[] = {
	    "/t/Acme/q",  "/t/-x/q",
	    "/t//q",      "/t/a.b/q",
	    "/t/a%2fb/q", "/t/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/q"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = toy_match("GET", bad[i]);
		CHECK(m.kind == API_MATCH_BAD_TENANT && m.route == NULL);
		CHECK(m.tenant[0] == '\0');
	}
	/* 63 characters is the longest name. */
	m = toy_match("GET",
		      "/t/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/q");
	CHECK(m.kind == API_MATCH_FOUND && strlen(m.tenant) == 63);
	/* A good name with another tail is the catch-all's. */
	m = toy_match("GET", "/t/acme/other");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_c && m.tenant[0] == '\0');
	m = toy_match("DELETE", "/t/acme/q");
	CHECK(m.kind == API_MATCH_METHOD && m.route == NULL);
	CHECK_STR(m.allow, "GET, PUT");
}

/* ---- the API's table ---- */

static struct api_match api_match(const char *method, const char *path)
{
	struct api_match m;
	api_route_match(api_routes, api_routes_count, method, path, &m);
	return m;
}

/* What the API's table answers, as "request -> answer": the route that
 * serves it (its method and pattern), 405 with the Allow value, or which
 * 404. */
static const char *const api_expect[] = {
    "GET /healthz -> GET /healthz",
    "GET /readyz -> GET /readyz",
    "GET /metrics -> GET /metrics",
    "GET /v1/sessions -> GET /v1/sessions/?",
    "GET /v1/sessions/ -> GET /v1/sessions/?",
    "POST /v1/sessions -> POST /v1/sessions/?",
    "POST /v1/sessions/ -> POST /v1/sessions/?",
    "GET /v1/sessions/" ID " -> GET /v1/sessions/{id}/?",
    "GET /v1/sessions/" ID "/ -> GET /v1/sessions/{id}/?",
    "PATCH /v1/sessions/" ID " -> PATCH /v1/sessions/{id}/?",
    "DELETE /v1/sessions/" ID " -> DELETE /v1/sessions/{id}/?",
    "POST /v1/sessions/" ID "/exec -> POST /v1/sessions/{id}/exec",
    "POST /v1/sessions/" ID "/keepalive -> POST /v1/sessions/{id}/keepalive",
    "POST /v1/sessions/" ID "/packages -> POST /v1/sessions/{id}/packages",
    "GET /v1/sessions/" ID "/files -> GET /v1/sessions/{id}/files",
    "PUT /v1/sessions/" ID "/files/a/b.txt -> PUT /v1/sessions/{id}/files/{path...}",
    "GET /v1/sessions/" ID "/files/a%20b -> GET /v1/sessions/{id}/files/{path...}",
    "DELETE /v1/sessions/" ID "/files/x -> DELETE /v1/sessions/{id}/files/{path...}",
    "GET /v1/sessions/" ID "/files/ -> GET /v1/sessions/{id}/files/{path...}",
    "POST /v1/exec -> POST /v1/exec",
    "GET /v1/events -> GET /v1/events",
    "GET /v1/audit -> GET /v1/audit",
    "GET /v1/admin/orphans -> GET /v1/admin/orphans",
    "GET /v1/admin/nodes -> GET /v1/admin/nodes",
    "DELETE /v1/admin/nodes -> DELETE /v1/admin/nodes",
    "POST /v1/admin/nodes -> 405 GET, DELETE",
    "POST /v1/admin/gc -> POST /v1/admin/gc",
    "POST /v1/admin/drain -> POST /v1/admin/drain",
    "POST /v1/admin/keys -> POST /v1/admin/keys",
    "GET /v1/admin/keys -> GET /v1/admin/keys",
    "DELETE /v1/admin/keys/0123456789abcdef -> DELETE /v1/admin/keys/{key}",
    /* A key id is checked by its handler (a 404 like an unknown one); what
     * cannot be one at all is no key route. */
    "DELETE /v1/admin/keys/nothex -> DELETE /v1/admin/keys/{key}",
    "DELETE /v1/admin/keys/ -> * /v1/admin/{...}",
    "DELETE /v1/admin/keys/a.b -> * /v1/admin/{...}",
    "DELETE /v1/admin/keys/a/b -> * /v1/admin/{...}",
    "PUT /v1/admin/keys -> 405 POST, GET",
    "GET /v1/admin/keys/0123456789abcdef -> 405 DELETE",
    "GET /v1/admin/audit -> GET /v1/admin/audit",
    "POST /v1/admin/audit -> 405 GET",
    /* A known admin path with another method is a 405 like any other;
     * an unknown admin name is the catch-all's 404. */
    "POST /v1/admin/orphans -> 405 GET",
    "GET /v1/admin/gc -> 405 POST",
    "OPTIONS /v1/admin/gc -> 405 POST",
    "POST /v1/admin/nothing -> * /v1/admin/{...}",
    "GET /v1/admin/ -> * /v1/admin/{...}",
    "GET /v1/admin/a/b -> * /v1/admin/{...}",
    "GET /v1/admin -> 404 no such route",
    "GET /v1/admin/tenants/acme/quota -> GET /v1/admin/tenants/{tenant}/quota",
    "PUT /v1/admin/tenants/default/quota -> PUT /v1/admin/tenants/{tenant}/quota",
    "GET /v1/admin/tenants/acme/usage -> GET /v1/admin/tenants/{tenant}/usage",
    "DELETE /v1/admin/tenants/acme/quota -> 405 GET, PUT",
    "GET /v1/admin/tenants/Acme/quota -> 404 malformed tenant",
    "GET /v1/admin/tenants/../quota -> 404 malformed tenant",
    "GET /v1/usage -> GET /v1/usage",
    "GET /v1/images -> GET /v1/images/?",
    "GET /v1/images/ -> GET /v1/images/?",
    "POST /v1/images -> 405 GET",
    "POST /v1/usage -> 405 GET",
    /* 405 for a known path; methods are case-sensitive. */
    "POST /healthz -> 405 GET",
    "HEAD /readyz -> 405 GET",
    "OPTIONS /v1/sessions -> 405 GET, POST",
    "GET /v1/runs/" ID " -> GET /v1/runs/{id}",
    "DELETE /v1/runs/" ID " -> 405 GET",
    "POST /v1/snapshots/" ID " -> 405 GET, DELETE",
    "DELETE /v1/reviews/" ID " -> 405 GET",
    "GET /v1/reviews/" ID "/approve -> 405 POST",
    "get /metrics -> 405 GET",
    "DELETE /v1/sessions -> 405 GET, POST",
    "PUT /v1/sessions/ -> 405 GET, POST",
    "POST /v1/sessions/" ID " -> 405 GET, PATCH, DELETE",
    "PUT /v1/sessions/" ID "/ -> 405 GET, PATCH, DELETE",
    "GET /v1/sessions/" ID "/exec -> 405 POST",
    "GET /v1/sessions/" ID "/keepalive -> 405 POST",
    "GET /v1/sessions/" ID "/packages -> 405 POST",
    "POST /v1/sessions/" ID "/files -> 405 GET",
    "POST /v1/sessions/" ID "/files/x -> 405 PUT, GET, DELETE",
    "GET /v1/exec -> 405 POST",
    "POST /v1/events -> 405 GET",
    "DELETE /v1/audit -> 405 GET",
    /* Any segment after /v1/sessions/ must be an id first. */
    "GET /v1/sessions/abc -> 404 malformed id",
    "GET /v1/sessions// -> 404 malformed id",
    "POST /v1/sessions//exec -> 404 malformed id",
    "GET /v1/sessions/abc/nothing/here -> 404 malformed id",
    "GET /v1/sessions/../" ID " -> 404 malformed id",
    /* A good id with an unknown action, or a near miss elsewhere. */
    "POST /v1/sessions/" ID "/exec/ -> 404 no such route",
    "POST /v1/sessions/" ID "/keepalive/x -> 404 no such route",
    "GET /v1/sessions/" ID "/filesx -> 404 no such route",
    "GET /v1/sessions/" ID "// -> 404 no such route",
    "GET /healthz/ -> 404 no such route",
    "POST /v1/exec/ -> 404 no such route",
    "GET /v1/events/ -> 404 no such route",
    "GET /v1/audit/ -> 404 no such route",
    "GET //healthz -> 404 no such route",
    "GET /v1/sessionsx -> 404 no such route",
    "GET / -> 404 no such route",
};

/* The answer to "METHOD PATH", in api_expect's words. */
static void describe(const char *request, char *out, size_t size)
{
	char method[16], path[256];
	CHECK(sscanf(request, "%15s %255s", method, path) == 2);
	struct api_match m = api_match(method, path);
	if (m.kind == API_MATCH_FOUND)
		snprintf(out, size, "%s -> %s %s", request, m.route->method, m.route->pattern);
	else if (m.kind == API_MATCH_METHOD)
		snprintf(out, size, "%s -> 405 %s", request, m.allow);
	else
		snprintf(out, size, "%s -> 404 %s", request,
			 m.kind == API_MATCH_BAD_ID       ? "malformed id"
			 : m.kind == API_MATCH_BAD_TENANT ? "malformed tenant"
							  : "no such route");
}

TEST(api_routes_table_answers)
{
	for (size_t i = 0; i < sizeof(api_expect) / sizeof(api_expect[0]); i++) {
		char request[300], got[600];
		snprintf(request, sizeof(request), "%.*s",
			 (int)(strstr(api_expect[i], " -> ") - api_expect[i]), api_expect[i]);
		describe(request, got, sizeof(got));
		CHECK_STR(got, api_expect[i]);
	}
	/* The handlers behind the patterns, for a few. */
	CHECK(api_match("GET", "/v1/sessions/" ID "/files").route->handler == api_files_list);
	CHECK(api_match("POST", "/v1/exec").route->handler == api_exec_oneshot);
	CHECK(api_match("BREW", "/v1/admin/x").route->handler == api_admin_unknown);
	struct api_match m = api_match("PUT", "/v1/sessions/" ID "/files/a/b.txt");
	CHECK(m.route->handler == api_files_put);
	CHECK_STR(m.id, ID);
	CHECK_STR(m.path, "a/b.txt");
}

TEST(api_route_key_parameter)
{
	static const struct api_route keyed[] = {
	    {"DELETE", "/k/{key}", h_a, API_AUTH_ADMIN},
	    {"GET", "/k/{key}/x", h_b, API_AUTH_ADMIN},
	};
	struct api_match m;
	api_route_match(keyed, 2, "DELETE", "/k/0123456789abcdef", &m);
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_a);
	CHECK_STR(m.key, "0123456789abcdef");
	CHECK(m.id[0] == '\0' && m.path == NULL);
	api_route_match(keyed, 2, "GET", "/k/AbC9/x", &m);
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == h_b);
	CHECK_STR(m.key, "AbC9");
	api_route_match(keyed, 2, "GET", "/k/0123456789abcdef", &m);
	CHECK(m.kind == API_MATCH_METHOD);
	CHECK_STR(m.allow, "DELETE");
	char longest[80];
	snprintf(longest, sizeof(longest), "/k/%0*d", API_KEY_PARAM_MAX, 0);
	api_route_match(keyed, 2, "DELETE", longest, &m);
	CHECK(m.kind == API_MATCH_FOUND && strlen(m.key) == API_KEY_PARAM_MAX);
	snprintf(longest, sizeof(longest), "/k/%0*d", API_KEY_PARAM_MAX + 1, 0);
	api_route_match(keyed, 2, "DELETE", longest, &m);
	CHECK(m.kind == API_MATCH_NONE);
	static const char *const none[] = {"/k/", "/k/a-b", "/k/a%2e", "/k/a.b", "/k/a/"};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		api_route_match(keyed, 2, "DELETE", none[i], &m);
		CHECK(m.kind == API_MATCH_NONE);
	}
}

TEST(api_routes_auth_column)
{
	/* The operator's routes need the admin key; the probes and the version nothing. */
	for (size_t i = 0; i < api_routes_count; i++) {
		const struct api_route *r = &api_routes[i];
		if (strncmp(r->pattern, "/v1/admin/", 10) == 0 ||
		    strcmp(r->pattern, "/metrics") == 0)
			CHECK(r->auth == API_AUTH_ADMIN);
		else if (strcmp(r->pattern, "/healthz") == 0 ||
			 strcmp(r->pattern, "/readyz") == 0 ||
			 strcmp(r->pattern, "/version") == 0 ||
			 strncmp(r->pattern, "/review/", 8) == 0) /* the page, holding no data */
			CHECK(r->auth == API_AUTH_NONE);
		else
			CHECK(r->auth == API_AUTH_TENANT);
	}
	CHECK(api_match("DELETE", "/v1/admin/keys/0123456789abcdef").route->handler ==
	      api_keys_revoke);
}

TEST(api_routes_mcp)
{
	/* One POST per message; GET and DELETE are answered 405 by the handler
	 * (no server stream, no session), anything else by the matcher. */
	CHECK(api_match("POST", "/mcp").route->handler == api_mcp_post);
	CHECK(api_match("GET", "/mcp").route->handler == api_mcp_refuse);
	CHECK(api_match("DELETE", "/mcp").route->handler == api_mcp_refuse);
	struct api_match m;
	api_route_match(api_routes, api_routes_count, "PUT", "/mcp", &m);
	CHECK(m.kind == API_MATCH_METHOD);
	CHECK_STR(m.allow, "POST, GET, DELETE");
	api_route_match(api_routes, api_routes_count, "POST", "/mcp/", &m);
	CHECK(m.kind == API_MATCH_NONE);
}

TEST(api_route_allow_is_bounded)
{
	/* More methods than API_ALLOW_MAX holds: cut, never overrun. */
	static const struct api_route many[] = {
	    {"AAAAAAAAAAAAAAAAAAAA", "/m", h_a, API_AUTH_TENANT},
	    {"BBBBBBBBBBBBBBBBBBBB", "/m", h_a, API_AUTH_TENANT},
	    {"CCCCCCCCCCCCCCCCCCCC", "/m", h_a, API_AUTH_TENANT},
	    {"DDDDDDDDDDDDDDDDDDDD", "/m", h_a, API_AUTH_TENANT},
	    {"AAAAAAAAAAAAAAAAAAAA", "/m", h_b, API_AUTH_TENANT},
	};
	struct api_match m;
	api_route_match(many, 5, "GET", "/m", &m);
	CHECK(m.kind == API_MATCH_METHOD);
	CHECK(strlen(m.allow) < API_ALLOW_MAX);
	CHECK_STR(m.allow, "AAAAAAAAAAAAAAAAAAAA, BBBBBBBBBBBBBBBBBBBB");
}
