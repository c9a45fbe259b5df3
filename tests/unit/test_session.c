/* test_session.c: create-request validation and session rules. */
#include <stdlib.h>
#include <string.h>

#include "api_requests.h"
#include "json.h"
#include "session.h"
#include "session_json.h"
#include "unit.h"

static struct config cfg;

static struct session *from(const char *body, struct err **e)
{
	static bool init;
	if (!init) {
		config_defaults(&cfg);
		init = true;
	}
	yajl_val v = body ? json_parse(body, strlen(body), e) : NULL;
	if (body && v == NULL)
		return NULL;
	struct session_request r;
	int rc = api_parse_session_request(v, &r, e);
	if (v)
		yajl_tree_free(v);
	if (rc < 0)
		return NULL;
	struct session *s = session_from_request(&r, &cfg, "default", e);
	session_request_release(&r);
	return s;
}

TEST(session_defaults_from_config)
{
	struct err *e = NULL;
	struct session *s = from(NULL, &e);
	CHECK(s != NULL);
	CHECK_STR(s->image, "python");
	CHECK(s->limits.memory_mb == 512 && s->limits.pids == 128 &&
	      s->limits.exec_timeout_s == 60);
	CHECK(s->idle_timeout_s == 600);
	CHECK(s->state == SESSION_STARTING);
	session_free(s);
}

TEST(session_full_request)
{
	struct err *e = NULL;
	struct session *s =
	    from("{\"image\":\"python\",\"idle_timeout_s\":3,\"limits\":{\"memory_mb\":256,"
		 "\"cpus\":0.5,\"pids\":64,\"disk_mb\":100,\"exec_timeout_s\":10},"
		 "\"network\":{\"allow\":[\"api.example.com:443\",\"*.example.org\"]},"
		 "\"env\":{\"FOO\":\"bar\"},\"metadata\":{\"owner\":\"agent-7\"}}",
		 &e);
	CHECK(s != NULL);
	if (s == NULL) {
		fprintf(stderr, "  %s\n", e->message);
		err_free(e);
		return;
	}
	CHECK(s->idle_timeout_s == 3);
	CHECK(s->limits.memory_mb == 256 && s->limits.cpus == 0.5 && s->limits.disk_mb == 100);
	CHECK(s->n_allow == 2);
	CHECK(s->n_env == 1 && strcmp(s->env[0].key, "FOO") == 0);
	CHECK(s->n_metadata == 1);
	session_free(s);
}

static void expect_bad(const char *body, const char *needle)
{
	struct err *e = NULL;
	struct session *s = from(body, &e);
	CHECK(s == NULL);
	CHECK(e != NULL && e->code == ERR_BAD_REQUEST);
	if (e && strstr(e->message, needle) == NULL) {
		fprintf(stderr, "  message '%s' lacks '%s'\n", e->message, needle);
		unit_failures_in_test++;
	}
	session_free(s);
	err_free(e);
}

TEST(session_rejects_bad_requests)
{
	expect_bad("[]", "expected a JSON object");
	expect_bad("{\"image\":5}", "image: expected a string");
	expect_bad("{\"image\":\"ruby\"}", "unknown image");
	expect_bad("{\"idle_timeout_s\":\"10\"}", "expected an integer");
	expect_bad("{\"idle_timeout_s\":0}", "below the minimum");
	expect_bad("{\"limits\":{\"memory_mb\":999999}}", "exceeds the server maximum 4096");
	expect_bad("{\"limits\":{\"cpus\":64}}", "exceeds the server maximum");
	expect_bad("{\"limits\":{\"memroy_mb\":1}}", "unknown field 'memroy_mb'");
	expect_bad("{\"limits\":[]}", "limits: expected an object");
	expect_bad("{\"network\":{\"allow\":\"x\"}}", "expected an array");
	expect_bad("{\"network\":{\"allow\":[\"bad host\"]}}", "is not HOST");
	expect_bad("{\"network\":{\"allow\":[\"a.com:99999\"]}}", "is not HOST");
	expect_bad("{\"env\":{\"1X\":\"y\"}}", "invalid name");
	expect_bad("{\"env\":{\"SANDBOX_IPC\":\"/x\"}}", "invalid name");
	expect_bad("{\"env\":{\"A\":1}}", "expected a string");
	expect_bad("{\"bogus\":1}", "unknown field 'bogus'");
}

TEST(session_ids)
{
	char id[SESSION_ID_LEN + 1], id2[SESSION_ID_LEN + 1];
	session_new_id(id);
	session_new_id(id2);
	CHECK(session_id_valid(id));
	CHECK(strcmp(id, id2) != 0);
	CHECK(!session_id_valid("../x"));
	CHECK(!session_id_valid(""));
	CHECK(!session_id_valid("ABCDEF00-0000-0000-0000-000000000000"));
	CHECK(!session_id_valid("0000000000000000000000000000000000000"));
	CHECK(session_id_valid("abcdef00-0000-4000-8000-000000000000"));
}

TEST(session_exec_rules_and_clock)
{
	struct err *e = NULL;
	struct session *s = from("{\"idle_timeout_s\":5}", &e);
	strcpy(s->id, "abcdef00-0000-4000-8000-000000000000");
	CHECK(session_check_exec(s, &e) < 0 && e->code == ERR_BUSY); /* starting */
	err_free(e);
	e = NULL;
	s->state = SESSION_READY;
	CHECK(session_check_exec(s, &e) == 0);
	s->state = SESSION_BUSY;
	CHECK(session_check_exec(s, &e) < 0 && e->code == ERR_BUSY);
	err_free(e);
	e = NULL;
	s->state = SESSION_EXPIRED;
	CHECK(session_check_exec(s, &e) < 0 && e->code == ERR_EXPIRED);
	err_free(e);
	session_touch(s, 1000);
	CHECK(s->last_active_at_ms == 1000 && s->expires_at_ms == 6000);
	session_free(s);
}

TEST(session_json_hides_env_in_api_view)
{
	struct err *e = NULL;
	struct session *s = from("{\"env\":{\"SECRET\":\"x\"}}", &e);
	strcpy(s->id, "abcdef00-0000-4000-8000-000000000000");
	s->node = strdup("n");
	AUTOGEN yajl_gen g = json_gen_new();
	session_to_json(s, g, false);
	size_t len;
	const char *t = jg_text(g, &len);
	CHECK(strstr(t, "SECRET") == NULL);
	CHECK(strstr(t, "\"state\":\"starting\"") != NULL);
	CHECK(strstr(t, "\"expires_at\":\"1970-01-01T00:00:00.000Z\"") != NULL);
	AUTOGEN yajl_gen g2 = json_gen_new();
	session_to_json(s, g2, true);
	CHECK(strstr(jg_text(g2, &len), "SECRET") != NULL);
	session_free(s);
}

TEST(session_record_roundtrip)
{
	struct err *e = NULL;
	struct session *s =
	    from("{\"idle_timeout_s\":30,\"limits\":{\"memory_mb\":256,\"cpus\":0.5},"
		 "\"network\":{\"allow\":[\"a.example:443\"]},\"env\":{\"K\":\"v\"},"
		 "\"metadata\":{\"m\":\"x\"}}",
		 &e);
	strcpy(s->id, "abcdef00-0000-4000-8000-000000000000");
	s->node = strdup("n1");
	s->container_id = strdup("c0ffee");
	strcpy(s->net_ip, "172.18.0.2");
	s->uid = 200001;
	s->created_at_ms = 1000;
	session_touch(s, 2000);
	AUTOGEN yajl_gen g = json_gen_new();
	session_to_json(s, g, true);
	size_t len;
	const char *t = jg_text(g, &len);
	struct session *r = session_from_record(t, len, &e);
	CHECK(r != NULL);
	if (r) {
		CHECK_STR(r->id, s->id);
		CHECK_STR(r->container_id, "c0ffee");
		CHECK_STR(r->net_ip, "172.18.0.2");
		CHECK(r->idle_timeout_s == 30 && r->limits.memory_mb == 256 &&
		      r->limits.cpus == 0.5);
		CHECK(r->expires_at_ms == 32000 && r->created_at_ms == 1000);
		CHECK(r->n_allow == 1 && r->n_env == 1 && r->n_metadata == 1);
		CHECK(r->state == SESSION_READY);
		CHECK(r->uid == 200001);
	}
	session_free(r);
	/* A record without its sandbox's uid cannot be adopted: the socket
	 * would be made for the wrong user. */
	s->uid = 0;
	yajl_gen_clear(g);
	yajl_gen_reset(g, NULL);
	session_to_json(s, g, true);
	t = jg_text(g, &len);
	CHECK(session_from_record(t, len, &e) == NULL);
	err_free(e);
	e = NULL;
	session_free(s);
	CHECK(session_from_record("{\"id\":\"../x\"}", 13, &e) == NULL);
	err_free(e);
}

TEST(session_lifetime_caps_the_idle_clock)
{
	struct err *e = NULL;
	struct session *s = from("{\"idle_timeout_s\":600,\"max_lifetime_s\":10}", &e);
	CHECK(s != NULL && s->max_lifetime_s == 10);
	s->created_at_ms = 0;
	session_touch(s, 1000);
	CHECK(s->expires_at_ms == 10000);
	CHECK(session_lifetime_bound(s));
	s->max_lifetime_s = 86400;
	session_touch(s, 1000);
	CHECK(s->expires_at_ms == 601000);
	CHECK(!session_lifetime_bound(s));
	session_free(s);
	expect_bad("{\"max_lifetime_s\":999999999}", "exceeds the server maximum");
}

TEST(exec_request_refuses_a_nul_in_the_code)
{
	/* The tree's strings end at a NUL: code with one would run cut short. */
	static const char *const bad[] = {
	    "{\"code\": \"print(1)\\u0000print(2)\"}",
	    "{\"code\": \"\\\\\\u0000\"}", /* an escaped backslash, then the escape */
	};
	static const char *const good[] = {
	    "{\"code\": \"print('\\\\u0000')\"}", /* a backslash, then the text u0000 */
	    "{\"code\": \"x = '\\u0001'\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct exec_request r;
		struct err *e = NULL;
		CHECK(api_parse_exec_request(bad[i], strlen(bad[i]), false, &r, &e) < 0);
		CHECK(e && e->code == ERR_BAD_REQUEST && strstr(e->message, "NUL"));
		err_free(e);
		exec_request_release(&r);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct exec_request r;
		struct err *e = NULL;
		CHECK(api_parse_exec_request(good[i], strlen(good[i]), false, &r, &e) == 0);
		CHECK(e == NULL);
		exec_request_release(&r);
	}
}

TEST(exec_request_language)
{
	/* Python is the default and is never named to the kernel (its frame
	 * stays as it was); the others are kept as the static names. */
	static const struct {
		const char *body;
		const char *want;
	} good[] = {
	    {"{\"code\": \"1\"}", NULL},
	    {"{\"code\": \"1\", \"language\": \"python\"}", NULL},
	    {"{\"code\": \"1\", \"language\": \"javascript\"}", "javascript"},
	    {"{\"code\": \"ls\", \"language\": \"bash\"}", "bash"},
	    {"{\"code\": \"1\", \"language\": null}", NULL}, /* null: the default */
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct exec_request r;
		struct err *e = NULL;
		CHECK(api_parse_exec_request(good[i].body, strlen(good[i].body), i % 2, &r, &e) ==
		      0);
		CHECK(e == NULL);
		if (good[i].want)
			CHECK(r.language && strcmp(r.language, good[i].want) == 0);
		else
			CHECK(r.language == NULL);
		exec_request_release(&r);
	}
	static const char *const bad[] = {
	    "{\"code\": \"1\", \"language\": \"cobol\"}",
	    "{\"code\": \"1\", \"language\": \"Python\"}",
	    "{\"code\": \"1\", \"language\": \"\"}",
	    "{\"code\": \"1\", \"language\": 3}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct exec_request r;
		struct err *e = NULL;
		CHECK(api_parse_exec_request(bad[i], strlen(bad[i]), false, &r, &e) < 0);
		CHECK(e && e->code == ERR_BAD_REQUEST && strstr(e->message, "language") &&
		      strstr(e->message, "javascript") && strstr(e->message, "bash"));
		err_free(e);
		exec_request_release(&r);
	}
}

TEST(session_durable_fields)
{
	struct err *e = NULL;
	struct session *s = from("{\"workspace\":\"report-1\",\"persist\":{\"paths\":[\"*.csv\","
				 "\"out/**\"],\"variables\":false}}",
				 &e);
	CHECK(s != NULL);
	if (s == NULL) {
		fprintf(stderr, "  %s\n", e->message);
		err_free(e);
		return;
	}
	CHECK_STR(s->workspace, "report-1");
	CHECK(s->persist.set && s->persist.n_paths == 2 && !s->persist.variables &&
	      s->persist.on_end);
	/* The record keeps them for the daemon that adopts the session. */
	strcpy(s->id, "abcdef00-0000-4000-8000-000000000000");
	s->node = strdup("n1");
	s->uid = 200001;
	AUTOGEN yajl_gen g = json_gen_new();
	session_to_json(s, g, true);
	size_t len;
	const char *t = jg_text(g, &len);
	struct session *r = session_from_record(t, len, &e);
	CHECK(r != NULL);
	if (r) {
		CHECK_STR(session_workspace_name(r), "report-1");
		CHECK(r->persist.set && r->persist.n_paths == 2 && !r->persist.variables &&
		      r->persist.on_end);
		CHECK_STR(r->persist.paths[1], "out/**");
	}
	session_free(r);
	session_free(s);
	/* Without a name, the workspace is the session's id. */
	s = from("{}", &e);
	strcpy(s->id, "abcdef00-0000-4000-8000-000000000001");
	CHECK_STR(session_workspace_name(s), s->id);
	CHECK(!s->persist.set);
	session_free(s);
	static const char *const bad[] = {
	    "{\"workspace\":\".hidden\"}",
	    "{\"workspace\":\"a/b\"}",
	    "{\"workspace\":\"\"}",
	    "{\"workspace\":7}",
	    "{\"restore\":\"abcdef00-0000-4000-8000-000000000000\",\"workspace\":\"w\"}",
	    "{\"persist\":{\"paths\":[\"../x\"]}}",
	    "{\"persist\":{\"paths\":[\"/etc/*\"]}}",
	    "{\"persist\":{\"paths\":[\"\"]}}",
	    "{\"persist\":{\"paths\":\"*.csv\"}}",
	    "{\"persist\":{\"on_end\":\"yes\"}}",
	    "{\"persist\":{\"keep\":true}}",
	    "{\"persist\":[]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e = NULL;
		s = from(bad[i], &e);
		CHECK(s == NULL);
		if (s) {
			fprintf(stderr, "  accepted: %s\n", bad[i]);
			session_free(s);
		}
		CHECK(e != NULL && e->code == ERR_BAD_REQUEST);
		err_free(e);
	}
}
