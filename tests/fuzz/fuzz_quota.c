/* fuzz_quota.c: a tenant's quota override (an admin's PUT body, or what
 * Redis holds) from any bytes: parsed, merged and written back without
 * crashing or leaking; what parses has only known names in range, and what
 * it writes parses back to the same. */
#include <stdint.h>
#include <stdlib.h>

#include "json.h"
#include "quota.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct quota_override o, back;
	struct err *e = NULL;
	if (quota_override_parse((const char *)data, size, &o, &e) < 0) {
		if (e == NULL || e->code != ERR_BAD_REQUEST || o.set != 0)
			abort();
		err_free(e);
		return 0;
	}
	if (o.set >> QUOTA_COUNT)
		abort();
	for (int i = 0; i < QUOTA_COUNT; i++)
		if (o.v[i] < 0 || o.v[i] > QUOTA_MAX_VALUE)
			abort();
	struct quota d = {{1, 2, 3, 4, 5}}, q;
	quota_merge(&d, &o, &q);
	yajl_gen g = json_gen_new();
	quota_override_to_json(&o, g);
	size_t len;
	const char *text = jg_text(g, &len);
	if (quota_override_parse(text, len, &back, NULL) < 0 || back.set != o.set)
		abort();
	for (int i = 0; i < QUOTA_COUNT; i++)
		if ((o.set & (1u << i)) && back.v[i] != o.v[i])
			abort();
	yajl_gen_free(g);
	return 0;
}
