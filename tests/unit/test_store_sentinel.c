/* test_store_sentinel.c: sentinel:// URLs and the master addresses a
 * sentinel gives (store_sentinel.c's pure half). */
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "unit.h"

static int parse(const char *url, struct store_sentinel_url *u)
{
	struct err *e = NULL;
	int rc = store_sentinel_parse_url(url, u, &e);
	if (rc < 0) {
		CHECK(e != NULL && strstr(e->message, "redis url") != NULL);
		CHECK(u->n == 0 && u->master == NULL);
	}
	err_free(e);
	return rc;
}

TEST(sentinel_url_forms)
{
	struct store_sentinel_url u;
	CHECK(parse("sentinel://127.0.0.1:26379,127.0.0.1:26380,localhost/mymaster/3", &u) == 0);
	CHECK(u.n == 3);
	CHECK_STR(u.host[0], "127.0.0.1");
	CHECK(u.port[0] == 26379 && u.port[1] == 26380 && u.port[2] == 26379);
	CHECK_STR(u.host[2], "localhost");
	CHECK_STR(u.master, "mymaster");
	CHECK(u.db == 3);
	store_sentinel_url_clear(&u);
	CHECK(parse("sentinel://[::1]:5000/m.a-s_t", &u) == 0);
	CHECK(u.n == 1 && u.port[0] == 5000 && u.db == 0);
	CHECK_STR(u.host[0], "::1");
	CHECK_STR(u.master, "m.a-s_t");
	store_sentinel_url_clear(&u);
	CHECK(parse("sentinel://h:1/m/", &u) == 0);
	CHECK(u.db == 0);
	store_sentinel_url_clear(&u);
}

TEST(sentinel_url_rejects)
{
	struct store_sentinel_url u;
	static const char *const bad[] = {
	    "sentinel://",           "sentinel:///m",         "sentinel://h:1",
	    "sentinel://h:1/",       "sentinel://h:0/m",      "sentinel://h:65536/m",
	    "sentinel://h:/m",       "sentinel://h:x/m",      "sentinel://h:1x/m",
	    "sentinel://h:-1/m",     "sentinel://h:1,/m",     "sentinel://,h:1/m",
	    "sentinel://h:1,,h:2/m", "sentinel://:1/m",       "sentinel://[::1/m",
	    "sentinel://[::1]x/m",   "sentinel://h h:1/m",    "sentinel://h:1/m m",
	    "sentinel://h:1/m/x",    "sentinel://h:1/m/1001", "sentinel://h:1/m/-1",
	    "sentinel://h:1/m/1/2",  "sentinel://h:1/m*",     "redis://h:1/m",
	    "sentinel://h@x:1/m",    "sentinel://h:1/m/+1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &u) == 0) {
			fprintf(stderr, "accepted: %s\n", bad[i]);
			CHECK(0);
			store_sentinel_url_clear(&u);
		}
	}
	/* 17 sentinels: one too many. */
	char url[512] = "sentinel://";
	for (int i = 0; i < STORE_SENTINELS_MAX + 1; i++)
		strcat(url, i ? ",h:1" : "h:1");
	strcat(url, "/m");
	CHECK(parse(url, &u) < 0);
	char name[128];
	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	char long_url[256];
	snprintf(long_url, sizeof(long_url), "sentinel://h:1/%s", name);
	CHECK(parse(long_url, &u) < 0);
}

static int addr(const char *h, const char *p, char out[STORE_SENTINEL_ADDR_MAX], int *port)
{
	return store_sentinel_check_addr(h, strlen(h), p, strlen(p), out, port);
}

TEST(sentinel_master_address_is_checked)
{
	char out[STORE_SENTINEL_ADDR_MAX];
	int port = 0;
	CHECK(addr("127.0.0.1", "6380", out, &port) == 0);
	CHECK_STR(out, "127.0.0.1");
	CHECK(port == 6380);
	CHECK(addr("::1", "1", out, &port) == 0 && port == 1);
	CHECK_STR(out, "::1");
	static const char *const bad_host[] = {
	    "",          "redis.example", "127.0.0.1 ", "0.0.0.0",        "255.255.255.255",
	    "::",        "224.0.0.1",     "ff02::1",    "127.0.0.1:6379", "1.2.3",
	    "1.2.3.4.5", "../../etc",
	};
	for (size_t i = 0; i < sizeof(bad_host) / sizeof(bad_host[0]); i++)
		CHECK(addr(bad_host[i], "6379", out, &port) < 0);
	static const char *const bad_port[] = {"",   "0",     "65536", "-1",
					       "+1", "63 79", "6379x", "99999999"};
	for (size_t i = 0; i < sizeof(bad_port) / sizeof(bad_port[0]); i++)
		CHECK(addr("127.0.0.1", bad_port[i], out, &port) < 0);
	/* Not NUL-terminated, and a NUL inside. */
	CHECK(store_sentinel_check_addr("127.0.0.1XX", 9, "6379Z", 4, out, &port) == 0);
	CHECK_STR(out, "127.0.0.1");
	CHECK(port == 6379);
	CHECK(store_sentinel_check_addr("127.0.0.1\0x", 11, "6379", 4, out, &port) < 0);
	char big[200];
	memset(big, '1', sizeof(big));
	CHECK(store_sentinel_check_addr(big, sizeof(big), "1", 1, out, &port) < 0);
	CHECK(store_sentinel_check_addr("127.0.0.1", 9, big, sizeof(big), out, &port) < 0);
}
