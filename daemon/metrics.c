/* metrics.c: the API's counters and histograms, and their part of the
 * /metrics page. */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "xalloc.h"

static const char *const metrics_methods[] = {"GET",   "HEAD",   "POST",    "PUT",
					      "PATCH", "DELETE", "OPTIONS", "other"};
#define METHODS_N (sizeof(metrics_methods) / sizeof(metrics_methods[0]))

struct metrics *metrics_new(void)
{
	struct metrics *mx = xcalloc(1, sizeof(*mx));
	metrics_hist_init(&mx->http_duration, metrics_latency_bounds, metrics_latency_nbounds);
	for (size_t i = 0; i < 2; i++)
		metrics_hist_init(&mx->create_duration[i], metrics_latency_bounds,
				  metrics_latency_nbounds);
	metrics_hist_init(&mx->exec_duration, metrics_latency_bounds, metrics_latency_nbounds);
	snprintf(mx->other.name, sizeof(mx->other.name), "%s", METRICS_TENANT_OTHER);
	return mx;
}

void metrics_free(struct metrics *mx)
{
	if (mx == NULL)
		return;
	for (size_t i = 0; i < sizeof(mx->tenants) / sizeof(mx->tenants[0]); i++)
		free(mx->tenants[i]);
	free(mx->requests);
	free(mx);
}

static uint8_t method_index(const char *method)
{
	for (uint8_t i = 0; i < METHODS_N - 1; i++)
		if (method && strcmp(method, metrics_methods[i]) == 0)
			return i;
	return METHODS_N - 1;
}

void metrics_count_request(struct metrics *mx, const char *route, const char *method, int status,
			   double seconds)
{
	metrics_hist_observe(&mx->http_duration, seconds);
	if (route == NULL)
		route = "other";
	uint8_t mi = method_index(method);
	uint16_t st = status >= 100 && status <= 599 ? (uint16_t)status : 499;
	/* Few series, hit in order of first use: a linear scan is cheaper
	 * than hashing the route. Routes are the table's static strings,
	 * compared by address; "other" is one literal in this file. */
	for (size_t i = 0; i < mx->n_requests; i++) {
		struct metrics_request_series *r = &mx->requests[i];
		if (r->route == route && r->method == mi && r->status == st) {
			r->count++;
			return;
		}
	}
	if (mx->n_requests >= METRICS_REQUEST_SERIES_MAX) {
		mx->requests_dropped++;
		return;
	}
	if (mx->n_requests == mx->cap_requests) {
		mx->cap_requests = mx->cap_requests ? 2 * mx->cap_requests : 32;
		mx->requests = xrealloc(mx->requests, mx->cap_requests * sizeof(*mx->requests));
	}
	mx->requests[mx->n_requests++] =
	    (struct metrics_request_series){.route = route, .method = mi, .status = st, .count = 1};
}

static uint32_t tenant_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

struct metrics_tenant *metrics_tenant(struct metrics *mx, const char *tenant)
{
	if (tenant == NULL || tenant[0] == '\0')
		tenant = "default";
	if (strlen(tenant) > METRICS_TENANT_NAME_MAX)
		return &mx->other; /* tenant names are shorter; never cut one into another's */
	const size_t slots = sizeof(mx->tenants) / sizeof(mx->tenants[0]);
	size_t i = tenant_hash(tenant) % slots;
	while (mx->tenants[i]) {
		if (strcmp(mx->tenants[i]->name, tenant) == 0)
			return mx->tenants[i];
		i = (i + 1) % slots;
	}
	if (mx->n_tenants >= METRICS_TENANTS_MAX)
		return &mx->other;
	struct metrics_tenant *t = xcalloc(1, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", tenant);
	mx->tenants[i] = t;
	mx->n_tenants++;
	return t;
}

void metrics_count_create(struct metrics *mx, const char *tenant, enum metrics_create_kind kind,
			  double seconds)
{
	metrics_hist_observe(&mx->create_duration[kind == METRICS_CREATE_POOL_HIT ? 0 : 1],
			     seconds);
	metrics_tenant(mx, tenant)->sessions_created++;
}

void metrics_count_tenant_session(struct metrics *mx, const char *tenant)
{
	metrics_tenant(mx, tenant)->sessions_created++;
}

void metrics_count_exec(struct metrics *mx, const char *tenant, double seconds)
{
	metrics_hist_observe(&mx->exec_duration, seconds);
	if (!(seconds > 0))
		seconds = 0;
	struct metrics_tenant *t = metrics_tenant(mx, tenant);
	t->execs++;
	t->exec_seconds += seconds;
}

static int write_requests(const struct metrics *mx, struct buf *b)
{
	if (metrics_head(b, "ci_http_requests_total", "counter",
			 "HTTP requests answered, by route pattern, method and status (499: the "
			 "client left first).") < 0)
		return -1;
	for (size_t i = 0; i < mx->n_requests; i++) {
		const struct metrics_request_series *r = &mx->requests[i];
		if (metrics_printf(b, "ci_http_requests_total{route=\"") < 0 ||
		    metrics_label_escape(b, r->route, 256) < 0 ||
		    metrics_printf(b, "\",method=\"%s\",status=\"%u\"} %llu\n",
				   metrics_methods[r->method], r->status,
				   (unsigned long long)r->count) < 0)
			return -1;
	}
	if (metrics_head(b, "ci_http_request_series_dropped_total", "counter",
			 "Requests not counted by route because the series cap was reached.") < 0)
		return -1;
	return metrics_printf(b, "ci_http_request_series_dropped_total %llu\n",
			      (unsigned long long)mx->requests_dropped);
}

enum tenant_field { TF_EXECS, TF_EXEC_SECONDS, TF_SESSIONS };

static int write_tenant_sample(struct buf *b, const char *name, const struct metrics_tenant *t,
			       enum tenant_field f)
{
	if (metrics_printf(b, "%s{tenant=\"", name) < 0 ||
	    metrics_label_escape(b, t->name, METRICS_TENANT_NAME_MAX) < 0)
		return -1;
	switch (f) {
	case TF_EXECS: return metrics_printf(b, "\"} %llu\n", (unsigned long long)t->execs);
	case TF_EXEC_SECONDS: return metrics_printf(b, "\"} %.6f\n", t->exec_seconds);
	case TF_SESSIONS:
		return metrics_printf(b, "\"} %llu\n", (unsigned long long)t->sessions_created);
	}
	return -1;
}

static int write_tenants(const struct metrics *mx, struct buf *b)
{
	static const struct {
		const char *name, *help;
		enum tenant_field f;
	} fams[] = {
	    {"ci_tenant_execs_total", "Executions with a result, by tenant.", TF_EXECS},
	    {"ci_tenant_exec_seconds_total", "Execution time used, by tenant.", TF_EXEC_SECONDS},
	    {"ci_tenant_sessions_created_total", "Sessions created, by tenant.", TF_SESSIONS},
	};
	const size_t slots = sizeof(mx->tenants) / sizeof(mx->tenants[0]);
	bool other_used = mx->other.execs || mx->other.sessions_created;
	for (size_t k = 0; k < sizeof(fams) / sizeof(fams[0]); k++) {
		if (metrics_head(b, fams[k].name, "counter", fams[k].help) < 0)
			return -1;
		for (size_t i = 0; i < slots; i++)
			if (mx->tenants[i] &&
			    write_tenant_sample(b, fams[k].name, mx->tenants[i], fams[k].f) < 0)
				return -1;
		if (other_used && write_tenant_sample(b, fams[k].name, &mx->other, fams[k].f) < 0)
			return -1;
	}
	return 0;
}

int metrics_write(const struct metrics *mx, struct buf *b)
{
	if (write_requests(mx, b) < 0 ||
	    metrics_head(b, "ci_http_request_duration_seconds", "histogram",
			 "Time from a request's head to its answer.") < 0 ||
	    metrics_hist_write(&mx->http_duration, b, "ci_http_request_duration_seconds", "") < 0 ||
	    metrics_head(b, "ci_session_create_duration_seconds", "histogram",
			 "Session creates that succeeded, from the request to the session ready; "
			 "pool=hit when a warm sandbox served it.") < 0 ||
	    metrics_hist_write(&mx->create_duration[0], b, "ci_session_create_duration_seconds",
			       "pool=\"hit\"") < 0 ||
	    metrics_hist_write(&mx->create_duration[1], b, "ci_session_create_duration_seconds",
			       "pool=\"miss\"") < 0 ||
	    metrics_head(b, "ci_exec_duration_seconds", "histogram",
			 "Executions with a result, from the request to the result.") < 0 ||
	    metrics_hist_write(&mx->exec_duration, b, "ci_exec_duration_seconds", "") < 0)
		return -1;
	return write_tenants(mx, b);
}
