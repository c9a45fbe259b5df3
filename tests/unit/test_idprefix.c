/* test_idprefix.c: ci-ctl's docker-style id prefixes (lib/idprefix.c). */
#include "idprefix.h"
#include "unit.h"

static const char *const ids[] = {
    "3f2a9c10-0000-4000-8000-000000000001", "3f2b0000-0000-4000-8000-000000000002",
    "a0000000-0000-4000-8000-000000000003",
    NULL, /* a listing entry without an id is skipped, never matched */
};

TEST(idprefix_unique_prefix_names_one_session)
{
	size_t out[4];

	CHECK(idprefix_match("3f2a", ids, 4, out, 4) == 1 && out[0] == 0);
	CHECK(idprefix_match("a", ids, 4, out, 4) == 1 && out[0] == 2);
}

TEST(idprefix_ambiguous_prefix_names_every_candidate)
{
	size_t out[4];

	CHECK(idprefix_match("3f2", ids, 4, out, 4) == 2 && out[0] == 0 && out[1] == 1);
	/* more matches than room: the count is still the whole */
	CHECK(idprefix_match("3f", ids, 4, out, 1) == 2 && out[0] == 0);
}

TEST(idprefix_full_id_wins_and_no_match_is_none)
{
	static const char *const nested[] = {"ab", "abc"};
	size_t out[2];

	CHECK(idprefix_match("ab", nested, 2, out, 2) == 1 && out[0] == 0);
	CHECK(idprefix_match("abc", nested, 2, out, 2) == 1 && out[0] == 1);
	CHECK(idprefix_match("b", ids, 4, out, 2) == 0);
	CHECK(idprefix_match("", ids, 4, out, 2) == 0);
	CHECK(idprefix_match("3f2a9c10-0000-4000-8000-0000000000019", ids, 4, out, 2) == 0);
}
