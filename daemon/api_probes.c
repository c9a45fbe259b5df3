/* api_probes.c: GET /healthz, /readyz and /metrics, and the loop-lag tick
 * that /metrics reports. */
#include "api.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "buf.h"
#include "clock.h"
#include "egress.h"
#include "fdbudget.h"
#include "json.h"
#include "metrics.h"
#include "procstat.h"
#include "runs.h"
#include "snapshot.h"
#include "version.h"
#include "webhook.h"

void api_probes_healthz(struct call *c)
{
	static const char body[] = "{\"status\":\"ok\"}";
	api_reply_body(c, 200, "application/json", body, sizeof(body) - 1);
}

void api_probes_readyz(struct call *c)
{
	struct http_api *api = c->api;
	bool docker_ok = docker_reachable(api->docker), redis_ok = store_connected(api->store);
	bool draining = manager_is_draining(api->mgr);
	bool recovered = manager_is_recovered(api->mgr);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	bool ready = docker_ok && redis_ok && !draining && recovered;
	if (ready) {
		jg_kv_str(g, "status", "ready");
	} else {
		/* Every reason, "; "-separated: an operator fixes them all at once. */
		/* With sentinels, what is being done about Redis, and the last
		 * thing that went wrong (a sentinel's, or the master's). */
		char redis_why[400] = "redis is not reachable";
		if (!redis_ok && store_master_name(api->store)) {
			const char *problem = store_problem(api->store);
			snprintf(redis_why, sizeof(redis_why),
				 "redis is not reachable: asking the sentinels for master %s%s%s",
				 store_master_name(api->store), problem ? " (last: " : "",
				 problem ? problem : "");
			if (problem)
				strcat(redis_why, ")");
		}
		const char *reasons[] = {
		    docker_ok ? NULL : "docker engine is not reachable",
		    redis_ok ? NULL : redis_why,
		    draining ? "draining" : NULL,
		    recovered ? NULL : "recovering the sessions of a previous run",
		};
		char msg[640] = "not ready: ";
		bool first = true;
		for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
			if (reasons[i] == NULL)
				continue;
			size_t used = strlen(msg);
			snprintf(msg + used, sizeof(msg) - used, "%s%s", first ? "" : "; ",
				 reasons[i]);
			first = false;
		}
		jg_str(g, "error");
		jg_obj(g);
		jg_kv_str(g, "code", "unavailable");
		jg_kv_str(g, "message", msg);
		jg_obj_end(g);
	}
	jg_str(g, "checks");
	jg_obj(g);
	jg_kv_str(g, "docker", docker_ok ? "ok" : "down");
	jg_kv_str(g, "redis", redis_ok ? "ok" : "down");
	jg_obj_end(g);
	if (store_master_name(api->store)) {
		/* Which master, and whether it is being asked for again. */
		const char *master = store_master(api->store);
		jg_str(g, "redis");
		jg_obj(g);
		jg_kv_str(g, "via", "sentinel");
		jg_kv_str(g, "name", store_master_name(api->store));
		jg_kv_str(g, "master", master);
		jg_kv_bool(g, "resolving", store_resolving(api->store));
		jg_kv_int(g, "failovers", (int64_t)store_failovers(api->store));
		jg_obj_end(g);
	}
	jg_obj_end(g);
	if (!ready)
		http_req_add_header(c->req, "Retry-After", "1");
	api_reply(c, ready ? 200 : 503, g, NULL);
}

#define TICK_US 50000

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct http_api *api = arg;
	int64_t now = clock_mono_us(), lag = now - api->tick_due_us;
	if (lag > api->lag_max_us)
		api->lag_max_us = lag;
	api->tick_due_us = now + TICK_US;
}

/* The page's cap: the series are bounded (routes, statuses, 1,000 tenants),
 * so it never comes near; a bug must not grow a reply without bound. */
#define METRICS_PAGE_MAX (8u << 20)

static int write_build_and_loop(struct http_api *api, struct buf *b)
{
	double lag_s = (double)api->lag_max_us / 1e6;
	api->lag_max_us = 0;
	if (metrics_head(b, "ci_build_info", "gauge",
			 "The daemon's version and commit (always 1).") < 0 ||
	    metrics_printf(b, "ci_build_info{version=\"") < 0 ||
	    metrics_label_escape(b, ci_version, 64) < 0 || metrics_printf(b, "\",git=\"") < 0 ||
	    metrics_label_escape(b, ci_git, 64) < 0 || metrics_printf(b, "\"} 1\n") < 0)
		return -1;
	if (metrics_head(b, "ci_event_loop_lag_seconds", "gauge",
			 "Worst event-loop lag since the last scrape (a 50 ms tick's lateness).") <
	    0)
		return -1;
	return metrics_printf(b, "ci_event_loop_lag_seconds %.6f\n", lag_s);
}

static int write_endings(struct http_api *api, struct buf *b)
{
	uint64_t ends[MANAGER_END_COUNT];
	manager_endings(api->mgr, ends);
	if (metrics_head(b, "ci_session_endings_total", "counter",
			 "Sessions ended, by reason (deleted, idle, lifetime, failed, crashed, "
			 "drained, node_lost).") < 0)
		return -1;
	for (int i = 0; i < MANAGER_END_COUNT; i++)
		if (metrics_printf(b, "ci_session_endings_total{reason=\"%s\"} %" PRIu64 "\n",
				   manager_end_name((enum manager_end)i), ends[i]) < 0)
			return -1;
	return 0;
}

static int write_core(struct http_api *api, struct buf *b)
{
	const struct egress_stats *es = egress_get_stats(api->egress);
	size_t pool_ready;
	uint64_t pool_hits, pool_misses;
	manager_pool_stats(api->mgr, &pool_ready, &pool_hits, &pool_misses);
	return metrics_printf(
	    b,
	    "# HELP ci_sessions Sessions on this node.\n# TYPE ci_sessions gauge\nci_sessions %zu\n"
	    "# HELP ci_session_creates_total Session creates.\n# TYPE ci_session_creates_total "
	    "counter\n"
	    "ci_session_creates_total{result=\"ok\"} %" PRIu64 "\n"
	    "ci_session_creates_total{result=\"error\"} %" PRIu64 "\n"
	    "# HELP ci_execs_total Executions by status.\n# TYPE ci_execs_total counter\n"
	    "ci_execs_total{status=\"ok\"} %" PRIu64 "\nci_execs_total{status=\"error\"} %" PRIu64
	    "\n"
	    "ci_execs_total{status=\"timeout\"} %" PRIu64
	    "\nci_execs_total{status=\"killed\"} %" PRIu64 "\n"
	    "# HELP ci_up Dependencies reachable (1) or not (0).\n# TYPE ci_up gauge\n"
	    "ci_up{dependency=\"docker\"} %d\nci_up{dependency=\"redis\"} %d\n"
	    "# HELP ci_egress_decisions_total Egress proxy decisions.\n"
	    "# TYPE ci_egress_decisions_total counter\n"
	    "ci_egress_decisions_total{decision=\"allowed\"} %" PRIu64 "\n"
	    "ci_egress_decisions_total{decision=\"denied\"} %" PRIu64 "\n"
	    "ci_egress_decisions_total{decision=\"failed\"} %" PRIu64 "\n"
	    "# HELP ci_egress_closed_total Open proxy connections closed by a PATCH or a session's "
	    "end.\n# TYPE ci_egress_closed_total counter\nci_egress_closed_total %" PRIu64 "\n"
	    "# HELP ci_egress_dns_queries_total DNS queries the egress resolver sent.\n"
	    "# TYPE ci_egress_dns_queries_total counter\nci_egress_dns_queries_total %" PRIu64 "\n"
	    "# HELP ci_pool_size Warm sandboxes ready to be claimed.\n# TYPE ci_pool_size gauge\n"
	    "ci_pool_size %zu\n"
	    "# HELP ci_pool_target Warm sandboxes the pool aims at: pool-size, or more after "
	    "bursts of creates (pool-max).\n# TYPE ci_pool_target gauge\nci_pool_target %zu\n"
	    "# HELP ci_pool_hits_total Creates served from the warm pool.\n"
	    "# TYPE ci_pool_hits_total counter\nci_pool_hits_total %" PRIu64 "\n"
	    "# HELP ci_pool_misses_total Creates the pool could have served but was empty for.\n"
	    "# TYPE ci_pool_misses_total counter\nci_pool_misses_total %" PRIu64 "\n",
	    manager_count(api->mgr), api->creates, api->create_failures, api->execs[EXEC_OK],
	    api->execs[EXEC_ERROR], api->execs[EXEC_TIMEOUT], api->execs[EXEC_KILLED],
	    docker_reachable(api->docker) ? 1 : 0, store_connected(api->store) ? 1 : 0, es->allowed,
	    es->denied, es->failed, es->closed_by_policy, es->dns_queries, pool_ready,
	    manager_pool_target(api->mgr), pool_hits, pool_misses);
}

/* Redis through Sentinel (issue 15): the master in use, as an info gauge,
 * and the master changes followed. Both present (0, no master) without
 * sentinels, so a dashboard needs no special case. */
static int write_redis(struct http_api *api, struct buf *b)
{
	const char *master = store_master(api->store);
	if (metrics_head(b, "ci_redis_failovers_total", "counter",
			 "Redis master changes this daemon followed (sentinel).") < 0 ||
	    metrics_printf(b, "ci_redis_failovers_total %" PRIu64 "\n",
			   store_failovers(api->store)) < 0)
		return -1;
	if (metrics_head(b, "ci_redis_master_info", "gauge",
			 "The Redis master in use (1), by address; 0 while it is being asked "
			 "for.") < 0 ||
	    metrics_printf(b, "ci_redis_master_info{master=\"") < 0 ||
	    metrics_label_escape(b, master ? master : "", 64) < 0)
		return -1;
	return metrics_printf(b, "\"} %d\n", master && store_connected(api->store) ? 1 : 0);
}

/* The process gauges every Prometheus client library exports, under their
 * usual names, and the allocator's view (procstat.h says why both). The
 * open descriptors are ci_fds{what="in_use"}. */
static int write_process(struct buf *b)
{
	struct procstat ps;
	procstat_read(&ps);
	return metrics_printf(
	    b,
	    "# HELP process_resident_memory_bytes Resident memory of the daemon.\n"
	    "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %" PRId64
	    "\n"
	    "# HELP process_cpu_seconds_total User and system CPU time of the daemon.\n"
	    "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.3f\n"
	    "# HELP process_start_time_seconds When the daemon started (Unix seconds).\n"
	    "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %" PRId64 "\n"
	    "# HELP ci_heap_bytes The allocator's heap: in_use is allocated and not freed, "
	    "mapped is held from the kernel.\n# TYPE ci_heap_bytes gauge\n"
	    "ci_heap_bytes{what=\"in_use\"} %" PRId64 "\nci_heap_bytes{what=\"mapped\"} %" PRId64
	    "\n",
	    ps.rss_bytes, ps.cpu_seconds, ps.start_time_s, ps.heap_in_use, ps.heap_mapped);
}

/* What the caps on clients and descriptors did (issue 9, findings 2, 3). */
static int write_caps(struct http_api *api, struct buf *b)
{
	const struct http_server_stats *hs = http_server_get_stats(api->srv);
	const struct fdbudget *fb = &fdbudget_daemon;
	return metrics_printf(
	    b,
	    "# HELP ci_http_refused_total API connections refused or closed by a cap.\n"
	    "# TYPE ci_http_refused_total counter\n"
	    "ci_http_refused_total{reason=\"per_peer\"} %" PRIu64 "\n"
	    "ci_http_refused_total{reason=\"full\"} %" PRIu64 "\n"
	    "ci_http_refused_total{reason=\"emfile\"} %" PRIu64 "\n"
	    "ci_http_refused_total{reason=\"evicted\"} %" PRIu64 "\n"
	    "ci_http_refused_total{reason=\"head_timeout\"} %" PRIu64 "\n"
	    "ci_http_refused_total{reason=\"evicted_stream\"} %" PRIu64 "\n"
	    "ci_http_refused_total{reason=\"body_timeout\"} %" PRIu64 "\n"
	    "# HELP ci_http_reserve_accepted_total API connections taken past max-connections "
	    "on the probes' reserve.\n"
	    "# TYPE ci_http_reserve_accepted_total counter\n"
	    "ci_http_reserve_accepted_total %" PRIu64 "\n"
	    "# HELP ci_fds File descriptors: the soft limit, and in use (estimate).\n"
	    "# TYPE ci_fds gauge\nci_fds{what=\"limit\"} %" PRId64 "\n"
	    "ci_fds{what=\"in_use\"} %" PRId64 "\n"
	    "# HELP ci_fd_refusals_total Work refused by the descriptor budget.\n"
	    "# TYPE ci_fd_refusals_total counter\n"
	    "ci_fd_refusals_total{kind=\"session\"} %" PRIu64 "\n"
	    "ci_fd_refusals_total{kind=\"tunnel\"} %" PRIu64 "\n"
	    "ci_fd_refusals_total{kind=\"http\"} %" PRIu64 "\n"
	    "# HELP ci_tls_handshake_failures_total TLS handshakes that failed (bad TLS, or plain "
	    "HTTP to the TLS port).\n# TYPE ci_tls_handshake_failures_total counter\n"
	    "ci_tls_handshake_failures_total %" PRIu64 "\n"
	    "# HELP ci_audit_dropped_total Audit entries the Redis stream did not get (the "
	    "log has them).\n# TYPE ci_audit_dropped_total counter\n"
	    "ci_audit_dropped_total %" PRIu64 "\n",
	    hs->refused_peer, hs->refused_full, hs->refused_emfile, hs->evicted, hs->head_timeouts,
	    hs->evicted_streams, hs->body_timeouts, hs->reserve_accepted, fb->limit,
	    fdbudget_in_use(fb), fb->refused[FDBUDGET_KINDS], fb->refused[FDBUDGET_EGRESS],
	    fb->refused[FDBUDGET_HTTP], hs->tls_handshake_failures, audit_dropped(api->audit));
}

/* The workflow's runs (issue 12). */
static int write_runs(struct http_api *api, struct buf *b)
{
	struct runs_stats rs = {0};
	if (api->runs)
		runs_stats(api->runs, &rs);
	return metrics_printf(
	    b,
	    "# HELP ci_runs_total Runs ended, by status.\n# TYPE ci_runs_total counter\n"
	    "ci_runs_total{status=\"ok\"} %" PRIu64 "\nci_runs_total{status=\"failed\"} %" PRIu64
	    "\nci_runs_total{status=\"skipped\"} %" PRIu64
	    "\nci_runs_total{status=\"degraded\"} %" PRIu64 "\n"
	    "# HELP ci_runs_active Runs running or waiting for a review on this node.\n"
	    "# TYPE ci_runs_active gauge\nci_runs_active %zu\n",
	    rs.ok, rs.failed, rs.skipped, rs.degraded, rs.active);
}

/* The review webhook's deliveries (zeros without one). */
static int write_webhook(struct http_api *api, struct buf *b)
{
	uint64_t delivered, failed, dropped;
	webhook_stats(api->webhook, &delivered, &failed, &dropped);
	return metrics_printf(
	    b,
	    "# HELP ci_review_webhook_deliveries_total Review webhook events: delivered, given up "
	    "after every try, or dropped (the queue was full).\n"
	    "# TYPE ci_review_webhook_deliveries_total counter\n"
	    "ci_review_webhook_deliveries_total{outcome=\"delivered\"} %" PRIu64 "\n"
	    "ci_review_webhook_deliveries_total{outcome=\"failed\"} %" PRIu64 "\n"
	    "ci_review_webhook_deliveries_total{outcome=\"dropped\"} %" PRIu64 "\n",
	    delivered, failed, dropped);
}

/* Snapshots (zeros when they are off). */
static int write_snapshots(struct http_api *api, struct buf *b)
{
	struct snapshots_stats st = {0};
	if (api->snapshots)
		snapshots_stats(api->snapshots, &st);
	return metrics_printf(
	    b,
	    "# HELP ci_snapshots_total Snapshots by what became of them on this node: stored, "
	    "failed (not taken), restored, expired (retention).\n"
	    "# TYPE ci_snapshots_total counter\n"
	    "ci_snapshots_total{outcome=\"stored\"} %" PRIu64 "\n"
	    "ci_snapshots_total{outcome=\"failed\"} %" PRIu64 "\n"
	    "ci_snapshots_total{outcome=\"restored\"} %" PRIu64 "\n"
	    "ci_snapshots_total{outcome=\"expired\"} %" PRIu64 "\n"
	    "# HELP ci_snapshot_uploads_pending Snapshots in this node's spool waiting for the "
	    "store.\n# TYPE ci_snapshot_uploads_pending gauge\nci_snapshot_uploads_pending %" PRIu64
	    "\n# HELP ci_snapshot_upload_retries_total Upload attempts the store refused.\n"
	    "# TYPE ci_snapshot_upload_retries_total counter\nci_snapshot_upload_retries_total "
	    "%" PRIu64 "\n",
	    st.taken, st.failed, st.restored, st.expired, st.pending, st.upload_retries);
}

void api_probes_metrics(struct call *c)
{
	struct http_api *api = c->api;
	struct buf b;
	buf_init(&b, METRICS_PAGE_MAX);
	if (write_build_and_loop(api, &b) < 0 || write_core(api, &b) < 0 ||
	    write_redis(api, &b) < 0 || write_endings(api, &b) < 0 ||
	    metrics_write(api->metrics, &b) < 0 || write_caps(api, &b) < 0 ||
	    write_process(&b) < 0 || write_runs(api, &b) < 0 || write_webhook(api, &b) < 0 ||
	    write_snapshots(api, &b) < 0 || api_cluster_metrics(api, &b) < 0) {
		buf_release(&b);
		api_fail(c, ERR_INTERNAL, "metrics: the page outgrew its cap");
		return;
	}
	api_reply_body(c, 200, "text/plain; version=0.0.4", b.data, b.len);
	buf_release(&b);
}

void api_probes_start(struct http_api *api)
{
	api->tick = event_new(api->base, -1, EV_PERSIST, tick_cb, api);
	struct timeval tv = {0, TICK_US};
	api->tick_due_us = clock_mono_us() + TICK_US;
	event_add(api->tick, &tv);
}

void api_probes_stop(struct http_api *api)
{
	event_free(api->tick);
	api->tick = NULL;
}
