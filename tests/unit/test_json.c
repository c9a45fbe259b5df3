/* test_json.c: bounded parsing and UTF-8-safe generation. */
#include <stdlib.h>

#include "json.h"
#include "unit.h"

TEST(json_parses_object_and_getters)
{
	struct err *e = NULL;
	const char *doc = "{\"a\":\"x\",\"n\":42,\"f\":1.5}";
	yajl_val v = json_parse(doc, strlen(doc), &e);
	CHECK(v != NULL);
	CHECK_STR(json_get_str(v, "a"), "x");
	int64_t n = 0;
	CHECK(json_get_int(v, "n", &n) && n == 42);
	CHECK(!json_get_int(v, "f", &n));
	CHECK(json_get(v, "missing") == NULL);
	CHECK(json_get_str(v, "n") == NULL);
	yajl_tree_free(v);
}

TEST(json_rejects_bad_input_with_message)
{
	const char *bad[] = {"", "{", "{\"a\":}", "[1,2", "nul", "{\"a\":1}x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct err *e = NULL;
		yajl_val v = json_parse(bad[i], strlen(bad[i]), &e);
		CHECK(v == NULL);
		CHECK(e != NULL && e->code == ERR_BAD_REQUEST);
		CHECK(e != NULL && strstr(e->message, "JSON") != NULL);
		err_free(e);
	}
}

TEST(json_rejects_deep_nesting_and_nul)
{
	char deep[100001];
	memset(deep, '[', 100000);
	deep[100000] = '\0';
	struct err *e = NULL;
	CHECK(json_parse(deep, 100000, &e) == NULL);
	CHECK(e && strstr(e->message, "nested"));
	err_free(e);
	e = NULL;
	/* Brackets inside strings do not count. */
	const char *ok = "{\"a\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}";
	yajl_val v = json_parse(ok, strlen(ok), &e);
	CHECK(v != NULL);
	if (v)
		yajl_tree_free(v);
	CHECK(json_parse("{\"a\":\"\0\"}", 9, &e) == NULL);
	err_free(e);
}

TEST(json_generation_replaces_invalid_utf8)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_strn(g, "ok\xff\xfe-\xc3\xa9", 7);
	size_t len;
	const char *t = jg_text(g, &len);
	CHECK_STR(t, "\"ok\xEF\xBF\xBD\xEF\xBF\xBD-\xc3\xa9\"");
}

TEST(json_utf8_prefix_rejects_overlong_and_surrogates)
{
	CHECK(json_utf8_valid_prefix((const unsigned char *)"\xc0\x80", 2) == 0);
	CHECK(json_utf8_valid_prefix((const unsigned char *)"\xed\xa0\x80", 3) == 0);
	CHECK(json_utf8_valid_prefix((const unsigned char *)"a\xf0\x9f\x98\x80", 5) == 5);
	CHECK(json_utf8_valid_prefix((const unsigned char *)"ab\xe2\x82", 4) == 2);
}
