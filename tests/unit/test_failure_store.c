/* The failure memory's pure parts: the entry parsed from what its Lua
 * scripts answer (a Redis may answer anything: wrong types, junk numbers,
 * unknown classes, NULs), failure_record_hopeless, and the routes of
 * /v1/failures with their {signature} parameter. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "store_internal.h"
#include "unit.h"

#define SIG "0123456789abcdef"

static redisReply str_el(const char *s)
{
	redisReply r;
	memset(&r, 0, sizeof(r));
	r.type = REDIS_REPLY_STRING;
	r.str = (char *)s;
	r.len = strlen(s);
	return r;
}

struct fields {
	redisReply el[11];
	const redisReply *p[11];
};

static void fields_init(struct fields *f, const char *const *v)
{
	for (int i = 0; i < 11; i++) {
		f->el[i] = str_el(v[i]);
		f->p[i] = &f->el[i];
	}
}

static const char *const good[11] = {"NameError",
				     "name <str> is not defined",
				     "x = np.zeros(<n>)",
				     "python",
				     "",
				     "4",
				     "2",
				     "1",
				     "0",
				     "1764600000000",
				     "1764600100000"};

TEST(failure_store_parses_a_good_entry)
{
	struct fields f;
	fields_init(&f, good);
	struct failure_record r;
	CHECK(store_failure_record_parse(SIG, f.p, &r) == 0);
	CHECK_STR(r.signature, SIG);
	CHECK_STR(r.ename, "NameError");
	CHECK_STR(r.line, "x = np.zeros(<n>)");
	CHECK(r.class_name == NULL);
	CHECK(r.seen == 4 && r.retried == 2 && r.fixed_rule == 1 && r.fixed_fixer == 0);
	CHECK(r.first_ms == 1764600000000LL && r.last_ms == 1764600100000LL);
	failure_record_clear(&r);
	CHECK(r.ename == NULL);

	const char *v[11];
	memcpy(v, good, sizeof(v));
	v[4] = "egress_denied";
	fields_init(&f, v);
	CHECK(store_failure_record_parse(SIG, f.p, &r) == 0);
	CHECK_STR(r.class_name, "egress_denied");
	failure_record_clear(&r);
	/* an integer reply is a count too */
	fields_init(&f, good);
	f.el[5].type = REDIS_REPLY_INTEGER;
	f.el[5].integer = 9;
	CHECK(store_failure_record_parse(SIG, f.p, &r) == 0 && r.seen == 9);
	failure_record_clear(&r);
}

TEST(failure_store_refuses_a_broken_entry)
{
	struct fields f;
	struct failure_record r;
	/* each count, one at a time, made junk */
	static const char *const junk[] = {"", "x", "-1", "12x", "99999999999999999999", " 1"};
	for (int i = 5; i < 11; i++) {
		for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++) {
			const char *v[11];
			memcpy(v, good, sizeof(v));
			v[i] = junk[j];
			fields_init(&f, v);
			CHECK(store_failure_record_parse(SIG, f.p, &r) < 0);
			failure_record_clear(&r);
		}
	}
	/* a class we do not know */
	const char *v[11];
	memcpy(v, good, sizeof(v));
	v[4] = "root";
	fields_init(&f, v);
	CHECK(store_failure_record_parse(SIG, f.p, &r) < 0);
	/* nil, an array, an error, a negative integer where text or a count goes */
	fields_init(&f, good);
	f.el[0].type = REDIS_REPLY_NIL;
	CHECK(store_failure_record_parse(SIG, f.p, &r) < 0);
	fields_init(&f, good);
	f.el[2].type = REDIS_REPLY_ARRAY;
	CHECK(store_failure_record_parse(SIG, f.p, &r) < 0);
	fields_init(&f, good);
	f.el[6].type = REDIS_REPLY_ERROR;
	CHECK(store_failure_record_parse(SIG, f.p, &r) < 0);
	fields_init(&f, good);
	f.el[7].type = REDIS_REPLY_INTEGER;
	f.el[7].integer = -3;
	CHECK(store_failure_record_parse(SIG, f.p, &r) < 0);
	/* a NUL inside a text; a text too long */
	fields_init(&f, good);
	f.el[1].str = (char *)"ab\0cd";
	f.el[1].len = 5;
	CHECK(store_failure_record_parse(SIG, f.p, &r) < 0);
	char *big = malloc(5000);
	memset(big, 'a', 4999);
	big[4999] = '\0';
	fields_init(&f, good);
	f.el[1] = str_el(big);
	CHECK(store_failure_record_parse(SIG, f.p, &r) < 0);
	free(big);
	/* a signature that is not one */
	fields_init(&f, good);
	CHECK(store_failure_record_parse("../../x", f.p, &r) < 0);
	CHECK(r.ename == NULL); /* nothing to clear after a refusal */
}

TEST(failure_record_hopeless_by_history)
{
	/* Seen often, never repaired: not hopeless (nobody tried). */
	struct failure_record r = {.seen = 100};
	CHECK(!failure_record_hopeless(&r, 3));
	CHECK(!failure_record_hopeless(&r, 1));
	/* Repaired (a rule's or the fixer's code ran) 3 times, never fixed. */
	r.retried = 3;
	CHECK(failure_record_hopeless(&r, 3));
	CHECK(!failure_record_hopeless(&r, 4));
	r.retried = 2;
	CHECK(!failure_record_hopeless(&r, 3));
	r.retried = 10;
	r.fixed_rule = 1; /* fixed once: never hopeless by history */
	CHECK(!failure_record_hopeless(&r, 3));
	r.fixed_rule = 0;
	r.fixed_fixer = 1;
	CHECK(!failure_record_hopeless(&r, 3));
	r.fixed_fixer = 0;
	CHECK(failure_record_hopeless(&r, 2));
	CHECK(!failure_record_hopeless(NULL, 1));
	CHECK(!failure_record_hopeless(&r, 0));
}

/* ---- the routes ---- */

static struct api_match api_match_of(const char *method, const char *path)
{
	struct api_match m;
	api_route_match(api_routes, api_routes_count, method, path, &m);
	return m;
}

TEST(failure_routes_and_the_signature_parameter)
{
	struct api_match m = api_match_of("GET", "/v1/failures");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == api_failures_list);
	CHECK(m.route->auth == API_AUTH_TENANT);
	m = api_match_of("GET", "/v1/failures/");
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == api_failures_list);
	m = api_match_of("DELETE", "/v1/failures/" SIG);
	CHECK(m.kind == API_MATCH_FOUND && m.route->handler == api_failures_delete);
	CHECK(m.route->auth == API_AUTH_TENANT);
	CHECK_STR(m.signature, SIG);
	CHECK_STR(m.allow, "DELETE");
	m = api_match_of("GET", "/v1/failures/" SIG);
	CHECK(m.kind == API_MATCH_METHOD);
	CHECK_STR(m.allow, "DELETE");
	CHECK_STR(m.signature, SIG);
	/* a bad signature is told apart from no route */
	static const char *const bad[] = {
	    "/v1/failures/0123456789ABCDEF", "/v1/failures/0123456789abcde",
	    "/v1/failures/0123456789abcdef0", "/v1/failures/xyz", "/v1/failures/..%2f..%2fkeys"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(api_match_of("DELETE", bad[i]).kind == API_MATCH_BAD_SIGNATURE);
	CHECK(api_match_of("DELETE", "/v1/failures/" SIG "/x").kind == API_MATCH_NONE);
	CHECK(api_match_of("DELETE", "/v1/failures").kind == API_MATCH_METHOD);
	/* other routes have no signature */
	m = api_match_of("GET", "/v1/audit");
	CHECK(m.kind == API_MATCH_FOUND && m.signature[0] == '\0');
}
