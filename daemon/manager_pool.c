/* manager_pool.c: the warm pool of pre-started sandboxes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "manager_internal.h"
#include "network.h"
#include "store.h"
#include "xalloc.h"

/* ---- the warm pool ----
 *
 * A cold create costs a Docker create and start and a Python start (about
 * 0.3 s here). The pool keeps pool-size sandboxes of the default image and
 * limits started, with their kernels connected, and hands one to a create
 * that it can serve: claiming is a Redis write, plus a live Docker update when
 * the memory, CPU or process limits differ. The disk size (a tmpfs size),
 * environment, network and runtime are fixed when a container is created, so
 * requests that set those are created cold. */

bool manager_pool_eligible(const struct manager *m, const struct session *s)
{
	int64_t size = s->networked ? m->cfg->pool_network_size : m->cfg->pool_size;
	return size > 0 && s->n_env == 0 && !s->gvisor && strcmp(s->image, m->cfg->image) == 0 &&
	       s->limits.disk_mb == m->cfg->disk_mb;
}

/* Warm sandboxes of one kind, ready or starting. */
static size_t pool_count(const struct manager *m, bool networked)
{
	size_t n = 0;
	const struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all)
		n += ms->pooled && ms->s->networked == networked;
	return n;
}

void manager_pool_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	manager_pool_fill(arg);
}

static void pool_filled(const struct session *s, const struct err *e, void *arg)
{
	struct manager *m = arg;
	m->pool_filling--;
	if (e) {
		log_warn("pool: a warm sandbox failed to start: %s; retrying in 2 s", e->message);
		struct timeval two = {2, 0};
		evtimer_add(m->pool_retry, &two);
		return;
	}
	struct msession *ms = manager_find(m, s->id);
	if (ms == NULL || ms->teardown)
		return;
	TAILQ_INSERT_TAIL(&m->pool, ms, pool_link);
	ms->in_pool = true;
	m->pool_ready++;
	log_debug("pool: %zu warm", m->pool_ready);
	manager_pool_fill(m);
}

void manager_pool_fill(struct manager *m)
{
	/* One at a time: filling competes with client creates for the engine. */
	if (m->draining || m->pool_filling > 0 || !m->recovered)
		return;
	bool networked;
	if (pool_count(m, false) < (size_t)m->cfg->pool_size)
		networked = false;
	else if (m->net && pool_count(m, true) < (size_t)m->cfg->pool_network_size)
		networked = true;
	else
		return;
	if (manager_client_sessions(m) + m->pooled_total >= (size_t)m->cfg->max_sessions)
		return;
	struct err *e = NULL;
	struct session *s = session_from_request(NULL, m->cfg, "", &e);
	if (s == NULL) {
		log_warn("pool: %s", e->message);
		err_free(e);
		return;
	}
	s->networked = networked; /* an empty allowlist until claimed */
	session_new_id(s->id);
	s->node = xstrdup(m->cfg->node);
	s->created_at_ms = clock_now_ms();
	session_touch(s, s->created_at_ms);
	struct msession *ms = msession_new(m, s, &e);
	if (ms == NULL) {
		log_warn("pool: %s", e->message);
		err_free(e);
		return;
	}
	ms->pooled = true;
	m->pooled_total++;
	m->pool_filling++;
	msession_create_start(m, ms, pool_filled, m, false);
}

struct claim_op {
	struct manager *m;
	char id[SESSION_ID_LEN + 1];
	manager_session_cb cb;
	void *arg;
};

static void claim_answer(struct claim_op *op, struct err *e)
{
	struct msession *ms = manager_find(op->m, op->id);
	if (ms == NULL || ms->teardown) {
		struct err *gone = err_new(
		    ERR_UNAVAILABLE, "create session: the warm sandbox ended while it was claimed");
		op->cb(NULL, gone, op->arg);
		err_free(gone);
	} else if (e) {
		err_wrap(&e, "create session");
		op->cb(NULL, e, op->arg);
		msession_end(ms, SESSION_DEAD, e->message, NULL, NULL);
	} else {
		log_info("session %s: ready from the warm pool (tenant %s)", ms->s->id,
			 ms->s->tenant);
		manager_emit(op->m, "ready", ms->s, NULL);
		op->cb(ms->s, NULL, op->arg);
	}
	err_free(e);
	free(op);
}

static void claim_updated(const struct docker_response *resp, void *arg)
{
	struct claim_op *op = arg;
	claim_answer(op, resp->status == 200 ? NULL : docker_error(resp, "apply limits"));
}

static void claim_stored(const struct err *e, void *arg)
{
	struct claim_op *op = arg;
	if (e) {
		claim_answer(op, err_new(ERR_UNAVAILABLE, "registry: %s", e->message));
		return;
	}
	struct msession *ms = manager_find(op->m, op->id);
	const struct config *cfg = op->m->cfg;
	if (ms == NULL || ms->teardown ||
	    (ms->s->limits.memory_mb == cfg->memory_mb && ms->s->limits.cpus == cfg->cpus &&
	     ms->s->limits.pids == cfg->pids)) {
		claim_answer(op, NULL);
		return;
	}
	/* The limits the client asked for, applied to the running container. */
	int64_t mem = ms->s->limits.memory_mb * 1024 * 1024;
	char body[256], path[256];
	int n =
	    snprintf(body, sizeof(body),
		     "{\"Memory\":%lld,\"MemorySwap\":%lld,\"NanoCpus\":%lld,\"PidsLimit\":%lld}",
		     (long long)mem, (long long)mem, (long long)(ms->s->limits.cpus * 1e9),
		     (long long)ms->s->limits.pids);
	snprintf(path, sizeof(path), "/containers/%s/update", ms->s->container_id);
	docker_request(op->m->docker, "POST", path, body, (size_t)n, claim_updated, op);
}

/* Give the warm sandbox to the client's request s (which is consumed). */
void manager_pool_claim(struct manager *m, struct msession *ms, struct session *s,
			manager_session_cb cb, void *arg)
{
	TAILQ_REMOVE(&m->pool, ms, pool_link);
	ms->in_pool = false;
	m->pool_ready--;
	m->pooled_total--;
	ms->pooled = false;
	memcpy(s->id, ms->s->id, sizeof(s->id));
	s->node = xstrdup(ms->s->node);
	s->container_id = xstrdup(ms->s->container_id);
	/* A networked sandbox is already on the network, its proxy settings in
	 * its environment: taking the client's allowlist is all it needs. */
	memcpy(s->net_ip, ms->s->net_ip, sizeof(s->net_ip));
	s->uid = ms->s->uid; /* its processes already run as this uid */
	s->state = SESSION_READY;
	s->created_at_ms = clock_now_ms();
	session_free(ms->s);
	ms->s = s;
	msession_touch(ms);
	struct claim_op *op = xcalloc(1, sizeof(*op));
	op->m = m;
	memcpy(op->id, s->id, sizeof(op->id));
	op->cb = cb;
	op->arg = arg;
	store_session_put(m->store, s, claim_stored, op);
	manager_pool_fill(m);
}

void manager_pool_stats(const struct manager *m, size_t *ready, uint64_t *hits, uint64_t *misses)
{
	*ready = m->pool_ready;
	*hits = m->pool_hits;
	*misses = m->pool_misses;
}
