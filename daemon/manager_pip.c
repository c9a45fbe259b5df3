/* manager_pip.c: `%pip install` in a cell, through the install window.
 *
 * During an execution the kernel sends pip_open with the requirements; the
 * daemon checks them and the session as the API's install does
 * (manager_install.c), opens the window for the node's longest window or
 * what is left of the execution's deadline, whichever is less, and answers
 * pip_window with the pip arguments (install_pip_args: the API install's
 * command). The kernel runs pip itself, its output the cell's, and sends
 * pip_close when pip ended. The window closes on that, on its timer, when
 * the execution ends or when the kernel goes away, whichever is first
 * (manager_exec.c calls install_kernel_close). The session stays one busy
 * operation, the execution.
 *
 * The kernel is hostile: a pip_open for another execution than the one it
 * runs is dropped (nothing is answered, so no reply backlog can build up
 * outside an execution), and one execution gets at most PIP_MAX_REQUESTS
 * answers. Bad requirements are answered with the error, never opened. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "install.h"
#include "json.h"
#include "kernel_frame.h"
#include "log.h"
#include "manager_internal.h"

/* Answers per execution; a cell that installs more than this in one go is
 * not a notebook. */
#define PIP_MAX_REQUESTS 16

/* The window ends this long before the execution's deadline, so the
 * kernel has the time to kill pip and say in the cell that the window
 * ended, before the deadline's interrupt. */
#define PIP_DEADLINE_MARGIN_MS 2000

static void pip_reply(struct msession *ms, uint64_t id, const char *index_url, char *const *specs,
		      size_t n_specs, int64_t window_ms, const char *entry, const struct err *e)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "t", "pip_window");
	jg_kv_int(g, "id", (int64_t)id);
	jg_kv_bool(g, "ok", e == NULL);
	if (e) {
		jg_kv_str(g, "code", err_code_name(e->code));
		jg_kv_str(g, "message", e->message);
	} else {
		jg_kv_int(g, "window_ms", window_ms);
		jg_kv_str(g, "index", entry);
		jg_kv_str(g, "site", INSTALL_SITE);
		size_t n = 0;
		char **args = install_pip_args(index_url, specs, n_specs, &n);
		jg_str(g, "args");
		jg_arr(g);
		for (size_t i = 0; i < n; i++)
			jg_str(g, args[i]);
		jg_arr_end(g);
		install_args_free(args);
	}
	jg_obj_end(g);
	size_t len = 0;
	const char *text = jg_text(g, &len);
	struct err *se = NULL;
	if (kernel_link_send_kernel(ms->link, text, len, &se) < 0) {
		log_debug("session %s: pip_window not sent: %s", ms->s->id, se->message);
		err_free(se);
	}
}

static void pip_open(struct msession *ms, uint64_t id, const struct kernel_pip *pip)
{
	int64_t left_ms = 0;
	uint64_t running = exec_running_id(ms, &left_ms);
	if (running == 0 || running != id) {
		log_debug("session %s: pip_open for execution %llu, which is not running: dropped",
			  ms->s->id, (unsigned long long)id);
		return;
	}
	if (ms->pip_exec_id != id) {
		ms->pip_exec_id = id;
		ms->pip_requests = 0;
	}
	if (++ms->pip_requests > PIP_MAX_REQUESTS) {
		if (ms->pip_requests == PIP_MAX_REQUESTS + 1)
			log_warn("session %s: more than %d pip_open frames in one execution: the "
				 "rest are dropped",
				 ms->s->id, PIP_MAX_REQUESTS);
		return;
	}
	char *const *specs = (char *const *)pip->specs;
	char entry[300] = "";
	int64_t window_ms = 0;
	AUTOERR struct err *e = NULL;
	if (pip->bad) {
		err_set(&e, ERR_BAD_REQUEST, "pip: %s", pip->bad);
	} else if (install_kernel_open(ms, id, specs, pip->n_specs,
				       left_ms - PIP_DEADLINE_MARGIN_MS, &window_ms, entry,
				       sizeof(entry), &e) < 0) {
		/* e says what */
	}
	if (e)
		log_info("session %s: %%pip install refused: %s", ms->s->id, e->message);
	pip_reply(ms, id, ms->m->cfg->pip_index_url, specs, pip->n_specs, window_ms, entry, e);
}

void pip_on_frame(struct msession *ms, uint64_t id, bool close, const struct kernel_pip *pip)
{
	if (!close) {
		pip_open(ms, id, pip);
		return;
	}
	char why[64];
	snprintf(why, sizeof(why), "pip finished, exit %d", pip->rc);
	install_kernel_close(ms, id, why);
}
