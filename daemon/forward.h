/* forward.h: passing a call to the node that owns its session, and the
 * owner's answer back to the caller, streamed both ways (issue 15).
 *
 * Several daemons share one Redis; any of them answers for any session.
 * When the session lives on another node, the receiving node proxies the
 * request to the owner's advertised URL (its heartbeat, cluster.h): the
 * method, the path and query, the caller's headers but the hop-by-hop
 * ones, and the body as it arrives (a 100 MB upload is never held whole).
 * The answer comes back the same way: status, the headers a client acts on
 * (Content-Type, Content-Length, Retry-After, X-Request-Id, ...), and the
 * body chunk by chunk, so an exec's NDJSON events reach the caller as the
 * owner writes them. Both directions have backpressure: a slow caller
 * pauses the owner's transfer, a slow owner pauses reading the upload.
 *
 * Peers are told apart from clients by the cluster secret
 * (--cluster-secret-file): a forwarded request carries it in the
 * X-CI-Cluster-Token header, and only a request with the right token is
 * treated as forwarded (never forwarded again, not counted twice against
 * the tenant's request rate). A client cannot claim to be a peer. */
#ifndef CI_FORWARD_H
#define CI_FORWARD_H

#include <event2/event.h>
#include <stdbool.h>

#include "err.h"

struct call;
struct config;
struct forwarder;
struct http_req;

/* A forwarder on base with the peer options of cfg (--cluster-secret-file,
 * --peer-ca-file, ...). Caller owns it (forwarder_free). */
struct forwarder *forwarder_new(struct event_base *base, const struct config *cfg,
				struct err **errp);

/* Transfers in flight are ended: their callers get a closed connection
 * (a short body), never a hang. NULL-safe. */
void forwarder_free(struct forwarder *f);

/* SIGHUP: read the secret and the CA file again. */
int forwarder_reload(struct forwarder *f, const struct config *cfg, struct err **errp);

/* Proxy c to node, whose API is at base_url ("http://host:port" or
 * "https://host:port"), and answer c with what node answers. c's body
 * must not have been read yet. c is answered exactly once, never inside
 * this call: the owner's answer, or, when node cannot be reached or
 * breaks off before answering, 503 unavailable naming node and why (a
 * break after the answer began closes the caller's connection). */
void forwarder_call(struct forwarder *f, struct call *c, const char *node, const char *base_url);

/* Whether req came from a peer node: it carries the cluster secret
 * (compared in constant time). */
bool forwarder_from_peer(const struct forwarder *f, const struct http_req *req);

/* Whether req carries an X-CI-Cluster-Token that is not the cluster secret
 * (or this node has none): a client claiming to be a peer. The routing
 * hook answers it 403 forbidden before anything else (api_cluster.c);
 * forwarder_call never passes a caller's own token on either way.
 * (Added to the fixed interface by the forwarding side, issue 15.) */
bool forwarder_forged(const struct forwarder *f, const struct http_req *req);

/* Append the forwarder's series to b (Prometheus text, for /metrics):
 * ci_forward_calls_total{outcome} and ci_forward_inflight. -1 when b's cap
 * is reached. NULL-safe (nothing). (Added by the forwarding side.) */
struct buf;
int forwarder_metrics(const struct forwarder *f, struct buf *b);

#endif
