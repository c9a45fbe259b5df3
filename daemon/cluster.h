/* cluster.h: several daemons on one Redis (issue 15; docs/deploy.md,
 * "Several nodes on one Redis").
 *
 * Every --heartbeat-ms each node writes its heartbeat (P heartbeat:<node>,
 * JSON, PX --node-lost-ms) and its time in P nodes (a sorted set), and in
 * the same script reads every node's heartbeat back: the view routing and
 * placement use, so a request costs no Redis read for it. A node whose
 * heartbeat key has expired is lost; a session routed to it is tombstoned
 * node_lost by whoever asks first (store_nodes.c's script, atomic with the
 * check), and the node, when it heartbeats again, ends exactly those
 * sessions (its heartbeat is written first, then the tombs are read, in one
 * script: no tomb can be added after it looked).
 *
 * cluster_pick.c holds the pure parts (a heartbeat's parse, the pick of the
 * node with the most room, the advertised URL), unit-tested. */
#ifndef CI_CLUSTER_H
#define CI_CLUSTER_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct config;
struct manager;
struct store;
struct cluster;

#define CLUSTER_NODE_NAME_MAX 63
#define CLUSTER_URL_MAX 255
/* Nodes read per heartbeat: beyond that the view is cut (and says so). */
#define CLUSTER_NODES_MAX 1000

/* One node as its heartbeat says (and when it was read). */
struct cluster_node {
	char name[CLUSTER_NODE_NAME_MAX + 1];
	char url[CLUSTER_URL_MAX + 1]; /* "" : takes no forwarded calls */
	int64_t sessions, max_sessions, room, pool_ready;
	bool draining;
	int64_t started_ms;   /* wall clock, the node's */
	int64_t heartbeat_ms; /* wall clock, the node's: its score in P nodes */
	char version[32];
	bool live; /* its heartbeat key was there when last read */
};

/* A heartbeat's JSON into *n (name, url and numbers checked); -1 and errp
 * when it is not one. */
int cluster_node_parse(const char *json, size_t len, struct cluster_node *n, struct err **errp);

/* The index in nodes[0..n) of the node a new session goes to, other than
 * self: live, not draining, with a URL, the most room (ties: the name, so
 * every node picks alike); -1 when none has room. *asked gets how many
 * live peers were considered. */
int cluster_pick(const struct cluster_node *nodes, size_t n, const char *self, size_t *asked);

/* The URL peers reach this node at: advertise when set, else from a TCP
 * listen that is not a wildcard ("http[s]://host:port"), else "". */
void cluster_advertise_url(const char *advertise, const char *listen, bool tls, char *out,
			   size_t size);

/* Start heartbeating on base (the first once mgr has recovered). Caller
 * owns it (cluster_free). */
struct cluster *cluster_new(struct event_base *base, const struct config *cfg, struct store *st,
			    struct manager *mgr);
void cluster_free(struct cluster *cl);

/* This node's name and advertised URL ("" when none). */
const char *cluster_self(const struct cluster *cl);
const char *cluster_url(const struct cluster *cl);

/* The view (borrowed until the next heartbeat's answer): every node in P
 * nodes, this one included. */
const struct cluster_node *cluster_nodes(const struct cluster *cl, size_t *n);
/* A node of the view by name, or NULL. Borrowed as above. */
struct cluster_node *cluster_node_find(struct cluster *cl, const char *name);

/* Whether name may be lost: not in the view, not live when last read, or
 * its last heartbeat older than the time a heartbeat should take to show
 * (node-lost-ms - heartbeat-ms). Routing then asks Redis (the authority). */
bool cluster_node_suspect(struct cluster *cl, const char *name);

/* Whether this node takes a new session now: recovered, not draining,
 * fewer sessions (live and being created) than --max-sessions. */
bool cluster_has_room(const struct cluster *cl);

/* Heartbeats written and failed, sessions ended because another node
 * tombstoned them node_lost (for /metrics). */
void cluster_counts(const struct cluster *cl, uint64_t *beats, uint64_t *beat_failures,
		    uint64_t *reconciled);

#endif
