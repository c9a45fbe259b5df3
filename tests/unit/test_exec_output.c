/* test_exec_output.c: the exec result's ordered "output" list (chunks of
 * stdout and stderr in arrival order, neighbours of one stream merged, the
 * cap) and its traceback, one line per entry with the middle of a long one
 * cut (exec_result.c). */
#include <stdio.h>
#include <stdlib.h>

#include "exec_result.h"
#include "json.h"
#include "unit.h"
#include "xalloc.h"

static char *to_json(const struct exec_result *r)
{
	AUTOGEN yajl_gen g = json_gen_new();
	exec_result_to_json(r, g);
	size_t len;
	const char *t = jg_text(g, &len);
	return xstrndup(t, len);
}

static void out(struct exec_result *r, bool is_stderr, const char *s)
{
	exec_result_on_stream(r, is_stderr, s, strlen(s), false, 0);
}

TEST(exec_output_keeps_the_order_and_merges_neighbours)
{
	struct exec_result *r = exec_result_new(1 << 20);
	out(r, false, "a\n");
	out(r, false, "b\n");
	out(r, true, "E1\n");
	out(r, false, "c\n");
	out(r, true, "E2\n");
	out(r, true, "E3\n");
	char *j = to_json(r);
	CHECK(strstr(j, "\"output\":[{\"stream\":\"stdout\",\"text\":\"a\\nb\\n\"},"
			"{\"stream\":\"stderr\",\"text\":\"E1\\n\"},"
			"{\"stream\":\"stdout\",\"text\":\"c\\n\"},"
			"{\"stream\":\"stderr\",\"text\":\"E2\\nE3\\n\"}],"
			"\"output_truncated\":false") != NULL);
	CHECK(strstr(j, "\"stdout\":\"a\\nb\\nc\\n\"") &&
	      strstr(j, "\"stderr\":\"E1\\nE2\\nE3\\n\""));
	free(j);
	/* A copy and a dropped result agree with the list they hold. */
	struct exec_result *d = exec_result_dup(r);
	char *a = to_json(r), *b = to_json(d);
	CHECK_STR(a, b);
	free(a);
	free(b);
	exec_result_free(d);
	exec_result_drop_outputs(r);
	j = to_json(r);
	CHECK(strstr(j, "\"output\":[],\"output_truncated\":false") != NULL);
	free(j);
	exec_result_free(r);
}

TEST(exec_output_cut_by_the_cap_says_so)
{
	/* Cap 8: "0123456789" keeps 8 live bytes; the tail comes at the end. */
	struct exec_result *r = exec_result_new(8);
	out(r, true, "e");
	out(r, false, "0123456789");
	exec_result_on_stream(r, false, "xyz", 3, true, 5);
	char *j = to_json(r);
	CHECK(strstr(j, "\"output\":[{\"stream\":\"stderr\",\"text\":\"e\"},"
			"{\"stream\":\"stdout\",\"text\":\"01234567\"},"
			"{\"stream\":\"stdout\",\"text\":\"xyz\"}],"
			"\"output_truncated\":true") != NULL);
	free(j);
	exec_result_free(r);
}

TEST(exec_output_chunk_cap)
{
	struct exec_result *r = exec_result_new(1 << 20);
	for (int i = 0; i < EXEC_MAX_OUTPUT_CHUNKS + 10; i++)
		out(r, i % 2, "x");
	CHECK(r->n_chunks == EXEC_MAX_OUTPUT_CHUNKS && r->chunks_full);
	char *j = to_json(r);
	CHECK(strstr(j, "\"output_truncated\":true") != NULL);
	free(j);
	exec_result_free(r);
}

static struct exec_result *with_traceback(const char *tb_json)
{
	char *done = xasprintf("{\"status\":\"error\",\"error\":{\"ename\":\"E\",\"evalue\":\"v\","
			       "\"traceback\":%s}}",
			       tb_json);
	struct err *e = NULL;
	yajl_val v = json_parse(done, strlen(done), &e);
	CHECK(v != NULL);
	struct exec_result *r = exec_result_new(64);
	CHECK(exec_result_on_done(r, v, &e) == 0);
	yajl_tree_free(v);
	free(done);
	return r;
}

TEST(exec_traceback_one_line_per_entry)
{
	struct exec_result *r =
	    with_traceback("[\"Traceback (most recent call last):\\n\","
			   "\"  File \\\"<cell-1>\\\", line 1, in <module>\\n    1/0\\n\","
			   "\"\\nDuring handling\\n\", \"ZeroDivisionError: division by zero\"]");
	const char *want[] = {"Traceback (most recent call last):",
			      "  File \"<cell-1>\", line 1, in <module>",
			      "    1/0",
			      "",
			      "During handling",
			      "ZeroDivisionError: division by zero"};
	CHECK(r->n_traceback == 6);
	for (size_t i = 0; i < 6 && i < r->n_traceback; i++)
		CHECK_STR(r->traceback[i], want[i]);
	exec_result_free(r);
}

TEST(exec_traceback_long_keeps_head_and_tail)
{
	/* 1000 items of two lines each: 2000 lines. */
	size_t cap = 1000 * 24 + 16;
	char *tb = xmalloc(cap);
	size_t n = 0;
	n += (size_t)snprintf(tb + n, cap - n, "[");
	for (int i = 0; i < 1000; i++)
		n += (size_t)snprintf(tb + n, cap - n, "%s\"f%d\\n  s%d\"", i ? "," : "", i, i);
	snprintf(tb + n, cap - n, "]");
	struct exec_result *r = with_traceback(tb);
	free(tb);
	CHECK(r->n_traceback == EXEC_MAX_TRACEBACK);
	CHECK_STR(r->traceback[0], "f0");
	CHECK_STR(r->traceback[1], "  s0");
	CHECK_STR(r->traceback[EXEC_TRACEBACK_HEAD - 1], "  s49");
	CHECK_STR(r->traceback[EXEC_TRACEBACK_HEAD], "[... 1801 traceback lines omitted ...]");
	CHECK_STR(r->traceback[EXEC_TRACEBACK_HEAD + 1], "  s950");
	CHECK_STR(r->traceback[EXEC_MAX_TRACEBACK - 1], "  s999");
	exec_result_free(r);
}
