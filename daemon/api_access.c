/* api_access.c: the end of every request: one access log line (info) and
 * its count in the request metrics, by route pattern, never by raw path. */
#include "api.h"

#include <stdio.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"

static void access_done(struct http_req *req, int status, uint64_t bytes, void *arg)
{
	struct call *c = arg;
	c->done = true;
	double seconds = (double)(clock_mono_us() - c->started_us) / 1e6;
	const char *method = http_req_method(req);
	const char *route = c->route ? c->route->pattern : NULL;
	metrics_count_request(c->api->metrics, route, method, status, seconds);
	if (LOG_LEVEL_INFO < log_threshold)
		return;
	char peer[64];
	http_req_peer(req, peer, sizeof(peer));
	/* The raw path and the user agent are the client's words: log_fields
	 * escapes them, so they cannot end the line or forge another. */
	struct log_field f[] = {
	    LOG_STR("method", method),
	    LOG_STR("route", route ? route : "other"),
	    LOG_STR("path", http_req_path(req)),
	    LOG_NUM("status", status ? status : 499),
	    LOG_NUM("duration_ms", (double)(int64_t)(seconds * 1e6) / 1000.0),
	    LOG_NUM("bytes", bytes),
	    LOG_STR("request_id", c->request_id),
	    LOG_STR("tenant", c->tenant),
	    LOG_STR("key_id", c->key_id[0] ? c->key_id : NULL),
	    LOG_STR("traceparent", c->traceparent[0] ? c->traceparent : NULL),
	    LOG_STR("peer", peer[0] ? peer : NULL),
	    LOG_STR("user_agent", http_req_header(req, "User-Agent")),
	};
	log_fields(LOG_LEVEL_INFO, "access", f, sizeof(f) / sizeof(f[0]));
}

void api_access_begin(struct call *c)
{
	http_req_set_done_cb(c->req, access_done, c);
}
