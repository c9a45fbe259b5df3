/* manager.c: the session table, a session's runtime (its IPC link, transfer
 * queue and clocks), what the kernel link reports, and the calls that read
 * or touch a live session. The flows have files of their own
 * (manager_internal.h lists them). */
#include "manager.h"
#include "manager_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "clock.h"
#include "egress.h"
#include "ipc_dir.h"
#include "log.h"
#include "network.h"
#include "seccomp.h"
#include "uid_range.h"
#include "xalloc.h"

void manager_emit(struct manager *m, const char *type, const struct session *s, const char *detail)
{
	if (m->listener)
		m->listener(type, s, detail, m->listener_arg);
}

void manager_set_listener(struct manager *m, manager_event_fn fn, void *arg)
{
	m->listener = fn;
	m->listener_arg = arg;
}

/* ---- the table ---- */

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

struct msession *manager_owned(struct manager *m, const char *id, const char *tenant)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0 || msession_closing(ms))
		return NULL;
	return ms;
}

static void table_insert(struct manager *m, struct msession *ms)
{
	unsigned b = bucket_of(ms->s->id);
	ms->hnext = m->buckets[b];
	m->buckets[b] = ms;
	TAILQ_INSERT_TAIL(&m->all, ms, all);
	m->count++;
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

/* Sessions that belong to a client (the pool's are not counted). */
size_t manager_client_sessions(const struct manager *m)
{
	return m->count - pool_total(m->pool);
}

bool manager_any_networked(const struct manager *m)
{
	const struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all)
		if (ms->s->networked)
			return true;
	return false;
}

static void msession_free(struct msession *ms)
{
	uid_range_release(ms->m->uids, ms->s->uid);
	workspace_vol_forget(ms->wsvol); /* an ended one gave it to its teardown */
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

void msession_remove(struct msession *ms)
{
	table_remove(ms->m, ms);
	msession_free(ms);
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
	if (ms->exec || ms->create || msession_closing(ms) || !files_idle(ms->files))
		return;
	if (clock_now_ms() < ms->s->expires_at_ms) {
		msession_arm_idle(ms); /* the wall clock moved */
		return;
	}
	char reason[128];
	bool lifetime = session_lifetime_bound(ms->s);
	if (lifetime)
		snprintf(reason, sizeof(reason), "its lifetime of %llds ended (max_lifetime_s)",
			 (long long)ms->s->max_lifetime_s);
	else
		snprintf(reason, sizeof(reason), "idle for %llds (idle_timeout_s)",
			 (long long)ms->s->idle_timeout_s);
	log_info("session %s: expired: %s", ms->s->id, reason);
	msession_end(ms, SESSION_EXPIRED, lifetime ? MANAGER_END_LIFETIME : MANAGER_END_IDLE,
		     reason, NULL, NULL);
}

/* ---- what the kernel link reports ---- */

static void ms_kernel_up(void *arg)
{
	struct msession *ms = arg;
	ms->last_exit.valid = false;
	log_debug("session %s: kernel connected", ms->s->id);
	if (ms->create)
		create_on_runner_up(ms->create);
	exec_on_kernel_up(ms);
}

static void ms_kernel_down(void *arg, const char *why)
{
	struct msession *ms = arg;
	log_debug("session %s: kernel connection lost: %s", ms->s->id, why);
	exec_on_kernel_down(ms);
}

static void ms_kernel_exit(void *arg, int code, int sig, bool oom)
{
	struct msession *ms = arg;
	ms->last_exit =
	    (struct kernel_exit_info){.valid = true, .code = code, .sig = sig, .oom = oom};
	log_info("session %s: kernel ended (code %d, signal %d%s)", ms->s->id, code, sig,
		 oom ? ", out of memory" : "");
	exec_on_kernel_exit(ms);
}

static void supervisor_gone_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct msession *ms = arg;
	if (kernel_link_supervisor_connected(ms->link))
		return;
	msession_end(ms, SESSION_DEAD, MANAGER_END_CRASHED,
		     "the sandbox stopped (its supervisor went away)", NULL, NULL);
}

static void ms_supervisor_up(void *arg)
{
	struct msession *ms = arg;
	evtimer_del(ms->supervisor_timer);
	if (ms->create)
		create_on_runner_up(ms->create);
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
static void supervisor_down_inspected(const struct docker_result *r,
				      const struct docker_container_state *st, void *arg)
{
	struct inspect_ctx *ctx = arg;
	struct msession *ms = manager_find(ctx->m, ctx->id);
	if (ms == NULL || ms->teardown || kernel_link_supervisor_connected(ms->link)) {
		free(ctx);
		return;
	}
	if (r->status == 404) {
		free(ctx);
		msession_end(ms, SESSION_DEAD, MANAGER_END_CRASHED, "its container disappeared",
			     NULL, NULL);
		return;
	}
	if (st && !st->running) {
		char reason[160];
		snprintf(reason, sizeof(reason), "its container stopped (exit code %lld%s)",
			 (long long)st->exit_code, st->oom_killed ? ", out of memory" : "");
		free(ctx);
		msession_end(ms, SESSION_DEAD, MANAGER_END_CRASHED, reason, NULL, NULL);
		return;
	}
	/* The socket can close a moment before Docker marks the container
	 * stopped: look again shortly (20, 100, 300, 1000 ms), then leave it to
	 * the supervisor grace timer. */
	static const int backoff_ms[] = {20, 100, 300, 1000};
	if (ctx->attempt < 4) {
		int wait = backoff_ms[ctx->attempt++];
		struct timeval tv = {0, wait * 1000};
		event_base_once(ctx->m->base, -1, EV_TIMEOUT, inspect_again_cb, ctx, &tv);
	} else {
		free(ctx);
	}
}

static void supervisor_down_inspect(struct inspect_ctx *ctx)
{
	struct msession *ms = manager_find(ctx->m, ctx->id);
	if (ms == NULL || ms->teardown || ms->s->container_id == NULL) {
		free(ctx);
		return;
	}
	docker_container_inspect(ctx->m->docker, ms->s->container_id, NULL,
				 supervisor_down_inspected, ctx);
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

static void ms_exec_stream(void *arg, uint64_t id, bool is_stderr, const char *data, size_t len,
			   bool tail, uint64_t dropped)
{
	exec_on_stream(arg, id, is_stderr, data, len, tail, dropped);
}

static void ms_exec_display(void *arg, uint64_t id, const struct exec_display_info *info,
			    const char *data, size_t len)
{
	exec_on_display(arg, id, info, data, len);
}

static void ms_exec_done(void *arg, uint64_t id, yajl_val header)
{
	exec_on_done(arg, id, header);
}

static void ms_exec_pip(void *arg, uint64_t id, bool close, const struct kernel_pip *pip)
{
	pip_on_frame(arg, id, close, pip);
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
    .exec_pip = ms_exec_pip,
    .supervisor_frame = ms_supervisor_frame,
    .supervisor_drained = ms_supervisor_drained,
};

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

/* ---- calls on a live session ---- */

const struct session *manager_get(struct manager *m, const char *id, const char *tenant)
{
	struct msession *ms = manager_owned(m, id, tenant);
	return ms ? ms->s : NULL;
}

struct file_op *manager_file_start(struct manager *m, const char *id, const char *tenant,
				   enum file_op_kind kind, const char *path, bool recursive,
				   const struct file_op_cbs *cbs, void *arg, struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0) {
		err_set(errp, ERR_NOT_FOUND, "no session %s", id);
		return NULL;
	}
	if (msession_closing(ms)) {
		err_set(errp, ERR_EXPIRED, "session %s has ended: %s", id, ms->end_reason);
		return NULL;
	}
	if (ms->s->state == SESSION_STARTING) {
		err_set(errp, ERR_BUSY, "session %s is still starting", id);
		return NULL;
	}
	msession_touch(ms);
	if (kind == FILE_DELETE)
		return files_start_delete(ms->files, path, recursive, cbs, arg, errp);
	return files_start(ms->files, kind, path, cbs, arg, errp);
}

int manager_delete(struct manager *m, const char *id, const char *tenant, manager_done_cb cb,
		   void *arg, struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	if (msession_closing(ms))
		return err_set(errp, ERR_EXPIRED, "session %s is already ending: %s", id,
			       ms->end_reason);
	log_info("session %s: delete requested", id);
	msession_end(ms, SESSION_DEAD, MANAGER_END_DELETED, "deleted by the client", cb, arg);
	return 0;
}

int manager_keepalive(struct manager *m, const char *id, const char *tenant, struct err **errp)
{
	struct msession *ms = manager_owned(m, id, tenant);
	if (ms == NULL)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	msession_touch(ms);
	return 0;
}

void manager_foreach(struct manager *m, const char *tenant,
		     void (*fn)(const struct session *s, void *arg), void *arg)
{
	struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all)
		if (!msession_closing(ms) && strcmp(ms->s->tenant, tenant) == 0)
			fn(ms->s, arg);
}

size_t manager_count(const struct manager *m)
{
	return manager_client_sessions(m);
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

bool manager_is_draining(const struct manager *m)
{
	return m->draining;
}

bool manager_is_recovered(const struct manager *m)
{
	return m->recovered;
}

void manager_pool_stats(const struct manager *m, size_t *ready, uint64_t *hits, uint64_t *misses)
{
	pool_stats(m->pool, ready, hits, misses);
}

size_t manager_pool_target(const struct manager *m)
{
	return pool_target(m->pool);
}

/* ---- network ---- */

bool manager_egress_lookup(const char *src_ip, struct egress_peer *peer, void *arg)
{
	struct manager *m = arg;
	struct msession *ms;
	TAILQ_FOREACH (ms, &m->all, all) {
		if (ms->s->net_ip[0] && !ms->teardown && strcmp(ms->s->net_ip, src_ip) == 0) {
			peer->session_id = ms->s->id;
			install_effective_allow(ms, &peer->allow, &peer->n_allow);
			return true;
		}
	}
	return false;
}

int manager_patch(struct manager *m, const char *id, const char *tenant,
		  const struct session_request *req, struct err **errp)
{
	struct msession *ms = manager_owned(m, id, tenant);
	if (ms == NULL)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	if (session_check_allow(req->allow, req->n_allow, errp) < 0)
		return -1;
	if (ms->s->net_ip[0] == '\0' && req->n_allow > 0)
		return err_set(errp, ERR_BAD_REQUEST,
			       "session %s was created without network access; create a session "
			       "with network.allow to reach hosts",
			       id);
	for (size_t i = 0; i < ms->s->n_allow; i++)
		free(ms->s->allow[i]);
	free(ms->s->allow);
	ms->s->allow = xcalloc(req->n_allow, sizeof(char *));
	ms->s->n_allow = req->n_allow;
	for (size_t i = 0; i < req->n_allow; i++)
		ms->s->allow[i] = xstrdup(req->allow[i]);
	log_info("session %s: allowlist now has %zu entries", id, ms->s->n_allow);
	char *const *eff;
	size_t n_eff;
	if (ms->install)
		install_on_allow_changed(ms->install);
	install_effective_allow(ms, &eff, &n_eff);
	egress_session_allow_changed(net_egress(m->net), id, eff, n_eff);
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
	struct workspace_disk *wsdisk =
	    workspace_disk_new(base, cfg->state_dir, cfg->workspace_backend, cfg->docker, errp);
	if (wsdisk == NULL) {
		free(seccomp);
		err_wrap(errp, "state-dir");
		return NULL;
	}
	struct manager *m = xcalloc(1, sizeof(*m));
	m->wsdisk = wsdisk;
	m->seccomp = seccomp;
	m->uids = uid_range_new(cfg->sandbox_uid_base, cfg->sandbox_uid_count);
	m->base = base;
	m->cfg = cfg;
	m->docker = docker;
	m->store = store;
	m->net = net;
	m->sessions_dir = xstrdup(dir);
	m->ipc_tmpfs = tmpfs;
	TAILQ_INIT(&m->all);
	TAILQ_INIT(&m->tombs);
	create_pool_init(m);
	m->sweep = event_new(base, -1, EV_PERSIST, manager_sweep_cb, m);
	struct timeval two = {2, 0};
	event_add(m->sweep, &two);
	store_set_connect_cb(store, manager_registry_write_back, m);
	return m;
}

void manager_release_state_dir(struct manager *m)
{
	if (m == NULL || !m->ipc_tmpfs)
		return;
	if (!TAILQ_EMPTY(&m->all)) {
		log_info("ipc: %s stays mounted: sandboxes outlive this daemon", m->sessions_dir);
		return;
	}
	if (umount2(m->sessions_dir, UMOUNT_NOFOLLOW) < 0) {
		log_warn("ipc: unmounting %s: %s", m->sessions_dir, strerror(errno));
		return;
	}
	m->ipc_tmpfs = false;
	log_info("ipc: %s unmounted (no sandbox outlives this daemon)", m->sessions_dir);
}

void manager_free(struct manager *m)
{
	if (m == NULL)
		return;
	while (!TAILQ_EMPTY(&m->all)) {
		struct msession *ms = TAILQ_FIRST(&m->all);
		table_remove(m, ms);
		if (ms->create)
			create_free_at_exit(ms->create);
		if (ms->install)
			install_abort_at_exit(ms->install);
		if (ms->exec)
			exec_abort_at_exit(ms->exec);
		free(ms->teardown);
		exit_snap_free_at_exit(ms);
		msession_free(ms);
	}
	pool_free(m->pool);
	workspace_disk_free(m->wsdisk);
	manager_shutdown_free(m); /* the loop stopped before it ended: nobody waits */
	manager_recovery_abandon(m);
	event_free(m->sweep);
	manager_tombs_free(m);
	uid_range_free(m->uids);
	free(m->seccomp);
	free(m->sessions_dir);
	free(m);
}
