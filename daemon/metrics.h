/* metrics.h: the API's own series for /metrics: HTTP requests by route,
 * method and status, latency histograms, and per-tenant usage. Pure (no
 * event loop, no I/O), unit-tested; api_access.c and the handlers count,
 * api_probes.c writes the page.
 *
 * Every label has a bounded set of values: the route is a pattern of the
 * route table (or "other"), the method one of a fixed list (or "other"),
 * the status a number from 100 to 599, and at most METRICS_TENANTS_MAX
 * tenants get series of their own; the rest are summed under "_other". */
#ifndef CI_METRICS_H
#define CI_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics_hist.h"

struct buf;

#define METRICS_TENANTS_MAX 1000
#define METRICS_TENANT_OTHER "_other"
#define METRICS_TENANT_NAME_MAX 64
/* (route, method, status) series kept. The statuses are the daemon's own,
 * so the real number is a few hundred at most; past the cap a new series
 * is not made and its requests are counted as dropped (a series of its own). */
#define METRICS_REQUEST_SERIES_MAX 4096

struct metrics_tenant {
	char name[METRICS_TENANT_NAME_MAX + 1];
	uint64_t execs, sessions_created;
	double exec_seconds;
};

struct metrics_request_series {
	const char *route; /* a pattern of the route table (static), or "other" */
	uint8_t method;    /* index into the method list */
	uint16_t status;
	uint64_t count;
};

enum metrics_create_kind { METRICS_CREATE_POOL_HIT, METRICS_CREATE_POOL_MISS };

struct metrics {
	struct metrics_request_series *requests;
	size_t n_requests, cap_requests;
	uint64_t requests_dropped;
	struct metrics_hist http_duration;
	struct metrics_hist create_duration[2]; /* by enum metrics_create_kind */
	struct metrics_hist exec_duration;
	/* Tenants: open addressing over twice the cap, so probes stay short. */
	struct metrics_tenant *tenants[2 * METRICS_TENANTS_MAX];
	size_t n_tenants;
	struct metrics_tenant other;
};

struct metrics *metrics_new(void);
void metrics_free(struct metrics *mx);

/* One request answered: route is the matched pattern (static; NULL for
 * none), status 0 when the client left before an answer (counted as 499,
 * as nginx names it), seconds from its head to its answer. */
void metrics_count_request(struct metrics *mx, const char *route, const char *method, int status,
			   double seconds);
void metrics_count_create(struct metrics *mx, const char *tenant, enum metrics_create_kind kind,
			  double seconds);
/* A session created without a latency worth observing (the one-shot's). */
void metrics_count_tenant_session(struct metrics *mx, const char *tenant);
/* One execution finished with a result: its latency and its tenant's usage. */
void metrics_count_exec(struct metrics *mx, const char *tenant, double seconds);

/* The tenant's counters (created on first use, or the "_other" ones past
 * the cap); for the unit tests and the writers. NULL tenant is "default". */
struct metrics_tenant *metrics_tenant(struct metrics *mx, const char *tenant);

/* Append every series of mx to b, HELP and TYPE first. -1 at b's cap. */
int metrics_write(const struct metrics *mx, struct buf *b);

#endif
