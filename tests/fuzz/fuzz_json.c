/* fuzz_json.c: json_parse must refuse or accept any bytes without crashing,
 * and a parsed tree must regenerate as valid JSON. */
#include <stddef.h>
#include <stdint.h>

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err *e = NULL;
	yajl_val v = json_parse((const char *)data, size, &e);
	if (v) {
		AUTOGEN yajl_gen g = json_gen_new();
		jg_strn(g, (const char *)data, size); /* any bytes as a string: valid UTF-8 out */
		size_t n;
		const char *t = jg_text(g, &n);
		struct err *e2 = NULL;
		yajl_val back = json_parse(t, n, &e2);
		if (back == NULL)
			__builtin_trap(); /* generation made invalid JSON */
		yajl_tree_free(back);
		yajl_tree_free(v);
	}
	err_free(e);
	return 0;
}
