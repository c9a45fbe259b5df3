/* manager_teardown.c: the end of a session, for whatever reason (delete,
 * expiry, death, shutdown): the flows under it are cancelled, the container
 * removed, and a tombstone written, so later calls get a 410 that says when
 * and why rather than a bare 404. A warm sandbox, nobody's session, gets no
 * tombstone. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "defer.h"
#include "egress.h"
#include "log.h"
#include "manager_internal.h"
#include "network.h"
#include "store.h"
#include "xalloc.h"

struct teardown_op {
	struct msession *ms;
	int pending; /* the container's removal, the workspace's, the tombstone's write */
	manager_done_cb cb;
	void *arg;
};

/* ---- local tombstones ---- */

struct tomb *manager_tomb_find(struct manager *m, const char *id)
{
	struct tomb *t;
	TAILQ_FOREACH (t, &m->tombs, link)
		if (strcmp(t->id, id) == 0)
			return t;
	return NULL;
}

static void tomb_remove(struct manager *m, struct tomb *t)
{
	TAILQ_REMOVE(&m->tombs, t, link);
	m->n_tombs--;
	free(t->reason);
	free(t);
}

static void tomb_add(struct manager *m, const struct session *s, const char *reason)
{
	struct tomb *t = xcalloc(1, sizeof(*t));
	snprintf(t->id, sizeof(t->id), "%s", s->id);
	snprintf(t->tenant, sizeof(t->tenant), "%s", s->tenant);
	snprintf(t->node, sizeof(t->node), "%s", s->node ? s->node : "");
	t->state = s->state;
	t->reason = xstrdup(reason);
	t->at_ms = clock_now_ms();
	t->unwritten = true;
	TAILQ_INSERT_HEAD(&m->tombs, t, link);
	if (++m->n_tombs > TOMBS_MAX)
		tomb_remove(m, TAILQ_LAST(&m->tombs, tomb_head_));
}

struct tomb_write {
	struct manager *m;
	char id[SESSION_ID_LEN + 1];
};

static void tomb_written(const struct err *e, void *arg)
{
	struct tomb_write *w = arg;
	struct tomb *t = e ? NULL : manager_tomb_find(w->m, w->id);
	if (t)
		t->unwritten = false;
	free(w);
}

/* Write the ending of t to Redis (record and clock removed, tombstone set). */
void manager_tomb_write(struct manager *m, struct tomb *t)
{
	struct session stub = {.tenant = t->tenant, .node = t->node, .state = t->state};
	memcpy(stub.id, t->id, sizeof(stub.id));
	struct tomb_write *w = xcalloc(1, sizeof(*w));
	w->m = m;
	memcpy(w->id, t->id, sizeof(w->id));
	store_session_end(m->store, &stub, t->reason, tomb_written, w);
}

void manager_tombs_expire(struct manager *m, int64_t now_ms)
{
	int64_t cutoff = now_ms - m->cfg->tombstone_ttl_s * 1000;
	struct tomb *t = TAILQ_LAST(&m->tombs, tomb_head_);
	/* Oldest first, up to the first one still young. An unwritten one
	 * stays until Redis has it (manager_registry_write_back). */
	while (t && t->at_ms <= cutoff) {
		struct tomb *newer = TAILQ_PREV(t, tomb_head_, link);
		if (!t->unwritten)
			tomb_remove(m, t);
		t = newer;
	}
}

void manager_tombs_free(struct manager *m)
{
	while (!TAILQ_EMPTY(&m->tombs))
		tomb_remove(m, TAILQ_FIRST(&m->tombs));
}

/* ---- teardown ---- */

static void teardown_step_done(struct teardown_op *op)
{
	if (--op->pending > 0)
		return;
	struct msession *ms = op->ms;
	log_info("session %s: removed (%s)", ms->s->id, ms->end_reason);
	manager_emit(ms->m, "removed", ms->s, ms->end_reason);
	manager_done_cb cb = op->cb;
	void *arg = op->arg;
	ms->teardown = NULL;
	free(op);
	msession_remove(ms);
	if (cb)
		cb(NULL, arg);
}

static void teardown_deferred_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct teardown_op *op = arg;
	op->pending = 1;
	teardown_step_done(op);
}

static void workspace_removed(const struct err *e, void *arg)
{
	struct teardown_op *op = arg;
	if (e)
		op->ms->m->orphans_suspected = true; /* logged by workspace_disk.c */
	teardown_step_done(op);
}

/* The loop-mounted workspace goes after the container (which holds a bind
 * of it), whether or not the container's removal worked: the host's mount
 * and image go now, the device when the last holder lets go. */
static void teardown_workspace(struct teardown_op *op)
{
	struct msession *ms = op->ms;
	if (ms->wsvol == NULL)
		return;
	struct workspace_vol *v = ms->wsvol;
	ms->wsvol = NULL;
	op->pending++;
	workspace_vol_remove(v, workspace_removed, op);
}

static void container_removed(const struct docker_result *r, void *arg)
{
	struct teardown_op *op = arg;
	if (r->error) {
		log_warn("session %s: %s (the orphan sweep will retry)", op->ms->s->id,
			 r->error->message);
		op->ms->m->orphans_suspected = true;
	}
	teardown_workspace(op);
	teardown_step_done(op);
}

static void tomb_stored(const struct err *e, void *arg)
{
	struct teardown_op *op = arg;
	struct tomb *t = manager_tomb_find(op->ms->m, op->ms->s->id);
	if (e)
		log_warn(
		    "session %s: tombstone not written yet (%s); it will be when Redis is back",
		    op->ms->s->id, e->message);
	else if (t)
		t->unwritten = false;
	teardown_step_done(op);
}

void msession_end(struct msession *ms, enum session_state st, enum manager_end why,
		  const char *reason, manager_done_cb cb, void *arg)
{
	if (ms->teardown)
		return;
	if (exit_snap_begin(ms, st, why, reason, cb, arg))
		return;
	struct manager *m = ms->m;
	bool was_pooled = ms->pooled;
	if (ms->pooled) {
		if (ms->pool_entry)
			pool_forget(m->pool, ms->pool_entry); /* and replace it */
		ms->pool_entry = NULL;
		ms->pooled = false;
	}
	session_set_state(ms->s, st);
	free(ms->end_reason);
	ms->end_reason = xstrdup(reason);
	egress_session_ended(net_egress(m->net), ms->s->id);
	manager_emit(m, st == SESSION_EXPIRED ? "expired" : "ended", ms->s, reason);
	struct teardown_op *op = xcalloc(1, sizeof(*op));
	op->ms = ms;
	op->cb = cb;
	op->arg = arg;
	op->pending = 2;
	ms->teardown = op;
	evtimer_del(ms->idle_timer);
	evtimer_del(ms->supervisor_timer);
	if (ms->create)
		create_abort(ms->create, reason);
	if (ms->exec)
		exec_abort(ms->exec, reason);
	files_free(ms->files, reason);
	ms->files = NULL;
	kernel_link_free(ms->link);
	ms->link = NULL;
	if (ms->s->container_id)
		docker_container_remove(m->docker, ms->s->container_id, container_removed, op);
	else {
		teardown_workspace(op);
		op->pending--;
	}
	if (was_pooled) {
		op->pending--;        /* nobody's session: no record, no tombstone */
		if (op->pending == 0) /* nothing was in flight: finish from the loop */
			defer_call(m->base, teardown_deferred_cb, op);
		return;
	}
	m->endings[why]++;
	tomb_add(m, ms->s, reason);
	if (ms->tomb_elsewhere) {
		/* The tombstone is another node's and the records went with the
		 * heartbeat that found it (cluster.h): rewriting either would
		 * bring the session back or say something else. */
		struct tomb *t = manager_tomb_find(m, ms->s->id);
		if (t)
			t->unwritten = false;
		if (--op->pending == 0)
			defer_call(m->base, teardown_deferred_cb, op);
		return;
	}
	store_session_end(m->store, ms->s, reason, tomb_stored, op);
}

bool manager_end_lost(struct manager *m, const char *id, const char *reason)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || ms->pooled || ms->teardown)
		return false;
	ms->tomb_elsewhere = true;
	ms->exit_snap_done = true; /* its workspace is gone for its client already */
	msession_end(ms, SESSION_DEAD, MANAGER_END_NODE_LOST, reason, NULL, NULL);
	return true;
}

const char *manager_end_name(enum manager_end why)
{
	static const char *const names[MANAGER_END_COUNT] = {
	    "deleted", "idle", "lifetime", "failed", "crashed", "drained", "node_lost"};
	return why < MANAGER_END_COUNT ? names[why] : "other";
}

void manager_endings(const struct manager *m, uint64_t out[MANAGER_END_COUNT])
{
	memcpy(out, m->endings, sizeof(m->endings));
}

/* ---- why a session is not here ---- */

struct explain_op {
	manager_done_cb cb;
	void *arg;
	char id[SESSION_ID_LEN + 1];
	char tenant[64];
	struct err *answer; /* known at once: delivered from the loop */
};

static void explain_deliver(struct explain_op *op)
{
	op->cb(op->answer, op->arg);
	err_free(op->answer);
	free(op);
}

static void explain_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	explain_deliver(arg);
}

static struct err *ended_error(const char *id, const char *reason, int64_t ended_at_ms,
			       const char *state)
{
	char when[32];
	/* A node_lost tombstone (cluster.h) keeps saying so, here and on every
	 * node, after its node has reconciled. */
	return err_new(strncmp(reason, "node_lost", 9) == 0 ? ERR_NODE_LOST : ERR_EXPIRED,
		       "session %s ended at %s (%s): %s", id,
		       clock_format_rfc3339(ended_at_ms, when, sizeof(when)),
		       state ? state : "dead", reason);
}

static void explain_tomb(bool found, const char *reason, int64_t ended_at_ms, const char *state,
			 const char *tenant, void *arg)
{
	struct explain_op *op = arg;
	/* Another tenant's ending is not this caller's business: to them the
	 * id never existed. */
	op->answer = found && strcmp(tenant, op->tenant) == 0
			 ? ended_error(op->id, reason, ended_at_ms, state)
			 : err_new(ERR_NOT_FOUND, "no session %s", op->id);
	explain_deliver(op);
}

void manager_explain_missing(struct manager *m, const char *id, const char *tenant,
			     manager_done_cb cb, void *arg)
{
	struct explain_op *op = xcalloc(1, sizeof(*op));
	op->cb = cb;
	op->arg = arg;
	snprintf(op->id, sizeof(op->id), "%s", id);
	snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
	struct msession *ms = manager_find(m, id);
	if (ms && strcmp(ms->s->tenant, tenant) != 0)
		ms = NULL;
	struct tomb *t = manager_tomb_find(m, id);
	if (t && strcmp(t->tenant, tenant) != 0)
		t = NULL;
	if (ms && ms->teardown) /* ending right now: the tombstone may not be written yet */
		op->answer = ended_error(id, ms->end_reason, clock_now_ms(),
					 session_state_name(ms->s->state));
	else if (t)
		op->answer = ended_error(id, t->reason, t->at_ms, session_state_name(t->state));
	else if (!store_connected(m->store))
		/* Without the registry a 404 would be a guess, and maybe a lie. */
		op->answer = err_new(ERR_UNAVAILABLE,
				     "session %s is not on this node and the registry (redis) is "
				     "unreachable; retry shortly",
				     id);
	else if (!m->recovered)
		/* It may be one of the sessions this node is adopting after a
		 * restart: "not found" now would be a lie a moment later. */
		op->answer =
		    err_new(ERR_UNAVAILABLE,
			    "session %s: this node is still recovering its sessions after a "
			    "restart; retry shortly",
			    id);
	if (op->answer == NULL) {
		store_tombstone_get(m->store, id, explain_tomb, op);
		return;
	}
	defer_call(m->base, explain_deferred, op);
}
