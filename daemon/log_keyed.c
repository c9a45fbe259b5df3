/* log_keyed.c: rate-limited log lines per key (log_keyed.h). */
#include "log_keyed.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

static struct log_keyed_entry *find(struct log_keyed *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (strncmp(t->e[i].key, key, LOG_KEYED_KEY_MAX) == 0)
			return &t->e[i];
	return NULL;
}

bool log_keyed_allow(struct log_keyed *t, const char *key, int64_t now_ms, int64_t window_ms,
		     uint32_t burst, uint32_t *suppressed)
{
	*suppressed = 0;
	struct log_keyed_entry *x = find(t, key);
	if (x == NULL) {
		if (t->e == NULL)
			t->e = xcalloc(LOG_KEYED_MAX, sizeof(*t->e));
		if (t->n < LOG_KEYED_MAX) {
			x = &t->e[t->n++];
		} else {
			x = &t->e[0];
			for (size_t i = 1; i < t->n; i++)
				if (t->e[i].last_ms < x->last_ms)
					x = &t->e[i];
			t->evicted_suppressed += x->ll.suppressed;
		}
		memset(x, 0, sizeof(*x));
		size_t n = strlen(key);
		if (n > LOG_KEYED_KEY_MAX)
			n = LOG_KEYED_KEY_MAX;
		memcpy(x->key, key, n);
	}
	x->last_ms = now_ms;
	return log_limit_allow(&x->ll, now_ms, window_ms, burst, suppressed);
}

uint32_t log_keyed_forget(struct log_keyed *t, const char *key)
{
	struct log_keyed_entry *x = find(t, key);
	if (x == NULL)
		return 0;
	uint32_t pending = x->ll.suppressed;
	*x = t->e[--t->n];
	return pending;
}

void log_keyed_release(struct log_keyed *t)
{
	free(t->e);
	*t = (struct log_keyed){0};
}
