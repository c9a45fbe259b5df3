/* test_fdbudget.c: the descriptor budget, the log rate limiter and the
 * listeners' backoff (pure logic), and the /proc/self/fd count. */
#include <fcntl.h>
#include <unistd.h>

#include "fdbudget.h"
#include "listen_guard.h"
#include "log.h"
#include "unit.h"

TEST(fdbudget_without_a_limit_refuses_nothing)
{
	struct fdbudget b;
	fdbudget_init(&b, 0, 64);
	CHECK(fdbudget_take(&b, FDBUDGET_HTTP, 100000));
	CHECK(fdbudget_take(&b, FDBUDGET_EGRESS, 100000));
	CHECK(fdbudget_session_fits(&b));
	CHECK(fdbudget_counted(&b) == 200000);
}

TEST(fdbudget_tunnels_stop_before_api_connections_and_the_reserve_is_kept)
{
	struct fdbudget b;
	fdbudget_init(&b, 1024, 64);
	int64_t margin = fdbudget_margin(&b);
	CHECK(margin == (1024 - 64) / 16);
	/* Tunnels (two descriptors each) until the margin is all that is left. */
	int tunnels = 0;
	while (fdbudget_take(&b, FDBUDGET_EGRESS, 2))
		tunnels++;
	CHECK(tunnels == (1024 - 64 - margin) / 2);
	CHECK(b.refused[FDBUDGET_EGRESS] == 1);
	CHECK(!fdbudget_session_fits(&b));
	CHECK(b.refused[FDBUDGET_KINDS] == 1);
	/* API connections still get the margin, and not one more. */
	int conns = 0;
	while (fdbudget_take(&b, FDBUDGET_HTTP, 1))
		conns++;
	CHECK(conns == margin);
	CHECK(fdbudget_counted(&b) == 1024 - 64);
	/* IPC of existing sessions is counted, never refused. */
	CHECK(fdbudget_take(&b, FDBUDGET_IPC, 2));
	fdbudget_charge(&b, FDBUDGET_IPC, 3);
	CHECK(b.used[FDBUDGET_IPC] == 5);
	/* Closing tunnels gives room back, to sessions too. */
	fdbudget_give(&b, FDBUDGET_IPC, 5);
	for (int i = 0; i < 20; i++)
		fdbudget_give(&b, FDBUDGET_EGRESS, 2);
	CHECK(fdbudget_take(&b, FDBUDGET_HTTP, 1));
	fdbudget_give(&b, FDBUDGET_HTTP, 1 + conns);
	CHECK(fdbudget_session_fits(&b));
	CHECK(fdbudget_room(&b, FDBUDGET_EGRESS) == 40);
}

TEST(fdbudget_give_never_goes_below_zero)
{
	struct fdbudget b;
	fdbudget_init(&b, 100, 16);
	fdbudget_give(&b, FDBUDGET_HTTP, 5);
	CHECK(b.used[FDBUDGET_HTTP] == 0);
	CHECK(fdbudget_room(&b, FDBUDGET_HTTP) == 100 - 16);
}

TEST(fdbudget_uncounted_descriptors_grow_the_reserve)
{
	struct fdbudget b;
	fdbudget_init(&b, 1024, 64);
	CHECK(fdbudget_take(&b, FDBUDGET_HTTP, 100));
	/* 20 uncounted: within the reserve, nothing changes. */
	fdbudget_observe(&b, 120);
	CHECK(b.other == 20);
	CHECK(fdbudget_room(&b, FDBUDGET_HTTP) == 1024 - 100 - 64);
	CHECK(fdbudget_in_use(&b) == 120);
	/* 300 uncounted (curl connections piling up, a leak): the reserve
	 * covers them, plus the slack they may grow by meanwhile. */
	fdbudget_observe(&b, 400);
	CHECK(b.other == 300);
	CHECK(fdbudget_room(&b, FDBUDGET_HTTP) == 1024 - 100 - 300 - FDBUDGET_SLACK);
	/* Counters ahead of the measurement never make "other" negative. */
	fdbudget_observe(&b, 50);
	CHECK(b.other == 0);
	/* A failed count changes nothing. */
	fdbudget_observe(&b, 400);
	fdbudget_observe(&b, -1);
	CHECK(b.other == 300);
}

TEST(fdbudget_emfile_means_full_until_measured_again)
{
	struct fdbudget b;
	fdbudget_init(&b, 1024, 64);
	CHECK(fdbudget_take(&b, FDBUDGET_EGRESS, 200));
	fdbudget_exhausted(&b);
	CHECK(fdbudget_in_use(&b) == 1024);
	CHECK(!fdbudget_take(&b, FDBUDGET_HTTP, 1));
	CHECK(!fdbudget_take(&b, FDBUDGET_EGRESS, 2));
	CHECK(!fdbudget_session_fits(&b));
	fdbudget_observe(&b, 230);
	CHECK(fdbudget_take(&b, FDBUDGET_HTTP, 1));
	/* A limit lowered from outside (prlimit) below what is open. */
	fdbudget_set_limit(&b, 150);
	CHECK(!fdbudget_take(&b, FDBUDGET_HTTP, 1));
	CHECK(fdbudget_room(&b, FDBUDGET_HTTP) < 0);
}

TEST(fdbudget_margin_is_bounded)
{
	struct fdbudget b;
	fdbudget_init(&b, 128, 64);
	CHECK(fdbudget_margin(&b) == 16);
	fdbudget_init(&b, 1 << 20, 64);
	CHECK(fdbudget_margin(&b) == 1024);
}

TEST(fdbudget_counts_open_descriptors)
{
	int64_t before = fdbudget_count_open();
	CHECK(before >= 3);
	int fds[5];
	for (int i = 0; i < 5; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fdbudget_count_open() == before + 5);
	for (int i = 0; i < 5; i++)
		close(fds[i]);
	CHECK(fdbudget_count_open() == before);
}

TEST(log_limit_allows_a_burst_per_window_then_counts)
{
	struct log_limit ll = {0};
	uint32_t sup = 99;
	for (int i = 0; i < 5; i++) {
		CHECK(log_limit_allow(&ll, 1000 + i, 10000, 5, &sup));
		CHECK(sup == 0);
	}
	for (int i = 0; i < 1000; i++)
		CHECK(!log_limit_allow(&ll, 2000 + i, 10000, 5, &sup));
	CHECK(ll.suppressed == 1000);
	/* Still inside the window: dropped. */
	CHECK(!log_limit_allow(&ll, 10999, 10000, 5, &sup));
	/* The next window: logged, with the count of what was dropped. */
	CHECK(log_limit_allow(&ll, 11000, 10000, 5, &sup));
	CHECK(sup == 1001);
	CHECK(log_limit_allow(&ll, 11001, 10000, 5, &sup));
	CHECK(sup == 0);
	/* Call sites keep their own state. */
	struct log_limit other = {0};
	CHECK(log_limit_allow(&other, 11002, 10000, 5, &sup) && sup == 0);
}

TEST(log_limit_window_starts_at_the_first_line)
{
	struct log_limit ll = {0};
	uint32_t sup;
	/* A clock that starts near zero (a fresh boot) still opens a window. */
	CHECK(log_limit_allow(&ll, 0, 10000, 1, &sup));
	CHECK(!log_limit_allow(&ll, 1, 10000, 1, &sup));
	CHECK(log_limit_allow(&ll, 10000, 10000, 1, &sup) && sup == 1);
}

TEST(listen_guard_backoff_doubles_to_a_second_and_resets)
{
	CHECK(listen_guard_next_backoff(0, INT64_MAX) == LISTEN_GUARD_MIN_MS);
	int64_t b = LISTEN_GUARD_MIN_MS, seen = 0;
	for (int i = 0; i < 20; i++) {
		b = listen_guard_next_backoff(b, 5);
		seen = b > seen ? b : seen;
	}
	CHECK(b == LISTEN_GUARD_MAX_MS && seen == LISTEN_GUARD_MAX_MS);
	CHECK(listen_guard_next_backoff(20, 5) == 40);
	/* An error long after the last resume starts small again. */
	CHECK(listen_guard_next_backoff(LISTEN_GUARD_MAX_MS, 5000) == LISTEN_GUARD_MIN_MS);
}
