/* test_quota.c: quota names, overrides parsed from JSON (and refused with
 * the member named), merging over the flags, and the Retry-After
 * estimates. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json.h"
#include "apikey.h"
#include "quota.h"
#include "unit.h"

static int parse(const char *text, struct quota_override *o, char *msg, size_t msize)
{
	struct err *e = NULL;
	int rc = quota_override_parse(text, strlen(text), o, &e);
	if (msg)
		snprintf(msg, msize, "%s", e ? e->message : "");
	if (e)
		CHECK(e->code == ERR_BAD_REQUEST);
	err_free(e);
	return rc;
}

TEST(quota_names_round_trip)
{
	for (int i = 0; i < QUOTA_COUNT; i++) {
		enum quota_name n;
		const char *s = quota_name((enum quota_name)i);
		CHECK(quota_lookup(s, strlen(s), &n) == 0 && n == (enum quota_name)i);
	}
	enum quota_name n;
	CHECK(quota_lookup("session", 7, &n) < 0);
	CHECK(quota_lookup("sessionsX", 9, &n) < 0);
	CHECK(quota_lookup("", 0, &n) < 0);
	CHECK_STR(quota_name(QUOTA_EXEC_SECONDS_PER_HOUR), "exec_seconds_per_hour");
	CHECK_STR(quota_name(QUOTA_COUNT), "?");
}

TEST(quota_override_parses_known_names)
{
	struct quota_override o;
	CHECK(parse("{\"sessions\":10,\"memory_mb\":0,\"requests_per_second\":5}", &o, NULL, 0) ==
	      0);
	CHECK(o.set == ((1u << QUOTA_SESSIONS) | (1u << QUOTA_MEMORY_MB) |
			(1u << QUOTA_REQUESTS_PER_SECOND)));
	CHECK(o.v[QUOTA_SESSIONS] == 10 && o.v[QUOTA_MEMORY_MB] == 0 &&
	      o.v[QUOTA_REQUESTS_PER_SECOND] == 5);
	CHECK(parse("{}", &o, NULL, 0) == 0 && o.set == 0);
}

TEST(quota_override_refuses_and_names_the_member)
{
	struct quota_override o;
	char msg[512];
	CHECK(parse("{\"sessions\":1,\"bogus\":2}", &o, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "bogus") != NULL);
	CHECK(o.set == 0 && o.v[QUOTA_SESSIONS] == 0); /* all or nothing */
	CHECK(parse("{\"executions\":-1}", &o, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "executions") != NULL);
	CHECK(parse("{\"memory_mb\":1.5}", &o, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "memory_mb") != NULL);
	CHECK(parse("{\"memory_mb\":\"5\"}", &o, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "memory_mb") != NULL);
	CHECK(parse("{\"sessions\":null}", &o, msg, sizeof(msg)) < 0);
	CHECK(parse("{\"sessions\":1000000001}", &o, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "sessions") != NULL);
	CHECK(parse("{\"sessions\":99999999999999999999999}", &o, NULL, 0) < 0);
	CHECK(parse("[1]", &o, NULL, 0) < 0);
	CHECK(parse("5", &o, NULL, 0) < 0);
	CHECK(parse("", &o, NULL, 0) < 0);
	CHECK(parse("{\"sessions\":1", &o, NULL, 0) < 0);
	/* A failed parse leaves nothing set. */
	CHECK(o.set == 0);
}

TEST(quota_merge_override_beats_the_flag)
{
	struct config cfg;
	config_defaults(&cfg);
	struct quota d, q;
	quota_from_config(&cfg, &d);
	for (int i = 0; i < QUOTA_SNAPSHOT_KEEP; i++)
		CHECK(d.v[i] == 0); /* the defaults: unlimited, as before quotas */
	/* The retention limits default to their flags. */
	CHECK(d.v[QUOTA_SNAPSHOT_KEEP] == 50 && d.v[QUOTA_SNAPSHOT_MAX_AGE_S] == 2592000);
	cfg.quota_sessions = 3;
	cfg.quota_requests_per_second = 7;
	quota_from_config(&cfg, &d);
	quota_merge(&d, NULL, &q);
	CHECK(q.v[QUOTA_SESSIONS] == 3 && q.v[QUOTA_REQUESTS_PER_SECOND] == 7);
	struct quota_override o;
	CHECK(parse("{\"sessions\":0,\"executions\":2}", &o, NULL, 0) == 0);
	quota_merge(&d, &o, &q);
	CHECK(q.v[QUOTA_SESSIONS] == 0); /* 0 in the override: unlimited */
	CHECK(q.v[QUOTA_EXECUTIONS] == 2);
	CHECK(q.v[QUOTA_REQUESTS_PER_SECOND] == 7); /* not in the override: the flag */
	config_free(&cfg);
}

TEST(quota_json_shapes)
{
	struct quota_override o;
	CHECK(parse("{\"executions\":2}", &o, NULL, 0) == 0);
	AUTOGEN yajl_gen g = json_gen_new();
	quota_override_to_json(&o, g);
	size_t len;
	CHECK_STR(jg_text(g, &len), "{\"executions\":2}");
	struct quota q = {{1, 2, 3, 4, 5, 6, 7, 8, 1, 10}};
	AUTOGEN yajl_gen g2 = json_gen_new();
	quota_to_json(&q, g2);
	CHECK_STR(jg_text(g2, &len),
		  "{\"sessions\":1,\"executions\":2,\"memory_mb\":3,\"exec_seconds_per_hour\":4,"
		  "\"requests_per_second\":5,\"disk_mb\":6,\"snapshot_keep\":7,"
		  "\"snapshot_max_age_s\":8,\"stateless\":true,\"stateless_runs\":10}");
	/* What quota_override_to_json writes parses back to the same. */
	struct quota_override back;
	const char *text = jg_text(g, &len);
	CHECK(quota_override_parse(text, len, &back, NULL) == 0);
	CHECK(back.set == o.set && back.v[QUOTA_EXECUTIONS] == 2);
}

TEST(quota_stateless_is_a_boolean)
{
	struct quota_override o;
	struct err *e = NULL;
	CHECK(quota_override_parse("{\"stateless\":false,\"stateless_runs\":2}", 38, &o, NULL) ==
	      0);
	CHECK(o.set == ((1u << QUOTA_STATELESS) | (1u << QUOTA_STATELESS_RUNS)));
	CHECK(o.v[QUOTA_STATELESS] == 0 && o.v[QUOTA_STATELESS_RUNS] == 2);
	AUTOGEN yajl_gen g = json_gen_new();
	quota_override_to_json(&o, g);
	size_t len;
	CHECK_STR(jg_text(g, &len), "{\"stateless\":false,\"stateless_runs\":2}");
	/* An integer is not a permission, nor a permission a count. */
	CHECK(quota_override_parse("{\"stateless\":1}", 15, &o, &e) < 0);
	CHECK(e && strstr(e->message, "true or false"));
	err_free(e);
	e = NULL;
	CHECK(quota_override_parse("{\"stateless_runs\":true}", 23, &o, &e) < 0);
	err_free(e);
	/* The flags' defaults: allowed, one run at a time. */
	struct config cfg;
	config_defaults(&cfg);
	struct quota q;
	quota_from_config(&cfg, &q);
	CHECK(q.v[QUOTA_STATELESS] == 1 && q.v[QUOTA_STATELESS_RUNS] == 1);
	config_free(&cfg);
}

TEST(quota_burst_and_retry_after)
{
	CHECK(quota_burst(0) == 1);
	CHECK(quota_burst(1) == 2);
	CHECK(quota_burst(50) == 100);
	/* Whole seconds, at least one, rounded up. */
	CHECK(quota_retry_after_ms(-5) == 1);
	CHECK(quota_retry_after_ms(0) == 1);
	CHECK(quota_retry_after_ms(1) == 1);
	CHECK(quota_retry_after_ms(1000) == 1);
	CHECK(quota_retry_after_ms(1001) == 2);
	CHECK(quota_retry_after_ms(3599999) == 3600);
	CHECK(quota_retry_after_ms(INT64_MAX) == 86400);
	/* A bucket: an empty bucket at 1/s is a second away; at 1 per s with
	 * a quarter token, 750 ms, which is one whole second. */
	CHECK(quota_retry_after_bucket(0, 1) == 1);
	CHECK(quota_retry_after_bucket(250, 1) == 1);
	CHECK(quota_retry_after_bucket(-3000, 1) == 1);
	CHECK(quota_retry_after_bucket(999, 1000) == 1);
	CHECK(quota_retry_after_bucket(5000, 3) == 1);
	CHECK(quota_retry_after_bucket(0, 0) == 1);
}

TEST(quota_tenant_names)
{
	CHECK(apikey_tenant_valid("default"));
	CHECK(apikey_tenant_valid("a"));
	CHECK(apikey_tenant_valid("acme-1_b"));
	CHECK(apikey_tenant_valid("0abc"));
	char long_ok[64], too_long[65];
	memset(long_ok, 'a', 63);
	long_ok[63] = '\0';
	memset(too_long, 'a', 64);
	too_long[64] = '\0';
	CHECK(apikey_tenant_valid(long_ok));
	CHECK(!apikey_tenant_valid(too_long));
	CHECK(!apikey_tenant_valid(""));
	CHECK(!apikey_tenant_valid(NULL));
	CHECK(!apikey_tenant_valid("-abc"));
	CHECK(!apikey_tenant_valid("_abc"));
	CHECK(!apikey_tenant_valid("Acme"));
	CHECK(!apikey_tenant_valid("a.b"));
	CHECK(!apikey_tenant_valid("a/b"));
	CHECK(!apikey_tenant_valid("a b"));
	CHECK(!apikey_tenant_valid("a%2fb"));
	CHECK(!apikey_tenant_valid("caf\xc3\xa9"));
}
