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

/* Parses a literal document for the tests below (the caller frees it). */
static yajl_val json_doc(const char *text)
{
	struct err *e = NULL;
	yajl_val v = json_parse(text, strlen(text), &e);
	CHECK(v != NULL && e == NULL);
	err_free(e);
	return v;
}

TEST(json_path_walks_nested_objects)
{
	AUTOJSON yajl_val v =
	    json_doc("{\"limits\":{\"memory_mb\":256,\"cpus\":0.5},\"error\":{\"code\":\"busy\"},"
		     "\"a.b\":1,\"list\":[1,2],\"s\":\"x\"}");
	double d = 0;
	CHECK(json_path_num(v, "limits.memory_mb", &d) && d == 256);
	CHECK(json_path_num(v, "limits.cpus", &d) && d == 0.5);
	CHECK_STR(json_path_str(v, "error.code"), "busy");
	CHECK(json_path(v, "") == v);
	/* A missing step, or a step through something that is not an object. */
	CHECK(json_path(v, "limits.nope") == NULL);
	CHECK(json_path(v, "nope.memory_mb") == NULL);
	CHECK(json_path(v, "s.x") == NULL);
	CHECK(json_path(v, "list.0") == NULL);
	CHECK(json_path(NULL, "a") == NULL);
	/* json_get takes a member name as written, dots and all; json_path
	 * reads the dot as a step. */
	CHECK(json_get(v, "a.b") != NULL);
	CHECK(json_path(v, "a.b") == NULL);
	CHECK(json_get(v, "limits.memory_mb") == NULL);
}

TEST(json_path_typed_getters_check_the_type)
{
	AUTOJSON yajl_val v = json_doc("{\"i\":7,\"f\":1.25,\"big\":123456789012345678901234567890,"
				       "\"t\":true,\"n\":null,\"o\":{},\"a\":[true,\"x\"],"
				       "\"s\":\"str\"}");
	double d = -1;
	bool b = false;
	CHECK(json_path_num(v, "i", &d) && d == 7);
	CHECK(json_path_num(v, "f", &d) && d == 1.25);
	CHECK(json_path_num(v, "big", &d) && d > 1.2e29 && d < 1.3e29);
	d = -1;
	CHECK(!json_path_num(v, "s", &d) && d == -1);
	CHECK(!json_path_num(v, "missing", &d) && d == -1);
	CHECK(json_path_bool(v, "t", &b) && b);
	CHECK(json_path_bool(v, "a", &b) == false);
	CHECK(!json_path_bool(v, "n", &b));
	CHECK(json_path_obj(v, "o") != NULL && json_path_obj(v, "a") == NULL);
	CHECK(json_path_arr(v, "a") != NULL && json_path_arr(v, "o") == NULL);
	CHECK(json_path_str(v, "s") != NULL && json_path_str(v, "i") == NULL);
	yajl_val a = json_path_arr(v, "a");
	CHECK(json_arr_len(a) == 2);
	CHECK(YAJL_IS_TRUE(json_arr_at(a, 0)));
	CHECK(json_arr_at(a, 2) == NULL);
	CHECK(json_arr_len(json_path(v, "o")) == 0 && json_arr_len(NULL) == 0);
	CHECK(json_arr_at(NULL, 0) == NULL);
}

TEST(json_parse_caps_depth_for_every_reader)
{
	/* JSON_MAX_DEPTH levels parse; one more is refused before yajl
	 * builds anything. */
	char ok[2 * JSON_MAX_DEPTH + 1], deep[2 * JSON_MAX_DEPTH + 3];
	memset(ok, '[', JSON_MAX_DEPTH);
	memset(ok + JSON_MAX_DEPTH, ']', JSON_MAX_DEPTH);
	ok[2 * JSON_MAX_DEPTH] = '\0';
	memset(deep, '[', JSON_MAX_DEPTH + 1);
	memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
	deep[2 * JSON_MAX_DEPTH + 2] = '\0';
	struct err *e = NULL;
	AUTOJSON yajl_val v = json_parse(ok, strlen(ok), &e);
	CHECK(v != NULL && e == NULL);
	CHECK(json_parse(deep, strlen(deep), &e) == NULL);
	CHECK(e != NULL && e->code == ERR_BAD_REQUEST && strstr(e->message, "nested") != NULL);
	err_free(e);
}

/* The text jg_number writes for v. */
static void json_check_number(double v, const char *want)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_number(g, v);
	CHECK_STR(jg_text(g, NULL), want);
}

TEST(jg_number_writes_integers_as_integers_and_the_rest_exactly)
{
	json_check_number(60, "60");
	json_check_number(-3, "-3");
	json_check_number(0, "0");
	json_check_number(0.5, "0.5");
	json_check_number(0.1, "0.1");
	json_check_number(1e-3, "0.001");
	json_check_number(1.0 / 3, "0.33333333333333331");
	json_check_number(9007199254740992.0, "9007199254740992"); /* 2^53, %.17g */
	json_check_number(1e20, "1e+20");
	json_check_number(1.0 / 0.0, "null");
	/* Whatever is written reads back to the same double. */
	double vals[] = {1.0 / 3, 2.0 / 3, 0.1 + 0.2, 123456.789, 1e300, -4.9e-324};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		AUTOGEN yajl_gen g = json_gen_new();
		jg_number(g, vals[i]);
		CHECK(strtod(jg_text(g, NULL), NULL) == vals[i]);
	}
	/* jg_double stays the daemon's six digits for people. */
	AUTOGEN yajl_gen g = json_gen_new();
	jg_double(g, 1.0 / 3);
	CHECK_STR(jg_text(g, NULL), "0.333333");
}

TEST(jg_value_re_emits_a_parsed_tree)
{
	const char *text = "{\"a\":[1,2.50,-3e2,true,false,null,\"s\\u00e9\"],\"b\":{},\"c\":[]}";
	AUTOJSON yajl_val v = json_doc(text);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_value(g, v);
	/* Numbers as they were read (2.50 stays 2.50); strings re-escaped. */
	CHECK_STR(jg_text(g, NULL),
		  "{\"a\":[1,2.50,-3e2,true,false,null,\"s\xc3\xa9\"],\"b\":{},\"c\":[]}");
	AUTOGEN yajl_gen g2 = json_gen_new();
	jg_value(g2, NULL);
	CHECK_STR(jg_text(g2, NULL), "null");
}

TEST(json_utf8_valid_checks_whole_texts)
{
	CHECK(json_utf8_valid("", 0));
	CHECK(json_utf8_valid("plain ascii", 11));
	CHECK(json_utf8_valid("caf\xc3\xa9", 5));
	CHECK(json_utf8_valid("a\0b", 3)); /* NUL is a character: jg_strn escapes it */
	CHECK(!json_utf8_valid("caf\xc3", 4));
	CHECK(!json_utf8_valid("\xff", 1));
	CHECK(!json_utf8_valid("\xed\xa0\x80", 3));     /* a surrogate */
	CHECK(!json_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
}

TEST(json_free_and_cleanup_take_null)
{
	json_free(NULL);
	yajl_val v = json_doc("[1]");
	json_cleanup(&v);
	CHECK(v == NULL);
	json_cleanup(&v);
}
