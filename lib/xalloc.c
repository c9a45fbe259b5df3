/* xalloc.c: the out-of-memory exit and formatted allocation. */
#include "xalloc.h"

#include <errno.h>
#include <stdio.h>

void xalloc_oom(size_t n)
{
	/* stderr is unbuffered and this format needs no allocation. */
	fprintf(stderr, "%s: out of memory (allocating %zu bytes)\n", program_invocation_short_name,
		n);
	abort();
}

char *xvasprintf(const char *fmt, va_list ap)
{
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		xalloc_oom(strlen(fmt));
	return s;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}
