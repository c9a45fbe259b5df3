/* The review queue's pure parts: its routes (resolve, auth column, Allow)
 * and the state names. */
#include "unit.h"

#include "api.h"
#include "store_reviews.h"

#define RID "0b5e2f0e-6a7c-4d1e-9f00-1234567890ab"

static struct api_match rmatch(const char *method, const char *path)
{
	struct api_match m;
	api_route_match(api_routes, api_routes_count, method, path, &m);
	return m;
}

TEST(reviews_routes_resolve)
{
	struct api_match m = rmatch("GET", "/v1/reviews");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == api_reviews_list);
	CHECK(m.route->auth == API_AUTH_TENANT);
	m = rmatch("GET", "/v1/reviews/");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == api_reviews_list);
	m = rmatch("GET", "/v1/reviews/" RID);
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == api_reviews_get);
	CHECK_STR(m.id, RID);
	m = rmatch("POST", "/v1/reviews/" RID "/approve");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == api_reviews_approve);
	CHECK(m.route->auth == API_AUTH_TENANT);
	m = rmatch("POST", "/v1/reviews/" RID "/reject");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == api_reviews_reject);
	/* A malformed id never reaches a handler. */
	m = rmatch("POST", "/v1/reviews/not-a-uuid/approve");
	CHECK(m.kind == API_MATCH_BAD_ID);
	/* Deciding is a POST. */
	m = rmatch("GET", "/v1/reviews/" RID "/approve");
	CHECK(m.kind == API_MATCH_METHOD);
	CHECK_STR(m.allow, "POST");
}

TEST(reviews_page_routes_need_no_key)
{
	static const char *const paths[] = {"/review", "/review/", "/review/app.js",
					    "/review/app.css"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct api_match m = rmatch("GET", paths[i]);
		CHECK(m.kind == API_MATCH_FOUND && m.route->auth == API_AUTH_NONE);
	}
	CHECK(rmatch("GET", "/review/other.js").kind == API_MATCH_NONE);
	CHECK(rmatch("POST", "/review").kind == API_MATCH_METHOD);
}

TEST(reviews_state_names)
{
	CHECK_STR(review_state_name(REVIEW_PENDING), "pending");
	CHECK_STR(review_state_name(REVIEW_APPROVED), "approved");
	CHECK_STR(review_state_name(REVIEW_REJECTED), "rejected");
}
