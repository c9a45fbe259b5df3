/* test_cluster_pick.c: the cluster's pure parts (cluster.h): a heartbeat's
 * parse (from Redis: outside input), the pick of the node a new session goes
 * to, and the URL a node advertises. */
#include <string.h>

#include "cluster.h"
#include "unit.h"

static struct cluster_node node(const char *name, int64_t room, bool live, bool draining,
				const char *url)
{
	struct cluster_node n;
	memset(&n, 0, sizeof(n));
	snprintf(n.name, sizeof(n.name), "%s", name);
	snprintf(n.url, sizeof(n.url), "%s", url);
	n.room = room;
	n.live = live;
	n.draining = draining;
	return n;
}

TEST(cluster_pick_most_room_not_self)
{
	struct cluster_node v[] = {
	    node("a", 50, true, false, "http://127.0.0.1:1"),
	    node("b", 3, true, false, "http://127.0.0.1:2"),
	    node("c", 7, true, false, "http://127.0.0.1:3"),
	};
	size_t asked;
	CHECK(cluster_pick(v, 3, "a", &asked) == 2); /* c: a is self, whatever its room */
	CHECK(asked == 2);
	CHECK(cluster_pick(v, 3, "c", &asked) == 0);
}

TEST(cluster_pick_skips_lost_draining_full_and_unreachable)
{
	struct cluster_node v[] = {
	    node("self", 0, true, false, "http://127.0.0.1:1"),
	    node("lost", 99, false, false, "http://127.0.0.1:2"),
	    node("draining", 98, true, true, "http://127.0.0.1:3"),
	    node("full", 0, true, false, "http://127.0.0.1:4"),
	    node("nourl", 97, true, false, ""),
	};
	size_t asked;
	CHECK(cluster_pick(v, 5, "self", &asked) == -1);
	CHECK(asked == 3); /* the live peers: draining, full, nourl */
	v[3].room = 1;
	CHECK(cluster_pick(v, 5, "self", &asked) == 3);
	CHECK(cluster_pick(v, 0, "self", &asked) == -1 && asked == 0);
}

TEST(cluster_pick_ties_by_name)
{
	struct cluster_node v[] = {
	    node("z", 5, true, false, "http://127.0.0.1:1"),
	    node("m", 5, true, false, "http://127.0.0.1:2"),
	    node("q", 5, true, false, "http://127.0.0.1:3"),
	};
	size_t asked;
	CHECK(cluster_pick(v, 3, "x", &asked) == 1);
}

#define HB(extra)                                                                               \
	"{\"node\":\"b\",\"url\":\"http://127.0.0.1:8081\",\"sessions\":2,\"max_sessions\":5,"  \
	"\"room\":3,\"pool_ready\":1,\"draining\":false,\"started_ms\":10,\"heartbeat_ms\":20," \
	"\"version\":\"0.1.0\"" extra "}"

TEST(cluster_node_parse_good)
{
	struct cluster_node n;
	struct err *e = NULL;
	const char *j = HB("");
	CHECK(cluster_node_parse(j, strlen(j), &n, &e) == 0);
	CHECK_STR(n.name, "b");
	CHECK_STR(n.url, "http://127.0.0.1:8081");
	CHECK(n.sessions == 2 && n.max_sessions == 5 && n.room == 3 && n.pool_ready == 1);
	CHECK(!n.draining && n.live && n.started_ms == 10 && n.heartbeat_ms == 20);
	CHECK_STR(n.version, "0.1.0");
	err_free(e);
}

TEST(cluster_node_parse_refuses_bad_shapes)
{
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{}",
	    "{\"node\":\"\",\"url\":\"\"}",
	    "{\"node\":\"a b\",\"url\":\"\",\"sessions\":0,\"max_sessions\":1,\"room\":1,"
	    "\"pool_ready\":0,\"draining\":false,\"started_ms\":1,\"heartbeat_ms\":1}",
	    "{\"node\":\"a\",\"url\":\"ftp://x:1\",\"sessions\":0,\"max_sessions\":1,\"room\":1,"
	    "\"pool_ready\":0,\"draining\":false,\"started_ms\":1,\"heartbeat_ms\":1}",
	    "{\"node\":\"a\",\"url\":\"\",\"sessions\":-1,\"max_sessions\":1,\"room\":1,"
	    "\"pool_ready\":0,\"draining\":false,\"started_ms\":1,\"heartbeat_ms\":1}",
	    "{\"node\":\"a\",\"url\":\"\",\"sessions\":0,\"max_sessions\":1,\"room\":\"1\","
	    "\"pool_ready\":0,\"draining\":false,\"started_ms\":1,\"heartbeat_ms\":1}",
	    "{\"node\":\"a\",\"url\":\"\",\"sessions\":0,\"max_sessions\":1,\"room\":1,"
	    "\"pool_ready\":0,\"draining\":1,\"started_ms\":1,\"heartbeat_ms\":1}",
	    "{\"node\":\"a\",\"url\":\"\",\"sessions\":0,\"max_sessions\":1,\"room\":1,"
	    "\"pool_ready\":0,\"draining\":false,\"started_ms\":1}",
	    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cluster_node n;
		struct err *e = NULL;
		CHECK(cluster_node_parse(bad[i], strlen(bad[i]), &n, &e) == -1);
		CHECK(e != NULL);
		err_free(e);
	}
	char big[5000];
	memset(big, ' ', sizeof(big));
	struct cluster_node n;
	struct err *e = NULL;
	CHECK(cluster_node_parse(big, sizeof(big), &n, &e) == -1);
	err_free(e);
	/* A name as long as the cap is fine; one more is not. */
	char j[512];
	snprintf(j, sizeof(j), HB(",\"x\":1"));
	e = NULL;
	CHECK(cluster_node_parse(j, strlen(j), &n, &e) == 0); /* unknown members are ignored */
	err_free(e);
}

TEST(cluster_advertise_url_derivation)
{
	char u[300];
	cluster_advertise_url("https://a.test:9", "127.0.0.1:8080", false, u, sizeof(u));
	CHECK_STR(u, "https://a.test:9");
	cluster_advertise_url("", "127.0.0.1:8080", false, u, sizeof(u));
	CHECK_STR(u, "http://127.0.0.1:8080");
	cluster_advertise_url("", "host.test:443", true, u, sizeof(u));
	CHECK_STR(u, "https://host.test:443");
	cluster_advertise_url("", "[::1]:8080", false, u, sizeof(u));
	CHECK_STR(u, "http://[::1]:8080");
	static const char *const none[] = {"0.0.0.0:8080", "[::]:8080", ":8080",
					   "unix:/run/ci.sock", "nocolon"};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		cluster_advertise_url(NULL, none[i], false, u, sizeof(u));
		CHECK_STR(u, "");
	}
}
