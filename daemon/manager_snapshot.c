/* manager_snapshot.c: what the snapshot engine (snapshot.h) needs of a
 * session: the daemon's own code run in its kernel, a tar op with its
 * supervisor, and the exit snapshot's pause in msession_end.
 *
 * An exit snapshot runs before anything of the ending: the session keeps
 * its kernel link, its files queue and its container, but refuses its
 * clients (msession_closing) until the engine says it has the files. Then
 * msession_end is called again with the arguments it first had. Another
 * ending asked for meanwhile (the node's shutdown, a second expiry) does not
 * restart anything: its callback is kept and called when the teardown ends. */
#include <string.h>

#include "log.h"
#include "manager_internal.h"
#include "xalloc.h"

/* Endings that another ending may join while the exit snapshot runs. */
#define EXIT_SNAP_WAITERS 4

struct exit_snap {
	struct msession *ms;
	enum session_state st;
	enum manager_end why;
	char *reason;
	manager_done_cb cb;
	void *arg;
	struct {
		manager_done_cb cb;
		void *arg;
	} waiters[EXIT_SNAP_WAITERS];
	size_t n_waiters;
};

void manager_set_exit_snapshot(struct manager *m, manager_exit_hook fn, void *arg)
{
	m->exit_hook = fn;
	m->exit_hook_arg = arg;
}

static bool wants_exit_snapshot(const struct msession *ms, enum manager_end why)
{
	if (ms->pooled || !ms->s->persist.set || !ms->s->persist.on_end ||
	    ms->s->container_id == NULL || ms->create != NULL)
		return false;
	/* A failed create or a crashed sandbox has no workspace to trust; a
	 * node lost at a restart has no container left. */
	return why == MANAGER_END_DELETED || why == MANAGER_END_IDLE ||
	       why == MANAGER_END_LIFETIME || why == MANAGER_END_DRAINED;
}

/* Called after the teardown with the callbacks of the endings that joined. */
struct waiters_call {
	manager_done_cb cb[EXIT_SNAP_WAITERS + 1];
	void *arg[EXIT_SNAP_WAITERS + 1];
	size_t n;
};

static void waiters_done(const struct err *e, void *arg)
{
	struct waiters_call *w = arg;
	for (size_t i = 0; i < w->n; i++)
		if (w->cb[i])
			w->cb[i](e, w->arg[i]);
	free(w);
}

static void exit_snap_done(const struct err *e, void *arg)
{
	struct exit_snap *x = arg;
	struct msession *ms = x->ms;
	if (e)
		log_warn("session %s: exit snapshot: %s", ms->s->id, e->message);
	ms->exit_snap = NULL;
	ms->exit_snap_done = true;
	manager_done_cb cb = x->cb;
	void *cb_arg = x->arg;
	if (x->n_waiters > 0) {
		struct waiters_call *w = xcalloc(1, sizeof(*w));
		w->cb[w->n] = x->cb;
		w->arg[w->n++] = x->arg;
		for (size_t i = 0; i < x->n_waiters; i++) {
			w->cb[w->n] = x->waiters[i].cb;
			w->arg[w->n++] = x->waiters[i].arg;
		}
		cb = waiters_done;
		cb_arg = w;
	}
	char *reason = x->reason;
	enum session_state st = x->st;
	enum manager_end why = x->why;
	free(x);
	msession_end(ms, st, why, reason, cb, cb_arg);
	free(reason);
}

bool exit_snap_begin(struct msession *ms, enum session_state st, enum manager_end why,
		     const char *reason, manager_done_cb cb, void *arg)
{
	struct exit_snap *x = ms->exit_snap;
	if (x) {
		if (cb == NULL)
			return true;
		if (x->n_waiters < EXIT_SNAP_WAITERS) {
			x->waiters[x->n_waiters].cb = cb;
			x->waiters[x->n_waiters++].arg = arg;
		} else {
			struct err e = {.code = ERR_BUSY,
					.message =
					    (char *)"the session is taking its exit snapshot"};
			cb(&e, arg);
		}
		return true;
	}
	struct manager *m = ms->m;
	if (ms->exit_snap_done || m->exit_hook == NULL || !wants_exit_snapshot(ms, why))
		return false;
	x = xcalloc(1, sizeof(*x));
	x->ms = ms;
	x->st = st;
	x->why = why;
	x->reason = xstrdup(reason);
	x->cb = cb;
	x->arg = arg;
	ms->exit_snap = x;
	free(ms->end_reason);
	ms->end_reason = xstrdup(reason);
	evtimer_del(ms->idle_timer);
	log_info("session %s: ending (%s): taking its exit snapshot first", ms->s->id, reason);
	m->exit_hook(m->exit_hook_arg, ms->s, exit_snap_done, x);
	return true;
}

void exit_snap_free_at_exit(struct msession *ms)
{
	struct exit_snap *x = ms->exit_snap;
	if (x == NULL)
		return;
	ms->exit_snap = NULL;
	free(x->reason);
	free(x);
}

/* The session for the engine: there, not torn down, its sandbox up. */
static struct msession *snapshot_session(struct manager *m, const char *id, struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || ms->pooled) {
		err_set(errp, ERR_NOT_FOUND, "no session %s", id);
		return NULL;
	}
	if (ms->teardown) {
		err_set(errp, ERR_EXPIRED, "session %s has ended: %s", id,
			ms->end_reason ? ms->end_reason : "deleted");
		return NULL;
	}
	if (ms->s->state == SESSION_STARTING || ms->files == NULL) {
		err_set(errp, ERR_BUSY, "session %s is still starting", id);
		return NULL;
	}
	return ms;
}

int manager_snapshot_exec(struct manager *m, const char *id, const char *code, size_t len,
			  int64_t timeout_s, manager_exec_cb cb, void *arg, struct err **errp)
{
	struct msession *ms = snapshot_session(m, id, errp);
	if (ms == NULL)
		return -1;
	return exec_start(ms, code, len, timeout_s, NULL, cb, arg, errp);
}

struct file_op *manager_snapshot_tar(struct manager *m, const char *id, enum file_op_kind kind,
				     const char *params, const struct file_op_cbs *cbs, void *arg,
				     struct err **errp)
{
	struct msession *ms = snapshot_session(m, id, errp);
	if (ms == NULL)
		return NULL;
	if (!ms->exit_snap)
		msession_touch(ms);
	return files_start_tar(ms->files, kind, params, cbs, arg, errp);
}

int manager_discard(struct manager *m, const char *id, const char *tenant, manager_done_cb cb,
		    void *arg, struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms && strcmp(ms->s->tenant, tenant) == 0)
		ms->exit_snap_done = true;
	return manager_delete(m, id, tenant, cb, arg, errp);
}

void manager_set_workspace(struct manager *m, const char *id, const char *tenant, const char *name)
{
	struct msession *ms = manager_owned(m, id, tenant);
	if (ms == NULL || !session_workspace_valid(name))
		return;
	free(ms->s->workspace);
	ms->s->workspace = strcmp(name, ms->s->id) == 0 ? NULL : xstrdup(name);
	msession_persist(ms);
}

static void forget_done(const struct err *e, int64_t size, yajl_val answer, void *arg)
{
	(void)size;
	(void)answer;
	(void)arg;
	if (e && e->code != ERR_NOT_FOUND && e->code != ERR_EXPIRED)
		log_debug("snapshot: removing a variables file: %s", e->message);
}

static const struct file_op_cbs forget_cbs = {.done = forget_done};

void manager_snapshot_forget_file(struct manager *m, const char *id, const char *path)
{
	struct err *e = NULL;
	struct msession *ms = snapshot_session(m, id, &e);
	if (ms == NULL || files_start(ms->files, FILE_DELETE, path, &forget_cbs, NULL, &e) == NULL)
		err_free(e);
}
