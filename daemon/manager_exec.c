/* manager_exec.c: executions in a session: sending the code to the kernel,
 * the deadline (an interrupt, then a kill the sandbox cannot refuse), the
 * output as it comes, and the kernel's death. One op per session
 * (ms->exec): a session runs one execution at a time. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "exec_result.h"
#include "log.h"
#include "manager_internal.h"
#include "xalloc.h"

/* How long to wait for the supervisor's word on why a kernel died. */
#define EXIT_REASON_WAIT_MS 1000

struct exec_op {
	struct msession *ms;
	uint64_t id;
	char *code;
	size_t len;
	const char *language; /* static (exec_languages); NULL: Python */
	bool sent;
	bool timed_out;    /* the deadline passed and SIGINT was sent */
	bool interrupted;  /* ... or the client asked (manager_interrupt) */
	bool hard_killed;  /* SIGKILL was sent after the grace */
	bool kernel_lost;  /* waiting for the supervisor's exit notice */
	bool sandbox_wait; /* ... and then for the sandbox's end, the supervisor gone too */
	int64_t start_us;
	int64_t timeout_s;
	struct exec_result *result;
	struct event *deadline;
	manager_event_cb on_event;
	manager_exec_cb cb;
	void *arg;
};

static void op_free(struct exec_op *op)
{
	event_free(op->deadline);
	exec_result_free(op->result);
	free(op->code);
	free(op);
}

static void exec_finish(struct exec_op *op, const struct err *e)
{
	struct msession *ms = op->ms;
	/* A %pip window of this execution ends with it, before anyone hears. */
	install_kernel_close(ms, op->id, "the execution ended");
	ms->exec = NULL;
	op->result->duration_ms = (clock_mono_us() - op->start_us) / 1000;
	if (ms->s->state == SESSION_BUSY)
		session_set_state(ms->s, SESSION_READY);
	if (ms->s->state == SESSION_READY)
		msession_touch(ms);
	manager_emit(ms->m, "exec", ms->s, e ? "failed" : exec_status_name(op->result->status));
	op->cb(e ? NULL : op->result, e, op->arg);
	op_free(op);
}

static void exec_finish_killed(struct exec_op *op)
{
	struct kernel_exit_info *x = &op->ms->last_exit;
	char reason[160];
	if (op->hard_killed && op->interrupted) {
		exec_result_fail(
		    op->result, EXEC_KILLED, true,
		    "the code ignored the interrupt it was sent; the kernel was killed "
		    "and restarted (variables lost, files kept)");
	} else if (op->hard_killed) {
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

void exec_abort(struct exec_op *op, const char *reason)
{
	char why[256];
	snprintf(why, sizeof(why), "the session ended during the execution: %s", reason);
	exec_result_fail(op->result, EXEC_KILLED, true, why);
	exec_finish(op, NULL);
}

void exec_abort_at_exit(struct exec_op *op)
{
	exec_result_fail(op->result, EXEC_KILLED, false, "the daemon is shutting down");
	exec_finish(op, NULL);
}

/* ---- the kernel link's news ---- */

void exec_on_kernel_up(struct msession *ms)
{
	struct exec_op *op = ms->exec;
	if (op == NULL || op->sent)
		return;
	struct err *e = NULL;
	if (kernel_link_send_exec(ms->link, op->id, op->language, op->code, op->len,
				  (size_t)ms->m->cfg->output_cap_bytes, EXEC_MAX_FILES, &e) < 0) {
		exec_finish(op, e);
		err_free(e);
		return;
	}
	op->sent = true;
}

uint64_t exec_running_id(const struct msession *ms, int64_t *left_ms)
{
	const struct exec_op *op = ms->exec;
	*left_ms = 0;
	if (op == NULL || !op->sent || op->timed_out || op->kernel_lost)
		return 0;
	int64_t end_us = op->start_us + op->timeout_s * 1000000;
	int64_t left = (end_us - clock_mono_us()) / 1000;
	*left_ms = left > 0 ? left : 0;
	return op->id;
}

void exec_on_kernel_down(struct msession *ms)
{
	/* The kernel that asked for a window is gone: so is the window. */
	install_kernel_close(ms, 0, "the kernel went away");
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

void exec_on_kernel_exit(struct msession *ms)
{
	if (ms->exec && ms->exec->kernel_lost)
		exec_finish_killed(ms->exec);
}

static struct exec_op *current_exec(struct msession *ms, uint64_t id)
{
	return ms->exec && ms->exec->id == id && ms->exec->sent ? ms->exec : NULL;
}

void exec_on_stream(struct msession *ms, uint64_t id, bool is_stderr, const char *data, size_t len,
		    bool tail, uint64_t dropped)
{
	struct exec_op *op = current_exec(ms, id);
	if (op == NULL)
		return;
	size_t kept = exec_result_on_stream(op->result, is_stderr, data, len, tail, dropped);
	if (op->on_event && kept > 0)
		op->on_event(is_stderr ? "stderr" : "stdout", data, kept, NULL, op->arg);
}

void exec_on_display(struct msession *ms, uint64_t id, const struct exec_display_info *info,
		     const char *data, size_t len)
{
	struct exec_op *op = current_exec(ms, id);
	if (op == NULL)
		return;
	if (exec_result_on_display(op->result, info, data, len) && op->on_event) {
		const struct exec_display *d = &op->result->display[op->result->n_display - 1];
		op->on_event("display", d->b64, strlen(d->b64), d, op->arg);
	}
}

void exec_on_done(struct msession *ms, uint64_t id, yajl_val header)
{
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
	if (op->language == NULL || strcmp(op->language, "python") == 0)
		exec_result_set_cell_line(op->result, op->code, op->len);
	if (op->timed_out && !op->interrupted) {
		char reason[128];
		snprintf(reason, sizeof(reason),
			 "interrupted at the %llds deadline; the kernel and its variables are kept",
			 (long long)op->timeout_s);
		exec_result_fail(op->result, EXEC_TIMEOUT, false, reason);
	}
	exec_finish(op, NULL);
}

/* ---- the deadline, and the client's interrupt ---- */

/* SIGINT now, SIGKILL if the code is still running after the grace. */
static void interrupt_soft(struct exec_op *op)
{
	op->timed_out = true;
	kernel_link_interrupt(op->ms->link, op->id);
	int64_t g = op->ms->m->cfg->kill_grace_ms;
	struct timeval tv = {g / 1000, (g % 1000) * 1000};
	evtimer_del(op->deadline);
	evtimer_add(op->deadline, &tv);
}

static void exec_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct exec_op *op = arg;
	struct msession *ms = op->ms;
	if (op->kernel_lost) {
		/* The supervisor never said why. When it went away too, the whole
		 * sandbox is going (an OOM kill that takes the container, as a
		 * tmpfs workspace's files make it): the session's end says why,
		 * from Docker, within the supervisor's grace, and aborts this
		 * execution with it. On a loaded machine that is later than the
		 * supervisor's word would have been; "the kernel died" then would
		 * hide an OOM kill from the caller. */
		if (!op->sandbox_wait && !kernel_link_supervisor_connected(ms->link)) {
			op->sandbox_wait = true;
			int64_t wait = SUPERVISOR_GRACE_MS + 2000;
			struct timeval tv = {wait / 1000, (wait % 1000) * 1000};
			evtimer_add(op->deadline, &tv);
			return;
		}
		exec_finish_killed(op);
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
		interrupt_soft(op);
		return;
	}
	/* Hard: the code ignored the interrupt. The daemon does not wait on the
	 * sandbox's cooperation: SIGKILL through the pidfd. */
	op->hard_killed = true;
	log_info("session %s: execution ignored the interrupt; killing the kernel", ms->s->id);
	if (kernel_link_signal_kernel(ms->link, SIGKILL) < 0)
		kernel_link_drop_kernel(ms->link, "hard timeout");
}

/* tenant's live session id, or NULL with not_found (also another tenant's)
 * or expired (ending). */
static struct msession *live_session(struct manager *m, const char *id, const char *tenant,
				     struct err **errp)
{
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0) {
		err_set(errp, ERR_NOT_FOUND, "no session %s", id);
		return NULL;
	}
	if (msession_closing(ms)) {
		err_set(errp, ERR_EXPIRED, "session %s has ended: %s", id,
			ms->end_reason ? ms->end_reason : "deleted");
		return NULL;
	}
	return ms;
}

int manager_exec(struct manager *m, const char *id, const char *tenant, const char *code,
		 size_t len, int64_t timeout_s, manager_event_cb on_event, manager_exec_cb cb,
		 void *arg, struct err **errp)
{
	return manager_exec_lang(m, id, tenant, NULL, code, len, timeout_s, on_event, cb, arg,
				 errp);
}

int manager_exec_lang(struct manager *m, const char *id, const char *tenant, const char *language,
		      const char *code, size_t len, int64_t timeout_s, manager_event_cb on_event,
		      manager_exec_cb cb, void *arg, struct err **errp)
{
	struct msession *ms = live_session(m, id, tenant, errp);
	if (ms == NULL)
		return -1;
	if (m->draining)
		return err_set(errp, ERR_UNAVAILABLE,
			       "the daemon is draining; retry shortly (the session survives)");
	int64_t cap = ms->s->limits.exec_timeout_s;
	if (timeout_s <= 0 || timeout_s > cap)
		timeout_s = cap;
	return exec_start_lang(ms, language, code, len, timeout_s, on_event, cb, arg, errp);
}

int exec_start(struct msession *ms, const char *code, size_t len, int64_t timeout_s,
	       manager_event_cb on_event, manager_exec_cb cb, void *arg, struct err **errp)
{
	return exec_start_lang(ms, NULL, code, len, timeout_s, on_event, cb, arg, errp);
}

int exec_start_lang(struct msession *ms, const char *language, const char *code, size_t len,
		    int64_t timeout_s, manager_event_cb on_event, manager_exec_cb cb, void *arg,
		    struct err **errp)
{
	struct manager *m = ms->m;
	if (session_check_exec(ms->s, errp) < 0)
		return -1;
	if (ms->install)
		return err_set(errp, ERR_BUSY, "session %s is busy: a package install is running",
			       ms->s->id);
	struct exec_op *op = xcalloc(1, sizeof(*op));
	op->ms = ms;
	op->id = ++ms->next_exec_id;
	op->code = xstrndup(code, len);
	op->len = len;
	op->language = language;
	op->timeout_s = timeout_s;
	op->start_us = clock_mono_us();
	op->result = exec_result_new((size_t)m->cfg->output_cap_bytes);
	op->on_event = on_event;
	op->cb = cb;
	op->arg = arg;
	op->deadline = evtimer_new(m->base, exec_deadline_cb, op);
	if (kernel_link_kernel_connected(ms->link)) {
		if (kernel_link_send_exec(ms->link, op->id, op->language, op->code, op->len,
					  (size_t)m->cfg->output_cap_bytes, EXEC_MAX_FILES,
					  errp) < 0) {
			op_free(op);
			return -1;
		}
		op->sent = true;
	}
	struct timeval tv = {timeout_s, 0};
	evtimer_add(op->deadline, &tv);
	ms->exec = op;
	session_set_state(ms->s, SESSION_BUSY);
	session_touch(ms->s, clock_now_ms());
	return 0;
}

int manager_interrupt(struct manager *m, const char *id, const char *tenant, bool *interrupted,
		      struct err **errp)
{
	*interrupted = false;
	struct msession *ms = live_session(m, id, tenant, errp);
	if (ms == NULL)
		return -1;
	struct exec_op *op = ms->exec;
	if (op == NULL)
		return 0; /* nothing runs: nothing to interrupt */
	*interrupted = true;
	if (op->timed_out || op->kernel_lost)
		return 0; /* already on its way out */
	op->interrupted = true;
	if (!op->sent) {
		exec_result_fail(op->result, EXEC_KILLED, false,
				 "interrupted before the kernel, restarting, could run it");
		exec_finish(op, NULL);
		return 0;
	}
	log_info("session %s: execution interrupted by the client", ms->s->id);
	interrupt_soft(op);
	return 0;
}
