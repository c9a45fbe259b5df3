/* manager_install.c: a time-boxed package install in a session
 * (install.h): the window (one more allowlist entry, a timer, the close),
 * and pip run through the session's kernel as one execution.
 *
 * The window opens in the same loop turn as the execution is sent, before
 * the proxy can hear from the sandbox, and closes exactly once: when the
 * execution ends or when the timer fires, whichever is first. Closing takes
 * the entry out of what manager_egress_lookup answers (new connections are
 * refused from then on) and asks the proxy to close every open connection
 * of the session that the session's own allowlist does not permit. */
#include <stdio.h>
#include <string.h>

#include "capbuf.h"
#include "clock.h"
#include "egress.h"
#include "install.h"
#include "log.h"
#include "manager_internal.h"
#include "network.h"
#include "xalloc.h"

/* After the window, what the execution may take to report: pip is killed
 * at the window by the script, and the report is a few lines. A kernel that
 * does not answer by then gets the execution's usual interrupt and kill. */
#define INSTALL_REPORT_GRACE_S 10

struct install_op {
	struct msession *ms;
	char entry[300]; /* host:port of the index */
	char **allow;    /* the session's list plus entry, while open */
	size_t n_allow;
	bool open;
	bool window_ended; /* the timer closed it, not pip's end */
	bool at_exit;
	bool from_kernel; /* a %pip install in execution exec_id (manager_pip.c) */
	uint64_t exec_id;
	int64_t opened_us, window_ms;
	struct event *timer;
	struct install_result result;
	manager_install_cb cb;
	void *arg;
};

static void allow_free(struct install_op *op)
{
	for (size_t i = 0; i < op->n_allow; i++)
		free(op->allow[i]);
	free(op->allow);
	op->allow = NULL;
	op->n_allow = 0;
}

static void allow_build(struct install_op *op)
{
	const struct session *s = op->ms->s;
	allow_free(op);
	op->allow = xcalloc(s->n_allow + 1, sizeof(char *));
	for (size_t i = 0; i < s->n_allow; i++)
		op->allow[op->n_allow++] = xstrdup(s->allow[i]);
	op->allow[op->n_allow++] = xstrdup(op->entry);
}

void install_effective_allow(struct msession *ms, char *const **allow, size_t *n)
{
	if (ms->install && ms->install->open) {
		*allow = ms->install->allow;
		*n = ms->install->n_allow;
	} else {
		*allow = ms->s->allow;
		*n = ms->s->n_allow;
	}
}

void install_on_allow_changed(struct install_op *op)
{
	if (op->open)
		allow_build(op);
}

static void window_close(struct install_op *op, const char *why)
{
	if (!op->open)
		return;
	op->open = false;
	evtimer_del(op->timer);
	allow_free(op);
	struct msession *ms = op->ms;
	op->result.window_ms = (clock_mono_us() - op->opened_us) / 1000;
	if (!op->at_exit)
		op->result.closed = egress_session_allow_changed(net_egress(ms->m->net), ms->s->id,
								 ms->s->allow, ms->s->n_allow);
	log_info("session %s: install window closed (%s) after %lld ms: egress to %s removed, "
		 "%zu proxy connection(s) closed",
		 ms->s->id, why, (long long)op->result.window_ms, op->entry, op->result.closed);
}

static void op_free(struct install_op *op)
{
	if (op == NULL)
		return;
	allow_free(op);
	event_free(op->timer);
	install_result_release(&op->result);
	free(op);
}

/* A kernel's window has nothing after its close (no report to read): it
 * goes with it, and the session may open another. */
static void kernel_window_end(struct install_op *op, const char *why)
{
	window_close(op, why);
	if (op->ms->install == op)
		op->ms->install = NULL;
	op_free(op);
}

static void window_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct install_op *op = arg;
	op->window_ended = true;
	if (op->from_kernel)
		kernel_window_end(op, "the window ended");
	else
		window_close(op, "the window ended");
}

void install_abort_at_exit(struct install_op *op)
{
	op->at_exit = true;
	if (op->from_kernel)
		kernel_window_end(op, "the daemon is exiting");
	else
		window_close(op, "the daemon is exiting");
}

/* The last bytes of the execution's stderr (pip's own words), for a
 * message; caller frees. */
static char *stderr_tail(const struct exec_result *r)
{
	size_t len = 0;
	AUTOFREE char *err = capbuf_render(&r->err, &len);
	size_t keep = len > 600 ? 600 : len;
	return xstrndup(err + len - keep, keep);
}

static void install_exec_done(const struct exec_result *r, const struct err *e, void *arg)
{
	struct install_op *op = arg;
	struct msession *ms = op->ms;
	window_close(op, e || r == NULL ? "the execution failed" : "pip finished");
	ms->install = NULL;
	struct err *out = NULL;
	char status[16] = "";
	int rc = 0;
	if (e) {
		out = err_new(e->code, "install: %s", e->message);
	} else {
		size_t len = 0;
		AUTOFREE char *text = capbuf_render(&r->out, &len);
		install_parse_report(text, len, &op->result, status, sizeof(status), &rc);
		AUTOFREE char *tail = stderr_tail(r);
		if (op->window_ended || strcmp(status, "timeout") == 0)
			out = err_new(ERR_TIMEOUT,
				      "timeout: the install window of %lld s ended before pip "
				      "finished; egress to %s is closed again (pip said: %s)",
				      (long long)op->result.window_s, op->entry, tail);
		else if (strcmp(status, "failed") == 0)
			out =
			    err_new(ERR_BAD_REQUEST, "pip install failed (exit %d): %s", rc, tail);
		else if (strcmp(status, "ok") != 0)
			out = err_new(r->status == EXEC_OK ? ERR_INTERNAL : ERR_UNAVAILABLE,
				      "install: the sandbox gave no install report (%s%s%s)",
				      exec_status_name(r->status), r->reason ? ": " : "",
				      r->reason ? r->reason : (r->evalue ? r->evalue : ""));
	}
	if (out)
		log_info("session %s: install failed: %s", ms->s->id, out->message);
	else
		log_info("session %s: installed %zu package(s) in %lld ms (pip %lld ms)", ms->s->id,
			 op->result.n_pkgs, (long long)op->result.window_ms,
			 (long long)op->result.pip_ms);
	op->cb(out ? NULL : &op->result, out, op->arg);
	err_free(out);
	op_free(op);
}

/* What both kinds of install check before a window opens: the node can
 * install, the session can, the requirements are ones pip may be given.
 * entry: the index's host:port. */
static int install_precheck(struct msession *ms, char *const *specs, size_t n_specs, char *entry,
			    size_t esize, struct err **errp)
{
	struct manager *m = ms->m;
	const struct config *cfg = m->cfg;
	if (cfg->pip_index_url == NULL || cfg->pip_index_url[0] == '\0')
		return err_set(errp, ERR_UNAVAILABLE,
			       "package installs are off on this node: no package index is "
			       "configured (start ci-daemon with --pip-index-url URL)");
	if (m->draining)
		return err_set(errp, ERR_UNAVAILABLE,
			       "the daemon is draining; retry shortly (the session survives)");
	for (size_t i = 0; i < n_specs; i++)
		if (install_check_spec(specs[i], errp) < 0)
			return -1;
	if (n_specs == 0)
		return err_set(errp, ERR_BAD_REQUEST, "pip: at least one requirement is needed");
	if (m->net == NULL || net_egress(m->net) == NULL)
		return err_set(errp, ERR_UNAVAILABLE,
			       "package installs need the sandbox network, which this node does "
			       "not have");
	if (!ms->s->networked || ms->s->net_ip[0] == '\0')
		return err_set(errp, ERR_BAD_REQUEST,
			       "session %s was created without network access; create the session "
			       "with network.allow (any entry: the index is opened for the install "
			       "window only) to install packages",
			       ms->s->id);
	return install_index_authority(cfg->pip_index_url, entry, esize, errp);
}

/* Open op's window for window_ms, in the loop turn that tells the sandbox
 * it may start (the proxy cannot have heard from its pip yet). */
static void window_open(struct install_op *op, int64_t window_ms, size_t n_specs)
{
	struct msession *ms = op->ms;
	ms->install = op;
	allow_build(op);
	op->open = true;
	op->opened_us = clock_mono_us();
	op->window_ms = window_ms;
	struct timeval tv = {window_ms / 1000, (window_ms % 1000) * 1000};
	evtimer_add(op->timer, &tv);
	log_info(
	    "session %s: install window opened: egress to %s for %lld s (%zu requirement(s)%s)",
	    ms->s->id, op->entry, (long long)((window_ms + 500) / 1000), n_specs,
	    op->from_kernel ? ", %pip in the execution" : "");
}

static struct install_op *op_new(struct msession *ms, const char *entry, int64_t window_s)
{
	struct install_op *op = xcalloc(1, sizeof(*op));
	op->ms = ms;
	snprintf(op->entry, sizeof(op->entry), "%s", entry);
	snprintf(op->result.index_host, sizeof(op->result.index_host), "%s", entry);
	op->result.window_s = window_s;
	op->timer = evtimer_new(ms->m->base, window_timer_cb, op);
	return op;
}

int install_kernel_open(struct msession *ms, uint64_t exec_id, char *const *specs, size_t n_specs,
			int64_t limit_ms, int64_t *window_ms, char *entry, size_t esize,
			struct err **errp)
{
	if (ms->install)
		return err_set(errp, ERR_BUSY,
			       "a package install is already running in this session (one at a "
			       "time)");
	if (install_precheck(ms, specs, n_specs, entry, esize, errp) < 0)
		return -1;
	int64_t w = ms->m->cfg->install_max_timeout_s * 1000;
	if (limit_ms < w)
		w = limit_ms;
	if (w < 1000)
		return err_set(errp, ERR_TIMEOUT,
			       "timeout: less than 1 s of the execution's deadline is left for an "
			       "install window; run %%pip in a cell of its own, with a longer "
			       "timeout_s");
	struct install_op *op = op_new(ms, entry, (w + 500) / 1000);
	op->from_kernel = true;
	op->exec_id = exec_id;
	window_open(op, w, n_specs);
	*window_ms = w;
	return 0;
}

void install_kernel_close(struct msession *ms, uint64_t exec_id, const char *why)
{
	struct install_op *op = ms->install;
	if (op == NULL || !op->from_kernel || (exec_id != 0 && op->exec_id != exec_id))
		return;
	/* The sandbox stops pip when the window ends by its own timer, which
	 * started after this one: news of that may come before this loop ran
	 * its timer (a loaded machine). Past the window's end, that is why. */
	if (op->open && clock_mono_us() - op->opened_us >= op->window_ms * 1000)
		why = "the window ended";
	kernel_window_end(op, why);
}

int manager_install(struct manager *m, const char *id, const char *tenant,
		    const struct install_request *req, manager_install_cb cb, void *arg,
		    struct err **errp)
{
	const struct config *cfg = m->cfg;
	if (cfg->pip_index_url == NULL || cfg->pip_index_url[0] == '\0')
		return err_set(errp, ERR_UNAVAILABLE,
			       "package installs are off on this node: no package index is "
			       "configured (start ci-daemon with --pip-index-url URL)");
	struct msession *ms = manager_find(m, id);
	if (ms == NULL || strcmp(ms->s->tenant, tenant) != 0)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	if (msession_closing(ms))
		return err_set(errp, ERR_EXPIRED, "session %s has ended: %s", id,
			       ms->end_reason ? ms->end_reason : "deleted");
	int64_t window = req->timeout_s > 0 ? req->timeout_s : cfg->install_max_timeout_s;
	if (window > cfg->install_max_timeout_s)
		return err_set(errp, ERR_BAD_REQUEST,
			       "timeout_s %lld is above this node's maximum %lld "
			       "(--install-max-timeout-s)",
			       (long long)window, (long long)cfg->install_max_timeout_s);
	char entry[300];
	if (install_precheck(ms, req->specs, req->n_specs, entry, sizeof(entry), errp) < 0)
		return -1;
	AUTOFREE char *code = install_script(cfg->pip_index_url, req->specs, req->n_specs, window);
	struct install_op *op = op_new(ms, entry, window);
	op->cb = cb;
	op->arg = arg;
	if (exec_start(ms, code, strlen(code), window + INSTALL_REPORT_GRACE_S, NULL,
		       install_exec_done, op, errp) < 0) {
		op_free(op);
		return -1;
	}
	/* Same loop turn as the send: the proxy cannot have heard from the
	 * sandbox's pip yet. */
	window_open(op, window * 1000, req->n_specs);
	return 0;
}
