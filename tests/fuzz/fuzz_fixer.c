/* fuzz_fixer.c: the fixer model's answer is outside input. fixer_reply_code
 * must take any bytes, as a whole body and as the message content of a
 * well-formed answer, and either refuse them or give code that is a
 * non-blank part of the content; and the prompt built from any bytes must
 * be valid JSON. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixer.h"
#include "json.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_code(const char *content, size_t clen, const char *body, size_t len)
{
	char *code = NULL;
	size_t n = 0;
	struct err *e = NULL;
	if (fixer_reply_code(body, len, &code, &n, &e) < 0) {
		if (e == NULL || code != NULL)
			__builtin_trap(); /* a refusal says why and gives nothing */
		err_free(e);
		return;
	}
	if (code == NULL || strlen(code) != n || n == 0 || e != NULL)
		__builtin_trap();
	if (content && (n > clen || memmem(content, clen, code, n) == NULL))
		__builtin_trap(); /* code the answer did not hold */
	free(code);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	check_code(NULL, 0, text, size);

	AUTOFREE char *content = xstrndup(text, size); /* as yajl would give it: up to a NUL */
	AUTOGEN yajl_gen g = json_gen_new();
	jg_str(g, content); /* a JSON string of any bytes, put in an answer */
	size_t slen;
	const char *str = jg_text(g, &slen);
	AUTOFREE char *body = NULL;
	int len =
	    asprintf(&body, "{\"choices\":[{\"message\":{\"content\":%.*s}}]}", (int)slen, str);
	if (len < 0)
		abort();
	/* The generator repairs invalid UTF-8, so compare with what it sent. */
	struct err *e = NULL;
	AUTOJSON yajl_val v = json_parse(body, (size_t)len, &e);
	err_free(e);
	const char *sent = json_path_str(json_arr_at(json_get(v, "choices"), 0), "message.content");
	check_code(sent, sent ? strlen(sent) : 0, body, (size_t)len);

	const char *tb[] = {content, content};
	const char *cols[] = {content};
	struct fixer_var vars[] = {{.name = content,
				    .type = content,
				    .shape = content,
				    .dtype = content,
				    .col_names = cols,
				    .col_types = cols,
				    .n_cols = 1,
				    .cols_total = 1000}};
	const char *files[] = {content};
	struct fixer_target t = {"http://127.0.0.1:1/v1", content, NULL};
	struct fixer_prompt p = {.code = text, .code_len = size};
	p.goal = p.ename = p.evalue = p.stdout_tail = p.stderr_tail = content;
	p.traceback = tb;
	p.n_traceback = 2;
	p.vars = vars;
	p.files = files;
	p.n_vars = p.n_files = 1;
	size_t plen;
	AUTOFREE char *prompt = fixer_prompt_json(&t, &p, &plen);
	e = NULL;
	yajl_val pv = json_parse(prompt, plen, &e);
	if (pv == NULL)
		__builtin_trap(); /* the prompt is not JSON */
	json_free(pv);
	return 0;
}
