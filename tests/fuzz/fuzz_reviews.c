/* fuzz_reviews.c: the review decision bodies (POST /v1/reviews/{id}/approve
 * and /reject) from any bytes, both ways, without crashing or leaking. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int approve = 0; approve < 2; approve++) {
		struct err *e = NULL;
		yajl_val v = NULL;
		const char *code = NULL, *comment = NULL;
		int rc = api_reviews_parse_decision((const char *)data, size, approve, &v, &code,
						    &comment, &e);
		if (rc == 0) {
			/* A rejection always has a comment; what is set is a string. */
			if (!approve && (comment == NULL || *comment == '\0'))
				__builtin_trap();
			if (code)
				(void)strlen(code);
			if (comment)
				(void)strlen(comment);
		} else if (e == NULL) {
			__builtin_trap();
		}
		json_free(v);
		err_free(e);
	}
	return 0;
}
