/* xalloc.h: allocation that aborts on out-of-memory, cleanup attributes on
 * locals, and the hand-off of an owned pointer.
 *
 * Neither program can do anything useful once malloc fails, and checking
 * every small allocation would bury the real error paths, so both abort (as
 * Redis does), after one line on stderr naming the program and the size.
 * Buffers fed from outside are capped before they are allocated.
 *
 * Ownership on locals (crun's and GLib's shape): a local that owns memory
 * is declared AUTOFREE (or AUTOERR, AUTOJSON, AUTOGEN: see err.h and json.h)
 * and freed when it goes out of scope; giving it away is
 * `return steal_pointer(&p);` or `x->field = steal_pointer(&p);`, which
 * yields the pointer and leaves NULL behind, so the cleanup frees nothing. */
#ifndef CI_XALLOC_H
#define CI_XALLOC_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Writes "PROGRAM: out of memory (allocating N bytes)" and aborts. */
void xalloc_oom(size_t n) __attribute__((noreturn));

static inline void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL)
		xalloc_oom(n);
	return p;
}

static inline void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p == NULL)
		xalloc_oom(n * size);
	return p;
}

static inline void *xrealloc(void *old, size_t n)
{
	void *p = realloc(old, n ? n : 1);
	if (p == NULL)
		xalloc_oom(n);
	return p;
}

static inline char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (p == NULL)
		xalloc_oom(strlen(s) + 1);
	return p;
}

/* At most n bytes of s, NUL-terminated (s need not be). */
static inline char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (p == NULL)
		xalloc_oom(n + 1);
	return p;
}

/* A formatted string the caller frees. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* For __attribute__((cleanup(free_cleanup))) on heap-owning locals. */
static inline void free_cleanup(void *p)
{
	free(*(void **)p);
}
#define AUTOFREE __attribute__((cleanup(free_cleanup)))

/* The value of *pp, leaving NULL in *pp: hands an owned pointer on (to a
 * return value, a struct field, a callee that takes it) out of a local
 * whose cleanup attribute would otherwise free it. */
#define steal_pointer(pp)                                   \
	__extension__({                                     \
		__typeof__(*(pp)) steal_pointer_p_ = *(pp); \
		*(pp) = NULL;                               \
		steal_pointer_p_;                           \
	})

#endif
