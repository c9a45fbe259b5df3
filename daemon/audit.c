/* audit.c: building audit entries and sending them to the log and the
 * stream (audit.h). */
#include "audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "store_audit.h"
#include "xalloc.h"

struct audit {
	struct store *st;
	int64_t max_entries;
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

struct audit *audit_new(struct store *st, const char *node, int64_t max_entries)
{
	struct audit *a = xcalloc(1, sizeof(*a));
	a->st = st;
	snprintf(a->node, sizeof(a->node), "%s", node ? node : "");
	a->max_entries = max_entries;
	return a;
}

void audit_free(struct audit *a)
{
	free(a); /* it owns nothing else */
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
	store_audit_add(a->st, a->max_entries,
			&(struct store_audit_fields){.time_ms = full.time_ms,
						     .action = full.action,
						     .tenant = full.tenant,
						     .session = full.session,
						     .outcome = full.outcome},
			json, len);
}

uint64_t audit_dropped(const struct audit *a)
{
	return store_audit_dropped(a->st);
}
