/* fuzz_json.c: json_parse must refuse or accept any bytes without crashing,
 * a parsed tree must regenerate as valid JSON (as a string and re-emitted
 * whole), and a dotted-path lookup of any path must stay inside the tree. */
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parses text that json.c generated: it must be JSON. */
static void fuzz_json_reparse(yajl_gen g)
{
	size_t n;
	const char *t = jg_text(g, &n);
	struct err *e = NULL;
	yajl_val back = json_parse(t, n, &e);
	if (back == NULL)
		__builtin_trap(); /* generation made invalid JSON */
	json_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err *e = NULL;
	yajl_val v = json_parse((const char *)data, size, &e);
	if (v) {
		AUTOGEN yajl_gen g = json_gen_new();
		jg_strn(g, (const char *)data, size); /* any bytes as a string: valid UTF-8 out */
		fuzz_json_reparse(g);

		AUTOGEN yajl_gen whole = json_gen_new();
		jg_value(whole, v);
		fuzz_json_reparse(whole);

		/* The input's own bytes, up to 64, as a path into the tree. */
		AUTOFREE char *path = xstrndup((const char *)data, size < 64 ? size : 64);
		double d;
		bool b;
		(void)json_path_str(v, path);
		(void)json_path_num(v, path, &d);
		(void)json_path_bool(v, path, &b);
		(void)json_arr_len(json_path_arr(v, path));
		json_free(v);
	}
	err_free(e);
	return 0;
}
