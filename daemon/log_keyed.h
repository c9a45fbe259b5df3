/* log_keyed.h: rate-limited log lines per key (a session), for events one
 * party can repeat at will and others must still be heard through: a
 * sandbox hammering the egress proxy with refused requests (issue 28 item
 * 8: 72,186 refusal lines, 14.2 MiB, in 20 s) writes at most burst lines per
 * window of its own, and the next line written after a quiet spell says how
 * many were left out. The counters of what happened (metrics) are the
 * caller's and count every event.
 *
 * A fixed table of keys (LOG_KEYED_MAX): a new key when it is full takes
 * the place of the one least recently seen, whose pending count is kept in
 * t->evicted_suppressed for the caller to report. Pure (time is given), for
 * the unit tests. */
#ifndef CI_LOG_KEYED_H
#define CI_LOG_KEYED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define LOG_KEYED_MAX 1024
#define LOG_KEYED_KEY_MAX 63

struct log_keyed_entry {
	char key[LOG_KEYED_KEY_MAX + 1];
	struct log_limit ll;
	int64_t last_ms; /* last event seen, for the eviction */
};

struct log_keyed {
	struct log_keyed_entry *e; /* allocated at the first event */
	size_t n;
	uint64_t evicted_suppressed; /* left out, of keys evicted since */
};

/* Whether key's line at now_ms may be written (at most burst per window_ms
 * for that key). When it may, *suppressed gets the key's lines left out
 * since its last one written, and that count starts again. */
bool log_keyed_allow(struct log_keyed *t, const char *key, int64_t now_ms, int64_t window_ms,
		     uint32_t burst, uint32_t *suppressed);

/* The key's end (a session's): its lines left out since its last written
 * one (to report now), and its entry goes. 0 for an unknown key. */
uint32_t log_keyed_forget(struct log_keyed *t, const char *key);

void log_keyed_release(struct log_keyed *t);

#endif
