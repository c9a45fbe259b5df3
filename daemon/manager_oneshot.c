/* manager_oneshot.c: one execution in a session made for it and removed
 * before the answer (POST /v1/exec).
 *
 * Built only on the manager's public calls (manager_create, manager_exec,
 * manager_delete), so it holds no session state of its own: the flow is
 * created -> executed -> deleted -> cb, carried by one struct oneshot. */
#include "manager.h"

#include <string.h>

#include "log.h"
#include "xalloc.h"

struct oneshot {
	struct manager *m;
	char *tenant;
	char id[SESSION_ID_LEN + 1];
	char *code;
	size_t len;
	int64_t timeout_s;
	const char *language; /* static (exec_languages); NULL: Python */
	/* What the answer will be, kept until the session is gone: manager_exec
	 * lends its result only for the length of its callback. */
	struct exec_result *result;
	struct err *error;
	manager_oneshot_cb cb;
	void *arg;
};

static void oneshot_free(struct oneshot *o)
{
	free(o->tenant);
	free(o->code);
	exec_result_free(o->result);
	err_free(o->error);
	free(o);
}

static void oneshot_deleted(const struct err *e, void *arg)
{
	struct oneshot *o = arg;
	/* Nobody else hears of this: the answer is about the execution. */
	if (e)
		log_warn("one-shot session %s: delete failed: %s", o->id, e->message);
	o->cb(o->error ? NULL : o->result, o->error, true, o->arg);
	oneshot_free(o);
}

/* Runs inside manager callbacks only, never inside manager_oneshot. */
static void oneshot_finish(struct oneshot *o)
{
	struct err *e = NULL;
	if (manager_delete(o->m, o->id, o->tenant, oneshot_deleted, o, &e) < 0) {
		err_free(e);
		oneshot_deleted(NULL, o); /* already gone (expired under us) */
	}
}

static void oneshot_exec_done(const struct exec_result *r, const struct err *e, void *arg)
{
	struct oneshot *o = arg;
	if (r)
		o->result = exec_result_dup(r);
	else
		o->error = err_new(e->code, "%s", e->message);
	oneshot_finish(o);
}

static void oneshot_created(const struct session *s, const struct err *e, void *arg)
{
	struct oneshot *o = arg;
	if (e) {
		o->cb(NULL, e, false, o->arg);
		oneshot_free(o);
		return;
	}
	memcpy(o->id, s->id, sizeof(o->id));
	if (manager_exec_lang(o->m, o->id, o->tenant, o->language, o->code, o->len, o->timeout_s,
			      NULL, oneshot_exec_done, o, &o->error) < 0)
		oneshot_finish(o);
}

int manager_oneshot(struct manager *m, const char *tenant, const struct exec_request *req,
		    manager_oneshot_cb cb, void *arg, struct err **errp)
{
	struct session_request sr = {0};
	if (req->image) {
		sr.image = req->image; /* borrowed: manager_create copies what it keeps */
		sr.set |= SRQ_IMAGE;
	}
	/* The session's limit is the asked deadline (checked against
	 * --max-exec-timeout-s by the API): the default must not lower it. */
	if (req->timeout_s > 0) {
		sr.limits.exec_timeout_s = req->timeout_s;
		sr.set |= SRQ_EXEC_TIMEOUT;
	}
	struct oneshot *o = xcalloc(1, sizeof(*o));
	o->m = m;
	o->tenant = xstrdup(tenant);
	o->code = xstrndup(req->code, req->len);
	o->len = req->len;
	o->timeout_s = req->timeout_s;
	o->language = req->language;
	o->cb = cb;
	o->arg = arg;
	if (manager_create(m, &sr, o->tenant, oneshot_created, o, errp) < 0) {
		oneshot_free(o);
		return -1;
	}
	return 0;
}
