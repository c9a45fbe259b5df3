/* audit.h: the audit trail: who did what, when, with which code, and how
 * it ended. Each entry goes to the log as one JSON line (log_raw_line,
 * {"type":"audit",...}) and to the Redis stream P audit (store_audit.c),
 * trimmed to about --audit-max-entries. The log line always goes out; the
 * stream write is best effort (Redis down, or too many writes in flight:
 * counted in store_audit_dropped, ci_audit_dropped_total on /metrics).
 *
 * Entry building and the UTF-8 cut are pure, for the unit tests. */
#ifndef CI_AUDIT_H
#define CI_AUDIT_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct store;

/* How much of an execution's code the entry keeps (cut on a UTF-8
 * boundary): enough to see what ran, while an entry stays small. */
#define AUDIT_CODE_HEAD_MAX 4096

/* One audited action. Strings are borrowed; NULL (or size/duration -1)
 * leaves a member out. */
struct audit_entry {
	int64_t time_ms; /* epoch ms; 0 = now */
	const char *action;
	const char *tenant;
	const char *key_id;
	const char *session;
	const char *request_id;
	const char *traceparent;
	const char *code_sha256; /* executions: of the whole code */
	const char *code_head;   /* ... and its first AUDIT_CODE_HEAD_MAX bytes at most */
	size_t code_head_len;
	const char *path; /* file writes and deletes */
	int64_t size;     /* bytes written, or -1 */
	const char *outcome;
	int64_t duration_ms; /* or -1 */
	const char *target;  /* what an admin action acted on (a key id, a tenant) */
	const char *node;
};

/* The length of the longest prefix of s[0..len) that is at most max bytes
 * and does not end inside a UTF-8 sequence (a byte sequence that is not
 * UTF-8 at all is cut as bytes; the JSON generator repairs it). */
size_t audit_utf8_cut(const char *s, size_t len, size_t max);

/* The entry as one line of JSON (no newline), {"type":"audit",...}; caller
 * frees. The text never holds a raw control character, so it is one line. */
char *audit_entry_json(const struct audit_entry *e, size_t *len);

struct audit;

/* An audit trail writing to st (borrowed, must outlive it) with node's
 * name on each entry, trimming the stream to about max_entries. Stream
 * writes are queued (at most 256) and sent together a few milliseconds
 * later, from base's loop. Caller frees (audit_free), before st. */
struct audit *audit_new(struct event_base *base, struct store *st, const char *node,
			int64_t max_entries);
void audit_free(struct audit *a);

/* Record e: the log line now, the stream write queued (never blocks). */
void audit_record(struct audit *a, const struct audit_entry *e);

/* Entries the stream did not get (Redis down or failing, the queue or the
 * in-flight cap), since start. */
uint64_t audit_dropped(const struct audit *a);

#endif
