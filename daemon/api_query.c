/* api_query.c: a request's query string: one parameter's decoded value,
 * a number within bounds, and whether every value decodes (so that a value
 * that does not is never read as "no filter"). */
#include "api.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

char *api_query_param(const char *query, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = query; p && *p;) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
		if ((size_t)(end - p) > nl && strncmp(p, name, nl) == 0 && p[nl] == '=')
			return http_percent_decode(p + nl + 1,
						   (size_t)(end - p - (ptrdiff_t)nl - 1));
		p = amp ? amp + 1 : NULL;
	}
	return NULL;
}

bool api_query_decodes(const char *query)
{
	for (const char *p = query; p && *p;) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));
		char *v = eq ? http_percent_decode(eq + 1, (size_t)(end - eq - 1)) : NULL;
		if (eq && v == NULL)
			return false;
		free(v);
		p = amp ? amp + 1 : NULL;
	}
	return true;
}

int api_query_num(const char *query, const char *name, long def, long min, long max, long *out)
{
	AUTOFREE char *v = api_query_param(query, name);
	if (v == NULL) {
		*out = def;
		return 0;
	}
	char *end = NULL;
	long n = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}
