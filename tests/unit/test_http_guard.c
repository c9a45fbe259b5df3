/* test_http_guard.c: the Origin, Host and Content-Type rules a request
 * meets before the API looks at it (http_guard.h; issue 28 item 2). */
#include "http_guard.h"
#include "unit.h"

TEST(http_guard_origin_list_is_exact)
{
	const char *list = "http://localhost:6274, https://ui.example ,";
	CHECK(http_guard_origin_listed(list, "http://localhost:6274"));
	CHECK(http_guard_origin_listed(list, "HTTPS://UI.EXAMPLE"));
	CHECK(!http_guard_origin_listed(list, "http://localhost:627"));
	CHECK(!http_guard_origin_listed(list, "http://localhost:62740"));
	CHECK(!http_guard_origin_listed(list, "https://ui.example.evil.test"));
	CHECK(!http_guard_origin_listed(list, "null"));
	CHECK(!http_guard_origin_listed(list, ""));
	CHECK(!http_guard_origin_listed("", "http://localhost:6274"));
	CHECK(!http_guard_origin_listed(NULL, "http://localhost:6274"));
	CHECK(!http_guard_origin_listed(list, NULL));
}

TEST(http_guard_own_origin_is_the_host)
{
	CHECK(http_guard_origin_is_host("http://127.0.0.1:8080", "127.0.0.1:8080"));
	CHECK(http_guard_origin_is_host("https://ci.test", "CI.test"));
	CHECK(!http_guard_origin_is_host("http://127.0.0.1:8081", "127.0.0.1:8080"));
	CHECK(!http_guard_origin_is_host("http://evil.test", "127.0.0.1:8080"));
	CHECK(!http_guard_origin_is_host("null", "null"));
	CHECK(!http_guard_origin_is_host("ftp://127.0.0.1:8080", "127.0.0.1:8080"));
	CHECK(!http_guard_origin_is_host("http://", ""));
	CHECK(!http_guard_origin_is_host("http://x", NULL));
}

TEST(http_guard_loopback_hosts)
{
	static const char *const yes[] = {"127.0.0.1",  "127.0.0.1:8080",       "127.1.2.3:1",
					  "localhost",  "LocalHost:65535",      "[::1]",
					  "[::1]:8080", "[::ffff:127.0.0.1]:80"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		CHECK(http_guard_host_is_loopback(yes[i]));
	static const char *const no[] = {"",
					 "evil.test",
					 "evil.test:8080",
					 "localhost.evil.test",
					 "127.0.0.1.evil.test",
					 "10.0.0.1:8080",
					 "128.0.0.1",
					 "0x7f.0.0.1",
					 "127.1",
					 "2130706433",
					 "[::2]:80",
					 "[::1",
					 "[::1]x",
					 "localhost:",
					 "localhost:123456",
					 "localhost:80x",
					 "127.0.0.1:8080:1",
					 "[fe80::1]:80",
					 "localhost.",
					 "0.0.0.0:8080"};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (http_guard_host_is_loopback(no[i])) {
			fprintf(stderr, "  %s was taken for loopback\n", no[i]);
			CHECK(false);
		}
	CHECK(!http_guard_host_is_loopback(NULL));
}

TEST(http_guard_json_content_type)
{
	CHECK(http_guard_content_type_is_json("application/json"));
	CHECK(http_guard_content_type_is_json("application/json; charset=utf-8"));
	CHECK(http_guard_content_type_is_json("Application/JSON;charset=UTF-8"));
	CHECK(http_guard_content_type_is_json("application/json ; charset=utf-8"));
	CHECK(!http_guard_content_type_is_json(NULL));
	CHECK(!http_guard_content_type_is_json(""));
	CHECK(!http_guard_content_type_is_json("text/plain"));
	CHECK(!http_guard_content_type_is_json("text/plain; x=application/json"));
	CHECK(!http_guard_content_type_is_json("application/x-www-form-urlencoded"));
	CHECK(!http_guard_content_type_is_json("multipart/form-data; boundary=x"));
	CHECK(!http_guard_content_type_is_json("application/jsonx"));
	CHECK(!http_guard_content_type_is_json("application/json-seq"));
}
