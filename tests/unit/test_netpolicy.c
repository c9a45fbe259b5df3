/* test_netpolicy.c: allowlist matching and address classes of the egress proxy. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

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

/* Finding 4: an IPv6 address that carries an IPv4 address is judged by it. */
TEST(netpolicy_classifies_embedded_ipv4_in_every_form)
{
	/* IPv4-mapped */
	CHECK(v6("::ffff:10.0.0.1") == ADDR_PRIVATE);
	CHECK(v6("::ffff:8.8.8.8") == ADDR_PUBLIC);
	/* IPv4-translated (SIIT) and IPv4-compatible: by the IPv4 address, else special */
	CHECK(v6("::ffff:0:127.0.0.1") == ADDR_LOOPBACK);
	CHECK(v6("::ffff:0:8.8.8.8") == ADDR_SPECIAL);
	CHECK(v6("::127.0.0.1") == ADDR_LOOPBACK);
	CHECK(v6("::169.254.169.254") == ADDR_LINK_LOCAL);
	CHECK(v6("::8.8.8.8") == ADDR_SPECIAL);
	CHECK(v6("::") == ADDR_SPECIAL);
	/* NAT64, well-known prefix */
	CHECK(v6("64:ff9b::127.0.0.1") == ADDR_LOOPBACK);
	CHECK(v6("64:ff9b::a00:1") == ADDR_PRIVATE);
	CHECK(v6("64:ff9b::169.254.169.254") == ADDR_LINK_LOCAL);
	CHECK(v6("64:ff9b::8.8.8.8") == ADDR_PUBLIC);
	/* NAT64 local-use: the IPv4 address sits where the operator chose */
	CHECK(v6("64:ff9b:1::8.8.8.8") == ADDR_PRIVATE);
	CHECK(v6("64:ff9b:1:abcd::1") == ADDR_PRIVATE);
	/* 6to4 */
	CHECK(v6("2002:7f00:1::1") == ADDR_LOOPBACK);
	CHECK(v6("2002:a9fe:a9fe::1") == ADDR_LINK_LOCAL);
	CHECK(v6("2002:c0a8:101::1") == ADDR_PRIVATE);
	CHECK(v6("2002:808:808::1") == ADDR_PUBLIC);
	/* ISATAP interface ids */
	CHECK(v6("2a00:1450::5efe:10.1.2.3") == ADDR_PRIVATE);
	CHECK(v6("2a00:1450::200:5efe:127.0.0.1") == ADDR_LOOPBACK);
	/* Teredo and the rest of 2001::/23, documentation, reserved space */
	CHECK(v6("2001:0:4136:e378:8000:63bf:3fff:fdd2") == ADDR_SPECIAL);
	CHECK(v6("2001:2::1") == ADDR_SPECIAL);
	CHECK(v6("2001:db8::1") == ADDR_SPECIAL);
	CHECK(v6("3fff::1") == ADDR_SPECIAL);
	CHECK(v6("100::1") == ADDR_SPECIAL);
	CHECK(v6("4000::1") == ADDR_SPECIAL);
	CHECK(v6("fec0::1") == ADDR_SPECIAL);
	CHECK(v6("ff02::1") == ADDR_SPECIAL);
	/* IPv4 special-purpose blocks */
	CHECK(v4("192.0.2.1") == ADDR_SPECIAL);
	CHECK(v4("198.51.100.1") == ADDR_SPECIAL);
	CHECK(v4("203.0.113.1") == ADDR_SPECIAL);
	CHECK(v4("255.255.255.255") == ADDR_SPECIAL);
	CHECK(v4("192.88.99.1") == ADDR_SPECIAL);
}

static struct sockaddr_storage ss(const char *ip)
{
	struct sockaddr_storage s;
	memset(&s, 0, sizeof(s));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&s;
		s6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, ip, &s6->sin6_addr);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&s;
		s4->sin_family = AF_INET;
		inet_pton(AF_INET, ip, &s4->sin_addr);
	}
	return s;
}

static const char *refusal(const char *ip, int port)
{
	/* A host with a public IPv4 and a public IPv6 address of its own, and
	 * an operator who trusted one local server. */
	struct sockaddr_storage own[] = {ss("8.8.4.4"), ss("2a00:1450::1"), ss("127.0.0.1")};
	struct netpolicy_trusted trusted[] = {{ss("127.0.0.1"), 8080}, {ss("::ffff:10.9.9.9"), 0}};
	struct sockaddr_storage dst = ss(ip);
	return netpolicy_refusal((struct sockaddr *)&dst, port, trusted, 2, own, 3);
}

TEST(netpolicy_refuses_the_hosts_own_addresses_in_every_form)
{
	CHECK(refusal("1.1.1.1", 443) == NULL);
	CHECK(refusal("2a00:1450::2", 443) == NULL);
	CHECK_STR(refusal("8.8.4.4", 443), "one of this host's own");
	/* the finding: the mapped form of the host's address passed */
	CHECK_STR(refusal("::ffff:8.8.4.4", 443), "one of this host's own");
	CHECK_STR(refusal("64:ff9b::8.8.4.4", 443), "one of this host's own");
	CHECK_STR(refusal("2002:808:404::1", 443), "one of this host's own");
	CHECK_STR(refusal("2a00:1450::5efe:8.8.4.4", 443), "one of this host's own");
	CHECK_STR(refusal("2a00:1450::1", 443), "one of this host's own");
	CHECK_STR(refusal("::8.8.4.4", 443), "special-purpose");
	CHECK_STR(refusal("64:ff9b::7f00:1", 443), "loopback");
	CHECK_STR(refusal("::ffff:169.254.169.254", 80), "link-local");
}

TEST(netpolicy_trusted_list_matches_the_address_and_its_mapped_form_only)
{
	CHECK(refusal("127.0.0.1", 8080) == NULL);
	CHECK(refusal("::ffff:127.0.0.1", 8080) == NULL); /* the same destination */
	CHECK_STR(refusal("127.0.0.1", 8081), "loopback");
	/* NAT64 and 6to4 lead to a translator or relay, not to the trusted server */
	CHECK_STR(refusal("64:ff9b::127.0.0.1", 8080), "loopback");
	CHECK_STR(refusal("2002:7f00:1::1", 8080), "loopback");
	/* a trusted entry written in mapped form is its IPv4 address */
	CHECK(refusal("10.9.9.9", 5432) == NULL);
	CHECK(refusal("::ffff:10.9.9.9", 5432) == NULL);
	CHECK_STR(refusal("64:ff9b::a09:909", 5432), "private");
}

TEST(netpolicy_embedded_v4_and_canonical_form)
{
	struct sockaddr_storage a = ss("::ffff:1.2.3.4"), c;
	struct in_addr v4;
	CHECK(netpolicy_embedded_v4((struct sockaddr *)&a, &v4) && ntohl(v4.s_addr) == 0x01020304);
	netpolicy_canonical((struct sockaddr *)&a, &c);
	CHECK(c.ss_family == AF_INET &&
	      ntohl(((struct sockaddr_in *)&c)->sin_addr.s_addr) == 0x01020304);
	a = ss("2002:102:304::");
	CHECK(netpolicy_embedded_v4((struct sockaddr *)&a, &v4) && ntohl(v4.s_addr) == 0x01020304);
	netpolicy_canonical((struct sockaddr *)&a, &c);
	CHECK(c.ss_family == AF_INET6); /* 6to4 is another destination: kept */
	a = ss("2a00:1450::1");
	CHECK(!netpolicy_embedded_v4((struct sockaddr *)&a, &v4));
}

/* Finding 10: IPv4 literals are canonical or refused, by name. */
TEST(netpolicy_host_kinds)
{
	CHECK(netpolicy_host_kind("127.0.0.1") == NETPOLICY_IPV4);
	CHECK(netpolicy_host_kind("0.0.0.0") == NETPOLICY_IPV4);
	CHECK(netpolicy_host_kind("255.255.255.255") == NETPOLICY_IPV4);
	CHECK(netpolicy_host_kind("::1") == NETPOLICY_IPV6);
	CHECK(netpolicy_host_kind("api.example.com") == NETPOLICY_NAME);
	CHECK(netpolicy_host_kind("1e100.net") == NETPOLICY_NAME);
	CHECK(netpolicy_host_kind("0x7f.example") == NETPOLICY_NAME);
	const char *ambiguous[] = {"0177.0.0.1", "127.1",      "127.0.1",    "0x7f.1",
				   "0x7f.0.0.1", "2130706433", "0x7f000001", "017700000001",
				   "127.0.0.01", "1.2.3.4.5",  "256.1.1.1",  "1.2.3.999",
				   "foo.123",    "foo.0x10",   "0x",         "1..2.3"};
	for (size_t i = 0; i < sizeof(ambiguous) / sizeof(ambiguous[0]); i++) {
		if (netpolicy_host_kind(ambiguous[i]) != NETPOLICY_AMBIGUOUS)
			fprintf(stderr, "  not ambiguous: %s\n", ambiguous[i]);
		CHECK(netpolicy_host_kind(ambiguous[i]) == NETPOLICY_AMBIGUOUS);
	}
	CHECK(netpolicy_host_kind("zz::zz") == NETPOLICY_INVALID);
}

static const char *entry_error(const char *entry)
{
	static char msg[512];
	struct err *e = NULL;
	if (netpolicy_check_entry(entry, &e) == 0)
		return NULL;
	snprintf(msg, sizeof(msg), "%s", e->message);
	err_free(e);
	return msg;
}

TEST(netpolicy_checks_allowlist_entries)
{
	const char *good[] = {"api.example.com", "api.example.com:443",
			      "*.example.org",   "*.example.org:8443",
			      "10.1.2.3",        "10.1.2.3:8080",
			      "[::1]",           "[2001:4860::1]:443",
			      "localhost",       "a-b.test"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *m = entry_error(good[i]);
		if (m)
			fprintf(stderr, "  %s: %s\n", good[i], m);
		CHECK(m == NULL);
	}
	const char *ambiguous[] = {"0177.0.0.1",     "127.1",    "0x7f.1",   "2130706433",
				   "0177.0.0.1:443", "127.1:80", "010.1.2.3"};
	for (size_t i = 0; i < sizeof(ambiguous) / sizeof(ambiguous[0]); i++) {
		const char *m = entry_error(ambiguous[i]);
		CHECK(m && strstr(m, "ambiguous IPv4 literal") && strstr(m, ambiguous[i]));
	}
	const char *bad[] = {
	    "",    "bad host", "a.com:99999", "a.com:+80",   "*.0.0.1", "*.1.2.3.4",
	    "*.",  "a..b",     ".a.com",      "a.com.",      "a_b.com", "[zz]",
	    "::1", "[::1",     "1.2.3.4.",    "*.a.com.:80", "x:80:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *m = entry_error(bad[i]);
		if (m == NULL)
			fprintf(stderr, "  accepted: '%s'\n", bad[i]);
		CHECK(m != NULL);
	}
}

TEST(netpolicy_wildcards_never_match_ip_literals)
{
	char *allow[] = {"*.0.1", "*.example.org", "[::ffff:10.1.2.3]:8080"};
	CHECK(!netpolicy_allowed(allow, 3, "127.0.0.1", 80)); /* the entry is refused too */
	CHECK(!netpolicy_allowed(allow, 3, "10.0.0.1", 443));
	CHECK(netpolicy_allowed(allow, 3, "a.example.org", 443));
	/* IP literals compare as addresses: the mapped entry is its IPv4 address */
	CHECK(netpolicy_allowed(allow, 3, "10.1.2.3", 8080));
	CHECK(netpolicy_allowed(allow, 3, "::ffff:10.1.2.3", 8080));
	/* a request for an ambiguous literal matches nothing */
	char *lit[] = {"127.0.0.1:80"};
	CHECK(netpolicy_allowed(lit, 1, "127.0.0.1", 80));
	CHECK(!netpolicy_allowed(lit, 1, "127.1", 80));
	CHECK(!netpolicy_allowed(lit, 1, "0177.0.0.1", 80));
	CHECK(!netpolicy_allowed(lit, 1, "2130706433", 80));
	/* a name is never an address, nor an address a name */
	char *mixed[] = {"localhost:80", "10.1.2.3"};
	CHECK(!netpolicy_allowed(mixed, 2, "127.0.0.1", 80));
	CHECK(netpolicy_allowed(mixed, 2, "localhost", 80));
}
