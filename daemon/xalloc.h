/* xalloc.h: allocation that aborts on out-of-memory.
 *
 * The daemon cannot do anything useful once malloc fails, and checking every
 * small allocation would bury the real error paths, so it aborts (as Redis
 * does). Buffers fed from outside are capped before they are allocated. */
#ifndef CI_XALLOC_H
#define CI_XALLOC_H

#include <stdlib.h>
#include <string.h>

static inline void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL)
		abort();
	return p;
}

static inline void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p == NULL)
		abort();
	return p;
}

static inline void *xrealloc(void *old, size_t n)
{
	void *p = realloc(old, n ? n : 1);
	if (p == NULL)
		abort();
	return p;
}

static inline char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (p == NULL)
		abort();
	return p;
}

static inline char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (p == NULL)
		abort();
	return p;
}

/* For __attribute__((cleanup(free_cleanup))) on heap-owning locals. */
static inline void free_cleanup(void *p)
{
	free(*(void **)p);
}
#define AUTOFREE __attribute__((cleanup(free_cleanup)))

#endif
