/* api_quota_gate.c: quotas on the way in (api.h): the tenants' overrides,
 * cached; requests per second before every tenant handler; reservations
 * for creates and executions, held by the call and given back when it is
 * freed; and the 429.
 *
 * A reservation's member names what holds it: "pending-<daemon>-<n>" for
 * a create not yet done (committed to the session id when it is, and
 * lapsing after the start timeout if this daemon dies first), and
 * "<session or pending>/<daemon>-<n>" for an execution. <daemon> is the
 * API's random per-start prefix, so two daemons never pick the same name.
 *
 * Redis unreachable: a check that needs Redis (a quota that is not 0)
 * answers 503; with every quota involved 0 (unlimited) there is nothing to
 * enforce and the call goes on (its time is then not counted). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "defer.h"
#include "log.h"
#include "xalloc.h"

/* How long a tenant's override read from Redis is used before it is read
 * again (in the background). */
#define CACHE_FRESH_MS 1000
/* Tenants remembered; beyond that the cache starts over (bounded memory
 * whatever names the admin routes are given). */
#define CACHE_MAX 4096
#define CACHE_BUCKETS 256

struct tenant_entry {
	char name[64];
	struct quota_override o;
	int64_t fetched_ms;             /* monotonic */
	int64_t uncounted;              /* requests not yet sent to Redis's count */
	int64_t unsent_exec_ms;         /* quiet executions' time, not yet sent */
	struct store_quota_op *refresh; /* a re-read in flight */
	struct tenant_entry *next;
};

struct api_quota_wait {
	struct http_api *api;
	struct call *c;
	struct store_quota_op *op;
	/* An admission or the gate (else a route's plain wait). */
	bool admit, gate;
	api_handler handler;
	struct api_quota_ask ask;
	api_quota_next next;
	api_quota_refused refused; /* api_quota_admit_or: instead of the 429 */
	void *ctx;
	void (*ctx_free)(void *ctx);
	struct quota eff;
	struct event *later; /* next, from the loop (cancelled by api_quota_stop) */
	LIST_ENTRY(api_quota_wait) link;
};

struct api_quota {
	struct http_api *api;
	struct tenant_entry *buckets[CACHE_BUCKETS];
	size_t n;
	struct event *flush; /* armed while requests wait to be counted */
	uint64_t seq;        /* member names */
	LIST_HEAD(, api_quota_wait) waits;
	LIST_HEAD(, api_quota_hold) quiet; /* executions not yet announced to Redis */
};

struct api_quota_hold {
	char tenant[64];
	bool session;
	char session_member[64];
	bool exec;
	char exec_member[128];
	int64_t exec_started_ms; /* monotonic */
	int64_t duration_ms;     /* -1: not told */
	/* A quiet execution (its tenant has no execution quota to enforce):
	 * announced to Redis only if it still runs at the next flush, its time
	 * sent with the tenant's others when it ends (quiet_link in q->quiet). */
	bool quiet;
	int64_t exec_lapse_ms;
	LIST_ENTRY(api_quota_hold) quiet_link;
};

/* ---- the cache ---- */

static unsigned bucket_of(const char *name)
{
	unsigned h = 5381;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = h * 33 + *p;
	return h % CACHE_BUCKETS;
}

static struct tenant_entry *cache_find(struct api_quota *q, const char *name)
{
	for (struct tenant_entry *t = q->buckets[bucket_of(name)]; t; t = t->next)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

static void cache_clear(struct api_quota *q)
{
	for (size_t i = 0; i < CACHE_BUCKETS; i++)
		while (q->buckets[i]) {
			struct tenant_entry *t = q->buckets[i];
			q->buckets[i] = t->next;
			store_quota_cancel(t->refresh);
			free(t);
		}
	q->n = 0;
}

static void flush_cb(evutil_socket_t fd, short what, void *arg);

static void cache_put(struct api_quota *q, const char *name, const struct quota_override *o)
{
	struct tenant_entry *t = cache_find(q, name);
	if (t == NULL) {
		if (q->n >= CACHE_MAX) {
			flush_cb(-1, 0, q);
			cache_clear(q);
		}
		t = xcalloc(1, sizeof(*t));
		snprintf(t->name, sizeof(t->name), "%s", name);
		unsigned b = bucket_of(name);
		t->next = q->buckets[b];
		q->buckets[b] = t;
		q->n++;
	}
	t->o = *o;
	t->fetched_ms = clock_mono_ms();
}

void api_quota_learn(struct http_api *api, const char *tenant, const struct quota_override *o)
{
	cache_put(api->quota, tenant, o);
}

/* Requests of tenants without a rate are counted here and sent to Redis
 * in batches, a command per tenant every FLUSH_MS, rather than one per
 * request: usage's requests_last_second lags by that much. */
#define FLUSH_MS 100

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct api_quota *q = arg;
	struct store *st = q->api->store;
	for (size_t i = 0; i < CACHE_BUCKETS; i++)
		for (struct tenant_entry *t = q->buckets[i]; t; t = t->next) {
			if (t->uncounted) {
				store_quota_count(st, t->name, t->uncounted);
				t->uncounted = 0;
			}
			if (t->unsent_exec_ms) {
				char member[64];
				snprintf(member, sizeof(member), "batch-%08x-%llu",
					 q->api->id_prefix, (unsigned long long)++q->seq);
				store_quota_exec_end(st, t->name, member, t->unsent_exec_ms);
				t->unsent_exec_ms = 0;
			}
		}
	/* Still running a flush later: the usage's running count should see it. */
	static const struct quota unlimited;
	while (!LIST_EMPTY(&q->quiet)) {
		struct api_quota_hold *h = LIST_FIRST(&q->quiet);
		LIST_REMOVE(h, quiet_link);
		h->quiet = false;
		store_quota_exec_admit(st, h->tenant, h->exec_member, h->exec_lapse_ms, &unlimited,
				       NULL, NULL);
	}
}

static void flush_soon(struct api_quota *q)
{
	if (!evtimer_pending(q->flush, NULL)) {
		struct timeval tv = {0, FLUSH_MS * 1000};
		evtimer_add(q->flush, &tv);
	}
}

static void count_request(struct api_quota *q, const char *tenant)
{
	struct tenant_entry *t = cache_find(q, tenant);
	if (t == NULL)
		return; /* not possible after resolve; nothing to count it in */
	t->uncounted++;
	flush_soon(q);
}

/* The tenant's effective quotas from what is known (flags read now, so a
 * SIGHUP applies at once). */
static void effective(struct http_api *api, const struct tenant_entry *t, struct quota *out)
{
	struct quota d;
	quota_from_config(api->cfg, &d);
	quota_merge(&d, t ? &t->o : NULL, out);
}

void api_quota_effective(struct call *c, struct quota *out)
{
	effective(c->api, cache_find(c->api->quota, c->tenant), out);
}

/* ---- waits ---- */

void api_quota_start(struct http_api *api)
{
	api->quota = xcalloc(1, sizeof(*api->quota));
	api->quota->api = api;
	api->quota->flush = evtimer_new(api->base, flush_cb, api->quota);
	LIST_INIT(&api->quota->waits);
	LIST_INIT(&api->quota->quiet);
}

static void wait_free(struct api_quota_wait *w)
{
	LIST_REMOVE(w, link);
	if (w->later)
		event_free(w->later);
	if (w->ctx_free && w->ctx)
		w->ctx_free(w->ctx);
	free(w);
}

void api_quota_stop(struct http_api *api)
{
	struct api_quota *q = api->quota;
	if (q == NULL)
		return;
	while (!LIST_EMPTY(&q->waits)) {
		struct api_quota_wait *w = LIST_FIRST(&q->waits);
		store_quota_cancel(w->op);
		struct call *c = w->c;
		wait_free(w);
		api_call_free(c);
	}
	flush_cb(-1, 0, q); /* announces every quiet execution: q->quiet is empty after */
	event_free(q->flush);
	cache_clear(q);
	free(q);
	api->quota = NULL;
}

struct api_quota_wait *api_quota_wait_new(struct call *c, void *ctx, void (*ctx_free)(void *ctx))
{
	struct api_quota_wait *w = xcalloc(1, sizeof(*w));
	w->api = c->api;
	w->c = c;
	w->ctx = ctx;
	w->ctx_free = ctx_free;
	LIST_INSERT_HEAD(&c->api->quota->waits, w, link);
	return w;
}

void api_quota_wait_set_op(struct api_quota_wait *w, struct store_quota_op *op)
{
	w->op = op;
}

struct call *api_quota_wait_done(struct api_quota_wait *w)
{
	struct call *c = w->c;
	w->ctx = NULL; /* handed on, or freed by its owner */
	wait_free(w);
	return c;
}

/* ---- the 429 ---- */

/* A create or an execution refused by a quota is an attempt the audit keeps,
 * like any other refusal (a request merely over its rate is not an action). */
static void audit_refusal(struct call *c, const struct err *e)
{
	if (c->route == NULL)
		return;
	if (c->audit_code) /* an execution: its code was read */
		api_audit_exec(c,
			       strcmp(c->route->pattern, "/v1/exec") == 0 ? "exec_oneshot" : "exec",
			       NULL, e);
	else if (strcmp(c->route->pattern, "/v1/sessions/?") == 0 &&
		 strcmp(c->route->method, "POST") == 0)
		api_audit_session(c, "session_create", NULL, e);
}

void api_quota_refuse(struct call *c, int n, int64_t retry_s)
{
	char retry[24], msg[256];
	if (retry_s < 1)
		retry_s = 1;
	snprintf(retry, sizeof(retry), "%lld", (long long)retry_s);
	snprintf(msg, sizeof(msg), "tenant %s is over its %s quota; retry in %llds", c->tenant,
		 quota_name((enum quota_name)n), (long long)retry_s);
	audit_refusal(c, &(struct err){.code = ERR_QUOTA_EXCEEDED, .message = msg});
	if (c->sink) { /* an MCP tool's call: the tool's result says it */
		api_fail(c, ERR_QUOTA_EXCEEDED, "%s", msg);
		return;
	}
	http_req_add_header(c->req, "Retry-After", retry);
	http_req_reply_error_field(c->req, ERR_QUOTA_EXCEEDED, msg, "quota",
				   quota_name((enum quota_name)n));
	api_call_free(c);
}

/* The wait ends with an answer: what it carried is freed, c answered. */
static void wait_fail(struct api_quota_wait *w, enum err_code code, const char *msg)
{
	struct call *c = w->c;
	wait_free(w);
	api_fail(c, code, "%s", msg);
}

static void wait_refuse(struct api_quota_wait *w, int n, int64_t retry_s)
{
	struct call *c = w->c;
	if (w->refused) {
		api_quota_refused refused = w->refused;
		void *ctx = w->ctx;
		w->ctx = NULL;
		wait_free(w);
		api_quota_release(c); /* what the ask had reserved before the refusal */
		char msg[256];
		snprintf(msg, sizeof(msg), "tenant %s is over its %s quota; retry in %llds",
			 c->tenant, quota_name((enum quota_name)n),
			 (long long)(retry_s < 1 ? 1 : retry_s));
		refused(c, ctx, msg);
		return;
	}
	wait_free(w);
	api_quota_refuse(c, n, retry_s);
}

/* ---- holds ---- */

static struct api_quota_hold *hold_of(struct call *c)
{
	if (c->hold == NULL) {
		c->hold = xcalloc(1, sizeof(*c->hold));
		snprintf(c->hold->tenant, sizeof(c->hold->tenant), "%s", c->tenant);
		c->hold->duration_ms = -1;
	}
	return c->hold;
}

void api_quota_session_created(struct call *c, const struct session *s)
{
	struct api_quota_hold *h = c->hold;
	if (h == NULL || !h->session)
		return;
	store_quota_session_commit(c->api->store, h->tenant, h->session_member, s->id,
				   s->limits.memory_mb, s->limits.disk_mb,
				   s->expires_at_ms + QUOTA_GRACE_MS);
	h->session = false;
}

void api_quota_exec_ran(struct call *c, int64_t duration_ms)
{
	if (c->hold)
		c->hold->duration_ms = duration_ms;
}

void api_quota_release(struct call *c)
{
	struct api_quota_hold *h = c->hold;
	if (h == NULL)
		return;
	struct store *st = c->api->store;
	if (h->exec) {
		int64_t d =
		    h->duration_ms >= 0 ? h->duration_ms : clock_mono_ms() - h->exec_started_ms;
		struct api_quota *q = c->api->quota;
		struct tenant_entry *t = h->quiet && q ? cache_find(q, h->tenant) : NULL;
		if (h->quiet)
			LIST_REMOVE(h, quiet_link);
		if (t) { /* never announced: its time goes with the tenant's next batch */
			t->unsent_exec_ms += d > 0 ? d : 0;
			flush_soon(q);
		} else {
			store_quota_exec_end(st, h->tenant, h->exec_member, d);
		}
	}
	if (h->session)
		store_quota_session_release(st, h->tenant, h->session_member);
	free(h);
	c->hold = NULL;
}

/* ---- the steps ---- */

static void step(struct api_quota_wait *w);

static void gate_admitted(const struct err *e, int refused, int64_t retry_s, void *arg)
{
	struct api_quota_wait *w = arg;
	w->op = NULL;
	if (e) {
		wait_fail(w, ERR_UNAVAILABLE,
			  "requests_per_second cannot be checked: the quota store (redis) is not "
			  "reachable");
		return;
	}
	if (refused >= 0) {
		wait_refuse(w, refused, retry_s);
		return;
	}
	struct call *c = w->c;
	api_handler h = w->handler;
	wait_free(w);
	h(c);
}

/* A refusal, or Redis down for a quota that is not 0, ends the wait;
 * true then. */
static bool admit_failed(struct api_quota_wait *w, const struct err *e, int refused,
			 int64_t retry_s, bool limited)
{
	if (e && limited) {
		wait_fail(w, ERR_UNAVAILABLE,
			  "the quotas cannot be checked: the quota store (redis) is not reachable; "
			  "retry shortly");
		return true;
	}
	if (!e && refused >= 0) {
		wait_refuse(w, refused, retry_s);
		return true;
	}
	return false;
}

/* The hold has what was reserved: the session, or the execution. */
static void hold_take(struct api_quota_hold *h, bool session)
{
	if (session) {
		h->session = true;
		return;
	}
	h->exec = true;
	h->exec_started_ms = clock_mono_ms();
}

/* A reservation's answer: the session's (reserved first) while the ask
 * still has it, else the execution's. */
static void admitted(const struct err *e, int refused, int64_t retry_s, void *arg)
{
	struct api_quota_wait *w = arg;
	w->op = NULL;
	bool session = w->ask.session;
	const int64_t *v = w->eff.v;
	bool limited = session ? v[QUOTA_SESSIONS] || v[QUOTA_MEMORY_MB] || v[QUOTA_DISK_MB]
			       : v[QUOTA_EXECUTIONS] || v[QUOTA_EXEC_SECONDS_PER_HOUR];
	if (admit_failed(w, e, refused, retry_s, limited))
		return;
	if (e == NULL)
		hold_take(w->c->hold, session);
	if (session)
		w->ask.session = false;
	else
		w->ask.exec = false;
	step(w);
}

static void next_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct api_quota_wait *w = arg;
	struct call *c = w->c;
	api_quota_next next = w->next;
	void *ctx = w->ctx;
	w->ctx = NULL;
	wait_free(w);
	next(c, ctx);
}

static void start_session(struct api_quota_wait *w)
{
	struct call *c = w->c;
	struct api_quota_hold *h = hold_of(c);
	const struct config *cfg = c->api->cfg;
	snprintf(h->session_member, sizeof(h->session_member), "pending-%08x-%llu",
		 c->api->id_prefix, (unsigned long long)++c->api->quota->seq);
	int64_t lapse = clock_now_ms() + cfg->start_timeout_s * 1000 + QUOTA_GRACE_MS;
	if (w->eff.v[QUOTA_SESSIONS] == 0 && w->eff.v[QUOTA_MEMORY_MB] == 0 &&
	    w->eff.v[QUOTA_DISK_MB] == 0) {
		/* Nothing to enforce: reserved for the usage without waiting, so a
		 * create costs no Redis round trip (the reservation's later move to
		 * the session id follows on the same connection, in order). */
		store_quota_session_admit(c->api->store, c->tenant, h->session_member,
					  w->ask.memory_mb, w->ask.disk_mb, lapse, &w->eff, NULL,
					  NULL);
		hold_take(h, true);
		w->ask.session = false;
		step(w);
		return;
	}
	w->op =
	    store_quota_session_admit(c->api->store, c->tenant, h->session_member, w->ask.memory_mb,
				      w->ask.disk_mb, lapse, &w->eff, admitted, w);
}

static void start_exec(struct api_quota_wait *w)
{
	struct call *c = w->c;
	struct api_quota_hold *h = hold_of(c);
	const struct config *cfg = c->api->cfg;
	snprintf(h->exec_member, sizeof(h->exec_member), "%s/%08x-%llu",
		 c->id[0] ? c->id : h->session_member, c->api->id_prefix,
		 (unsigned long long)++c->api->quota->seq);
	int64_t lapse =
	    clock_now_ms() + w->ask.exec_timeout_s * 1000 + cfg->kill_grace_ms + QUOTA_GRACE_MS;
	if (!c->id[0]) /* the one-shot starts its session first */
		lapse += cfg->start_timeout_s * 1000;
	if (w->eff.v[QUOTA_EXECUTIONS] == 0 && w->eff.v[QUOTA_EXEC_SECONDS_PER_HOUR] == 0) {
		/* Nothing to enforce: counted for the usage without waiting, and
		 * in batches (flush_cb), so Redis stays off an execution's path
		 * and a short one costs Redis nothing of its own. */
		h->quiet = true;
		h->exec_lapse_ms = lapse;
		LIST_INSERT_HEAD(&c->api->quota->quiet, h, quiet_link);
		flush_soon(c->api->quota);
		hold_take(h, false);
		w->ask.exec = false;
		if (w->next) /* an admission's (not api_quota_admit_now's) */
			step(w);
		return;
	}
	w->op = store_quota_exec_admit(c->api->store, c->tenant, h->exec_member, lapse, &w->eff,
				       admitted, w);
}

/* The quotas are known (w->eff): the gate's bucket, or the admission's
 * next reservation, or the end. */
static void step(struct api_quota_wait *w)
{
	struct call *c = w->c;
	if (w->gate) {
		int64_t rate = w->eff.v[QUOTA_REQUESTS_PER_SECOND];
		if (rate == 0) {
			/* Nothing to enforce: counted for the usage, never waited on. */
			count_request(c->api->quota, c->tenant);
			api_handler h = w->handler;
			wait_free(w);
			h(c);
			return;
		}
		w->op = store_quota_request(c->api->store, c->tenant, rate, gate_admitted, w);
		return;
	}
	if (w->ask.session) {
		start_session(w);
		return;
	}
	if (w->ask.exec) {
		start_exec(w);
		return;
	}
	w->later = evtimer_new(c->api->base, next_deferred, w);
	defer_event(w->later);
}

static void fetched(const struct err *e, const struct quota_override *o, void *arg)
{
	struct api_quota_wait *w = arg;
	w->op = NULL;
	struct api_quota *q = w->api->quota;
	if (e == NULL)
		cache_put(q, w->c->tenant, o);
	/* Redis down: the last override known (or none), and what needs Redis
	 * will say so. */
	effective(w->api, cache_find(q, w->c->tenant), &w->eff);
	step(w);
}

static void refreshed(const struct err *e, const struct quota_override *o, void *arg)
{
	struct tenant_entry *t = arg;
	t->refresh = NULL;
	if (e == NULL)
		t->o = *o;
	t->fetched_ms = clock_mono_ms(); /* after a failure too: retried in a second */
}

/* Know c's tenant's quotas, then step. Only a tenant not seen yet waits for
 * Redis: a known one's quotas are used as they are while a stale entry is
 * read again in the background, so Redis is on no request's path for it. */
static void resolve(struct api_quota_wait *w)
{
	struct tenant_entry *t = cache_find(w->api->quota, w->c->tenant);
	if (t) {
		if (clock_mono_ms() - t->fetched_ms >= CACHE_FRESH_MS && t->refresh == NULL)
			t->refresh = store_quota_get(w->api->store, t->name, refreshed, t);
		effective(w->api, t, &w->eff);
		step(w);
		return;
	}
	w->op = store_quota_get(w->api->store, w->c->tenant, fetched, w);
}

void api_quota_gate(struct call *c, api_handler h)
{
	/* The common case, a known tenant without a rate: nothing to wait for,
	 * nothing to allocate. */
	struct tenant_entry *t = cache_find(c->api->quota, c->tenant);
	if (t && clock_mono_ms() - t->fetched_ms < CACHE_FRESH_MS) {
		struct quota eff;
		effective(c->api, t, &eff);
		if (eff.v[QUOTA_REQUESTS_PER_SECOND] == 0) {
			count_request(c->api->quota, c->tenant);
			h(c);
			return;
		}
	}
	struct api_quota_wait *w = api_quota_wait_new(c, NULL, NULL);
	w->gate = true;
	w->handler = h;
	resolve(w);
}

bool api_quota_admit_now(struct call *c, const struct api_quota_ask *ask)
{
	struct tenant_entry *t = cache_find(c->api->quota, c->tenant);
	if (ask->session || !ask->exec || t == NULL ||
	    clock_mono_ms() - t->fetched_ms >= CACHE_FRESH_MS)
		return false;
	struct api_quota_wait w = {.api = c->api, .c = c, .ask = *ask};
	effective(c->api, t, &w.eff);
	if (w.eff.v[QUOTA_EXECUTIONS] || w.eff.v[QUOTA_EXEC_SECONDS_PER_HOUR])
		return false;
	start_exec(&w); /* counted without waiting; w goes no further */
	return true;
}

void api_quota_admit(struct call *c, const struct api_quota_ask *ask, api_quota_next next,
		     void *ctx, void (*ctx_free)(void *ctx))
{
	struct api_quota_wait *w = api_quota_wait_new(c, ctx, ctx_free);
	w->admit = true;
	w->ask = *ask;
	w->next = next;
	resolve(w);
}

void api_quota_admit_or(struct call *c, const struct api_quota_ask *ask, api_quota_next next,
			api_quota_refused refused, void *ctx, void (*ctx_free)(void *ctx))
{
	struct api_quota_wait *w = api_quota_wait_new(c, ctx, ctx_free);
	w->admit = true;
	w->ask = *ask;
	w->next = next;
	w->refused = refused;
	resolve(w);
}
