/* test_netpolicy.c: allowlist matching and address classes of the egress proxy. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "netpolicy.h"
#include "unit.h"

static bool allowed(const char *host, int port)
{
	char *allow[] = {"api.example.com:443", "*.example.org", "10.1.2.3:8080", "[::1]:9000",
			 "exact.test"};
	return netpolicy_allowed(allow, 5, host, port);
}

TEST(netpolicy_matches_names_ports_and_suffixes)
{
	CHECK(allowed("api.example.com", 443));
	CHECK(!allowed("api.example.com", 80));
	CHECK(!allowed("evil-api.example.com", 443));
	CHECK(allowed("a.example.org", 443));
	CHECK(allowed("a.b.example.org", 80));
	CHECK(!allowed("example.org", 443));  /* the suffix itself is not below it */
	CHECK(!allowed("a.example.org", 22)); /* no port: 80 and 443 only */
	CHECK(!allowed("aexample.org", 443));
	CHECK(allowed("10.1.2.3", 8080));
	CHECK(!allowed("10.1.2.3", 8081));
	CHECK(allowed("::1", 9000));
	CHECK(allowed("EXACT.test", 80));
	CHECK(!allowed("exact.test.evil.com", 80));
}

TEST(netpolicy_splits_authorities)
{
	char host[256];
	int port;
	struct err *e = NULL;
	CHECK(netpolicy_split("Example.COM.:8443", 443, host, sizeof(host), &port, &e) == 0);
	CHECK_STR(host, "example.com");
	CHECK(port == 8443);
	CHECK(netpolicy_split("[2001:db8::1]:443", 80, host, sizeof(host), &port, &e) == 0);
	CHECK_STR(host, "2001:db8::1");
	CHECK(netpolicy_split("x.test", 80, host, sizeof(host), &port, &e) == 0 && port == 80);
	CHECK(netpolicy_split("x.test:0", 80, host, sizeof(host), &port, &e) < 0);
	err_free(e);
	e = NULL;
	CHECK(netpolicy_split("bad host:80", 80, host, sizeof(host), &port, &e) < 0);
	err_free(e);
	e = NULL;
	CHECK(netpolicy_split("user@x.test:80", 80, host, sizeof(host), &port, &e) < 0);
	err_free(e);
}

static enum addr_class v4(const char *ip)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	inet_pton(AF_INET, ip, &sa.sin_addr);
	return netpolicy_classify((struct sockaddr *)&sa);
}

static enum addr_class v6(const char *ip)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
	inet_pton(AF_INET6, ip, &sa.sin6_addr);
	return netpolicy_classify((struct sockaddr *)&sa);
}

TEST(netpolicy_classifies_addresses)
{
	CHECK(v4("127.0.0.1") == ADDR_LOOPBACK);
	CHECK(v4("10.0.0.1") == ADDR_PRIVATE);
	CHECK(v4("172.16.5.4") == ADDR_PRIVATE);
	CHECK(v4("172.32.0.1") == ADDR_PUBLIC);
	CHECK(v4("192.168.1.1") == ADDR_PRIVATE);
	CHECK(v4("100.64.0.1") == ADDR_PRIVATE);
	CHECK(v4("169.254.169.254") == ADDR_LINK_LOCAL); /* cloud metadata */
	CHECK(v4("0.0.0.0") == ADDR_SPECIAL);
	CHECK(v4("224.0.0.1") == ADDR_SPECIAL);
	CHECK(v4("8.8.8.8") == ADDR_PUBLIC);
	CHECK(v6("::1") == ADDR_LOOPBACK);
	CHECK(v6("fe80::1") == ADDR_LINK_LOCAL);
	CHECK(v6("fd00::1") == ADDR_PRIVATE);
	CHECK(v6("::ffff:127.0.0.1") == ADDR_LOOPBACK); /* mapped v4 is judged as v4 */
	CHECK(v6("::ffff:169.254.169.254") == ADDR_LINK_LOCAL);
	CHECK(v6("2001:4860::1") == ADDR_PUBLIC);
}
