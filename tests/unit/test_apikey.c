/* test_apikey.c: the key format, tenant names, the Bearer header, and the
 * lookup cache's expiry and bound. */
#include <stdio.h>
#include <string.h>

#include "apikey.h"
#include "apikey_cache.h"
#include "unit.h"

TEST(apikey_generate_has_the_shape_parse_accepts)
{
	char id[APIKEY_ID_LEN + 1], key[APIKEY_LEN + 1], sha[DIGEST_HEX_LEN + 1];
	apikey_generate(id, key, sha);
	CHECK(strlen(key) == APIKEY_LEN && key[APIKEY_ID_LEN] == '.');
	CHECK(apikey_id_valid(id) && strncmp(key, id, APIKEY_ID_LEN) == 0);
	CHECK(apikey_sha256_valid(sha));
	char pid[APIKEY_ID_LEN + 1];
	const char *secret = NULL;
	CHECK(apikey_parse(key, pid, &secret) == 0);
	CHECK_STR(pid, id);
	CHECK(secret == key + APIKEY_ID_LEN + 1 && strlen(secret) == APIKEY_SECRET_LEN);
	char again[DIGEST_HEX_LEN + 1];
	apikey_hash(secret, again);
	CHECK_STR(again, sha);
	/* The stored hash is of the secret, not of the whole key. */
	char whole[DIGEST_HEX_LEN + 1];
	digest_sha256_hex(key, strlen(key), whole);
	CHECK(strcmp(whole, sha) != 0);
	/* Two keys share nothing. */
	char id2[APIKEY_ID_LEN + 1], key2[APIKEY_LEN + 1], sha2[DIGEST_HEX_LEN + 1];
	apikey_generate(id2, key2, sha2);
	CHECK(strcmp(id, id2) != 0 && strcmp(key + 17, key2 + 17) != 0);
}

TEST(apikey_parse_refuses_what_is_not_a_key)
{
	char id[APIKEY_ID_LEN + 1];
	const char *secret;
	const char *good = "0123456789abcdef.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno-_";
	CHECK(strlen(good) == APIKEY_LEN);
	CHECK(apikey_parse(good, id, &secret) == 0);
	CHECK_STR(id, "0123456789abcdef");
	static const char *const bad[] = {
	    "",
	    "0123456789abcdef",
	    "0123456789abcdef.",
	    "0123456789ABCDEF.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno-_",  /* upper id */
	    "0123456789abcdeg.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno-_",  /* not hex */
	    "0123456789abcdef:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno-_",  /* separator */
	    "0123456789abcdef.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno+/",  /* base64, not url */
	    "0123456789abcdef.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno-",   /* short */
	    "0123456789abcdef.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno-_=", /* padded */
	    "0123456789abcdef.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn o-_",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(apikey_parse(bad[i], id, &secret) < 0);
	CHECK(apikey_parse(NULL, id, &secret) < 0);
}

TEST(apikey_tenant_names)
{
	CHECK(apikey_tenant_valid("acme"));
	CHECK(apikey_tenant_valid("0"));
	CHECK(apikey_tenant_valid("a-b_c9"));
	char max[APIKEY_TENANT_MAX + 2];
	memset(max, 'a', APIKEY_TENANT_MAX);
	max[APIKEY_TENANT_MAX] = '\0';
	CHECK(apikey_tenant_valid(max));
	max[APIKEY_TENANT_MAX] = 'a';
	max[APIKEY_TENANT_MAX + 1] = '\0';
	CHECK(!apikey_tenant_valid(max));
	static const char *const bad[] = {"", "-a", "_a", "Acme", "a b", "a.b", "a/b", "ä", "a\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!apikey_tenant_valid(bad[i]));
	CHECK(!apikey_tenant_valid(NULL));
}

TEST(apikey_bearer_header)
{
	char t[64];
	CHECK(apikey_bearer("Bearer abc", t, sizeof(t)) == 0);
	CHECK_STR(t, "abc");
	CHECK(apikey_bearer("bearer   abc  ", t, sizeof(t)) == 0);
	CHECK_STR(t, "abc");
	CHECK(apikey_bearer("BEARER\tabc", t, sizeof(t)) == 0);
	CHECK(apikey_bearer("Bearer", t, sizeof(t)) < 0);
	CHECK(apikey_bearer("Bearer ", t, sizeof(t)) < 0);
	CHECK(apikey_bearer("Bearerabc", t, sizeof(t)) < 0);
	CHECK(apikey_bearer("Basic abc", t, sizeof(t)) < 0);
	CHECK(apikey_bearer("Bearer a b", t, sizeof(t)) < 0);
	CHECK(apikey_bearer(NULL, t, sizeof(t)) < 0);
	char small[4];
	CHECK(apikey_bearer("Bearer abc", small, sizeof(small)) == 0);
	CHECK(apikey_bearer("Bearer abcd", small, sizeof(small)) < 0);
}

static const char *SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

TEST(apikey_cache_expires_entries_after_the_ttl)
{
	struct apikey_cache *kc = apikey_cache_new(8, 500);
	apikey_cache_put(kc, "0000000000000001", true, "acme", SHA, 1000);
	apikey_cache_put(kc, "0000000000000002", false, NULL, NULL, 1000);
	const struct apikey_entry *e = apikey_cache_get(kc, "0000000000000001", 1499);
	CHECK(e && e->found);
	CHECK_STR(e ? e->tenant : NULL, "acme");
	CHECK_STR(e ? e->sha256 : NULL, SHA);
	e = apikey_cache_get(kc, "0000000000000002", 1499);
	CHECK(e && !e->found && e->tenant[0] == '\0'); /* a negative entry */
	CHECK(apikey_cache_get(kc, "0000000000000003", 1000) == NULL);
	/* At ttl, trust ends, and the stale entry is gone. */
	CHECK(apikey_cache_get(kc, "0000000000000001", 1500) == NULL);
	CHECK(apikey_cache_size(kc) == 1);
	/* A clock that went back does not extend trust either. */
	CHECK(apikey_cache_get(kc, "0000000000000002", 999) == NULL);
	CHECK(apikey_cache_size(kc) == 0);
	/* A fresh answer replaces an old one and restarts its clock. */
	apikey_cache_put(kc, "0000000000000001", true, "acme", SHA, 2000);
	apikey_cache_put(kc, "0000000000000001", false, NULL, NULL, 2400);
	e = apikey_cache_get(kc, "0000000000000001", 2800);
	CHECK(e && !e->found);
	CHECK(apikey_cache_size(kc) == 1);
	apikey_cache_drop(kc, "0000000000000001");
	CHECK(apikey_cache_get(kc, "0000000000000001", 2800) == NULL);
	apikey_cache_drop(kc, "0000000000000001"); /* dropping nothing is fine */
	apikey_cache_free(kc);
	apikey_cache_free(NULL);
}

TEST(apikey_cache_is_bounded_and_evicts_the_oldest)
{
	struct apikey_cache *kc = apikey_cache_new(4, 500);
	char id[APIKEY_ID_LEN + 1];
	for (int i = 0; i < 10; i++) {
		snprintf(id, sizeof(id), "%016x", i);
		apikey_cache_put(kc, id, true, "t", SHA, 100 + i);
		CHECK(apikey_cache_size(kc) <= 4);
	}
	CHECK(apikey_cache_size(kc) == 4);
	for (int i = 0; i < 6; i++) {
		snprintf(id, sizeof(id), "%016x", i);
		CHECK(apikey_cache_get(kc, id, 200) == NULL);
	}
	for (int i = 6; i < 10; i++) {
		snprintf(id, sizeof(id), "%016x", i);
		CHECK(apikey_cache_get(kc, id, 200) != NULL);
	}
	/* Many more than it holds, with lookups and drops between: no growth. */
	for (int i = 0; i < 5000; i++) {
		snprintf(id, sizeof(id), "%016x", i * 7919);
		apikey_cache_put(kc, id, i % 3 != 0, "t", SHA, 1000 + i / 10);
		if (i % 5 == 0)
			apikey_cache_drop(kc, id);
		CHECK(apikey_cache_size(kc) <= 4);
	}
	apikey_cache_free(kc);
}
