/* test_fixer.c: the fixer's prompt (every part present, every part capped,
 * valid JSON whatever the input) and the reading of its answer (the fence
 * variants, no block, an empty block, an unclosed one, not JSON, huge). */
#include <stdlib.h>

#include "fixer.h"
#include "json.h"
#include "unit.h"
#include "xalloc.h"

static const struct fixer_target target = {"http://127.0.0.1:1/v1", "m1", NULL};

/* The prompt's user message, parsed out of its JSON (caller frees). */
static char *user_message(const struct fixer_prompt *p, yajl_val *tree)
{
	size_t len;
	AUTOFREE char *body = fixer_prompt_json(&target, p, &len);
	CHECK(strlen(body) == len);
	struct err *e = NULL;
	yajl_val v = json_parse(body, len, &e);
	CHECK(v != NULL);
	err_free(e);
	if (tree)
		*tree = v;
	yajl_val msgs = json_get(v, "messages");
	CHECK(json_arr_len(msgs) == 2);
	const char *user = json_get_str(json_arr_at(msgs, 1), "content");
	char *out = xstrdup(user ? user : "");
	if (tree == NULL)
		json_free(v);
	return out;
}

TEST(fixer_prompt_carries_every_part)
{
	const char *tb[] = {"Traceback (most recent call last):\n  File \"<cell>\", line 2",
			    "NameError: name 'np' is not defined"};
	struct fixer_var vars[] = {{.name = "df", .type = "DataFrame"},
				   {.name = "n", .type = "int"}};
	const char *files[] = {"sales.csv", "out/chart.png"};
	struct fixer_prompt p = {.goal = "plot the sales",
				 .code = "x = np.arange(3)",
				 .code_len = 16,
				 .ename = "NameError",
				 .evalue = "name 'np' is not defined",
				 .traceback = tb,
				 .n_traceback = 2,
				 .stdout_tail = "some output",
				 .stderr_tail = "a warning",
				 .vars = vars,
				 .n_vars = 2,
				 .files = files,
				 .n_files = 2,
				 .attempt = 1,
				 .max_attempts = 3};
	yajl_val v;
	AUTOFREE char *u = user_message(&p, &v);
	CHECK_STR(json_get_str(v, "model"), "m1");
	int64_t temp = -1;
	CHECK(json_get_int(v, "temperature", &temp) && temp == 0);
	yajl_val msgs = json_get(v, "messages");
	CHECK_STR(json_get_str(json_arr_at(msgs, 0), "role"), "system");
	CHECK_STR(json_get_str(json_arr_at(msgs, 1), "role"), "user");
	CHECK(strstr(json_get_str(json_arr_at(msgs, 0), "content"), "```python") != NULL);
	CHECK(strstr(u, "plot the sales") != NULL);
	CHECK(strstr(u, "```python\nx = np.arange(3)\n```") != NULL);
	CHECK(strstr(u, "NameError: name 'np' is not defined") != NULL);
	CHECK(strstr(u, "File \"<cell>\", line 2") != NULL);
	CHECK(strstr(u, "some output") != NULL);
	CHECK(strstr(u, "a warning") != NULL);
	CHECK(strstr(u, "- df: DataFrame\n") != NULL);
	CHECK(strstr(u, "- n: int\n") != NULL);
	CHECK(strstr(u, "- sales.csv\n") != NULL);
	CHECK(strstr(u, "- out/chart.png\n") != NULL);
	CHECK(strstr(u, "Attempt 1 of 3") != NULL);
	json_free(v);
}

TEST(fixer_prompt_leaves_out_absent_parts)
{
	struct fixer_prompt p = {.code = "1/0", .code_len = 3};
	AUTOFREE char *u = user_message(&p, NULL);
	CHECK(strstr(u, "1/0") != NULL);
	CHECK(strstr(u, "Goal") == NULL);
	CHECK(strstr(u, "Traceback") == NULL);
	CHECK(strstr(u, "Variables") == NULL);
	CHECK(strstr(u, "Files") == NULL);
	CHECK(strstr(u, "Standard") == NULL);
}

TEST(fixer_prompt_caps_every_part)
{
	size_t big = 1 << 20;
	char *code = xmalloc(big + 1), *out = xmalloc(big + 1);
	memset(code, 'c', big);
	code[big] = '\0';
	memset(out, 'o', big);
	memcpy(out + big - 4, "LAST", 4);
	out[big] = '\0';
	static char lines[100][32];
	const char *tb[100];
	for (int i = 0; i < 100; i++) {
		snprintf(lines[i], sizeof(lines[i]), "tbline%03d", i);
		tb[i] = lines[i];
	}
	struct fixer_var *vars = xcalloc(1000, sizeof(*vars));
	const char **files = xcalloc(1000, sizeof(*files));
	for (int i = 0; i < 1000; i++) {
		vars[i] = (struct fixer_var){.name = "v", .type = "int"};
		files[i] = "f.txt";
	}
	struct fixer_prompt p = {.goal = code,
				 .code = code,
				 .code_len = big,
				 .ename = "E",
				 .evalue = code,
				 .traceback = tb,
				 .n_traceback = 100,
				 .stdout_tail = out,
				 .stderr_tail = out,
				 .vars = vars,
				 .n_vars = 1000,
				 .files = files,
				 .n_files = 1000};
	size_t len;
	AUTOFREE char *body = fixer_prompt_json(&target, &p, &len);
	CHECK(len < 200 * 1024);
	AUTOFREE char *u = user_message(&p, NULL);
	CHECK(strstr(u, "more bytes cut") != NULL);
	CHECK(strstr(u, "earlier bytes cut") != NULL);
	CHECK(strstr(u, "LAST") != NULL);      /* a tail keeps the end */
	CHECK(strstr(u, "tbline099") != NULL); /* the last 60 traceback lines */
	CHECK(strstr(u, "tbline040") != NULL);
	CHECK(strstr(u, "tbline039") == NULL);
	CHECK(strstr(u, "and 800 more") != NULL);
	free(code);
	free(out);
	free(vars);
	free(files);
}

/* The seed's scenario: a misspelled column. The model sees the frame's
 * shape and its columns with their dtypes (names as repr: case shows), an
 * array's shape and dtype. */
TEST(fixer_prompt_describes_dataframes_and_arrays)
{
	const char *names[] = {"'Region'", "'Sales'"}, *types[] = {"object", "int64"};
	struct fixer_var vars[] = {
	    {.name = "df",
	     .type = "DataFrame",
	     .shape = "(5, 2)",
	     .col_names = names,
	     .col_types = types,
	     .n_cols = 2,
	     .cols_total = 2},
	    {.name = "a", .type = "ndarray", .shape = "(3, 4)", .dtype = "float64"},
	    {.name = "s", .type = "Series", .shape = "(5,)", .dtype = "int64"},
	    {.name = "n", .type = "int"}};
	struct fixer_prompt p = {.code = "df['sales']", .code_len = 11, .vars = vars, .n_vars = 4};
	AUTOFREE char *u = user_message(&p, NULL);
	CHECK(strstr(u, "- df: DataFrame, shape (5, 2)\n  2 columns (name: dtype): 'Region': "
			"object, 'Sales': int64\n") != NULL);
	CHECK(strstr(u, "- a: ndarray, shape (3, 4), dtype float64\n") != NULL);
	CHECK(strstr(u, "- s: Series, shape (5,), dtype int64\n") != NULL);
	CHECK(strstr(u, "- n: int\n") != NULL);
}

/* A wide frame: its first 50 columns and how many more; many wide frames:
 * 500 columns in all, the rest counted; long names cut. */
TEST(fixer_prompt_caps_the_columns)
{
	static char names[300][200];
	const char *np[300], *tp[300];
	for (int i = 0; i < 300; i++) {
		snprintf(names[i], sizeof(names[i]), "'col%03d", i);
		if (i == 0) /* a long name */
			memset(names[i] + 7, 'x', 190);
		np[i] = names[i];
		tp[i] = "float64";
	}
	struct fixer_var *vars = xcalloc(20, sizeof(*vars));
	for (int i = 0; i < 20; i++)
		vars[i] = (struct fixer_var){.name = "w",
					     .type = "DataFrame",
					     .shape = "(1, 300)",
					     .col_names = np,
					     .col_types = tp,
					     .n_cols = 300,
					     .cols_total = 300};
	struct fixer_prompt p = {.code = "x", .code_len = 1, .vars = vars, .n_vars = 20};
	AUTOFREE char *u = user_message(&p, NULL);
	CHECK(strstr(u, "'col049: float64, [... and 250 more]") != NULL);
	CHECK(strstr(u, "'col050") == NULL);
	CHECK(strstr(u, "xxx...: float64") != NULL); /* cut at 100 bytes, and says so */
	/* 500 columns in all: ten frames get theirs, the others none */
	CHECK(strstr(u, "300 columns (name: dtype): [... and 300 more]") != NULL);
	size_t shown = 0;
	for (const char *q = u; (q = strstr(q, ": float64")) != NULL; q++)
		shown++;
	CHECK(shown == 500);
	free(vars);
}

TEST(fixer_prompt_counts_traceback_lines_inside_entries)
{
	/* One entry of 100 lines: still the last 60. */
	char entry[2000] = "";
	for (int i = 0; i < 100; i++)
		snprintf(entry + strlen(entry), sizeof(entry) - strlen(entry), "L%03d\n", i);
	const char *tb[] = {entry};
	struct fixer_prompt p = {.code = "x", .code_len = 1, .traceback = tb, .n_traceback = 1};
	AUTOFREE char *u = user_message(&p, NULL);
	CHECK(strstr(u, "L099\n") != NULL);
	CHECK(strstr(u, "L040\n") != NULL);
	CHECK(strstr(u, "L039\n") == NULL);
	CHECK(strstr(u, "earlier lines cut") != NULL);
}

TEST(fixer_prompt_is_valid_json_for_any_bytes)
{
	/* Invalid UTF-8, quotes, control bytes, a newline in a variable's
	 * name (which must not forge a line of the list). */
	const char code[] = "print(\"\xff\xfe\x01\")\n\\";
	const char *cols[] = {"'c\n- forged: int'"};
	struct fixer_var vars[] = {{.name = "a\n- forged: int",
				    .type = "t\x01",
				    .shape = "(1,\n- forged)",
				    .col_names = cols,
				    .col_types = cols,
				    .n_cols = 1}};
	struct fixer_prompt p = {
	    .code = code, .code_len = sizeof(code) - 1, .vars = vars, .n_vars = 1};
	AUTOFREE char *u = user_message(&p, NULL);
	CHECK(strstr(u, "\n- forged") == NULL);
	CHECK(json_utf8_valid(u, strlen(u)));
}

static char *reply_json(const char *content)
{
	yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "choices");
	jg_arr(g);
	jg_obj(g);
	jg_str(g, "message");
	jg_obj(g);
	jg_kv_str(g, "role", "assistant");
	jg_kv_str(g, "content", content);
	jg_obj_end(g);
	jg_obj_end(g);
	jg_arr_end(g);
	jg_obj_end(g);
	size_t n;
	char *out = xstrdup(jg_text(g, &n));
	yajl_gen_free(g);
	return out;
}

/* The code fixer_reply_code takes from a reply of content, or the error. */
static char *code_of(const char *content, char *why, size_t why_size)
{
	AUTOFREE char *body = reply_json(content);
	char *code = NULL;
	size_t len = 0;
	struct err *e = NULL;
	why[0] = '\0';
	if (fixer_reply_code(body, strlen(body), &code, &len, &e) < 0) {
		CHECK(code == NULL && e != NULL);
		snprintf(why, why_size, "%s", e->message);
		err_free(e);
		return NULL;
	}
	CHECK(strlen(code) == len);
	return code;
}

TEST(fixer_reply_code_fence_variants)
{
	static const struct {
		const char *content, *code;
	} cases[] = {
	    {"```python\nprint(1)\n```", "print(1)"},
	    {"Here it is:\n```py\nimport numpy as np\nx = 1\n```\nDone.",
	     "import numpy as np\nx = 1"},
	    {"```\nbare()\n```", "bare()"},
	    {"```Python3  \r\nwin()\r\n```\r\n", "win()"},
	    {"```json\n{}\n```\n```python\nsecond()\n```", "second()"}, /* not Python: skipped */
	    {"```python\nfirst()\n```\n```python\nsecond()\n```", "first()"},
	    {"text ```python inline``` text\n```python\nreal()\n```", "real()"},
	    {"```python\ns = '```'\n```", "s = '```'"}, /* a fence must start its line */
	    {"<think>\n```python\ndraft()\n```\n</think>\n```python\nanswer()\n```", "answer()"},
	    {"  <think>no code here</think>```python\nafter()\n```", "after()"},
	    {"text <think>\n```python\nnot_thinking()\n```", "not_thinking()"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[256];
		AUTOFREE char *code = code_of(cases[i].content, why, sizeof(why));
		CHECK_STR(code, cases[i].code);
		if (code == NULL || strcmp(code, cases[i].code) != 0)
			fprintf(stderr, "  case %zu: %s\n", i, why);
	}
}

TEST(fixer_reply_code_refuses_nonsense)
{
	static const struct {
		const char *content, *error;
	} cases[] = {
	    {"I cannot help with that.", "the fixer's answer has no code block"},
	    {"print(1)", "the fixer's answer has no code block"},
	    {"```python\n```", "the fixer's answer has an empty code block"},
	    {"```python\n  \n\n```", "the fixer's answer has an empty code block"},
	    {"```python\nprint(1)\n", "the fixer's answer has a code block that is never closed"},
	    {"", "the fixer's answer has no code block"},
	    {"<think>\n```python\ndraft()\n```\n", "the fixer's answer has no code block"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[256];
		AUTOFREE char *code = code_of(cases[i].content, why, sizeof(why));
		CHECK(code == NULL);
		CHECK_STR(why, cases[i].error);
	}
	static const char *bodies[] = {"not json",
				       "{}",
				       "{\"choices\": []}",
				       "{\"choices\": [{}]}",
				       "{\"choices\": [{\"message\": {\"content\": 5}}]}",
				       "[1,2]",
				       "{\"choices\": {}}",
				       "{\"error\": {\"message\": \"overloaded\"}}"};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		char *code = NULL;
		struct err *e = NULL;
		CHECK(fixer_reply_code(bodies[i], strlen(bodies[i]), &code, NULL, &e) < 0);
		CHECK(code == NULL && e != NULL &&
		      strstr(e->message, "the fixer's answer") != NULL);
		err_free(e);
	}
}

TEST(fixer_reply_code_huge_answer)
{
	size_t n = 900 * 1024;
	char *content = xmalloc(n + 32);
	memcpy(content, "```python\n", 10);
	for (size_t i = 10; i < n; i++)
		content[i] = (i % 64 == 0) ? '\n' : 'x';
	strcpy(content + n, "\n```");
	char why[256];
	AUTOFREE char *code = code_of(content, why, sizeof(why));
	CHECK(code != NULL && strlen(code) == n - 10);
	/* Many lines of backticks that never close: linear, and an error. */
	for (size_t i = 0; i < n; i++)
		content[i] = (i % 4 == 3) ? '\n' : '`';
	content[n] = '\0';
	AUTOFREE char *none = code_of(content, why, sizeof(why));
	CHECK(none == NULL);
	free(content);
}

TEST(fixer_reply_code_content_as_parts)
{
	const char *body = "{\"choices\":[{\"message\":{\"content\":["
			   "{\"type\":\"text\",\"text\":\"Fixed:\\n```python\\nx\"},"
			   "{\"type\":\"image_url\",\"text\":\"ignored\"},"
			   "{\"type\":\"text\",\"text\":\" = 1\\n```\"}]}}]}";
	char *code = NULL;
	struct err *e = NULL;
	CHECK(fixer_reply_code(body, strlen(body), &code, NULL, &e) == 0);
	CHECK_STR(code, "x = 1");
	free(code);
	err_free(e);
}
