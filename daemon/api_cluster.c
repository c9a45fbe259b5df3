/* api_cluster.c: any node answers for any session (cluster.h, forward.h).
 *
 * A session route whose id is not this node's goes where its record says:
 * here (today's path), to a live peer (forwarded), or, when that peer has
 * stopped heartbeating, nowhere: 410 node_lost, tombstoned atomically with
 * the check so every node says the same from then on. A new session is made
 * here when this node has room, else on the live node with the most room.
 * A call that came from a peer is always answered here: it was routed (and
 * counted against its tenant's rate) where it entered. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "api.h"
#include "buf.h"
#include "clock.h"
#include "cluster.h"
#include "forward.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "metrics_hist.h"
#include "session.h"
#include "session_json.h"
#include "store_nodes.h"
#include "xalloc.h"

/* Sessions never move, so whose a session is can be remembered: capped,
 * least recently used out first. */
#define OWNERS_MAX 4096
#define OWNERS_BUCKETS 1024

struct owner {
	char id[SESSION_ID_LEN + 1];
	char node[CLUSTER_NODE_NAME_MAX + 1];
	char tenant[64];
	struct owner *hnext;
	TAILQ_ENTRY(owner) lru;
};

struct api_cluster {
	struct cluster *cl;
	struct forwarder *fwd;
	struct owner *buckets[OWNERS_BUCKETS];
	TAILQ_HEAD(owner_lru_, owner) lru; /* most recent first */
	size_t n;
	uint64_t forwarded, placed_away, lost_answers;
};

static unsigned owner_hash(const char *id)
{
	unsigned h = 5381;
	for (; *id; id++)
		h = h * 33 + (unsigned char)*id;
	return h % OWNERS_BUCKETS;
}

static struct owner **owner_slot(struct api_cluster *ac, const char *id)
{
	struct owner **p = &ac->buckets[owner_hash(id)];
	while (*p && strcmp((*p)->id, id) != 0)
		p = &(*p)->hnext;
	return p;
}

static struct owner *owner_get(struct api_cluster *ac, const char *id)
{
	struct owner *o = *owner_slot(ac, id);
	if (o) {
		TAILQ_REMOVE(&ac->lru, o, lru);
		TAILQ_INSERT_HEAD(&ac->lru, o, lru);
	}
	return o;
}

static void owner_drop(struct api_cluster *ac, struct owner *o)
{
	struct owner **p = owner_slot(ac, o->id);
	*p = o->hnext;
	TAILQ_REMOVE(&ac->lru, o, lru);
	ac->n--;
	free(o);
}

static void owner_put(struct api_cluster *ac, const char *id, const char *node, const char *tenant)
{
	if (*owner_slot(ac, id))
		return;
	if (ac->n >= OWNERS_MAX)
		owner_drop(ac, TAILQ_LAST(&ac->lru, owner_lru_));
	struct owner *o = xcalloc(1, sizeof(*o));
	snprintf(o->id, sizeof(o->id), "%s", id);
	snprintf(o->node, sizeof(o->node), "%s", node);
	snprintf(o->tenant, sizeof(o->tenant), "%s", tenant);
	struct owner **p = owner_slot(ac, id);
	*p = o;
	TAILQ_INSERT_HEAD(&ac->lru, o, lru);
	ac->n++;
}

struct api_cluster *api_cluster_new(struct cluster *cl, struct forwarder *fwd)
{
	struct api_cluster *ac = xcalloc(1, sizeof(*ac));
	ac->cl = cl;
	ac->fwd = fwd;
	TAILQ_INIT(&ac->lru);
	return ac;
}

void api_cluster_free(struct api_cluster *ac)
{
	if (ac == NULL)
		return;
	while (!TAILQ_EMPTY(&ac->lru))
		owner_drop(ac, TAILQ_FIRST(&ac->lru));
	free(ac);
}

bool api_cluster_from_peer(const struct call *c)
{
	const struct api_cluster *ac = c->api->cluster;
	return ac && ac->fwd && forwarder_from_peer(ac->fwd, c->req);
}

bool api_cluster_forged(const struct call *c)
{
	const struct api_cluster *ac = c->api->cluster;
	return ac && ac->fwd && forwarder_forged(ac->fwd, c->req);
}

/* ---- a session of another node ---- */

static void forward_to(struct call *c, const struct cluster_node *n)
{
	struct api_cluster *ac = c->api->cluster;
	if (n->url[0] == '\0') {
		api_fail(c, ERR_UNAVAILABLE,
			 "session %s lives on node %s, which takes no forwarded calls (it has no "
			 "--advertise-url); call that node directly",
			 c->id, n->name);
		return;
	}
	ac->forwarded++;
	forwarder_call(ac->fwd, c, n->name, n->url);
}

struct lost_wait {
	struct api_wait *w;
	char node[CLUSTER_NODE_NAME_MAX + 1];
};

static void lost_answer(const struct err *e, bool alive, const char *reason, int64_t ended_at_ms,
			void *arg)
{
	struct lost_wait *lw = arg;
	struct call *c = api_wait_done(lw->w, NULL);
	char node[sizeof(lw->node)];
	memcpy(node, lw->node, sizeof(node));
	free(lw);
	if (c == NULL)
		return;
	if (e) {
		api_reply(c, 0, NULL, e);
		return;
	}
	struct api_cluster *ac = c->api->cluster;
	if (alive) {
		/* Slow, not lost: the view was behind Redis. */
		const struct cluster_node *n = cluster_node_find(ac->cl, node);
		if (n && n->url[0])
			forward_to(c, n);
		else
			api_fail(c, ERR_UNAVAILABLE,
				 "session %s lives on node %s, which this node does not know the "
				 "address of yet; retry shortly",
				 c->id, node);
		return;
	}
	char when[32];
	bool lost = strncmp(reason, "node_lost", 9) == 0;
	if (lost)
		ac->lost_answers++;
	api_fail(c, lost ? ERR_NODE_LOST : ERR_EXPIRED, "session %s ended at %s (dead): %s", c->id,
		 clock_format_rfc3339(ended_at_ms, when, sizeof(when)), reason);
}

/* The node of c's session is suspected lost: Redis decides, and the
 * tombstone goes with the decision. */
static void ask_lost(struct call *c, const char *node, const char *tenant)
{
	struct api_cluster *ac = c->api->cluster;
	const struct cluster_node *n = cluster_node_find(ac->cl, node);
	char reason[300], when[32];
	if (n && n->heartbeat_ms > 0)
		snprintf(reason, sizeof(reason),
			 "node_lost: node %s has not heartbeated since %s (limit %lld ms)", node,
			 clock_format_rfc3339(n->heartbeat_ms, when, sizeof(when)),
			 (long long)c->api->cfg->node_lost_ms);
	else
		snprintf(reason, sizeof(reason),
			 "node_lost: node %s has no heartbeat (it never wrote one, or it was "
			 "forgotten; limit %lld ms)",
			 node, (long long)c->api->cfg->node_lost_ms);
	struct lost_wait *lw = xcalloc(1, sizeof(*lw));
	snprintf(lw->node, sizeof(lw->node), "%s", node);
	lw->w = api_wait_new(c, NULL);
	store_node_lost(c->api->store, c->id, node, tenant, reason, lost_answer, lw);
}

static void route_to(struct call *c, const char *node, const char *tenant)
{
	struct api_cluster *ac = c->api->cluster;
	/* Another tenant's session is none of this caller's business: today's
	 * path answers 404, and nothing is forwarded or tombstoned for it. */
	if (strcmp(node, cluster_self(ac->cl)) == 0 || strcmp(tenant, c->tenant) != 0) {
		c->route->handler(c);
		return;
	}
	if (!cluster_node_suspect(ac->cl, node)) {
		forward_to(c, cluster_node_find(ac->cl, node));
		return;
	}
	ask_lost(c, node, tenant);
}

static void owner_known(const struct err *e, const char *node, const char *tenant, void *arg)
{
	struct call *c = api_wait_done(arg, NULL);
	if (c == NULL)
		return;
	/* No record (or Redis failing): today's path says 404, 410 from the
	 * tombstone, or 503. */
	if (e || node == NULL || tenant == NULL) {
		c->route->handler(c);
		return;
	}
	owner_put(c->api->cluster, c->id, node, tenant);
	route_to(c, node, tenant);
}

static void route_session(struct call *c)
{
	struct api_cluster *ac = c->api->cluster;
	if (manager_get(c->api->mgr, c->id, c->tenant)) {
		c->route->handler(c);
		return;
	}
	struct owner *o = owner_get(ac, c->id);
	if (o) {
		char node[sizeof(o->node)], tenant[sizeof(o->tenant)];
		memcpy(node, o->node, sizeof(node));
		memcpy(tenant, o->tenant, sizeof(tenant));
		route_to(c, node, tenant);
		return;
	}
	store_session_owner(c->api->store, c->id, owner_known, api_wait_new(c, NULL));
}

/* ---- a new session ---- */

static void place(struct call *c)
{
	struct api_cluster *ac = c->api->cluster;
	/* Without the cluster secret nothing can be forwarded: today's path. */
	if (cluster_has_room(ac->cl) || c->api->cfg->cluster_secret_file[0] == '\0') {
		c->route->handler(c);
		return;
	}
	size_t n, asked;
	const struct cluster_node *nodes = cluster_nodes(ac->cl, &n);
	int i = cluster_pick(nodes, n, cluster_self(ac->cl), &asked);
	if (i < 0 && asked == 0) {
		/* Alone: today's answer (draining, max-sessions, recovering). */
		c->route->handler(c);
		return;
	}
	if (i < 0) {
		api_fail(c, ERR_UNAVAILABLE,
			 "no room for a new session: this node (%s) is full or draining, and none "
			 "of the %zu other live nodes asked has room",
			 cluster_self(ac->cl), asked);
		return;
	}
	/* Until its next heartbeat says, count this one against it: a burst
	 * of creates spreads instead of landing on one node. */
	struct cluster_node *to = cluster_node_find(ac->cl, nodes[i].name);
	to->room--;
	ac->placed_away++;
	forward_to(c, to);
}

/* A peer placed it here: here or nowhere. */
static void place_for_peer(struct call *c)
{
	struct api_cluster *ac = c->api->cluster;
	if (!cluster_has_room(ac->cl)) {
		api_fail(c, ERR_UNAVAILABLE, "no room on node %s (%zu sessions of %lld%s)",
			 cluster_self(ac->cl), manager_count(c->api->mgr),
			 (long long)c->api->cfg->max_sessions,
			 manager_is_draining(c->api->mgr) ? ", draining" : "");
		return;
	}
	c->route->handler(c);
}

/* ---- GET /v1/sessions: the tenant's sessions on every live node ---- */

/* What one list reads from Redis at most (its script blocks Redis while
 * it runs: a cap on the ids it looks at bounds that). */
#define LIST_MAX_RECORDS 10000
#define LIST_MAX_SCANNED 50000

static void list_one(const struct session *s, void *arg)
{
	session_to_json(s, arg, false);
}

static void listed(const struct err *e, const char *const *records, const size_t *lens, size_t n,
		   bool cut, void *arg)
{
	struct call *c = api_wait_done(arg, NULL);
	if (c == NULL)
		return;
	/* Redis failing: this node's own sessions still list, marked partial. */
	if (e) {
		n = 0;
		cut = true;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "sessions");
	jg_arr(g);
	manager_foreach(c->api->mgr, c->tenant, list_one, g);
	for (size_t i = 0; i < n; i++) {
		struct session *s = session_from_record(records[i], lens[i], NULL);
		if (s && strcmp(s->tenant, c->tenant) == 0 &&
		    manager_get(c->api->mgr, s->id, c->tenant) == NULL)
			session_to_json(s, g, false);
		session_free(s);
	}
	jg_arr_end(g);
	if (cut)
		jg_kv_bool(g, "partial", true);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

/* The other nodes' sessions come from their records in Redis (one script),
 * not from asking each node: a node that is slow or unreachable does not
 * hold the list, and its sessions are listed as their records say (their
 * state as of the record's last write: "ready"). */
static void list_all(struct call *c)
{
	struct api_cluster *ac = c->api->cluster;
	store_nodes_list(c->api->store, cluster_self(ac->cl), c->tenant, LIST_MAX_RECORDS,
			 LIST_MAX_SCANNED, listed, api_wait_new(c, NULL));
}

void api_cluster_route(struct call *c)
{
	struct api_cluster *ac = c->api->cluster;
	if (ac == NULL || ac->fwd == NULL) {
		c->route->handler(c);
		return;
	}
	/* A forged cluster token was refused already (api.c's route_authorized,
	 * before the quota gate). */
	bool create = c->route->handler == api_sessions_create;
	if (forwarder_from_peer(ac->fwd, c->req)) {
		if (create)
			place_for_peer(c);
		else
			c->route->handler(c);
		return;
	}
	if (c->id[0] && strncmp(http_req_path(c->req), "/v1/sessions/", 13) == 0)
		route_session(c);
	else if (c->route->handler == api_sessions_list)
		list_all(c);
	else if (create)
		place(c);
	else
		c->route->handler(c);
}

/* ---- GET /v1/admin/nodes ---- */

void api_cluster_nodes(struct call *c)
{
	struct api_cluster *ac = c->api->cluster;
	AUTOGEN yajl_gen g = json_gen_new();
	size_t n = 0;
	const struct cluster_node *nodes = ac ? cluster_nodes(ac->cl, &n) : NULL;
	int64_t now = clock_now_ms();
	jg_obj(g);
	jg_kv_str(g, "self", ac ? cluster_self(ac->cl) : c->api->cfg->node);
	jg_kv_int(g, "heartbeat_ms", c->api->cfg->heartbeat_ms);
	jg_kv_int(g, "node_lost_ms", c->api->cfg->node_lost_ms);
	jg_str(g, "nodes");
	jg_arr(g);
	for (size_t i = 0; i < n; i++) {
		const struct cluster_node *x = &nodes[i];
		jg_obj(g);
		jg_kv_str(g, "node", x->name);
		jg_kv_str(g, "state", x->live ? "live" : "lost");
		jg_kv_str(g, "url", x->url);
		jg_kv_int(g, "sessions", x->sessions);
		jg_kv_int(g, "max_sessions", x->max_sessions);
		jg_kv_int(g, "room", x->room);
		jg_kv_int(g, "pool_ready", x->pool_ready);
		jg_kv_bool(g, "draining", x->draining);
		jg_kv_int(g, "started_ms", x->started_ms);
		jg_kv_int(g, "heartbeat_ms", x->heartbeat_ms);
		jg_kv_time(g, "heartbeat_at", x->heartbeat_ms);
		jg_kv_int(g, "age_ms", now - x->heartbeat_ms);
		jg_kv_str(g, "version", x->version);
		jg_obj_end(g);
	}
	jg_arr_end(g);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

/* ---- DELETE /v1/admin/nodes?node=NAME ---- */

struct forget_wait {
	struct api_wait *w;
	char node[CLUSTER_NODE_NAME_MAX + 1];
};

static void forgotten(const struct err *e, int state, int64_t n, void *arg)
{
	struct forget_wait *fw = arg;
	struct call *c = api_wait_done(fw->w, NULL);
	char node[sizeof(fw->node)];
	memcpy(node, fw->node, sizeof(node));
	free(fw);
	if (c == NULL)
		return;
	if (e) {
		api_reply(c, 0, NULL, e);
		return;
	}
	if (state == 1) {
		api_fail(c, ERR_BUSY, "node %s is live (its heartbeat is there): stop it first",
			 node);
		return;
	}
	if (state == 2) {
		api_fail(c, ERR_NOT_FOUND, "no node %s in this Redis and prefix", node);
		return;
	}
	log_warn("cluster: node %s forgotten by the operator; %lld of its sessions ended "
		 "(node_lost)",
		 node, (long long)n);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "node", node);
	jg_kv_int(g, "sessions_ended", n);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

void api_cluster_forget(struct call *c)
{
	AUTOFREE char *node = api_query_param(http_req_query(c->req), "node");
	size_t len = node ? strlen(node) : 0;
	bool ok = len > 0 && len <= CLUSTER_NODE_NAME_MAX;
	for (size_t i = 0; ok && i < len; i++)
		ok = (unsigned char)node[i] > ' ' && node[i] != 0x7f;
	if (!ok) {
		api_fail(c, ERR_BAD_REQUEST,
			 "node: expected ?node=NAME (1 to %d visible characters)",
			 CLUSTER_NODE_NAME_MAX);
		return;
	}
	if (strcmp(node, c->api->cfg->node) == 0) {
		api_fail(c, ERR_BUSY, "node %s is this node", node);
		return;
	}
	char reason[200];
	snprintf(reason, sizeof(reason), "node_lost: node %s was forgotten by the operator", node);
	struct forget_wait *fw = xcalloc(1, sizeof(*fw));
	snprintf(fw->node, sizeof(fw->node), "%s", node);
	fw->w = api_wait_new(c, NULL);
	store_node_forget(c->api->store, node, reason, forgotten, fw);
}

int api_cluster_metrics(struct http_api *api, struct buf *b)
{
	const struct api_cluster *ac = api->cluster;
	if (ac == NULL)
		return 0;
	size_t n, live = 0;
	const struct cluster_node *nodes = cluster_nodes(ac->cl, &n);
	for (size_t i = 0; i < n; i++)
		live += nodes[i].live;
	uint64_t beats, failed, reconciled;
	cluster_counts(ac->cl, &beats, &failed, &reconciled);
	if (metrics_head(b, "ci_cluster_nodes", "gauge",
			 "Nodes in the shared Redis, by state (live: heartbeat key present; lost), "
			 "as of this node's last heartbeat.") < 0 ||
	    metrics_printf(b, "ci_cluster_nodes{state=\"live\"} %zu\n", live) < 0 ||
	    metrics_printf(b, "ci_cluster_nodes{state=\"lost\"} %zu\n", n - live) < 0 ||
	    metrics_head(b, "ci_cluster_heartbeats_total", "counter",
			 "This node's heartbeats, by outcome.") < 0 ||
	    metrics_printf(b, "ci_cluster_heartbeats_total{outcome=\"written\"} %" PRIu64 "\n",
			   beats) < 0 ||
	    metrics_printf(b, "ci_cluster_heartbeats_total{outcome=\"failed\"} %" PRIu64 "\n",
			   failed) < 0 ||
	    metrics_head(b, "ci_cluster_routed_total", "counter",
			 "Calls this node routed away: forwarded (every call sent to a peer: to a "
			 "session's owner, or a new session to a node with room), placed (of them, "
			 "the new sessions), node_lost (410 for a node without a heartbeat).") <
		0 ||
	    metrics_printf(b, "ci_cluster_routed_total{to=\"forwarded\"} %" PRIu64 "\n",
			   ac->forwarded) < 0 ||
	    metrics_printf(b, "ci_cluster_routed_total{to=\"placed\"} %" PRIu64 "\n",
			   ac->placed_away) < 0 ||
	    metrics_printf(b, "ci_cluster_routed_total{to=\"node_lost\"} %" PRIu64 "\n",
			   ac->lost_answers) < 0 ||
	    metrics_head(b, "ci_cluster_reconciled_total", "counter",
			 "Sessions this node ended on its return because another node had declared "
			 "them node_lost.") < 0)
		return -1;
	if (metrics_printf(b, "ci_cluster_reconciled_total %" PRIu64 "\n", reconciled) < 0)
		return -1;
	return forwarder_metrics(ac->fwd, b); /* the proxy's own series (forward.c) */
}
