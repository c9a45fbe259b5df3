/* manager_recovery.c: Docker and Redis reconciled after a start, the
 * registry written back after a Redis outage, orphan containers, shutdown. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "defer.h"
#include "ipc_dir.h"
#include "json.h"
#include "log.h"
#include "manager_internal.h"
#include "network.h"
#include "store.h"
#include "store_quota.h"
#include "session_json.h"
#include "xalloc.h"

static struct docker_call *list_containers(struct manager *m, docker_list_cb cb, void *arg);
static size_t sweep_state_dirs(struct manager *m, bool remove, yajl_gen list);
static bool dir_is_live(const char *name, void *arg);

/* ---- recovery after a restart ----
 *
 * Docker (containers labelled with this node and prefix) and Redis (this
 * node's records) are listed, then reconciled: a running container with a
 * record is adopted (its runner reconnects to the re-created socket, and its
 * kernel keeps its variables); a container without a record is an orphan and
 * is removed; a record without a running container is tombstoned "dead". */

/* A container as the engine listed it, copied out of the driver's answer. */
struct listed {
	char *id, *state, *session;
};

struct recovery {
	struct manager *m;
	int pending;
	bool failed;
	bool recorded;  /* Redis's records came back (the store called back) */
	bool abandoned; /* the manager is gone: the next callback frees this */
	struct listed *containers;
	size_t n_containers;
	struct session **records;
	size_t n_records;
};

static void recovery_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	manager_recover(arg);
}

static void recovery_free(struct recovery *r)
{
	for (size_t i = 0; i < r->n_containers; i++) {
		free(r->containers[i].id);
		free(r->containers[i].state);
		free(r->containers[i].session);
	}
	free(r->containers);
	for (size_t i = 0; i < r->n_records; i++)
		session_free(r->records[i]);
	free(r->records);
	free(r);
}

static void adopt(struct manager *m, struct session *s)
{
	struct err *e = NULL;
	char id[SESSION_ID_LEN + 1];
	memcpy(id, s->id, sizeof(id));
	struct msession *ms = msession_new(m, s, &e);
	if (ms == NULL) {
		log_warn("session %s: cannot adopt: %s", id, e->message);
		err_free(e);
		return;
	}
	kernel_link_set_container(ms->link, s->container_id);
	ms->wsvol = workspace_vol_adopt(m->wsdisk, s->id); /* it keeps its files */
	if (s->net_ip[0])
		net_ensure(m->net, NULL, NULL); /* its proxy must listen again */
	msession_arm_idle(ms);
	manager_emit(m, "adopted", s, NULL);
	log_info("session %s: adopted (container %.12s, expires in %llds)", s->id, s->container_id,
		 (long long)((s->expires_at_ms - clock_now_ms()) / 1000));
}

static void net_collected_log(const struct err *e, const struct net_leftovers *found, void *arg)
{
	(void)found;
	(void)arg;
	if (e)
		log_warn("recovery: sandbox network not checked: %s", e->message);
}

static void recovery_reconcile(struct recovery *r)
{
	struct manager *m = r->m;
	size_t adopted = 0, orphans = 0, dead = 0;
	bool *claimed = xcalloc(r->n_records + 1, sizeof(bool));
	for (size_t i = 0; i < r->n_containers; i++) {
		const char *cid = r->containers[i].id, *state = r->containers[i].state;
		const char *sid = r->containers[i].session;
		size_t k = r->n_records;
		for (size_t j = 0; sid && j < r->n_records; j++)
			if (r->records[j] && strcmp(r->records[j]->id, sid) == 0)
				k = j;
		if (sid && manager_find(m, sid))
			continue; /* a session of ours already (recovery ran twice) */
		if (k == r->n_records || state == NULL || strcmp(state, "running") != 0) {
			log_info("recovery: removing %s container %.12s (session %s)",
				 k == r->n_records ? "orphan" : "stopped", cid, sid ? sid : "?");
			docker_container_remove(m->docker, cid, NULL, NULL);
			orphans++;
			continue;
		}
		struct session *s = r->records[k];
		r->records[k] = NULL;
		claimed[k] = true;
		free(s->container_id);
		s->container_id = xstrdup(cid);
		adopt(m, s);
		adopted++;
	}
	for (size_t j = 0; j < r->n_records; j++) {
		struct session *s = r->records[j];
		if (claimed[j] || s == NULL || manager_find(m, s->id))
			continue;
		session_set_state(s, SESSION_DEAD);
		store_session_end(m->store, s,
				  "node lost: its container was gone when the daemon restarted",
				  NULL, NULL);
		log_info("session %s: tombstoned (its container is gone)", s->id);
		m->endings[MANAGER_END_NODE_LOST]++;
		dead++;
	}
	free(claimed);
	/* What a daemon killed with SIGKILL leaves of its warm pool: the
	 * containers went as orphans above, their directories go here. */
	size_t dirs = sweep_state_dirs(m, true, NULL);
	size_t images =
	    workspace_disk_sweep(m->wsdisk, dir_is_live, m, true, NULL, NULL, NULL, NULL);
	log_info("recovery: %zu adopted, %zu containers removed, %zu sessions tombstoned, %zu "
		 "stale state directories removed, %zu workspace images removed",
		 adopted, orphans, dead, dirs, images);
	m->recovered = true;
	/* A sandbox network that no adopted session uses, and that no warm pool
	 * will use, is a previous run's leftover (with its firewall chain). */
	if (m->net && !manager_any_networked(m) && m->cfg->pool_network_size == 0)
		net_collect(m->net, false, true, net_collected_log, NULL);
	/* After recovery, so the reconcile never sees half-made warm sandboxes. */
	pool_fill(m->pool);
}

static void recovery_step_done(struct recovery *r)
{
	if (--r->pending > 0)
		return;
	r->m->recovery = NULL;
	if (r->failed) {
		struct timeval one = {1, 0};
		event_base_once(r->m->base, -1, EV_TIMEOUT, recovery_retry_cb, r->m, &one);
		r->m->recovering = false;
		recovery_free(r);
		return;
	}
	recovery_reconcile(r);
	r->m->recovering = false;
	recovery_free(r);
}

/* The daemon stops with a recovery under way (an engine that does not
 * answer keeps its listing pending): Docker never calls back once the loop
 * has stopped, Redis may (its pending replies end when the store is freed).
 * So a recovery whose records are in goes now; one still waiting for them
 * goes when they come, without its manager. */
void manager_recovery_abandon(struct manager *m)
{
	struct recovery *r = m->recovery;
	if (r == NULL)
		return;
	m->recovery = NULL;
	if (r->recorded) {
		recovery_free(r);
		return;
	}
	r->abandoned = true;
	r->m = NULL;
}

static void recovery_listed(const struct docker_result *res,
			    const struct docker_container_summary *list, size_t n, void *arg)
{
	struct recovery *r = arg;
	if (r->abandoned) {
		recovery_free(r);
		return;
	}
	if (res->error) {
		log_warn("recovery: %s; retrying", res->error->message);
		r->failed = true;
	} else {
		r->containers = xcalloc(n + 1, sizeof(*r->containers));
		for (size_t i = 0; i < n; i++) {
			struct listed *c = &r->containers[r->n_containers++];
			c->id = xstrdup(list[i].id);
			c->state = list[i].state ? xstrdup(list[i].state) : NULL;
			c->session = list[i].session ? xstrdup(list[i].session) : NULL;
		}
	}
	recovery_step_done(r);
}

static void recovery_records(const struct err *e, const char *const *records, const size_t *lens,
			     const int64_t *expires_ms, size_t n, void *arg)
{
	struct recovery *r = arg;
	if (r->abandoned) {
		recovery_free(r);
		return;
	}
	r->recorded = true;
	if (e) {
		log_warn("recovery: %s; retrying", e->message);
		r->failed = true;
	} else {
		r->records = xcalloc(n + 1, sizeof(*r->records));
		for (size_t i = 0; i < n; i++) {
			struct err *pe = NULL;
			struct session *s = session_from_record(records[i], lens[i], &pe);
			if (s == NULL) {
				log_warn("recovery: skipping a record: %s", pe->message);
				err_free(pe);
				continue;
			}
			/* The expiry set is the clock's authority: the record
			 * itself is rewritten only when the session changes. */
			if (expires_ms[i] > s->expires_at_ms) {
				s->expires_at_ms = expires_ms[i];
				s->last_active_at_ms = expires_ms[i] - s->idle_timeout_s * 1000;
			}
			r->records[r->n_records++] = s;
		}
	}
	recovery_step_done(r);
}

void manager_recover(struct manager *m)
{
	if (m->recovered || m->recovering)
		return;
	m->recovering = true;
	struct recovery *r = xcalloc(1, sizeof(*r));
	r->m = m;
	r->pending = 2;
	m->recovery = r;
	list_containers(m, recovery_listed, r);
	store_node_records(m->store, recovery_records, r);
}

/* Redis came back, maybe empty: write every live session back. */
void manager_registry_write_back(void *arg)
{
	struct manager *m = arg;
	if (!m->recovered) {
		manager_recover(m);
		return;
	}
	struct msession *ms;
	size_t n = 0;
	TAILQ_FOREACH (ms, &m->all, all) {
		if (ms->teardown || ms->create || ms->pooled)
			continue;
		msession_persist(ms);
		store_quota_session_restore(m->store, ms->s); /* store_quota.h */
		n++;
	}
	/* After a failover (sentinel://) the new master may lack endings the
	 * old one acknowledged (replication is asynchronous): every ending
	 * held here is written again, so no ended session's record comes back
	 * to life in the new master. */
	bool new_master = store_master_is_new(m->store);
	size_t t_n = 0;
	struct tomb *t;
	TAILQ_FOREACH (t, &m->tombs, link) {
		if (t->unwritten || new_master) {
			manager_tomb_write(m, t);
			t_n++;
		}
	}
	log_info("redis: wrote %zu live sessions and %zu endings back to the registry%s", n, t_n,
		 new_master ? " (a new master)" : "");
}

/* ---- shutdown and orphans ---- */

struct shutdown_op {
	struct manager *m;
	struct shutdown_op *next; /* in m->shutdown, until it ends */
	int pending;
	manager_done_cb cb;
	void *arg;
};

static void shutdown_finish(struct shutdown_op *op)
{
	for (struct shutdown_op **pp = &op->m->shutdown; *pp; pp = &(*pp)->next)
		if (*pp == op) {
			*pp = op->next;
			break;
		}
	op->cb(NULL, op->arg);
	free(op);
}

static void shutdown_net_collected(const struct err *e, const struct net_leftovers *found,
				   void *arg)
{
	(void)found;
	struct shutdown_op *op = arg;
	if (e)
		log_warn("shutdown: sandbox network not removed: %s", e->message);
	shutdown_finish(op);
}

static void shutdown_one_done(const struct err *e, void *arg)
{
	(void)e;
	struct shutdown_op *op = arg;
	if (--op->pending > 0)
		return;
	/* Nothing of ours is on the sandbox network any more: take it and its
	 * firewall chain away rather than leave them to the next daemon. */
	if (op->m->net && !manager_any_networked(op->m)) {
		net_collect(op->m->net, false, true, shutdown_net_collected, op);
		return;
	}
	shutdown_finish(op);
}

static void shutdown_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	shutdown_one_done(NULL, arg);
}

void manager_shutdown_free(struct manager *m)
{
	while (m->shutdown) {
		struct shutdown_op *op = m->shutdown;
		m->shutdown = op->next;
		free(op);
	}
}

void manager_shutdown(struct manager *m, const char *reason, bool pool_only, manager_done_cb cb,
		      void *arg)
{
	m->draining = true;
	struct shutdown_op *op = xcalloc(1, sizeof(*op));
	op->next = m->shutdown; /* freed by manager_free if the loop stops first */
	m->shutdown = op;
	op->m = m;
	op->cb = cb;
	op->arg = arg;
	op->pending = 1; /* ours, released below */
	struct msession *ms, *next;
	for (ms = TAILQ_FIRST(&m->all); ms; ms = next) {
		next = TAILQ_NEXT(ms, all);
		if (ms->teardown || (pool_only && !ms->pooled))
			continue;
		op->pending++;
		msession_end(ms, SESSION_DEAD, MANAGER_END_DRAINED, reason, shutdown_one_done, op);
	}
	if (--op->pending == 0) {
		/* Nothing to wait for; still answer through the loop. */
		op->pending = 1;
		defer_call(m->base, shutdown_deferred, op);
	}
}

/* This node's and prefix's containers, in every state. */
static struct docker_call *list_containers(struct manager *m, docker_list_cb cb, void *arg)
{
	char node[300], prefix[128];
	snprintf(node, sizeof(node), "ci.node=%s", m->cfg->node);
	snprintf(prefix, sizeof(prefix), "ci.prefix=%s", m->cfg->key_prefix);
	const char *const labels[] = {node, prefix};
	return docker_container_list(m->docker, labels, 2, cb, arg);
}

/* Session directories that no session in the table owns. */
static bool dir_is_live(const char *name, void *arg)
{
	return manager_find(arg, name) != NULL;
}

static void dir_listed(const char *name, void *arg)
{
	jg_str(arg, name);
}

/* Session directories without a session here: listed into list (when not
 * NULL), removed with remove. */
static size_t sweep_state_dirs(struct manager *m, bool remove, yajl_gen list)
{
	return ipc_dir_sweep(m->sessions_dir, dir_is_live, m, remove, list ? dir_listed : NULL,
			     list);
}

/* A listing of leftovers, and with remove their removal: answered once
 * every removal has come back, so that after the answer they are gone. */
struct orphans_op {
	struct manager *m;
	bool remove;
	manager_orphans_cb cb;
	void *arg;
	yajl_gen g;  /* the answer, complete once the network is looked at */
	int pending; /* removals in flight, and the network check */
};

static void orphans_step_done(struct orphans_op *op)
{
	if (--op->pending > 0)
		return;
	size_t len;
	const char *t = jg_text(op->g, &len);
	op->cb(NULL, t, len, op->arg);
	json_gen_cleanup(&op->g);
	free(op);
}

static void orphan_removed(const struct docker_result *r, void *arg)
{
	struct orphans_op *op = arg;
	if (r->error) {
		log_warn("gc: %s (the sweep will retry)", r->error->message);
		op->m->orphans_suspected = true;
	}
	orphans_step_done(op);
}

static void orphan_workspace_removed(const struct err *e, void *arg)
{
	struct orphans_op *op = arg;
	if (e)
		op->m->orphans_suspected = true; /* logged by workspace_disk.c */
	orphans_step_done(op);
}

static void orphans_net_collected(const struct err *e, const struct net_leftovers *found, void *arg)
{
	struct orphans_op *op = arg;
	yajl_gen g = op->g;
	jg_str(g, "networks");
	jg_arr(g);
	if (e == NULL && (found->network || found->chain)) {
		jg_obj(g);
		jg_kv_str(g, "network", found->network ? found->network_name : NULL);
		jg_kv_str(g, "bridge", found->bridge);
		jg_kv_str(g, "chain", found->chain ? found->chain_name : NULL);
		jg_obj_end(g);
	}
	jg_arr_end(g);
	jg_obj_end(g);
	orphans_step_done(op);
}

static void orphans_listed(const struct docker_result *res,
			   const struct docker_container_summary *list, size_t n, void *arg)
{
	struct orphans_op *op = arg;
	struct manager *m = op->m;
	if (res->error) {
		op->cb(res->error, NULL, 0, op->arg);
		free(op);
		return;
	}
	op->g = json_gen_new();
	yajl_gen g = op->g;
	op->pending = 1; /* the network check */
	jg_obj(g);
	jg_str(g, "orphans");
	jg_arr(g);
	for (size_t i = 0; i < n; i++) {
		const char *cid = list[i].id, *sid = list[i].session;
		if (sid && manager_find(m, sid))
			continue;
		jg_obj(g);
		jg_kv_str(g, "container", cid);
		jg_kv_str(g, "session", sid);
		jg_kv_str(g, "state", list[i].state);
		jg_obj_end(g);
		if (op->remove) {
			log_info("gc: removing orphan container %.12s (session %s)", cid,
				 sid ? sid : "?");
			op->pending++;
			docker_container_remove(m->docker, cid, orphan_removed, op);
		}
	}
	jg_arr_end(g);
	/* Directories in <state-dir>/s of sessions that are not here. */
	jg_str(g, "state_dirs");
	jg_arr(g);
	size_t dirs = sweep_state_dirs(m, op->remove, g);
	jg_arr_end(g);
	if (op->remove && dirs)
		log_info("gc: removed %zu stale state directories", dirs);
	/* Workspace images of sessions that are not here: answered once they
	 * are unmounted too. */
	jg_str(g, "workspaces");
	jg_arr(g);
	size_t images = workspace_disk_sweep(m->wsdisk, dir_is_live, m, op->remove, dir_listed, g,
					     orphan_workspace_removed, op);
	if (op->remove)
		op->pending += (int)images;
	jg_arr_end(g);
	if (m->net == NULL) {
		struct net_leftovers none = {0};
		orphans_net_collected(NULL, &none, op);
		return;
	}
	net_collect(m->net, manager_any_networked(m), op->remove, orphans_net_collected, op);
}

void manager_orphans(struct manager *m, bool remove, manager_orphans_cb cb, void *arg)
{
	struct orphans_op *op = xcalloc(1, sizeof(*op));
	op->m = m;
	op->remove = remove;
	op->cb = cb;
	op->arg = arg;
	list_containers(m, orphans_listed, op);
}

static void sweep_done(const struct err *e, const char *json, size_t len, void *arg)
{
	(void)json;
	(void)len;
	struct manager *m = arg;
	if (e == NULL)
		m->orphans_suspected = false;
}

/* Every 2 s when a removal failed (Docker was down), and every minute in
 * any case: remove containers of ours that no session owns. Each tick also
 * forgets the endings whose tombstones Redis has let go. */
void manager_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct manager *m = arg;
	manager_tombs_expire(m, clock_now_ms());
	int64_t now = clock_mono_ms();
	if (!m->recovered || m->draining || !docker_reachable(m->docker) ||
	    (!m->orphans_suspected && now - m->last_sweep_ms < 60000))
		return;
	m->last_sweep_ms = now;
	manager_orphans(m, true, sweep_done, m);
}
