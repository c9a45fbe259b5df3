/* audit.c: building audit entries and sending them to the log and the
 * stream (audit.h). */
#include "audit.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "store_audit.h"
#include "xalloc.h"

/* Stream writes wait here for the next flush: sent a few milliseconds
 * later, together, they are off the path of the answer they record (the
 * answer goes out first, and Redis works on the entry while the client reads
 * it) and a burst costs one write to Redis rather than one per entry. */
#define AUDIT_QUEUE_MAX 256
#define AUDIT_FLUSH_MS 5

struct audit_queued {
	int64_t time_ms;
	char *action, *tenant, *session, *outcome;
	char *json;
	size_t len;
};

struct audit {
	struct store *st;
	struct event *flush;
	int64_t max_entries;
	uint64_t dropped; /* the queue was full */
	size_t n;
	struct audit_queued q[AUDIT_QUEUE_MAX];
	char node[256];
};

size_t audit_utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	/* s[max] is the first byte left out: when it continues a sequence
	 * (10xxxxxx), back up to that sequence's lead byte, at most 3 bytes
	 * (a longer run of continuation bytes is not UTF-8: cut as bytes). */
	for (size_t back = 0; back < 4 && back <= max; back++)
		if (((unsigned char)s[max - back] & 0xC0) != 0x80)
			return max - back;
	return max;
}

static void kv_opt(yajl_gen g, const char *key, const char *v)
{
	if (v != NULL && *v != '\0')
		jg_kv_str(g, key, v);
}

char *audit_entry_json(const struct audit_entry *e, size_t *len)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "type", "audit");
	jg_kv_time(g, "time", e->time_ms ? e->time_ms : clock_now_ms());
	jg_kv_str(g, "action", e->action);
	jg_kv_str(g, "tenant", e->tenant ? e->tenant : "");
	jg_kv_str(g, "key_id", e->key_id ? e->key_id : "");
	kv_opt(g, "session", e->session);
	kv_opt(g, "request_id", e->request_id);
	kv_opt(g, "traceparent", e->traceparent);
	if (e->code_sha256) {
		jg_kv_str(g, "code_sha256", e->code_sha256);
		jg_str(g, "code_head");
		jg_strn(g, e->code_head ? e->code_head : "", e->code_head ? e->code_head_len : 0);
	}
	kv_opt(g, "path", e->path);
	if (e->size >= 0)
		jg_kv_int(g, "size", e->size);
	kv_opt(g, "target", e->target);
	jg_kv_str(g, "outcome", e->outcome ? e->outcome : "ok");
	if (e->duration_ms >= 0)
		jg_kv_int(g, "duration_ms", e->duration_ms);
	kv_opt(g, "node", e->node);
	jg_obj_end(g);
	size_t n;
	const char *text = jg_text(g, &n);
	if (len)
		*len = n;
	return xstrndup(text, n);
}

/* Hand every queued entry to the store (which pipelines them). */
static void audit_flush(struct audit *a)
{
	for (size_t i = 0; i < a->n; i++) {
		struct audit_queued *q = &a->q[i];
		store_audit_add(a->st, a->max_entries,
				&(struct store_audit_fields){.time_ms = q->time_ms,
							     .action = q->action,
							     .tenant = q->tenant,
							     .session = q->session,
							     .outcome = q->outcome},
				q->json, q->len);
		char **owned[] = {&q->action, &q->tenant, &q->session, &q->outcome, &q->json};
		for (size_t k = 0; k < sizeof(owned) / sizeof(owned[0]); k++)
			free(*owned[k]);
	}
	a->n = 0;
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	audit_flush(arg);
}

struct audit *audit_new(struct event_base *base, struct store *st, const char *node,
			int64_t max_entries)
{
	struct audit *a = xcalloc(1, sizeof(*a));
	a->st = st;
	a->flush = evtimer_new(base, flush_cb, a);
	snprintf(a->node, sizeof(a->node), "%s", node ? node : "");
	a->max_entries = max_entries;
	return a;
}

void audit_free(struct audit *a)
{
	if (a == NULL)
		return;
	/* What is queued still goes to the store: it is sent if the loop
	 * turns again before the store is freed. */
	audit_flush(a);
	event_free(a->flush);
	free(a);
}

void audit_record(struct audit *a, const struct audit_entry *e)
{
	struct audit_entry full = *e;
	if (full.time_ms == 0)
		full.time_ms = clock_now_ms();
	if (full.node == NULL)
		full.node = a->node;
	size_t len;
	AUTOFREE char *json = audit_entry_json(&full, &len);
	/* The log first: it is the record that survives Redis being down. */
	log_raw_line(json);
	if (a->n == AUDIT_QUEUE_MAX) {
		a->dropped++;
		return;
	}
	struct audit_queued *q = &a->q[a->n++];
	q->time_ms = full.time_ms;
	q->action = xstrdup(full.action ? full.action : "");
	q->tenant = xstrdup(full.tenant ? full.tenant : "");
	q->session = xstrdup(full.session ? full.session : "");
	q->outcome = xstrdup(full.outcome ? full.outcome : "");
	q->json = steal_pointer(&json);
	q->len = len;
	if (!evtimer_pending(a->flush, NULL)) {
		struct timeval tv = {0, AUDIT_FLUSH_MS * 1000};
		evtimer_add(a->flush, &tv);
	}
}

uint64_t audit_dropped(const struct audit *a)
{
	return a->dropped + store_audit_dropped(a->st);
}
