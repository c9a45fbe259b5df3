/* http_api.h: the v1 HTTP API (docs/api.md) as the rest of the daemon sees
 * it: made, listening, drained, freed. The routes, request parsing and JSON
 * in and out are api.c's and api_<resource>.c's (api.h); only they know
 * URLs. */
#ifndef CI_HTTP_API_H
#define CI_HTTP_API_H

#include <stdbool.h>

#include "config.h"
#include "docker.h"
#include "err.h"
#include "manager.h"
#include "store.h"

struct http_api;
struct http_server;

struct egress;

struct http_api *http_api_new(struct event_base *base, const struct config *cfg,
			      struct manager *mgr, struct docker *docker, struct store *store,
			      struct egress *egress);
void http_api_free(struct http_api *api);

/* Listen on cfg->listen; over TLS when http_api_set_tls was called first. */
int http_api_listen(struct http_api *api, struct err **errp);

/* Serve TLS (tls.h; the caller's, it outlives the api). Before listening. */
struct tls;
void http_api_set_tls(struct http_api *api, struct tls *tls);

/* SIGHUP: take the server's limits (timeouts, connection caps) again from
 * the configuration; they apply to what comes next. */
void http_api_reload(struct http_api *api);

/* What POST /v1/admin/drain does (main's drain, as on SIGTERM). */
void http_api_set_drain(struct http_api *api, void (*fn)(void *arg), void *arg);

/* The review webhook (webhook.h; the caller's, it outlives the api), for
 * its counts on /metrics. */
struct webhook;
void http_api_set_webhook(struct http_api *api, struct webhook *wh);
struct snapshots;
void http_api_set_snapshots(struct http_api *api, struct snapshots *sn);

/* Several nodes on one Redis: the view and the proxy (cluster.h, forward.h;
 * the caller's, freed after the api, the forwarder before it). */
struct cluster;
struct forwarder;
void http_api_set_cluster(struct http_api *api, struct cluster *cl, struct forwarder *fwd);

/* End open event streams cleanly (the daemon is about to exit). */
void http_api_end_streams(struct http_api *api);

/* The run engine (runs.h; main's, it outlives the api), and the audit
 * trail it writes to (the api's). */
struct runs;
struct audit;
void http_api_set_runs(struct http_api *api, struct runs *runs);
/* The fixer rules runs' requests are checked against (fixer_target.h; the
 * caller's, set again after a SIGHUP replaced them). */
struct fixer_targets;
void http_api_set_fixers(struct http_api *api, const struct fixer_targets *ft);
struct audit *http_api_audit(struct http_api *api);

/* Stop accepting connections (drain). */
void http_api_stop(struct http_api *api);

#endif
