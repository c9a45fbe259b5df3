/* manager.c: the life of a session, from create to teardown (the warm pool
 * is in manager_pool.c, restarts and orphans in manager_recovery.c). */
#include "manager.h"
#include "manager_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "clock.h"
#include "container_spec.h"
#include "defer.h"
#include "egress.h"
#include "fdbudget.h"
#include "ipc_dir.h"
#include "network.h"
#include "json.h"
#include "kernel.h"
#include "log.h"
#include "seccomp.h"
#include "uid_range.h"
#include "xalloc.h"

void manager_emit(struct manager *m, const char *type, const struct session *s, const char *detail)
{
	if (m->listener)
		m->listener(type, s, detail, m->listener_arg);
}

/* How long to wait for the supervisor's word on why a kernel died. */
#define EXIT_REASON_WAIT_MS 1000
/* A supervisor that stays away this long means the container is gone. */
#define SUPERVISOR_GRACE_MS 3000

static void exec_finish(struct exec_op *op, const struct err *e);

/* ---- table ---- */

static unsigned bucket_of(const char *id)
{
	unsigned h = 2166136261u;
	for (const char *p = id; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h % BUCKETS;
}

struct msession *manager_find(struct manager *m, const char *id)
{
	for (struct msession *ms = m->buckets[bucket_of(id)]; ms; ms = ms->hnext)
		if (strcmp(ms->s->id, id) == 0)
			return ms;
	return NULL;
}

static void table_insert(struct manager *m, struct msession *ms)
{
	unsigned b = bucket_of(ms->s->id);
	ms->hnext = m->buckets[b];
	m->buckets[b] = ms;
	TAILQ_INSERT_TAIL(&m->all, ms, all);
	m->count++;
}

/* Sessions that belong to a client (the pool's are not counted). */
size_t manager_client_sessions(const struct manager *m)
{
	return m->count - m->pooled_total;
}

static void table_remove(struct manager *m, struct msession *ms)
{
	for (struct msession **pp = &m->buckets[bucket_of(ms->s->id)]; *pp; pp = &(*pp)->hnext)
		if (*pp == ms) {
			*pp = ms->hnext;
			break;
		}
	TAILQ_REMOVE(&m->all, ms, all);
	m->count--;
}

static void msession_free(struct msession *ms)
{
	uid_range_release(ms->m->uids, ms->s->uid);
	files_free(ms->files, "the daemon is shutting down");
	/* A session still in the table at this point outlives the daemon (its
	 * container is kept for adoption); an ended one has link NULL already. */
	kernel_link_close(ms->link);
	if (ms->idle_timer)
		event_free(ms->idle_timer);
	if (ms->supervisor_timer)
		event_free(ms->supervisor_timer);
	session_free(ms->s);
	free(ms->end_reason);
	free(ms);
}

/* ---- local tombstones ---- */

static struct tomb *tomb_find(struct manager *m, const char *id)
{
	struct tomb *t;
	TAILQ_FOREACH (t, &m->tombs, link)
		if (strcmp(t->id, id) == 0)
			return t;
	return NULL;
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
	if (++m->n_tombs > TOMBS_MAX) {
		struct tomb *old = TAILQ_LAST(&m->tombs, tomb_head_);
		TAILQ_REMOVE(&m->tombs, old, link);
		free(old->reason);
		free(old);
		m->n_tombs--;
	}
}

struct manager_tomb_write {
	struct manager *m;
	char id[SESSION_ID_LEN + 1];
};

static void tomb_written(const struct err *e, void *arg)
{
	struct manager_tomb_write *w = arg;
	struct tomb *t = e ? NULL : tomb_find(w->m, w->id);
	if (t)
		t->unwritten = false;
	free(w);
}

/* Write the ending of t to Redis (record and clock removed, tombstone set). */
void manager_tomb_write(struct manager *m, struct tomb *t)
{
	struct session stub = {.tenant = t->tenant, .node = t->node, .state = t->state};
	memcpy(stub.id, t->id, sizeof(stub.id));
	struct manager_tomb_write *w = xcalloc(1, sizeof(*w));
	w->m = m;
	memcpy(w->id, t->id, sizeof(w->id));
	store_session_end(m->store, &stub, t->reason, tomb_written, w);
}

static void tombs_free(struct manager *m)
{
	while (!TAILQ_EMPTY(&m->tombs)) {
		struct tomb *t = TAILQ_FIRST(&m->tombs);
		TAILQ_REMOVE(&m->tombs, t, link);
		free(t->reason);
		free(t);
	}
}

/* ---- clocks ---- */

void msession_arm_idle(struct msession *ms)
{
	int64_t delay = ms->s->expires_at_ms - clock_now_ms();
	if (delay < 0)
		delay = 0;
	struct timeval tv = {delay / 1000, (delay % 1000) * 1000};
	evtimer_add(ms->idle_timer, &tv);
}

/* The clock in Redis moves at most once a second per session: a busy
 * session runs thousands of executions a second, and the Redis copy only
 * serves a restart (which then may expire a session up to a second early). */
#define CLOCK_WRITE_MS 1000

void msession_touch(struct msession *ms)
{
	if (ms->pooled)
		return; /* no owner, no clock */
	int64_t now = clock_now_ms();
	session_touch(ms->s, now);
	msession_arm_idle(ms);
	if (now - ms->clock_written_ms >= CLOCK_WRITE_MS) {
		store_session_touch(ms->m->store, ms->s);
		ms->clock_written_ms = now;
	}
}

void manager_flush_clocks(struct manager *m)
{
	struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all) {
		if (!ms->pooled && !ms->teardown && !ms->create)
			store_session_touch(m->store, ms->s);
	}
}

/* Write the whole record (after what it says changed: created, claimed,
 * allowlist, container); fire and forget. */
void msession_persist(struct msession *ms)
{
	if (!ms->pooled)
		store_session_put(ms->m->store, ms->s, NULL, NULL);
}

static void idle_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct msession *ms = arg;
	/* An execution counts as activity: its end slides the clock again. */
	if (ms->exec || ms->create || ms->teardown || !files_idle(ms->files))
		return;
	if (clock_now_ms() < ms->s->expires_at_ms) {
		msession_arm_idle(ms); /* the wall clock moved */
		return;
	}
	char reason[128];
	if (session_lifetime_bound(ms->s))
		snprintf(reason, sizeof(reason), "its lifetime of %llds ended (max_lifetime_s)",
			 (long long)ms->s->max_lifetime_s);
	else
		snprintf(reason, sizeof(reason), "idle for %llds (idle_timeout_s)",
			 (long long)ms->s->idle_timeout_s);
	log_info("session %s: expired: %s", ms->s->id, reason);
	msession_end(ms, SESSION_EXPIRED, reason, NULL, NULL);
}

/* ---- create ---- */

void manager_ignore_response(const struct docker_response *resp, void *arg)
{
	(void)resp;
	(void)arg;
}

void manager_ignore_net_ready(const struct err *e, void *arg)
{
	(void)arg;
	if (e)
		log_warn("sandbox network: %s", e->message);
}

/* Report the create. When a Docker or Redis call is still in flight (a
 * timeout), the op must outlive this: it is detached and freed when that
 * call comes back (create_abandoned). */
static void create_finish_ex(struct create_op *op, struct err *e, bool call_in_flight)
{
	struct msession *ms = op->ms;
	ms->create = NULL;
	event_free(op->timeout);
	op->timeout = NULL;
	if (e == NULL) {
		ms->s->state = SESSION_READY;
		msession_touch(ms);
		msession_persist(ms);
		if (!ms->pooled) {
			log_info("session %s: ready (tenant %s, image %s)", ms->s->id,
				 ms->s->tenant, ms->s->image);
			manager_emit(ms->m, "ready", ms->s, NULL);
		}
		op->cb(ms->s, NULL, op->arg);
	} else {
		err_wrap(&e, "create session");
		log_warn("session %s: %s", ms->s->id, e->message);
		op->cb(NULL, e, op->arg);
		msession_end(ms, SESSION_DEAD, e->message, NULL, NULL);
		err_free(e);
	}
	if (call_in_flight)
		op->ms = NULL;
	else
		free(op);
}

static void create_finish(struct create_op *op, struct err *e)
{
	create_finish_ex(op, e, false);
}

static void create_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct create_op *op = arg;
	static const char *const steps[] = {"writing the registry",     "setting up the network",
					    "creating the container",   "starting the container",
					    "inspecting the container", "waiting for the kernel"};
	create_finish_ex(op,
			 err_new(ERR_UNAVAILABLE,
				 "the sandbox did not become ready within %llds (%s)",
				 (long long)op->m->cfg->start_timeout_s, steps[op->step]),
			 op->step != CREATE_WAIT_KERNEL);
}

static void create_check_ready(struct create_op *op)
{
	struct kernel_link *link = op->ms->link;
	if (op->step == CREATE_WAIT_KERNEL && kernel_link_kernel_connected(link) &&
	    kernel_link_supervisor_connected(link))
		create_finish(op, NULL);
}

/* The session ended while a create step was in flight: the requester was
 * answered then; free the op, and remove a container that came too late. */
static bool create_abandoned(struct create_op *op, struct manager *m, const char *late_container)
{
	if (op->ms != NULL)
		return false;
	if (late_container) {
		char path[256];
		snprintf(path, sizeof(path), "/containers/%s?force=true&v=true", late_container);
		docker_request(m->docker, "DELETE", path, NULL, 0, manager_ignore_response, NULL);
	}
	free(op);
	return true;
}

/* The egress proxy knows a sandbox by its address on the network. */
static void create_inspected(const struct docker_response *resp, void *arg)
{
	struct create_op *op = arg;
	if (create_abandoned(op, op->m, NULL))
		return;
	struct msession *ms = op->ms;
	struct err *e = NULL;
	yajl_val v = resp->status == 200 ? json_parse(resp->body, resp->len, &e) : NULL;
	yajl_val nets = json_get(json_get(v, "NetworkSettings"), "Networks");
	const char *ip = json_get_str(json_get(nets, net_name(ms->m->net)), "IPAddress");
	if (ip == NULL || *ip == '\0' || strlen(ip) >= sizeof(ms->s->net_ip)) {
		if (v)
			yajl_tree_free(v);
		err_free(e);
		create_finish(op, err_new(ERR_INTERNAL, "the container has no address on %s",
					  net_name(ms->m->net)));
		return;
	}
	snprintf(ms->s->net_ip, sizeof(ms->s->net_ip), "%s", ip);
	yajl_tree_free(v);
	op->step = CREATE_WAIT_KERNEL;
	create_check_ready(op);
}

static void create_started(const struct docker_response *resp, void *arg)
{
	struct create_op *op = arg;
	if (create_abandoned(op, NULL, NULL))
		return;
	if (resp->status != 204 && resp->status != 304) {
		create_finish(op, docker_error(resp, "start container"));
		return;
	}
	if (op->ms->s->networked) {
		op->step = CREATE_INSPECT;
		char path[256];
		snprintf(path, sizeof(path), "/containers/%s/json", op->ms->s->container_id);
		docker_request(op->ms->m->docker, "GET", path, NULL, 0, create_inspected, op);
		return;
	}
	op->step = CREATE_WAIT_KERNEL;
	create_check_ready(op);
}

static void create_created(const struct docker_response *resp, void *arg)
{
	struct create_op *op = arg;
	if (op->ms == NULL) {
		struct err *pe = NULL;
		yajl_val v = resp->status == 201 ? json_parse(resp->body, resp->len, &pe) : NULL;
		const char *cid = json_get_str(v, "Id");
		AUTOFREE char *late = cid ? xstrdup(cid) : NULL;
		if (v)
			yajl_tree_free(v);
		err_free(pe);
		create_abandoned(op, op->m, late);
		return;
	}
	struct msession *ms = op->ms;
	if (resp->status != 201) {
		struct err *e = docker_error(resp, "create container");
		if (resp->status == 400 && ms->s->gvisor && strstr(e->message, "runtime")) {
			err_free(e);
			e = err_new(
			    ERR_UNAVAILABLE,
			    "runtime gvisor: Docker runtime '%s' is not configured on this node "
			    "(docs/security.md says how)",
			    ms->m->cfg->gvisor_runtime);
		} else if (resp->status == 404) {
			/* Not the client's fault and not a missing session. */
			AUTOFREE char *tag = config_image_tag(ms->m->cfg, ms->s->image);
			err_free(e);
			e = err_new(ERR_UNAVAILABLE,
				    "image %s is not on this node (build it with `make image`)",
				    tag);
		}
		create_finish(op, e);
		return;
	}
	struct err *e = NULL;
	yajl_val v = json_parse(resp->body, resp->len, &e);
	const char *cid = json_get_str(v, "Id");
	if (cid == NULL || strlen(cid) > 128) {
		if (v)
			yajl_tree_free(v);
		err_free(e);
		create_finish(op,
			      err_new(ERR_INTERNAL, "create container: no Id in Docker's answer"));
		return;
	}
	ms->s->container_id = xstrdup(cid);
	kernel_link_set_container(ms->link, cid); /* before start: no hello can come earlier */
	yajl_tree_free(v);
	if (!ms->pooled)
		msession_persist(ms); /* the record now names its container */
	op->step = CREATE_DOCKER_START;
	char path[256];
	snprintf(path, sizeof(path), "/containers/%s/start", ms->s->container_id);
	docker_request(ms->m->docker, "POST", path, NULL, 0, create_started, op);
}

static void create_container(struct create_op *op)
{
	struct msession *ms = op->ms;
	const struct config *cfg = ms->m->cfg;
	bool networked = ms->s->networked;
	AUTOFREE char *tag = config_image_tag(cfg, ms->s->image);
	char dir[512], name[CONTAINER_NAME_SIZE], path[128];
	snprintf(dir, sizeof(dir), "%s/%s", ms->m->sessions_dir, ms->s->id);
	struct container_spec_args args = {
	    .image_tag = tag,
	    .ipc_dir = dir,
	    .network = networked ? net_name(ms->m->net) : NULL,
	    .proxy_url = networked ? net_proxy_url(ms->m->net) : NULL,
	    .seccomp = ms->m->seccomp,
	};
	size_t len;
	AUTOFREE char *spec = container_spec_json(ms->s, cfg, &args, &len);
	container_spec_new_name(name, sizeof(name));
	snprintf(path, sizeof(path), "/containers/create?name=%s", name);
	op->step = CREATE_DOCKER_CREATE;
	docker_request(ms->m->docker, "POST", path, spec, len, create_created, op);
}

static void create_network_ready(const struct err *e, void *arg)
{
	struct create_op *op = arg;
	if (create_abandoned(op, op->m, NULL))
		return;
	if (e) {
		create_finish(op, err_new(ERR_UNAVAILABLE, "sandbox network: %s", e->message));
		return;
	}
	create_container(op);
}

static void create_stored(const struct err *e, void *arg)
{
	struct create_op *op = arg;
	if (create_abandoned(op, op->m, NULL))
		return;
	if (e) {
		create_finish(op, err_new(ERR_UNAVAILABLE, "registry: %s", e->message));
		return;
	}
	if (op->ms->s->networked) {
		op->step = CREATE_NETWORK;
		net_ensure(op->m->net, create_network_ready, op);
		return;
	}
	create_container(op);
}

/* ---- kernel link events ---- */

static void ms_kernel_up(void *arg)
{
	struct msession *ms = arg;
	ms->last_exit.valid = false;
	log_debug("session %s: kernel connected", ms->s->id);
	if (ms->create)
		create_check_ready(ms->create);
	struct exec_op *op = ms->exec;
	if (op && !op->sent) {
		struct err *e = NULL;
		if (kernel_link_send_exec(ms->link, op->id, op->code, op->len,
					  (size_t)ms->m->cfg->output_cap_bytes, EXEC_MAX_FILES,
					  &e) < 0) {
			exec_finish(op, e);
			err_free(e);
			return;
		}
		op->sent = true;
	}
}

static void exec_finish_killed(struct exec_op *op)
{
	struct kernel_exit_info *x = &op->ms->last_exit;
	char reason[160];
	if (op->hard_killed) {
		snprintf(
		    reason, sizeof(reason),
		    "the code ignored the interrupt at the %llds deadline; the kernel was killed "
		    "and restarted (variables lost, files kept)",
		    (long long)op->timeout_s);
		exec_result_fail(op->result, EXEC_TIMEOUT, true, reason);
	} else {
		if (x->valid && x->oom)
			snprintf(reason, sizeof(reason),
				 "out of memory: the kernel exceeded memory_mb=%lld and was killed",
				 (long long)op->ms->s->limits.memory_mb);
		else if (x->valid && x->sig > 0)
			snprintf(reason, sizeof(reason), "the kernel was killed by signal %d (%s)",
				 x->sig, strsignal(x->sig));
		else if (x->valid && x->code >= 0)
			snprintf(reason, sizeof(reason), "the kernel exited with code %d", x->code);
		else
			snprintf(reason, sizeof(reason), "the kernel died");
		exec_result_fail(op->result, EXEC_KILLED, true, reason);
	}
	exec_finish(op, NULL);
}

static void ms_kernel_down(void *arg, const char *why)
{
	struct msession *ms = arg;
	log_debug("session %s: kernel connection lost: %s", ms->s->id, why);
	struct exec_op *op = ms->exec;
	if (op == NULL || !op->sent)
		return;
	op->sent = false;
	if (op->hard_killed || ms->last_exit.valid) {
		exec_finish_killed(op);
		return;
	}
	/* Wait briefly for the supervisor to say how the kernel died. */
	op->kernel_lost = true;
	struct timeval tv = {0, EXIT_REASON_WAIT_MS * 1000};
	evtimer_add(op->deadline, &tv);
}

static void ms_kernel_exit(void *arg, int code, int sig, bool oom)
{
	struct msession *ms = arg;
	ms->last_exit =
	    (struct kernel_exit_info){.valid = true, .code = code, .sig = sig, .oom = oom};
	log_info("session %s: kernel ended (code %d, signal %d%s)", ms->s->id, code, sig,
		 oom ? ", out of memory" : "");
	if (ms->exec && ms->exec->kernel_lost)
		exec_finish_killed(ms->exec);
}

static void supervisor_gone_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct msession *ms = arg;
	if (kernel_link_supervisor_connected(ms->link))
		return;
	msession_end(ms, SESSION_DEAD, "the sandbox stopped (its supervisor went away)", NULL,
		     NULL);
}

static void ms_supervisor_up(void *arg)
{
	struct msession *ms = arg;
	evtimer_del(ms->supervisor_timer);
	if (ms->create)
		create_check_ready(ms->create);
}

struct inspect_ctx {
	struct manager *m;
	char id[SESSION_ID_LEN + 1];
	int attempt;
};

static void supervisor_down_inspect(struct inspect_ctx *ctx);

static void inspect_again_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	supervisor_down_inspect(arg);
}

/* The supervisor's socket closed: ask Docker at once whether the container
 * is still running, so a `docker kill` or a crash ends the session within
 * milliseconds with the real reason. The session is looked up again by id:
 * it may have ended while Docker answered. */
static void supervisor_down_inspected(const struct docker_response *resp, void *arg)
{
	struct inspect_ctx *ctx = arg;
	struct msession *ms = manager_find(ctx->m, ctx->id);
	if (ms == NULL || ms->teardown || kernel_link_supervisor_connected(ms->link)) {
		free(ctx);
		return;
	}
	if (resp->status == 404) {
		free(ctx);
		msession_end(ms, SESSION_DEAD, "its container disappeared", NULL, NULL);
		return;
	}
	struct err *e = NULL;
	yajl_val v = resp->status == 200 ? json_parse(resp->body, resp->len, &e) : NULL;
	yajl_val state = json_get(v, "State");
	yajl_val running = json_get(state, "Running"), oom = json_get(state, "OOMKilled");
	int64_t code = -1;
	json_get_int(state, "ExitCode", &code);
	if (running && YAJL_IS_FALSE(running)) {
		char reason[160];
		snprintf(reason, sizeof(reason), "its container stopped (exit code %lld%s)",
			 (long long)code, oom && YAJL_IS_TRUE(oom) ? ", out of memory" : "");
		free(ctx);
		msession_end(ms, SESSION_DEAD, reason, NULL, NULL);
	} else {
		/* The socket can close a moment before Docker marks the container
		 * stopped: look again shortly (20, 100, 300, 1000 ms), then leave
		 * it to the supervisor grace timer. */
		static const int backoff_ms[] = {20, 100, 300, 1000};
		if (ctx->attempt < 4) {
			int ms_ = backoff_ms[ctx->attempt++];
			struct timeval tv = {0, ms_ * 1000};
			event_base_once(ctx->m->base, -1, EV_TIMEOUT, inspect_again_cb, ctx, &tv);
		} else {
			free(ctx);
		}
	}
	err_free(e);
	if (v)
		yajl_tree_free(v);
}

static void supervisor_down_inspect(struct inspect_ctx *ctx)
{
	struct msession *ms = manager_find(ctx->m, ctx->id);
	if (ms == NULL || ms->teardown || ms->s->container_id == NULL) {
		free(ctx);
		return;
	}
	char path[256];
	snprintf(path, sizeof(path), "/containers/%s/json", ms->s->container_id);
	docker_request(ctx->m->docker, "GET", path, NULL, 0, supervisor_down_inspected, ctx);
}

static void ms_supervisor_down(void *arg, const char *why)
{
	struct msession *ms = arg;
	log_warn("session %s: supervisor connection lost: %s", ms->s->id, why);
	files_on_supervisor_down(ms->files);
	struct timeval tv = {SUPERVISOR_GRACE_MS / 1000, (SUPERVISOR_GRACE_MS % 1000) * 1000};
	evtimer_add(ms->supervisor_timer, &tv);
	if (ms->s->container_id && !ms->teardown) {
		struct inspect_ctx *ctx = xcalloc(1, sizeof(*ctx));
		ctx->m = ms->m;
		memcpy(ctx->id, ms->s->id, sizeof(ctx->id));
		supervisor_down_inspect(ctx);
	}
}

static struct exec_op *current_exec(struct msession *ms, uint64_t id)
{
	return ms->exec && ms->exec->id == id && ms->exec->sent ? ms->exec : NULL;
}

static void ms_exec_stream(void *arg, uint64_t id, bool is_stderr, const char *data, size_t len,
			   bool tail, uint64_t dropped)
{
	struct msession *ms = arg;
	struct exec_op *op = current_exec(ms, id);
	if (op == NULL)
		return;
	size_t kept = exec_result_on_stream(op->result, is_stderr, data, len, tail, dropped);
	if (op->on_event && kept > 0)
		op->on_event(is_stderr ? "stderr" : "stdout", data, kept, NULL, op->arg);
}

static void ms_exec_display(void *arg, uint64_t id, const char *mime, const char *data, size_t len)
{
	struct msession *ms = arg;
	struct exec_op *op = current_exec(ms, id);
	if (op == NULL)
		return;
	if (exec_result_on_display(op->result, mime, data, len) && op->on_event) {
		const struct exec_display *d = &op->result->display[op->result->n_display - 1];
		op->on_event("display", d->b64, strlen(d->b64), d->mime, op->arg);
	}
}

static void ms_exec_done(void *arg, uint64_t id, yajl_val header)
{
	struct msession *ms = arg;
	struct exec_op *op = current_exec(ms, id);
	if (op == NULL)
		return;
	struct err *e = NULL;
	if (exec_result_on_done(op->result, header, &e) < 0) {
		log_warn("session %s: bad result from the kernel: %s", ms->s->id, e->message);
		err_free(e);
		kernel_link_drop_kernel(ms->link, "protocol error");
		return;
	}
	if (op->timed_out) {
		char reason[128];
		snprintf(reason, sizeof(reason),
			 "interrupted at the %llds deadline; the kernel and its variables are kept",
			 (long long)op->timeout_s);
		exec_result_fail(op->result, EXEC_TIMEOUT, false, reason);
	}
	exec_finish(op, NULL);
}

static void ms_supervisor_frame(void *arg, yajl_val header, const char *body, size_t len)
{
	struct msession *ms = arg;
	files_on_frame(ms->files, header, body, len);
	if (files_idle(ms->files))
		msession_touch(ms); /* a transfer ended: activity */
}

static void ms_supervisor_drained(void *arg)
{
	struct msession *ms = arg;
	files_on_drained(ms->files);
}

static const struct kernel_link_ops link_ops = {
    .kernel_up = ms_kernel_up,
    .kernel_down = ms_kernel_down,
    .supervisor_up = ms_supervisor_up,
    .supervisor_down = ms_supervisor_down,
    .kernel_exit = ms_kernel_exit,
    .exec_stream = ms_exec_stream,
    .exec_display = ms_exec_display,
    .exec_done = ms_exec_done,
    .supervisor_frame = ms_supervisor_frame,
    .supervisor_drained = ms_supervisor_drained,
};

/* The runtime side of a session: its IPC socket, transfer queue and timers,
 * in the table. Takes s (freed on failure). */
struct msession *msession_new(struct manager *m, struct session *s, struct err **errp)
{
	struct msession *ms = xcalloc(1, sizeof(*ms));
	ms->m = m;
	ms->s = s;
	ms->next_exec_id = (uint64_t)clock_now_ms() * 1000;
	if (s->uid == 0) {
		s->uid = uid_range_take(m->uids);
		if (s->uid < 0) {
			s->uid = 0;
			err_set(errp, ERR_UNAVAILABLE,
				"every sandbox uid of this node is in use (sandbox-uid-count %lld)",
				(long long)m->cfg->sandbox_uid_count);
			msession_free(ms);
			return NULL;
		}
	} else if (!uid_range_mark(m->uids, s->uid)) {
		/* Adopted with a uid outside today's range, or shared with another
		 * record: it keeps working, but does not have a uid of its own. */
		log_warn("session %s: uid %lld is outside sandbox-uid-base/count or in use twice",
			 s->id, (long long)s->uid);
	}
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/%s", m->sessions_dir, s->id);
	ms->link = kernel_link_new(m->base, dir, (uid_t)s->uid, (gid_t)s->uid,
				   (int)m->cfg->ipc_hello_timeout_ms, &link_ops, ms, errp);
	if (ms->link == NULL) {
		msession_free(ms);
		return NULL;
	}
	ms->files = files_new(m->base, ms->link);
	ms->idle_timer = evtimer_new(m->base, idle_timer_cb, ms);
	ms->supervisor_timer = evtimer_new(m->base, supervisor_gone_cb, ms);
	table_insert(m, ms);
	return ms;
}

/* Walk a new session through its create steps. A pool sandbox has no owner
 * yet, so it gets no registry record until claimed. */
void msession_create_start(struct manager *m, struct msession *ms, manager_session_cb cb, void *arg,
			   bool record)
{
	struct create_op *op = xcalloc(1, sizeof(*op));
	op->m = m;
	op->ms = ms;
	op->cb = cb;
	op->arg = arg;
	op->step = CREATE_STORE;
	op->timeout = evtimer_new(m->base, create_timeout_cb, op);
	struct timeval tv = {m->cfg->start_timeout_s, 0};
	evtimer_add(op->timeout, &tv);
	ms->create = op;
	if (record)
		store_session_put(m->store, ms->s, create_stored, op);
	else
		create_stored(NULL, op);
}

bool manager_pool_eligible(const struct manager *m, const struct session *s);
void manager_pool_claim(struct manager *m, struct msession *ms, struct session *s,
			manager_session_cb cb, void *arg);

int manager_create(struct manager *m, yajl_val body, const char *tenant, manager_session_cb cb,
		   void *arg, struct err **errp)
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
	struct session *s = session_from_request(body, m->cfg, tenant, errp);
	if (s == NULL)
		return -1;
	if (s->networked && m->net == NULL) {
		session_free(s);
		return err_set(errp, ERR_UNAVAILABLE,
			       "network access is not available on this node");
	}
	if (manager_pool_eligible(m, s)) {
		struct msession *warm;
		TAILQ_FOREACH (warm, &m->pool, pool_link)
			if (warm->s->networked == s->networked)
				break;
		if (warm) {
			m->pool_hits++;
			manager_pool_claim(m, warm, s, cb, arg);
			return 0;
		}
		m->pool_misses++;
	}
	session_new_id(s->id);
	s->node = xstrdup(m->cfg->node);
	s->created_at_ms = clock_now_ms();
	session_touch(s, s->created_at_ms);

	struct msession *ms = msession_new(m, s, errp);
	if (ms == NULL)
		return -1;

	msession_create_start(m, ms, cb, arg, true);
	return 0;
}

/* ---- exec ---- */

static void exec_finish(struct exec_op *op, const struct err *e)
{
	struct msession *ms = op->ms;
	ms->exec = NULL;
	op->result->duration_ms = (clock_mono_us() - op->start_us) / 1000;
	event_free(op->deadline);
	if (ms->s->state == SESSION_BUSY)
		ms->s->state = SESSION_READY;
	if (ms->s->state == SESSION_READY)
		msession_touch(ms);
	manager_emit(ms->m, "exec", ms->s, e ? "failed" : exec_status_name(op->result->status));
	op->cb(e ? NULL : op->result, e, op->arg);
	exec_result_free(op->result);
	free(op->code);
	free(op);
}

static void exec_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct exec_op *op = arg;
	struct msession *ms = op->ms;
	if (op->kernel_lost) {
		exec_finish_killed(op); /* the supervisor never said why */
		return;
	}
	if (!op->sent) {
		/* The kernel never came back to run it. */
		exec_result_fail(
		    op->result, EXEC_TIMEOUT, true,
		    "the kernel was restarting and did not come back before the deadline");
		exec_finish(op, NULL);
		return;
	}
	if (!op->timed_out) {
		/* Soft: interrupt, and give the code a grace to unwind. */
		op->timed_out = true;
		kernel_link_signal_kernel(ms->link, SIGINT);
		int64_t g = ms->m->cfg->kill_grace_ms;
		struct timeval tv = {g / 1000, (g % 1000) * 1000};
		evtimer_add(op->deadline, &tv);
		return;
	}
	/* Hard: the code ignored the interrupt. The daemon does not wait on the
	 * sandbox's cooperation: SIGKILL through the pidfd. */
	op->hard_killed = true;
	log_info("session %s: execution ignored the interrupt; killing the kernel", ms->s->id);
	if (kernel_link_signal_kernel(ms->link, SIGKILL) < 0)
		kernel_link_drop_kernel(ms->link, "hard timeout");
}

int manager_exec(struct manager *m, const char *id, const char *tenant, const char *code,
		 size_t len, int64_t timeout_s, manager_event_cb on_event, manager_exec_cb cb,
		 void *arg, struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	if (ms->teardown)
		return err_set(errp, ERR_EXPIRED, "session %s has ended: %s", id,
			       ms->end_reason ? ms->end_reason : "deleted");
	if (m->draining)
		return err_set(errp, ERR_UNAVAILABLE,
			       "the daemon is draining; retry shortly (the session survives)");
	if (session_check_exec(ms->s, errp) < 0)
		return -1;
	int64_t cap = ms->s->limits.exec_timeout_s;
	if (timeout_s <= 0 || timeout_s > cap)
		timeout_s = cap;
	struct exec_op *op = xcalloc(1, sizeof(*op));
	op->ms = ms;
	op->id = ++ms->next_exec_id;
	op->code = xstrndup(code, len);
	op->len = len;
	op->timeout_s = timeout_s;
	op->start_us = clock_mono_us();
	op->result = exec_result_new((size_t)m->cfg->output_cap_bytes);
	op->on_event = on_event;
	op->cb = cb;
	op->arg = arg;
	op->deadline = evtimer_new(m->base, exec_deadline_cb, op);
	struct timeval tv = {timeout_s, 0};
	evtimer_add(op->deadline, &tv);
	ms->exec = op;
	ms->s->state = SESSION_BUSY;
	session_touch(ms->s, clock_now_ms());
	if (kernel_link_kernel_connected(ms->link)) {
		if (kernel_link_send_exec(ms->link, op->id, op->code, op->len,
					  (size_t)m->cfg->output_cap_bytes, EXEC_MAX_FILES,
					  errp) < 0) {
			ms->exec = NULL;
			ms->s->state = SESSION_READY;
			event_free(op->deadline);
			exec_result_free(op->result);
			free(op->code);
			free(op);
			return -1;
		}
		op->sent = true;
	}
	return 0;
}

/* ---- teardown ---- */

static void teardown_step_done(struct teardown_op *op)
{
	if (--op->pending > 0)
		return;
	struct msession *ms = op->ms;
	struct manager *m = ms->m;
	log_info("session %s: removed (%s)", ms->s->id, ms->end_reason);
	manager_emit(m, "removed", ms->s, ms->end_reason);
	table_remove(m, ms);
	if (op->cb)
		op->cb(NULL, op->arg);
	msession_free(ms);
	free(op);
}

static void teardown_deferred_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct teardown_op *op = arg;
	op->pending = 1;
	teardown_step_done(op);
}

/* Finish a teardown that had nothing in flight, from the loop. */
static void teardown_step_done_deferred(struct teardown_op *op)
{
	defer_call(op->ms->m->base, teardown_deferred_cb, op);
}

static void teardown_container_removed(const struct docker_response *resp, void *arg)
{
	struct teardown_op *op = arg;
	if (resp->status != 204 && resp->status != 404) {
		struct err *e = docker_error(resp, "remove container");
		log_warn("session %s: %s (the orphan sweep will retry)", op->ms->s->id, e->message);
		err_free(e);
		op->ms->m->orphans_suspected = true;
	}
	teardown_step_done(op);
}

static void teardown_store_done(const struct err *e, void *arg)
{
	struct teardown_op *op = arg;
	struct tomb *t = tomb_find(op->ms->m, op->ms->s->id);
	if (e)
		log_warn(
		    "session %s: tombstone not written yet (%s); it will be when Redis is back",
		    op->ms->s->id, e->message);
	else if (t)
		t->unwritten = false;
	teardown_step_done(op);
}

void msession_end(struct msession *ms, enum session_state st, const char *reason,
		  manager_done_cb cb, void *arg)
{
	if (ms->teardown)
		return;
	bool was_pooled = ms->pooled;
	if (ms->pooled) {
		if (ms->in_pool) {
			TAILQ_REMOVE(&ms->m->pool, ms, pool_link);
			ms->m->pool_ready--;
			ms->in_pool = false;
		}
		ms->m->pooled_total--;
		ms->pooled = false;
		struct timeval two = {2, 0};
		evtimer_add(ms->m->pool_retry, &two); /* replace it */
	}
	ms->s->state = st;
	ms->end_reason = xstrdup(reason);
	egress_session_ended(net_egress(ms->m->net), ms->s->id);
	manager_emit(ms->m, st == SESSION_EXPIRED ? "expired" : "ended", ms->s, reason);
	struct teardown_op *op = xcalloc(1, sizeof(*op));
	op->ms = ms;
	op->cb = cb;
	op->arg = arg;
	op->pending = 2;
	ms->teardown = op;
	evtimer_del(ms->idle_timer);
	evtimer_del(ms->supervisor_timer);
	if (ms->create) {
		struct create_op *c = ms->create;
		ms->create = NULL;
		event_free(c->timeout);
		struct err *e = err_new(
		    ERR_EXPIRED, "create session: the session ended while starting: %s", reason);
		c->cb(NULL, e, c->arg);
		err_free(e);
		/* A Docker or Redis call is still in flight and will come back to
		 * c, which is freed then (create_abandoned). In the wait for the
		 * kernel nothing is in flight. */
		c->ms = NULL;
		if (c->step == CREATE_WAIT_KERNEL)
			free(c);
	}
	if (ms->exec) {
		char why[256];
		snprintf(why, sizeof(why), "the session ended during the execution: %s", reason);
		exec_result_fail(ms->exec->result, EXEC_KILLED, true, why);
		exec_finish(ms->exec, NULL);
	}
	files_free(ms->files, reason);
	ms->files = NULL;
	kernel_link_free(ms->link);
	ms->link = NULL;
	if (ms->s->container_id) {
		char path[256];
		snprintf(path, sizeof(path), "/containers/%s?force=true&v=true",
			 ms->s->container_id);
		docker_request(ms->m->docker, "DELETE", path, NULL, 0, teardown_container_removed,
			       op);
	} else {
		op->pending--;
	}
	if (was_pooled) {
		op->pending--; /* nobody's session: no record, no tombstone */
		if (op->pending == 0)
			teardown_step_done_deferred(op);
		return;
	}
	tomb_add(ms->m, ms->s, reason);
	store_session_end(ms->m->store, ms->s, reason, teardown_store_done, op);
}

struct file_op *manager_file_start(struct manager *m, const char *id, const char *tenant,
				   enum file_op_kind kind, const char *path,
				   const struct file_op_cbs *cbs, void *arg, struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0) {
		err_set(errp, ERR_NOT_FOUND, "no session %s", id);
		return NULL;
	}
	if (ms->teardown) {
		err_set(errp, ERR_EXPIRED, "session %s has ended: %s", id, ms->end_reason);
		return NULL;
	}
	if (ms->s->state == SESSION_STARTING) {
		err_set(errp, ERR_BUSY, "session %s is still starting", id);
		return NULL;
	}
	msession_touch(ms);
	return files_start(ms->files, kind, path, cbs, arg, errp);
}

int manager_delete(struct manager *m, const char *id, const char *tenant, manager_done_cb cb,
		   void *arg, struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	if (ms->teardown)
		return err_set(errp, ERR_EXPIRED, "session %s is already ending: %s", id,
			       ms->end_reason);
	log_info("session %s: delete requested", id);
	msession_end(ms, SESSION_DEAD, "deleted by the client", cb, arg);
	return 0;
}

/* ---- queries ---- */

const struct session *manager_get(struct manager *m, const char *id, const char *tenant)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0 || ms->teardown)
		return NULL;
	return ms->s;
}

struct explain_op {
	manager_done_cb cb;
	void *arg;
	char id[SESSION_ID_LEN + 1];
};

static void explain_tomb(bool found, const char *reason, int64_t ended_at_ms, const char *state,
			 void *arg)
{
	struct explain_op *op = arg;
	struct err *e;
	if (found) {
		char when[32];
		e = err_new(ERR_EXPIRED, "session %s ended at %s (%s): %s", op->id,
			    clock_format_rfc3339(ended_at_ms, when, sizeof(when)),
			    state ? state : "dead", reason);
	} else {
		e = err_new(ERR_NOT_FOUND, "no session %s", op->id);
	}
	op->cb(e, op->arg);
	err_free(e);
	free(op);
}

struct missing_now {
	struct msession *ms;
	struct explain_op *op;
};

void manager_explain_missing(struct manager *m, const char *id, manager_done_cb cb, void *arg)
{
	struct explain_op *op = xcalloc(1, sizeof(*op));
	op->cb = cb;
	op->arg = arg;
	snprintf(op->id, sizeof(op->id), "%s", id);
	struct msession *ms = manager_find(m, id);
	if (ms && ms->teardown) {
		/* Ending right now: the tombstone may not be written yet. */
		char reason[512];
		snprintf(reason, sizeof(reason), "%s", ms->end_reason);
		explain_tomb(true, reason, clock_now_ms(), session_state_name(ms->s->state), op);
		return;
	}
	struct tomb *t = tomb_find(m, id);
	if (t) {
		explain_tomb(true, t->reason, t->at_ms, session_state_name(t->state), op);
		return;
	}
	if (!store_connected(m->store)) {
		/* Without the registry a 404 would be a guess, and maybe a lie. */
		struct err *e =
		    err_new(ERR_UNAVAILABLE,
			    "session %s is not on this node and the registry (redis) is "
			    "unreachable; retry shortly",
			    id);
		op->cb(e, op->arg);
		err_free(e);
		free(op);
		return;
	}
	store_tombstone_get(m->store, id, explain_tomb, op);
}

int manager_keepalive(struct manager *m, const char *id, const char *tenant, struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0 || ms->teardown)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	msession_touch(ms);
	return 0;
}

void manager_foreach(struct manager *m, const char *tenant,
		     void (*fn)(const struct session *s, void *arg), void *arg)
{
	struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all)
		if (!ms->teardown && strcmp(ms->s->tenant, tenant) == 0)
			fn(ms->s, arg);
}

size_t manager_count(const struct manager *m)
{
	return manager_client_sessions(m);
}

bool manager_any_networked(const struct manager *m)
{
	const struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all)
		if (ms->s->networked)
			return true;
	return false;
}

size_t manager_execs_in_flight(const struct manager *m)
{
	size_t n = 0;
	struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all)
		n += ms->exec != NULL;
	return n;
}

void manager_set_draining(struct manager *m, bool draining)
{
	m->draining = draining;
}

/* ---- network ---- */

bool manager_egress_lookup(const char *src_ip, struct egress_peer *peer, void *arg)
{
	struct manager *m = arg;
	struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all) {
		if (ms->s->net_ip[0] && !ms->teardown && strcmp(ms->s->net_ip, src_ip) == 0) {
			peer->session_id = ms->s->id;
			peer->allow = ms->s->allow;
			peer->n_allow = ms->s->n_allow;
			return true;
		}
	}
	return false;
}

int manager_patch(struct manager *m, const char *id, const char *tenant, yajl_val body,
		  struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0 || ms->teardown)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	if (body == NULL || !YAJL_IS_OBJECT(body))
		return err_set(errp, ERR_BAD_REQUEST, "body: expected a JSON object");
	for (size_t i = 0; i < body->u.object.len; i++)
		if (strcmp(body->u.object.keys[i], "network") != 0)
			return err_set(errp, ERR_BAD_REQUEST,
				       "unknown field '%.64s' (only network can change)",
				       body->u.object.keys[i]);
	/* Validate with the create rules, on a scratch session. */
	struct session *scratch = session_from_request(body, m->cfg, tenant, errp);
	if (scratch == NULL)
		return -1;
	if (ms->s->net_ip[0] == '\0' && scratch->n_allow > 0) {
		session_free(scratch);
		return err_set(errp, ERR_BAD_REQUEST,
			       "session %s was created without network access; create a session "
			       "with network.allow to reach hosts",
			       id);
	}
	for (size_t i = 0; i < ms->s->n_allow; i++)
		free(ms->s->allow[i]);
	free(ms->s->allow);
	ms->s->allow = scratch->allow;
	ms->s->n_allow = scratch->n_allow;
	scratch->allow = NULL;
	scratch->n_allow = 0;
	session_free(scratch);
	log_info("session %s: allowlist now has %zu entries", id, ms->s->n_allow);
	egress_session_allow_changed(net_egress(m->net), id, ms->s->allow, ms->s->n_allow);
	msession_touch(ms);
	msession_persist(ms);
	return 0;
}

/* ---- life ---- */

struct manager *manager_new(struct event_base *base, const struct config *cfg,
			    struct docker *docker, struct store *store, struct sandbox_net *net,
			    struct err **errp)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/s", cfg->state_dir);
	if (mkdir(cfg->state_dir, 0711) < 0 && errno != EEXIST) {
		err_set(errp, ERR_INTERNAL, "state-dir %s: %s", cfg->state_dir, strerror(errno));
		return NULL;
	}
	chmod(cfg->state_dir, 0711);
	bool tmpfs = false;
	if (ipc_dir_prepare(dir, cfg->docker, cfg->ipc_tmpfs, &tmpfs, errp) < 0) {
		err_wrap(errp, "state-dir");
		return NULL;
	}
	struct err *se = NULL;
	char *seccomp = seccomp_profile_load(cfg->seccomp_profile, &se);
	if (se) {
		*errp = se;
		return NULL;
	}
	struct manager *m = xcalloc(1, sizeof(*m));
	m->seccomp = seccomp;
	m->uids = uid_range_new(cfg->sandbox_uid_base, cfg->sandbox_uid_count);
	m->base = base;
	m->cfg = cfg;
	m->docker = docker;
	m->store = store;
	m->net = net;
	m->sessions_dir = xstrdup(dir);
	TAILQ_INIT(&m->all);
	TAILQ_INIT(&m->pool);
	m->pool_retry = evtimer_new(base, manager_pool_retry_cb, m);
	TAILQ_INIT(&m->tombs);
	m->sweep = event_new(base, -1, EV_PERSIST, manager_sweep_cb, m);
	struct timeval two = {2, 0};
	event_add(m->sweep, &two);
	store_set_connect_cb(store, manager_registry_write_back, m);
	return m;
}

void manager_free(struct manager *m)
{
	if (m == NULL)
		return;
	while (!TAILQ_EMPTY(&m->all)) {
		struct msession *ms = TAILQ_FIRST(&m->all);
		table_remove(m, ms);
		if (ms->create) {
			event_free(ms->create->timeout);
			free(ms->create);
		}
		if (ms->exec) {
			exec_result_fail(ms->exec->result, EXEC_KILLED, false,
					 "the daemon is shutting down");
			exec_finish(ms->exec, NULL);
		}
		free(ms->teardown);
		msession_free(ms);
	}
	event_free(m->pool_retry);
	event_free(m->sweep);
	tombs_free(m);
	uid_range_free(m->uids);
	free(m->seccomp);
	free(m->sessions_dir);
	free(m);
}

bool manager_is_draining(const struct manager *m)
{
	return m->draining;
}
