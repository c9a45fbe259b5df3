/* cluster.c: this node's heartbeat, the view of every node, and the
 * reconcile of sessions other nodes declared lost (cluster.h). */
#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "store.h"
#include "store_nodes.h"
#include "version.h"
#include "xalloc.h"

/* Before the manager has adopted its sessions, look again this often (the
 * first heartbeat waits for it: see cluster_new). */
#define RECOVERY_POLL_MS 100

struct cluster {
	struct event_base *base;
	const struct config *cfg;
	struct store *st;
	struct manager *mgr;
	char self[CLUSTER_NODE_NAME_MAX + 1];
	char url[CLUSTER_URL_MAX + 1];
	int64_t started_ms;
	struct event *timer;
	struct store_nodes_op *beat; /* the one heartbeat in flight, or NULL */
	struct cluster_node *nodes;  /* the view */
	size_t n;
	int64_t last_ok_mono_ms; /* the last heartbeat Redis took; 0: none yet */
	bool failing;            /* the last heartbeat failed (logged once per outage) */
	uint64_t beats, failures, reconciled;
};

static void arm(struct cluster *cl, int64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(cl->timer, &tv);
}

bool cluster_has_room(const struct cluster *cl)
{
	return manager_is_recovered(cl->mgr) && !manager_is_draining(cl->mgr) &&
	       (int64_t)manager_count(cl->mgr) < cl->cfg->max_sessions;
}

static char *heartbeat_json(struct cluster *cl, int64_t now, size_t *len)
{
	int64_t count = (int64_t)manager_count(cl->mgr);
	int64_t room = cluster_has_room(cl) ? cl->cfg->max_sessions - count : 0;
	size_t ready = 0;
	uint64_t hits, misses;
	manager_pool_stats(cl->mgr, &ready, &hits, &misses);
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "node", cl->self);
	jg_kv_str(g, "url", cl->url);
	jg_kv_bool(g, "forwardable", cl->url[0] != '\0');
	jg_kv_int(g, "sessions", count);
	jg_kv_int(g, "max_sessions", cl->cfg->max_sessions);
	jg_kv_int(g, "room", room);
	jg_kv_int(g, "pool_ready", (int64_t)ready);
	jg_kv_bool(g, "draining", manager_is_draining(cl->mgr));
	jg_kv_int(g, "started_ms", cl->started_ms);
	jg_kv_int(g, "heartbeat_ms", now);
	jg_kv_str(g, "version", ci_version);
	jg_obj_end(g);
	const char *t = jg_text(g, len);
	return xstrndup(t, *len);
}

/* Another node declared these sessions lost while this one was away; the
 * heartbeat that just landed took their records. End them here. */
static void reconcile(struct cluster *cl, const struct store_beat *b)
{
	for (size_t i = 0; i < b->n_lost; i++) {
		AUTOJSON yajl_val v = json_parse(b->lost_tombs[i], strlen(b->lost_tombs[i]), NULL);
		const char *reason = json_get_str(v, "reason");
		char why[600];
		snprintf(why, sizeof(why), "%s", reason ? reason : "node_lost");
		if (manager_end_lost(cl->mgr, b->lost_ids[i], why)) {
			cl->reconciled++;
			log_warn("session %s: ended here, another node declared it lost while this "
				 "node was not heartbeating (%s)",
				 b->lost_ids[i], why);
		}
	}
}

static void view_replace(struct cluster *cl, const struct store_beat *b)
{
	struct cluster_node *nodes = xcalloc(b->n + 1, sizeof(*nodes));
	size_t m = 0;
	for (size_t i = 0; i < b->n; i++) {
		struct cluster_node *n = &nodes[m];
		struct err *e = NULL;
		if (b->hbs[i] && cluster_node_parse(b->hbs[i], b->hb_lens[i], n, &e) == 0 &&
		    strcmp(n->name, b->names[i]) == 0) {
			n->heartbeat_ms = b->scores[i];
			m++;
			continue;
		}
		if (e) {
			log_debug("cluster: heartbeat of %s ignored: %s", b->names[i], e->message);
			err_free(e);
		}
		/* Lost (or unreadable): what the last view knew of it, not live. */
		struct cluster_node *old = cluster_node_find(cl, b->names[i]);
		if (old)
			*n = *old;
		else
			memset(n, 0, sizeof(*n));
		snprintf(n->name, sizeof(n->name), "%s", b->names[i]);
		n->heartbeat_ms = b->scores[i];
		n->live = false;
		m++;
	}
	free(cl->nodes);
	cl->nodes = nodes;
	cl->n = m;
}

static void beat_done(const struct err *e, const struct store_beat *b, void *arg)
{
	struct cluster *cl = arg;
	cl->beat = NULL;
	if (e) {
		cl->failures++;
		if (!cl->failing)
			log_warn("cluster: heartbeat not written: %s (peers will declare this node "
				 "lost after %lld ms without one)",
				 e->message, (long long)cl->cfg->node_lost_ms);
		cl->failing = true;
		return;
	}
	int64_t now = clock_mono_ms();
	if (cl->last_ok_mono_ms && now - cl->last_ok_mono_ms > cl->cfg->node_lost_ms)
		log_warn("cluster: heartbeat resumed after %lld ms (node-lost-ms %lld): peers may "
			 "have declared this node's sessions lost; %zu to end here",
			 (long long)(now - cl->last_ok_mono_ms), (long long)cl->cfg->node_lost_ms,
			 b->n_lost);
	else if (cl->failing)
		log_info("cluster: heartbeat written again");
	cl->failing = false;
	cl->last_ok_mono_ms = now;
	cl->beats++;
	view_replace(cl, b);
	reconcile(cl, b);
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cluster *cl = arg;
	/* Not before the adoption: a session adopted after the reconcile would
	 * escape it, and a node still recovering has no room to offer. */
	if (!manager_is_recovered(cl->mgr)) {
		arm(cl, RECOVERY_POLL_MS);
		return;
	}
	arm(cl, cl->cfg->heartbeat_ms);
	if (cl->beat)
		return; /* one in flight at most: a slow Redis never piles them up */
	int64_t now = clock_now_ms();
	size_t len;
	AUTOFREE char *hb = heartbeat_json(cl, now, &len);
	cl->beat = store_nodes_beat(cl->st, cl->self, hb, len, cl->cfg->node_lost_ms, now,
				    CLUSTER_NODES_MAX, beat_done, cl);
}

struct cluster *cluster_new(struct event_base *base, const struct config *cfg, struct store *st,
			    struct manager *mgr)
{
	struct cluster *cl = xcalloc(1, sizeof(*cl));
	cl->base = base;
	cl->cfg = cfg;
	cl->st = st;
	cl->mgr = mgr;
	snprintf(cl->self, sizeof(cl->self), "%s", cfg->node);
	cluster_advertise_url(cfg->advertise_url, cfg->listen, cfg->tls_cert[0] != '\0', cl->url,
			      sizeof(cl->url));
	cl->started_ms = clock_now_ms();
	cl->timer = evtimer_new(base, tick, cl);
	if (cl->url[0])
		log_info("cluster: node %s heartbeats every %lld ms, lost after %lld ms; peers "
			 "forward to %s",
			 cl->self, (long long)cfg->heartbeat_ms, (long long)cfg->node_lost_ms,
			 cl->url);
	else
		log_warn("cluster: node %s has no URL for peers (listen %s is a wildcard or a unix "
			 "socket; set --advertise-url): it takes no forwarded calls and gets no "
			 "placed sessions",
			 cl->self, cfg->listen);
	arm(cl, 0);
	return cl;
}

void cluster_free(struct cluster *cl)
{
	if (cl == NULL)
		return;
	store_nodes_cancel(cl->beat);
	if (cl->timer)
		event_free(cl->timer);
	free(cl->nodes);
	free(cl);
}

const char *cluster_self(const struct cluster *cl)
{
	return cl->self;
}

const char *cluster_url(const struct cluster *cl)
{
	return cl->url;
}

const struct cluster_node *cluster_nodes(const struct cluster *cl, size_t *n)
{
	*n = cl->n;
	return cl->nodes;
}

struct cluster_node *cluster_node_find(struct cluster *cl, const char *name)
{
	for (size_t i = 0; i < cl->n; i++)
		if (strcmp(cl->nodes[i].name, name) == 0)
			return &cl->nodes[i];
	return NULL;
}

bool cluster_node_suspect(struct cluster *cl, const char *name)
{
	const struct cluster_node *n = cluster_node_find(cl, name);
	if (n == NULL || !n->live)
		return true;
	return clock_now_ms() - n->heartbeat_ms > cl->cfg->node_lost_ms - cl->cfg->heartbeat_ms;
}

void cluster_counts(const struct cluster *cl, uint64_t *beats, uint64_t *beat_failures,
		    uint64_t *reconciled)
{
	*beats = cl->beats;
	*beat_failures = cl->failures;
	*reconciled = cl->reconciled;
}
