/* test_err.c: the error convention (lib/err.c) and the ownership helpers of
 * lib/xalloc.h that go with it. */
#include <stdlib.h>

#include "err.h"
#include "unit.h"
#include "xalloc.h"

TEST(err_set_keeps_the_first_error_and_returns_minus_one)
{
	AUTOERR struct err *e = NULL;
	CHECK(err_set(&e, ERR_NOT_FOUND, "session %s", "s1") == -1);
	CHECK(e != NULL && e->code == ERR_NOT_FOUND);
	CHECK_STR(e->message, "session s1");
	/* Later errors are fallout of the first: not stored. */
	CHECK(err_set(&e, ERR_INTERNAL, "later") == -1);
	CHECK(e->code == ERR_NOT_FOUND);
	CHECK_STR(e->message, "session s1");
	/* A caller that does not want the error passes NULL. */
	CHECK(err_set(NULL, ERR_INTERNAL, "nobody") == -1);
	/* The daemon never sets the optional peer fields. */
	CHECK(e->peer_status == 0 && e->peer_code == NULL);
}

TEST(err_wrap_prefixes_context_as_the_error_climbs)
{
	AUTOERR struct err *e = NULL;
	err_wrap(&e, "nothing to wrap"); /* no error: no-op */
	CHECK(e == NULL);
	err_wrap(NULL, "nothing either");
	err_set(&e, ERR_BUSY, "409 name in use");
	err_wrap(&e, "docker");
	err_wrap(&e, "create session %d", 7);
	CHECK_STR(e->message, "create session 7: docker: 409 name in use");
	CHECK(e->code == ERR_BUSY);
}

TEST(err_give_hands_over_or_frees)
{
	struct err *e = NULL;
	err_give(&e, err_new(ERR_EXPIRED, "first"));
	CHECK(e != NULL && e->code == ERR_EXPIRED);
	/* The first error wins; the second is freed (valgrind checks it). */
	err_give(&e, err_new(ERR_INTERNAL, "second"));
	CHECK_STR(e->message, "first");
	err_give(NULL, err_new(ERR_INTERNAL, "dropped"));
	err_give(&e, NULL);
	CHECK(e != NULL);
	err_cleanup(&e);
	CHECK(e == NULL);
	err_cleanup(&e); /* NULL-safe */
	err_free(NULL);
}

TEST(err_set_peer_records_the_answer)
{
	AUTOERR struct err *e = err_new(ERR_NOT_FOUND, "no such session");
	err_set_peer(e, 404, "not_found");
	CHECK(e->peer_status == 404);
	CHECK_STR(e->peer_code, "not_found");
	/* A code this build does not know is kept as sent; setting again
	 * replaces (and frees) the old one. */
	err_set_peer(e, 418, "teapot");
	CHECK(e->peer_status == 418);
	CHECK_STR(e->peer_code, "teapot");
	err_set_peer(e, 502, NULL);
	CHECK(e->peer_code == NULL);
}

TEST(err_codes_have_names_and_statuses_both_ways)
{
	static const struct {
		enum err_code code;
		const char *name;
		int status;
	} want[] = {
	    {ERR_BAD_REQUEST, "bad_request", 400},
	    {ERR_BAD_PATH, "bad_path", 400},
	    {ERR_UNAUTHORIZED, "unauthorized", 401},
	    {ERR_FORBIDDEN, "forbidden", 403},
	    {ERR_NOT_FOUND, "not_found", 404},
	    {ERR_EXPIRED, "expired", 410},
	    {ERR_BUSY, "busy", 409},
	    {ERR_QUOTA_EXCEEDED, "quota_exceeded", 429},
	    {ERR_PAYLOAD_TOO_LARGE, "payload_too_large", 413},
	    {ERR_UNAVAILABLE, "unavailable", 503},
	    {ERR_INTERNAL, "internal", 500},
	    {ERR_IS_A_DIRECTORY, "is_a_directory", 409},
	    {ERR_METHOD_NOT_ALLOWED, "method_not_allowed", 405},
	    {ERR_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		enum err_code back = ERR_INTERNAL;
		CHECK_STR(err_code_name(want[i].code), want[i].name);
		CHECK(err_code_status(want[i].code) == want[i].status);
		CHECK(err_code_from_name(want[i].name, &back) == 0 && back == want[i].code);
	}
	/* Out of range: the safe answer, never a read past the table. */
	CHECK_STR(err_code_name((enum err_code)999), "internal");
	CHECK(err_code_status((enum err_code) - 1) == 500);
	enum err_code untouched = ERR_BUSY;
	CHECK(err_code_from_name("teapot", &untouched) == -1 && untouched == ERR_BUSY);
	CHECK(err_code_from_name("", &untouched) == -1);
}

/* Returns an owned string out of an AUTOFREE local. */
static char *xalloc_make(int n)
{
	AUTOFREE char *s = xasprintf("item-%d", n);
	return steal_pointer(&s);
}

TEST(steal_pointer_hands_off_and_leaves_null)
{
	char *s = xalloc_make(42);
	CHECK_STR(s, "item-42");
	free(s);

	AUTOFREE char *p = xstrdup("x");
	char *q = steal_pointer(&p);
	CHECK(p == NULL);
	CHECK_STR(q, "x");
	free(q);

	AUTOERR struct err *e = err_new(ERR_BUSY, "busy");
	struct err *kept = steal_pointer(&e);
	CHECK(e == NULL && kept->code == ERR_BUSY);
	err_free(kept);
}

TEST(xalloc_helpers_copy_and_format)
{
	AUTOFREE char *a = xstrndup("abcdef", 3);
	CHECK_STR(a, "abc");
	const char *two = "ab";
	AUTOFREE char *b = xstrndup(two, strlen(two) + 1);
	CHECK_STR(b, "ab");
	AUTOFREE char *c = xasprintf("%s=%d", "n", -1);
	CHECK_STR(c, "n=-1");
	AUTOFREE char *z = xmalloc(0); /* a real allocation, never NULL */
	CHECK(z != NULL);
	AUTOFREE int *v = xcalloc(4, sizeof(int));
	CHECK(v[0] == 0 && v[3] == 0);
	v = xrealloc(v, 8 * sizeof(int));
	v[7] = 7;
	CHECK(v[0] == 0 && v[7] == 7);
}
