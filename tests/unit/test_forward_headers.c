/* test_forward_headers.c: what a forwarded call carries to the owner and
 * back (forward_headers.h): hop-by-hop and our own headers stay behind,
 * the ones a client acts on come back, the owner's status and header
 * lines are read strictly, X-Forwarded-For and the owner's URL. */
#include <stdlib.h>

#include "forward_headers.h"
#include "unit.h"

TEST(forward_drops_hop_by_hop)
{
	const char *drop[] = {"Connection",        "keep-alive",     "TE",    "Trailer",
			      "Transfer-Encoding", "Upgrade",        "Host",  "Proxy-Authorization",
			      "proxy-connection",  "Content-Length", "Expect"};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		CHECK(forward_headers_drop_request(drop[i], NULL));
	const char *keep[] = {"Authorization", "Content-Type", "Accept",  "User-Agent",
			      "X-Custom",      "Proxy",        "Hostname"};
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		CHECK(!forward_headers_drop_request(keep[i], NULL));
}

TEST(forward_drops_what_connection_names)
{
	CHECK(forward_headers_drop_request("X-Secret-Hop", "keep-alive, X-Secret-Hop"));
	CHECK(forward_headers_drop_request("x-secret-hop", " X-Secret-Hop ,close"));
	CHECK(!forward_headers_drop_request("X-Secret", "X-Secret-Hop"));
	CHECK(!forward_headers_drop_request("Authorization", "close"));
	CHECK(!forward_headers_drop_request("Authorization", ""));
}

TEST(forward_drops_a_clients_own_cluster_headers)
{
	/* A client's token or claims never reach the owner: the proxy sets them. */
	CHECK(forward_headers_drop_request("X-CI-Cluster-Token", NULL));
	CHECK(forward_headers_drop_request("x-ci-cluster-token", NULL));
	CHECK(forward_headers_drop_request("X-CI-Forwarded-By", NULL));
	CHECK(forward_headers_drop_request("X-Forwarded-For", NULL));
	CHECK(forward_headers_drop_request("X-Request-Id", NULL));
	CHECK(forward_headers_drop_request("traceparent", NULL));
	CHECK(!forward_headers_drop_request("X-CI-Other", NULL));
}

TEST(forward_keeps_what_a_client_acts_on)
{
	const char *keep[] = {"Retry-After",        "allow",         "Location",
			      "WWW-Authenticate",   "Cache-Control", "X-CI-Node",
			      "Content-Disposition"};
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		CHECK(forward_headers_keep_response(keep[i]));
	const char *drop[] = {
	    "Connection",   "Transfer-Encoding",  "Keep-Alive", "X-Request-Id", "Content-Length",
	    "Content-Type", "X-CI-Cluster-Token", "Set-Cookie", "Server",       "Date"};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		CHECK(!forward_headers_keep_response(drop[i]));
}

TEST(forward_status_line)
{
	CHECK(forward_headers_status("HTTP/1.1 200 OK\r\n", 17) == 200);
	CHECK(forward_headers_status("HTTP/1.0 404 Not Found\r\n", 24) == 404);
	CHECK(forward_headers_status("HTTP/1.1 100 Continue\r\n", 23) == 100);
	CHECK(forward_headers_status("HTTP/1.1 204\r\n", 14) == 204);
	CHECK(forward_headers_status("HTTP/1.1 2000 OK\r\n", 18) == -1);
	CHECK(forward_headers_status("HTTP/1.1 099 x\r\n", 16) == -1);
	CHECK(forward_headers_status("HTTP/1.1 600 x\r\n", 16) == -1);
	CHECK(forward_headers_status("HTTP/2 200\r\n", 12) == -1);
	CHECK(forward_headers_status("HTTP/1.1 2x0 OK\r\n", 17) == -1);
	CHECK(forward_headers_status("garbage\r\n", 9) == -1);
	CHECK(forward_headers_status("HTTP/1.1 20", 11) == -1);
}

TEST(forward_header_split)
{
	char name[64];
	const char *v;
	size_t vl;
	const char *l = "Retry-After:  7 \r\n";
	CHECK(forward_headers_split(l, strlen(l), name, sizeof(name), &v, &vl) == 0);
	CHECK_STR(name, "Retry-After");
	CHECK(vl == 1 && v[0] == '7');
	l = "Empty:\r\n";
	CHECK(forward_headers_split(l, strlen(l), name, sizeof(name), &v, &vl) == 0);
	CHECK(vl == 0);
	l = "no colon here\r\n";
	CHECK(forward_headers_split(l, strlen(l), name, sizeof(name), &v, &vl) == -1);
	l = ": no name\r\n";
	CHECK(forward_headers_split(l, strlen(l), name, sizeof(name), &v, &vl) == -1);
	l = "Bad Name: x\r\n";
	CHECK(forward_headers_split(l, strlen(l), name, sizeof(name), &v, &vl) == -1);
	l = "X: a\rb\r\n"; /* a bare CR inside a value is not passed on */
	CHECK(forward_headers_split(l, strlen(l), name, sizeof(name), &v, &vl) == -1);
	char big[200];
	memset(big, 'A', sizeof(big));
	memcpy(big + 150, ": v\r\n", 5);
	CHECK(forward_headers_split(big, 155, name, sizeof(name), &v, &vl) == -1);
}

TEST(forward_xff)
{
	char out[128];
	forward_headers_xff(NULL, "127.0.0.1:4567", out, sizeof(out));
	CHECK_STR(out, "127.0.0.1");
	forward_headers_xff("10.9.8.7", "127.0.0.1:4567", out, sizeof(out));
	CHECK_STR(out, "10.9.8.7, 127.0.0.1");
	forward_headers_xff("", "[::1]:80", out, sizeof(out));
	CHECK_STR(out, "::1");
	forward_headers_xff(NULL, "unix", out, sizeof(out));
	CHECK_STR(out, "unknown");
	forward_headers_xff(NULL, "", out, sizeof(out));
	CHECK_STR(out, "unknown");
	/* A chain too long for out is dropped, never our address at its end. */
	char small[24];
	forward_headers_xff("a-very-long-chain-of-addresses", "127.0.0.1:1", small, sizeof(small));
	CHECK_STR(small, "127.0.0.1");
}

TEST(forward_url)
{
	char *u = forward_headers_url("http://127.0.0.1:8080/", "/v1/sessions/x/exec", "");
	CHECK_STR(u, "http://127.0.0.1:8080/v1/sessions/x/exec");
	free(u);
	u = forward_headers_url("https://b.test:9", "/v1/sessions/x/files/a%20b", "wait_s=1");
	CHECK_STR(u, "https://b.test:9/v1/sessions/x/files/a%20b?wait_s=1");
	free(u);
	u = forward_headers_url("http://h//", "/p", NULL);
	CHECK_STR(u, "http://h/p");
	free(u);
}
