/*
 * idprefix.c: matching an id prefix against a list of ids (idprefix.h).
 */
#include "idprefix.h"

#include <string.h>

size_t idprefix_match(const char *prefix, const char *const *ids, size_t n, size_t *out, size_t max)
{
	size_t plen = strlen(prefix), found = 0, i;

	if (plen == 0)
		return 0;
	for (i = 0; i < n; i++) {
		if (ids[i] != NULL && strcmp(ids[i], prefix) == 0) {
			if (max > 0)
				out[0] = i;
			return 1;
		}
	}
	for (i = 0; i < n; i++) {
		if (ids[i] == NULL || strncmp(ids[i], prefix, plen) != 0)
			continue;
		if (found < max)
			out[found] = i;
		found++;
	}
	return found;
}
