/*
 * idprefix.h: docker-style id prefixes: a unique prefix names one id, an
 * ambiguous one names several (and none is taken), no match names none.
 */
#ifndef CI_IDPREFIX_H
#define CI_IDPREFIX_H

#include <stddef.h>

/*
 * Which of ids[0..n) the prefix names: an id equal to prefix alone wins
 * (a full id is never ambiguous); else every id that starts with it.  The
 * first max matching indexes go into out.  Returns how many ids match
 * (which may be more than max); 0 for an empty prefix.
 */
size_t idprefix_match(const char *prefix, const char *const *ids, size_t n, size_t *out,
		      size_t max);

#endif
