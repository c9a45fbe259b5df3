/* manager_create.c: creating a session, cold or from the warm pool.
 *
 * A create is an explicit state machine, one op per session (ms->create):
 *
 *   cold:   STORE → NETWORK → DOCKER_CREATE → WORKSPACE → DOCKER_START → INSPECT →
 *           WAIT_RUNNER
 *   claim:  CLAIM_STORE → CLAIM_UPDATE
 *
 * Each step starts one call and keeps its handle; its callback moves to the
 * next step. Only a networked session visits NETWORK and INSPECT, and a
 * claim visits CLAIM_UPDATE only when the client's limits differ from the
 * pool's. The one exception to one call at a time: with the loop backend
 * the workspace image (workspace_disk.h, ~70 ms of helpers) is made from
 * the start, beside STORE, NETWORK and DOCKER_CREATE, which do not need it;
 * WORKSPACE waits for it before the container starts and binds it. When
 * the session ends under it (delete, expiry, shutdown), the call in flight
 * is cancelled and the op freed at once: the driver removes a container
 * whose create it cancelled, and the teardown the image once it is made. The warm pool's
 * bookkeeping is pool.c's; which requests it may serve is decided here. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "container_spec.h"
#include "defer.h"
#include "fdbudget.h"
#include "log.h"
#include "manager_internal.h"
#include "network.h"
#include "store.h"
#include "xalloc.h"

enum create_step {
	CREATE_STORE,
	CREATE_NETWORK,
	CREATE_DOCKER_CREATE,
	CREATE_WORKSPACE,
	CREATE_DOCKER_START,
	CREATE_INSPECT,
	CREATE_WAIT_RUNNER,
	CREATE_CLAIM_STORE,
	CREATE_CLAIM_UPDATE,
};

static const char *const step_names[] = {
    [CREATE_STORE] = "writing the registry",
    [CREATE_NETWORK] = "setting up the network",
    [CREATE_DOCKER_CREATE] = "creating the container",
    [CREATE_WORKSPACE] = "making the workspace disk",
    [CREATE_DOCKER_START] = "starting the container",
    [CREATE_INSPECT] = "inspecting the container",
    [CREATE_WAIT_RUNNER] = "waiting for the kernel",
    [CREATE_CLAIM_STORE] = "writing the registry",
    [CREATE_CLAIM_UPDATE] = "applying the limits",
};

struct create_op {
	struct msession *ms;
	manager_session_cb cb;
	void *arg;
	enum create_step step;
	bool record; /* a client's session: it has a Redis record */
	struct event *timeout;
	/* The one call in flight, if any. */
	struct docker_call *docker;
	struct store_op *store;
	struct net_waiter *net;
	/* The workspace image, made beside the steps until WORKSPACE. */
	bool ws_making;     /* the make is in flight */
	struct err *ws_err; /* it failed, before WORKSPACE was reached */
};

static void create_step(struct create_op *op);

/* Cancel the call in flight and free the op; nobody is told. */
static void op_free(struct create_op *op)
{
	docker_cancel(op->docker);
	store_cancel(op->store);
	/* The image may still be in the making: the teardown removes it once
	 * made (workspace_vol_remove waits for it). */
	if (op->ws_making)
		workspace_vol_cancel_make(op->ms->wsvol);
	err_free(op->ws_err);
	if (op->net)
		net_cancel(op->ms->m->net, op->net);
	if (op->timeout)
		event_free(op->timeout);
	free(op);
}

/* The create ends here, either way; the op goes. */
static void create_finish(struct create_op *op, struct err *e)
{
	struct msession *ms = op->ms;
	struct manager *m = ms->m;
	ms->create = NULL;
	if (e == NULL) {
		if (op->step != CREATE_CLAIM_STORE && op->step != CREATE_CLAIM_UPDATE) {
			session_set_state(ms->s, SESSION_READY);
			msession_touch(ms);
			msession_persist(ms);
		}
		if (!ms->pooled) {
			if (op->step == CREATE_CLAIM_STORE || op->step == CREATE_CLAIM_UPDATE)
				log_info("session %s: ready from the warm pool (tenant %s)",
					 ms->s->id, ms->s->tenant);
			else
				log_info("session %s: ready (tenant %s, image %s)", ms->s->id,
					 ms->s->tenant, ms->s->image);
			manager_emit(m, "ready", ms->s, NULL);
		}
		manager_session_cb cb = op->cb;
		void *arg = op->arg;
		op_free(op);
		cb(ms->s, NULL, arg);
		return;
	}
	err_wrap(&e, "create session");
	log_warn("session %s: %s", ms->s->id, e->message);
	manager_session_cb cb = op->cb;
	void *arg = op->arg;
	op_free(op);
	cb(NULL, e, arg);
	msession_end(ms, SESSION_DEAD, MANAGER_END_FAILED, e->message, NULL, NULL);
	err_free(e);
}

static void create_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct create_op *op = arg;
	create_finish(op,
		      err_new(ERR_UNAVAILABLE, "the sandbox did not become ready within %llds (%s)",
			      (long long)op->ms->m->cfg->start_timeout_s, step_names[op->step]));
}

void create_on_runner_up(struct create_op *op)
{
	struct kernel_link *link = op->ms->link;
	if (op->step == CREATE_WAIT_RUNNER && kernel_link_kernel_connected(link) &&
	    kernel_link_supervisor_connected(link))
		create_finish(op, NULL);
}

void create_abort(struct create_op *op, const char *reason)
{
	op->ms->create = NULL;
	struct err *e =
	    err_new(ERR_EXPIRED, "create session: the session ended while starting: %s", reason);
	manager_session_cb cb = op->cb;
	void *arg = op->arg;
	op_free(op);
	cb(NULL, e, arg);
	err_free(e);
}

void create_free_at_exit(struct create_op *op)
{
	op->ms->create = NULL;
	op_free(op);
}

/* ---- the steps' answers ---- */

static void stored(const struct err *e, void *arg)
{
	struct create_op *op = arg;
	op->store = NULL;
	if (e) {
		create_finish(op, err_new(ERR_UNAVAILABLE, "registry: %s", e->message));
		return;
	}
	op->step = op->step == CREATE_CLAIM_STORE ? CREATE_CLAIM_UPDATE
		   : op->ms->s->networked         ? CREATE_NETWORK
						  : CREATE_DOCKER_CREATE;
	create_step(op);
}

static void workspace_made(const struct err *e, void *arg)
{
	struct create_op *op = arg;
	op->ws_making = false;
	if (op->step != CREATE_WORKSPACE) { /* the steps before it are still going */
		if (e)
			op->ws_err = err_new(e->code, "%s", e->message);
		return;
	}
	if (e) {
		create_finish(op, err_new(e->code, "%s", e->message));
		return;
	}
	op->step = CREATE_DOCKER_START;
	create_step(op);
}

/* The session's own disk, made before its container starts (a warm
 * sandbox's too, so a claim finds it ready); with the tmpfs backend,
 * nothing to do. */
static void make_workspace(struct create_op *op)
{
	struct msession *ms = op->ms;
	if (!workspace_disk_is_loop(ms->m->wsdisk))
		return;
	op->ws_making = true;
	ms->wsvol = workspace_vol_make(ms->m->wsdisk, ms->s->id, ms->s->limits.disk_mb, ms->s->uid,
				       workspace_made, op);
}

/* Reached after the container is created: go on once the image is made. */
static void wait_workspace(struct create_op *op)
{
	if (op->ws_err) {
		struct err *e = op->ws_err;
		op->ws_err = NULL;
		create_finish(op, e);
		return;
	}
	if (op->ws_making)
		return; /* workspace_made moves on */
	op->step = CREATE_DOCKER_START;
	create_step(op);
}

static void network_ready(const struct err *e, void *arg)
{
	struct create_op *op = arg;
	op->net = NULL;
	if (e) {
		create_finish(op, err_new(ERR_UNAVAILABLE, "sandbox network: %s", e->message));
		return;
	}
	op->step = CREATE_DOCKER_CREATE;
	create_step(op);
}

static void container_created(const struct docker_result *r, const char *id, void *arg)
{
	struct create_op *op = arg;
	struct msession *ms = op->ms;
	op->docker = NULL;
	if (r->error) {
		struct err *e;
		if (r->status == 400 && ms->s->gvisor && strstr(r->error->message, "runtime"))
			e = err_new(
			    ERR_UNAVAILABLE,
			    "runtime gvisor: Docker runtime '%s' is not configured on this node "
			    "(docs/security.md says how)",
			    ms->m->cfg->gvisor_runtime);
		else if (r->status == 404) {
			/* Not the client's fault and not a missing session. */
			AUTOFREE char *tag = config_image_tag(ms->m->cfg, ms->s->image);
			e = err_new(ERR_UNAVAILABLE,
				    "image %s is not on this node (build it with `make image`)",
				    tag);
		} else
			e = err_new(r->error->code, "%s", r->error->message);
		create_finish(op, e);
		return;
	}
	ms->s->container_id = xstrdup(id);
	kernel_link_set_container(ms->link, id); /* before start: no hello can come earlier */
	if (!ms->pooled)
		msession_persist(ms); /* the record now names its container */
	op->step = CREATE_WORKSPACE;
	create_step(op);
}

static void container_started(const struct docker_result *r, void *arg)
{
	struct create_op *op = arg;
	op->docker = NULL;
	if (r->error) {
		create_finish(op, err_new(r->error->code, "%s", r->error->message));
		return;
	}
	op->step = op->ms->s->networked ? CREATE_INSPECT : CREATE_WAIT_RUNNER;
	create_step(op);
}

/* The egress proxy knows a sandbox by its address on the network. */
static void container_inspected(const struct docker_result *r,
				const struct docker_container_state *st, void *arg)
{
	struct create_op *op = arg;
	struct msession *ms = op->ms;
	op->docker = NULL;
	if (r->error || st->ip[0] == '\0' || strlen(st->ip) >= sizeof(ms->s->net_ip)) {
		create_finish(op, err_new(ERR_INTERNAL, "the container has no address on %s",
					  net_name(ms->m->net)));
		return;
	}
	snprintf(ms->s->net_ip, sizeof(ms->s->net_ip), "%s", st->ip);
	op->step = CREATE_WAIT_RUNNER;
	create_step(op);
}

static void limits_applied(const struct docker_result *r, void *arg)
{
	struct create_op *op = arg;
	op->docker = NULL;
	create_finish(op, r->error ? err_new(r->error->code, "%s", r->error->message) : NULL);
}

/* ---- the machine ---- */

static void start_container(struct create_op *op)
{
	struct msession *ms = op->ms;
	struct manager *m = ms->m;
	bool networked = ms->s->networked;
	AUTOFREE char *tag = config_image_tag(m->cfg, ms->s->image);
	char dir[512], name[CONTAINER_NAME_SIZE], wsdir[512];
	snprintf(dir, sizeof(dir), "%s/%s", m->sessions_dir, ms->s->id);
	/* The image's mount point: the path is known before the make ends, and
	 * only the start needs the mount. */
	bool ws = ms->wsvol && workspace_disk_path(m->wsdisk, ms->s->id, wsdir, sizeof(wsdir)) == 0;
	struct container_spec_args args = {
	    .image_tag = tag,
	    .ipc_dir = dir,
	    .network = networked ? net_name(m->net) : NULL,
	    .proxy_url = networked ? net_proxy_url(m->net) : NULL,
	    .seccomp = m->seccomp,
	    .workspace_dir = ws ? wsdir : NULL,
	};
	struct container_spec spec;
	container_spec_build(&spec, ms->s, m->cfg, &args);
	container_spec_new_name(name, sizeof(name));
	op->docker = docker_container_create(m->docker, name, &spec.docker, container_created, op);
	container_spec_release(&spec);
}

/* The limits the client asked for, applied to the running warm container;
 * none to apply when they are the pool's. */
static void apply_limits(struct create_op *op)
{
	const struct session_limits *l = &op->ms->s->limits;
	const struct config *cfg = op->ms->m->cfg;
	if (l->memory_mb == cfg->memory_mb && l->cpus == cfg->cpus && l->pids == cfg->pids) {
		create_finish(op, NULL);
		return;
	}
	int64_t mem = l->memory_mb * 1024 * 1024;
	struct docker_limits lim = {.memory = mem,
				    .memory_swap = mem,
				    .nano_cpus = (int64_t)(l->cpus * 1e9),
				    .pids_limit = l->pids};
	op->docker = docker_container_update(op->ms->m->docker, op->ms->s->container_id, &lim,
					     limits_applied, op);
}

static void create_step(struct create_op *op)
{
	struct msession *ms = op->ms;
	struct manager *m = ms->m;
	switch (op->step) {
	case CREATE_STORE:
	case CREATE_CLAIM_STORE:
		if (!op->record) {
			stored(NULL, op);
			return;
		}
		op->store = store_session_put(m->store, ms->s, stored, op);
		return;
	case CREATE_WORKSPACE: wait_workspace(op); return;
	case CREATE_NETWORK: op->net = net_ensure(m->net, network_ready, op); return;
	case CREATE_DOCKER_CREATE: start_container(op); return;
	case CREATE_DOCKER_START:
		op->docker =
		    docker_container_start(m->docker, ms->s->container_id, container_started, op);
		return;
	case CREATE_INSPECT:
		op->docker = docker_container_inspect(m->docker, ms->s->container_id,
						      net_name(m->net), container_inspected, op);
		return;
	case CREATE_WAIT_RUNNER:
		create_on_runner_up(op); /* they may be connected already */
		return;
	case CREATE_CLAIM_UPDATE: apply_limits(op); return;
	}
}

static struct create_op *op_new(struct msession *ms, manager_session_cb cb, void *arg,
				enum create_step first, bool record)
{
	struct create_op *op = xcalloc(1, sizeof(*op));
	op->ms = ms;
	op->cb = cb;
	op->arg = arg;
	op->step = first;
	op->record = record;
	ms->create = op;
	return op;
}

void create_start(struct msession *ms, manager_session_cb cb, void *arg, bool record)
{
	struct create_op *op = op_new(ms, cb, arg, CREATE_STORE, record);
	op->timeout = evtimer_new(ms->m->base, create_timeout_cb, op);
	struct timeval tv = {ms->m->cfg->start_timeout_s, 0};
	evtimer_add(op->timeout, &tv);
	make_workspace(op); /* beside the first steps: WORKSPACE waits for it */
	create_step(op);
}

/* ---- the warm pool ---- */

/* The disk size (a tmpfs's or an image's), environment, network and runtime
 * are fixed when a container is created, so requests that set those are created
 * cold; memory, CPU and processes can be changed live. */
static bool pool_can_serve(const struct manager *m, const struct session *s)
{
	int64_t size = s->networked ? m->cfg->pool_network_size : m->cfg->pool_size;
	return size > 0 && s->n_env == 0 && !s->gvisor && strcmp(s->image, m->cfg->image) == 0 &&
	       s->limits.disk_mb == m->cfg->disk_mb;
}

static bool pool_may_start(void *arg)
{
	struct manager *m = arg;
	/* A warm sandbox's image takes disk like a session's: not from the
	 * headroom either (its create would fail at the fallocate). */
	return !m->draining && m->recovered && m->count < (size_t)m->cfg->max_sessions &&
	       workspace_disk_admit(m->wsdisk, m->cfg->disk_mb, m->cfg->workspace_disk_headroom_mb,
				    NULL) == 0;
}

static void pool_resize_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	manager_pool_resize(arg);
}

/* A warm sandbox's create ended. arg is its msession, alive here: on a
 * failure the teardown comes after this callback. */
static void warm_started(const struct session *s, const struct err *e, void *arg)
{
	(void)s;
	struct msession *ms = arg;
	struct manager *m = ms->m;
	if (e) {
		log_warn("pool: a warm sandbox failed to start: %s; retrying in 2 s", e->message);
		pool_start_failed(m->pool, ms->s->networked);
		return;
	}
	ms->pool_entry = pool_started(m->pool, ms, ms->s->networked);
	size_t ready;
	uint64_t hits, misses;
	pool_stats(m->pool, &ready, &hits, &misses);
	log_debug("pool: %zu warm", ready);
	/* The size was lowered while this one started: end it from the loop,
	 * not inside its own create's callback. */
	if (pool_surplus(m->pool))
		defer_call(m->base, pool_resize_deferred, m);
}

static int pool_start(void *arg, bool networked)
{
	struct manager *m = arg;
	struct err *e = NULL;
	struct session *s = session_from_request(NULL, m->cfg, "", &e);
	if (s == NULL) {
		log_warn("pool: %s", e->message);
		err_free(e);
		return -1;
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
		return -1;
	}
	ms->pooled = true;
	create_start(ms, warm_started, ms, false);
	return 0;
}

static void pool_shrink(void *arg)
{
	manager_pool_resize(arg);
}

static const struct pool_ops pool_ops = {
    .may_start = pool_may_start, .start = pool_start, .shrink = pool_shrink};
static const int64_t no_network_pool = 0;

void create_pool_init(struct manager *m)
{
	/* Without a sandbox network there is no networked pool. */
	struct pool_sizes sizes = {
	    .size = &m->cfg->pool_size,
	    .network_size = m->net ? &m->cfg->pool_network_size : &no_network_pool,
	    .max = &m->cfg->pool_max,
	    .memory_mb = &m->cfg->pool_memory_mb,
	};
	m->pool = pool_new(m->base, &sizes, &pool_ops, m);
}

void manager_pool_resize(struct manager *m)
{
	struct msession *ms;
	size_t ended = 0;
	while ((ms = pool_surplus(m->pool)) != NULL && ms->teardown == NULL) {
		msession_end(ms, SESSION_DEAD, MANAGER_END_DRAINED, "warm pool shrunk", NULL, NULL);
		ended++;
	}
	if (ended)
		log_info("pool: %zu warm sandboxes ended (target %zu: pool-size %lld, pool-max "
			 "%lld; pool-network-size %lld)",
			 ended, pool_target(m->pool), (long long)m->cfg->pool_size,
			 (long long)m->cfg->pool_max, (long long)m->cfg->pool_network_size);
	pool_fill(m->pool);
}

/* Give the warm sandbox ms to the client's request s (which it takes). */
static void claim(struct msession *ms, struct session *s, manager_session_cb cb, void *arg)
{
	ms->pooled = false;
	memcpy(s->id, ms->s->id, sizeof(s->id));
	s->node = xstrdup(ms->s->node);
	s->container_id = xstrdup(ms->s->container_id);
	/* A networked sandbox is already on the network, its proxy settings in
	 * its environment: taking the client's allowlist is all it needs. */
	memcpy(s->net_ip, ms->s->net_ip, sizeof(s->net_ip));
	s->uid = ms->s->uid; /* its processes already run as this uid */
	session_set_state(s, SESSION_READY);
	s->created_at_ms = clock_now_ms();
	session_free(ms->s);
	ms->s = s;
	msession_touch(ms);
	create_step(op_new(ms, cb, arg, CREATE_CLAIM_STORE, true));
}

int manager_create(struct manager *m, const struct session_request *req, const char *tenant,
		   manager_session_cb cb, void *arg, struct err **errp)
{
	if (m->draining)
		return err_set(errp, ERR_UNAVAILABLE,
			       "the daemon is draining; create the session elsewhere");
	if (!fdbudget_session_fits(&fdbudget_daemon)) /* fdbudget.h */
		return err_set(
		    errp, ERR_UNAVAILABLE,
		    "the daemon is near its file-descriptor limit (%lld in use of %lld); "
		    "retry later or create the session elsewhere",
		    (long long)fdbudget_in_use(&fdbudget_daemon), (long long)fdbudget_daemon.limit);
	if (manager_client_sessions(m) >= (size_t)m->cfg->max_sessions)
		return err_set(errp, ERR_QUOTA_EXCEEDED,
			       "this node already runs %zu sessions (max-sessions)",
			       manager_client_sessions(m));
	if (!store_connected(m->store))
		return err_set(errp, ERR_UNAVAILABLE,
			       "the session registry (redis) is not reachable");
	struct session *s = session_from_request(req, m->cfg, tenant, errp);
	if (s == NULL)
		return -1;
	if (s->networked && m->net == NULL) {
		session_free(s);
		return err_set(errp, ERR_UNAVAILABLE,
			       "network access is not available on this node");
	}
	if (pool_can_serve(m, s)) {
		if (!s->networked)
			pool_note_demand(m->pool);
		struct msession *warm = pool_take(m->pool, s->networked);
		if (warm) {
			warm->pool_entry = NULL;
			claim(warm, s, cb, arg);
			return 0;
		}
	}
	/* Its image is allocated whole at the make: refused here, with words,
	 * rather than by fallocate's ENOSPC later (workspace_disk.h). */
	if (workspace_disk_admit(m->wsdisk, s->limits.disk_mb, m->cfg->workspace_disk_headroom_mb,
				 errp) < 0) {
		session_free(s);
		return -1;
	}
	session_new_id(s->id);
	s->node = xstrdup(m->cfg->node);
	s->created_at_ms = clock_now_ms();
	session_touch(s, s->created_at_ms);
	struct msession *ms = msession_new(m, s, errp);
	if (ms == NULL)
		return -1;
	create_start(ms, cb, arg, true);
	return 0;
}
