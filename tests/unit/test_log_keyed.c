/* test_log_keyed.c: refusal lines rate-limited per session, with a count of
 * what was left out (log_keyed.h; issue 28 item 8). Pure: time is given. */
#include <stdio.h>

#include "log_keyed.h"
#include "unit.h"

TEST(log_keyed_limits_each_key_and_counts_what_it_left_out)
{
	struct log_keyed t = {0};
	uint32_t left = 99;
	int written = 0;
	/* A flood from one session: 10 lines per 10 s window, whatever comes. */
	for (int i = 0; i < 100000; i++)
		if (log_keyed_allow(&t, "s1", 1000 + i / 100, 10000, 10, &left)) {
			written++;
			CHECK(left == 0);
		}
	CHECK(written == 10);
	/* Another session is heard meanwhile: its own budget. */
	CHECK(log_keyed_allow(&t, "s2", 1500, 10000, 10, &left) && left == 0);
	/* The next window: s1's first line says how many were left out. */
	CHECK(log_keyed_allow(&t, "s1", 1000 + 10000, 10000, 10, &left));
	CHECK(left == 100000 - 10);
	CHECK(log_keyed_allow(&t, "s1", 1000 + 10001, 10000, 10, &left) && left == 0);
	/* The end of a session reports what its last window left out. */
	for (int i = 0; i < 50; i++)
		log_keyed_allow(&t, "s1", 12000, 10000, 10, &left);
	CHECK(log_keyed_forget(&t, "s1") == 50 - 8);
	CHECK(log_keyed_forget(&t, "s1") == 0);
	CHECK(log_keyed_forget(&t, "never") == 0);
	/* A forgotten key starts afresh. */
	CHECK(log_keyed_allow(&t, "s1", 12001, 10000, 10, &left) && left == 0);
	log_keyed_release(&t);
	CHECK(t.e == NULL && t.n == 0);
}

TEST(log_keyed_table_is_bounded_and_evicts_the_least_recent)
{
	struct log_keyed t = {0};
	uint32_t left;
	char key[32];
	for (int i = 0; i < LOG_KEYED_MAX; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		CHECK(log_keyed_allow(&t, key, 100 + i, 10000, 1, &left));
	}
	/* k0 is the least recent: it has 3 left out when a new key comes. */
	for (int i = 0; i < 3; i++)
		CHECK(!log_keyed_allow(&t, "k0", 100, 10000, 1, &left));
	for (int i = 1; i < LOG_KEYED_MAX; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		log_keyed_allow(&t, key, 5000, 10000, 1, &left);
	}
	CHECK(t.n == LOG_KEYED_MAX);
	CHECK(log_keyed_allow(&t, "new", 6000, 10000, 1, &left) && left == 0);
	CHECK(t.n == LOG_KEYED_MAX);
	CHECK(t.evicted_suppressed == 3);
	CHECK(log_keyed_forget(&t, "k0") == 0); /* gone */
	/* A key longer than the table keeps is still one key. */
	char long_key[200];
	memset(long_key, 'x', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	CHECK(log_keyed_allow(&t, long_key, 7000, 10000, 1, &left));
	CHECK(!log_keyed_allow(&t, long_key, 7001, 10000, 1, &left));
	CHECK(log_keyed_forget(&t, long_key) == 1);
	log_keyed_release(&t);
}
