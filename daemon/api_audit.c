/* api_audit.c: the audit hooks the handlers call (one entry per audited
 * action, audit.h), and GET /v1/audit and /v1/admin/audit, which read the
 * stream back with filters, paging and an optional long poll. */
#include "api.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit.h"
#include "clock.h"
#include "digest.h"
#include "json.h"
#include "store_audit.h"
#include "xalloc.h"

/* ---- the hooks ---- */

/* One allocation, freed with free() (api_call_free). */
struct api_audit_code {
	char sha256[DIGEST_HEX_LEN + 1];
	size_t head_len;
	char head[AUDIT_CODE_HEAD_MAX];
};

const char *api_audit_outcome(const struct err *e)
{
	return e ? err_code_name(e->code) : "ok";
}

/* The entry of c, with what every entry has. */
static struct audit_entry entry_of(const struct call *c, const char *action, const char *outcome)
{
	return (struct audit_entry){
	    .action = action,
	    .tenant = c->tenant,
	    .key_id = c->key_id,
	    .session = c->id[0] ? c->id : NULL,
	    .request_id = c->request_id,
	    .traceparent = c->traceparent,
	    .outcome = outcome,
	    .size = -1,
	    .duration_ms = (clock_mono_us() - c->started_us) / 1000,
	};
}

void api_audit(struct call *c, const char *action, const char *outcome, const char *target)
{
	struct audit_entry e = entry_of(c, action, outcome);
	e.target = target;
	audit_record(c->api->audit, &e);
}

void api_audit_session(struct call *c, const char *action, const char *session, const struct err *e)
{
	struct audit_entry en = entry_of(c, action, api_audit_outcome(e));
	if (session)
		en.session = session;
	audit_record(c->api->audit, &en);
}

void api_audit_exec_code(struct call *c, const char *code, size_t len)
{
	if (c->audit_code == NULL)
		c->audit_code = xmalloc(sizeof(*c->audit_code));
	struct api_audit_code *ac = c->audit_code;
	digest_sha256_hex(code, len, ac->sha256);
	ac->head_len = audit_utf8_cut(code, len, AUDIT_CODE_HEAD_MAX);
	memcpy(ac->head, code, ac->head_len);
}

void api_audit_exec(struct call *c, const char *action, const struct exec_result *r,
		    const struct err *e)
{
	struct audit_entry en =
	    entry_of(c, action, r ? exec_status_name(r->status) : api_audit_outcome(e));
	if (c->audit_code) {
		en.code_sha256 = c->audit_code->sha256;
		en.code_head = c->audit_code->head;
		en.code_head_len = c->audit_code->head_len;
	}
	audit_record(c->api->audit, &en);
}

void api_audit_file(struct call *c, const char *action, int64_t size, const struct err *e)
{
	struct audit_entry en = entry_of(c, action, api_audit_outcome(e));
	en.path = c->path;
	en.size = e ? -1 : size;
	audit_record(c->api->audit, &en);
}

/* ---- reading it back ---- */

#define QUERY_LIMIT_DEFAULT 100
#define QUERY_LIMIT_MAX 1000
#define QUERY_WAIT_MAX_S 30
/* A read asks Redis for this many entries at a time, and one query looks
 * at no more than QUERY_SCAN_MAX of them (filters that match little answer
 * with fewer entries and a next to go on from, rather than scan a stream of
 * 100000 on one request). */
#define QUERY_BATCH 500
#define QUERY_SCAN_MAX 10000
/* Long polls re-read this often; at most QUERY_WAITERS_MAX at a time. */
#define QUERY_POLL_MS 250
#define QUERY_WAITERS_MAX 64
#define STREAM_ID_MAX 48 /* and the buffers for them hold 60 and a "(" */

struct api_audit_found {
	char id[STREAM_ID_MAX + 16];
	char *json;
};

struct api_audit_query {
	LIST_ENTRY(api_audit_query) link;
	struct http_api *api;
	struct call *c;
	char *tenant, *action, *session; /* filters, NULL for any; owned */
	bool forward;                    /* since given (or a long poll went on): oldest first */
	char cursor[STREAM_ID_MAX + 16]; /* where the next read starts (Redis range syntax) */
	char next[STREAM_ID_MAX + 16];   /* what the answer's next will be */
	size_t limit, scanned;
	struct api_audit_found *found; /* the matching entries, in the order read */
	size_t n_found;
	int64_t wait_until_ms; /* monotonic; 0 = no long poll */
	bool waiting;          /* counted in api->audit_waiters */
	struct event *timer;
	struct store_audit_read *rd;
};

static void query_free(struct api_audit_query *q)
{
	if (q == NULL)
		return;
	LIST_REMOVE(q, link);
	if (q->waiting)
		q->api->audit_waiters--;
	store_audit_cancel(q->rd);
	if (q->timer)
		event_free(q->timer);
	for (size_t i = 0; i < q->n_found; i++)
		free(q->found[i].json);
	free(q->found);
	char **filters[] = {&q->tenant, &q->action, &q->session};
	for (size_t i = 0; i < 3; i++)
		free(*filters[i]);
	free(q);
}

/* "1764600000000" or "1764600000000-3": a stream id as Redis writes it. */
static bool stream_id_ok(const char *s)
{
	size_t n = strlen(s), digits = strspn(s, "0123456789");
	if (n == 0 || n > STREAM_ID_MAX || digits == 0 || digits > 20)
		return false;
	if (s[digits] == '\0')
		return true;
	size_t seq = strspn(s + digits + 1, "0123456789");
	return s[digits] == '-' && seq > 0 && seq <= 20 && s[digits + 1 + seq] == '\0';
}

/* "2026-12-01T14:00:00Z", with optional fraction: epoch ms into *out. */
static bool rfc3339_ms(const char *s, int64_t *out)
{
	struct tm tm = {0};
	int ms = 0;
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (p == NULL)
		return false;
	if (*p == '.') {
		int scale = 100;
		for (p++; isdigit((unsigned char)*p); p++, scale /= 10)
			ms += scale * (*p - '0');
	}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
		return false;
	time_t t = timegm(&tm);
	if (t < 0)
		return false;
	*out = (int64_t)t * 1000 + ms;
	return true;
}

static bool matches(const struct api_audit_query *q, const struct store_audit_item *it)
{
	return (q->tenant == NULL || strcmp(it->tenant, q->tenant) == 0) &&
	       (q->action == NULL || strcmp(it->action, q->action) == 0) &&
	       (q->session == NULL || strcmp(it->session, q->session) == 0);
}

static void query_read(struct api_audit_query *q);

static void query_answer(struct api_audit_query *q)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "entries");
	jg_arr(g);
	for (size_t k = 0; k < q->n_found; k++) {
		/* Newest last: a backward scan found them newest first. */
		size_t i = q->forward ? k : q->n_found - 1 - k;
		/* What Redis holds is outside input: re-emitted only when it
		 * parses, with the stream id added. */
		const struct api_audit_found *f = &q->found[i];
		AUTOJSON yajl_val v = json_parse(f->json, strlen(f->json), NULL);
		if (v == NULL || !YAJL_IS_OBJECT(v))
			continue;
		jg_obj(g);
		jg_kv_str(g, "id", f->id);
		for (size_t k2 = 0; k2 < v->u.object.len; k2++) {
			if (strcmp(v->u.object.keys[k2], "id") == 0)
				continue;
			jg_str(g, v->u.object.keys[k2]);
			jg_value(g, v->u.object.values[k2]);
		}
		jg_obj_end(g);
	}
	jg_arr_end(g);
	jg_kv_str(g, "next", q->next);
	jg_obj_end(g);
	struct call *c = q->c;
	q->c = NULL;
	query_free(q);
	api_reply(c, 200, g, NULL);
}

static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct api_audit_query *q = arg;
	if (http_req_client_gone(q->c->req)) {
		query_answer(q); /* the one reply every request gets, to no one */
		return;
	}
	q->scanned = 0;
	query_read(q);
}

/* Nothing found yet: wait and read again while the long poll lasts. A
 * backward scan (no since) goes on forward from the newest entry it saw,
 * so that only what comes after counts. */
static bool query_wait(struct api_audit_query *q)
{
	if (q->wait_until_ms == 0 || clock_mono_ms() + QUERY_POLL_MS > q->wait_until_ms)
		return false;
	if (!q->forward) {
		q->forward = true;
		if (q->next[0])
			snprintf(q->cursor, sizeof(q->cursor), "(%.60s", q->next);
		else
			snprintf(q->cursor, sizeof(q->cursor), "-");
	}
	if (q->timer == NULL)
		q->timer = evtimer_new(q->api->base, poll_cb, q);
	struct timeval tv = {0, QUERY_POLL_MS * 1000};
	evtimer_add(q->timer, &tv);
	return true;
}

static void read_cb(const struct err *e, const struct store_audit_item *items, size_t n, void *arg)
{
	struct api_audit_query *q = arg;
	q->rd = NULL;
	if (e) {
		struct call *c = q->c;
		q->c = NULL;
		query_free(q);
		api_reply(c, 0, NULL, e);
		return;
	}
	for (size_t i = 0; i < n && q->n_found < q->limit; i++) {
		const struct store_audit_item *it = &items[i];
		q->scanned++;
		/* Forward, next is the last entry looked at; backward, the
		 * newest (the first of the first read). */
		if (q->forward || q->next[0] == '\0')
			snprintf(q->next, sizeof(q->next), "%.60s", it->id);
		snprintf(q->cursor, sizeof(q->cursor), "(%.60s", it->id);
		if (!matches(q, it))
			continue;
		q->found = xrealloc(q->found, (q->n_found + 1) * sizeof(*q->found));
		struct api_audit_found *f = &q->found[q->n_found++];
		snprintf(f->id, sizeof(f->id), "%.60s", it->id);
		f->json = xstrndup(it->json, it->json_len);
	}
	bool more = n == QUERY_BATCH && q->n_found < q->limit && q->scanned < QUERY_SCAN_MAX;
	if (more) {
		query_read(q);
		return;
	}
	if (q->n_found == 0 && query_wait(q))
		return;
	if (q->next[0] == '\0')
		snprintf(q->next, sizeof(q->next), "%s", "0-0");
	query_answer(q);
}

static void query_read(struct api_audit_query *q)
{
	const char *lo = q->forward ? q->cursor : "-", *hi = q->forward ? "+" : q->cursor;
	q->rd = store_audit_range(q->api->store, lo, hi, !q->forward, QUERY_BATCH, read_cb, q);
}

static void audit_query(struct call *c, bool admin)
{
	const char *qs = http_req_query(c->req);
	long limit, wait_s;
	if (!api_query_decodes(qs)) {
		api_fail(c, ERR_BAD_REQUEST,
			 "a query parameter is not valid percent-encoding or has a NUL byte");
		return;
	}
	if (api_query_num(qs, "limit", QUERY_LIMIT_DEFAULT, 1, QUERY_LIMIT_MAX, &limit) < 0) {
		api_fail(c, ERR_BAD_REQUEST, "limit must be an integer from 1 to %d",
			 QUERY_LIMIT_MAX);
		return;
	}
	if (api_query_num(qs, "wait_s", 0, 0, QUERY_WAIT_MAX_S, &wait_s) < 0) {
		api_fail(c, ERR_BAD_REQUEST, "wait_s must be an integer from 0 to %d",
			 QUERY_WAIT_MAX_S);
		return;
	}
	AUTOFREE char *since = api_query_param(qs, "since");
	char cursor[STREAM_ID_MAX + 16] = "+";
	if (since && *since) {
		int64_t ms;
		if (stream_id_ok(since))
			snprintf(cursor, sizeof(cursor), "(%.60s", since);
		else if (rfc3339_ms(since, &ms))
			snprintf(cursor, sizeof(cursor), "%lld-0", (long long)ms);
		else {
			api_fail(c, ERR_BAD_REQUEST,
				 "since must be a stream id (an entry's id or next) or an RFC 3339 "
				 "time");
			return;
		}
	}
	if (wait_s > 0 && c->api->audit_waiters >= QUERY_WAITERS_MAX) {
		api_fail(c, ERR_UNAVAILABLE, "too many audit long polls (%d); try again",
			 QUERY_WAITERS_MAX);
		return;
	}
	struct api_audit_query *q = xcalloc(1, sizeof(*q));
	q->api = c->api;
	q->c = c;
	LIST_INSERT_HEAD(&c->api->audit_queries, q, link);
	/* The tenant route never takes the tenant from the query: a tenant
	 * sees its own entries only, whatever it asks for. */
	q->tenant = admin ? api_query_param(qs, "tenant") : xstrdup(c->tenant);
	if (q->tenant && *q->tenant == '\0') {
		free(q->tenant);
		q->tenant = NULL;
	}
	q->action = api_query_param(qs, "action");
	q->session = api_query_param(qs, "session");
	q->forward = since && *since;
	memcpy(q->cursor, cursor, sizeof(cursor));
	if (q->forward)
		snprintf(q->next, sizeof(q->next), "%.60s", cursor[0] == '(' ? cursor + 1 : cursor);
	q->limit = (size_t)limit;
	if (wait_s > 0) {
		q->wait_until_ms = clock_mono_ms() + wait_s * 1000;
		q->waiting = true;
		c->api->audit_waiters++;
	}
	query_read(q);
}

void api_audit_list(struct call *c)
{
	audit_query(c, false);
}

void api_admin_audit(struct call *c)
{
	audit_query(c, true);
}

void api_audit_stop(struct http_api *api)
{
	while (!LIST_EMPTY(&api->audit_queries)) {
		struct api_audit_query *q = LIST_FIRST(&api->audit_queries);
		struct call *c = q->c;
		query_free(q);
		api_fail(c, ERR_UNAVAILABLE, "the daemon is shutting down");
	}
}
