/* test_exec_result_dup.c: the copy the one-shot keeps of an execution's
 * result (manager_oneshot.c) serialises exactly as the original. */
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

/* Every part of a result: truncated output with a tail, stderr, a display,
 * a value, an error with a traceback, files, a reason. */
static const char done[] =
    "{\"t\":\"done\",\"id\":1,\"status\":\"error\",\"result\":\"42\","
    "\"error\":{\"ename\":\"E\",\"evalue\":\"v\",\"traceback\":[\"a\",\"b\"]},"
    "\"files\":[{\"path\":\"a.txt\",\"size\":3,\"change\":\"created\"}]}";

static const struct exec_display_info png = {"image/png", -1, false};

static struct exec_result *full_result(void)
{
	struct exec_result *r = exec_result_new(16);
	exec_result_on_stream(r, false, "0123456789abcdefXYZ", 19, false, 0);
	exec_result_on_stream(r, false, "tail", 4, true, 7);
	exec_result_on_stream(r, true, "err\n", 4, false, 0);
	exec_result_on_display(r, &png, "\x89PNG", 4);
	struct err *e = NULL;
	yajl_val v = json_parse(done, sizeof(done) - 1, &e);
	CHECK(v && exec_result_on_done(r, v, &e) == 0);
	yajl_tree_free(v);
	exec_result_fail(r, EXEC_KILLED, true, "out of memory");
	return r;
}

/* The copy, made and then outliving r, serialises as r did. */
static void check_copy(struct exec_result *r)
{
	char *want = to_json(r);
	struct exec_result *d = exec_result_dup(r);
	exec_result_free(r);
	char *got = to_json(d);
	CHECK_STR(got, want);
	exec_result_free(d);
	free(want);
	free(got);
}

TEST(exec_result_dup_is_deep_and_equal)
{
	struct exec_result *r = full_result();
	char *text = to_json(r);
	CHECK(strstr(text, "\"reason\":\"out of memory\"") && strstr(text, "\"traceback\""));
	free(text);
	check_copy(r);
	check_copy(exec_result_new(8)); /* empty: no output, no arrays */
}

/* What an earlier attempt of a run keeps: the error and the ending, not
 * the output (exec_result_drop_outputs). */
TEST(exec_result_drop_outputs_keeps_the_error)
{
	struct exec_result *r = full_result();
	exec_result_drop_outputs(r);
	CHECK(r->out.head_len == 0 && r->out.tail == NULL && r->err.head_len == 0);
	CHECK(r->n_display == 0 && r->display == NULL && r->n_files == 0 && r->result == NULL);
	CHECK(r->has_error && strcmp(r->ename, "E") == 0 && strcmp(r->evalue, "v") == 0);
	CHECK(r->n_traceback == 2 && strcmp(r->traceback[1], "b") == 0);
	CHECK(r->status == EXEC_KILLED && strcmp(r->reason, "out of memory") == 0);
	char *j = to_json(r);
	CHECK(strstr(j, "\"stdout\":\"\"") && strstr(j, "\"display\":[]") &&
	      strstr(j, "\"files\":[]"));
	free(j);
	exec_result_drop_outputs(r); /* twice is fine */
	exec_result_drop_outputs(NULL);
	exec_result_free(r);
}
