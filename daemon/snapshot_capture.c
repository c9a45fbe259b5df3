/* snapshot_capture.c: taking a snapshot of a live session (snapshot.h).
 *
 *   variables ──► ws_tar ──► scanner + spool file ──► manifest ──► upload queue
 *   (kernel)      (supervisor, streamed)               (<id>.json last)
 *
 * The variables code runs first, as an execution (so it waits for nothing:
 * a session that is busy has its variables skipped with the reason, and
 * its files are still taken). Every byte of the tar goes through the
 * scanner, which checks it and hashes each file for the manifest, and
 * then into <spool>/<id>.tar; the daemon counts against the caps itself
 * (the supervisor is the sandbox's, and may lie). The manifest is written
 * last, so a crash leaves a tar without one, which the next start removes.
 *
 * The spool is written on the loop: the page cache takes a 256 KiB chunk in
 * microseconds, and the file is not fsync'ed (the spool is for the store's
 * outages and the daemon's restarts, not for the host's power loss). */
#include "snapshot_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capbuf.h"
#include "clock.h"
#include "config.h"
#include "defer.h"
#include "exec_result.h"
#include "files.h"
#include "install.h"
#include "json.h"
#include "log.h"
#include "snapshot_manifest.h"
#include "tar_scan.h"
#include "xalloc.h"

extern const char snapshot_vars_source[];

/* Packages found in the tar (.ci/site/<name>-<version>.dist-info). */
#define CAPTURE_PACKAGES_MAX 1000
#define CAPTURE_VARS_ANSWER_MAX (4u << 20)

struct snap_capture {
	struct snapshots *sn;
	char id[SESSION_ID_LEN + 1];
	char session[SESSION_ID_LEN + 1];
	char *tenant, *workspace;
	char **paths;
	size_t n_paths;
	bool variables, at_exit;
	int64_t created_ms;
	yajl_val vars; /* the kernel's answer, or NULL */
	struct snapshot_builder *builder;
	struct tar_scan *ts;
	struct install_pkg pkgs[CAPTURE_PACKAGES_MAX];
	size_t n_pkgs;
	int fd;
	char tar_path[PATH_MAX];
	struct file_op *op;
	bool exec_running; /* the variables code: its callback will come */
	struct err *error; /* the first failure, reported at the end */
	bool ending;
	struct event *stall;
	snap_capture_cb cb;
	snapshot_cb upload_cb;
	void *arg;
	LIST_ENTRY(snap_capture) link;
};

static void capture_free(struct snap_capture *c)
{
	LIST_REMOVE(c, link);
	if (c->op)
		files_cancel(c->op);
	if (c->fd >= 0)
		close(c->fd);
	if (c->tar_path[0])
		unlink(c->tar_path);
	tar_scan_free(c->ts);
	snapshot_builder_free(c->builder);
	for (size_t i = 0; i < c->n_pkgs; i++) {
		free(c->pkgs[i].name);
		free(c->pkgs[i].version);
	}
	json_free(c->vars);
	for (size_t i = 0; i < c->n_paths; i++)
		free(c->paths[i]);
	free(c->paths);
	free(c->tenant);
	free(c->workspace);
	err_free(c->error);
	if (c->stall)
		event_free(c->stall);
	free(c);
}

/* The capture's outcome, told from the loop: the end may come from inside
 * a files callback, and what the listener does next (an exit snapshot's
 * teardown frees the session's files queue) must not run under it. */
struct capture_told {
	snap_capture_cb cb;
	void *arg;
	struct snapshots *sn;
	struct err *e;
	char id[SESSION_ID_LEN + 1];
};

static void capture_tell(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct capture_told *t = arg;
	if (!t->sn->closing)
		t->cb(t->e, t->id, t->arg);
	err_free(t->e);
	free(t);
}

/* The end: cb hears e (NULL: spooled and queued). */
static void capture_end(struct snap_capture *c, const struct err *e)
{
	if (e) {
		c->sn->stats.failed++;
		log_warn("snapshot %s of session %s: %s", c->id, c->session, e->message);
	}
	/* The variables file is in the tar (or the capture failed); left in the
	 * workspace, a later snapshot without variables would carry it. */
	if (c->variables && !c->sn->closing)
		manager_snapshot_forget_file(c->sn->mgr, c->session, ".ci/vars.pkl");
	struct capture_told *t = xcalloc(1, sizeof(*t));
	t->cb = c->cb;
	t->arg = c->arg;
	t->sn = c->sn;
	t->e = e ? err_new(e->code, "%s", e->message) : NULL;
	memcpy(t->id, c->id, sizeof(t->id));
	defer_call(c->sn->base, capture_tell, t);
	c->cb = NULL;
	if (c->exec_running) {
		/* The variables code's callback is still to come: it frees. */
		c->ending = true;
		return;
	}
	capture_free(c);
}

static void capture_fail(struct snap_capture *c, struct err *e)
{
	capture_end(c, e);
	err_free(e);
}

static void stall_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct snap_capture *c = arg;
	capture_fail(c, err_new(ERR_UNAVAILABLE,
				"snapshot of session %s: no progress for %d s; abandoned",
				c->session, SNAP_STALL_S));
}

static void stall_arm(struct snap_capture *c)
{
	struct timeval tv = {SNAP_STALL_S, 0};
	evtimer_add(c->stall, &tv);
}

/* ---- the tar ---- */

/* ".ci/site/<name>-<version>.dist-info" (a directory entry): a package. */
static void note_package(struct snap_capture *c, const struct tar_entry *e)
{
	static const char site[] = ".ci/site/";
	if (!e->dir || strncmp(e->path, site, sizeof(site) - 1) != 0 ||
	    c->n_pkgs >= CAPTURE_PACKAGES_MAX)
		return;
	const char *name = e->path + sizeof(site) - 1;
	size_t n = strlen(name);
	static const char suffix[] = ".dist-info";
	if (strchr(name, '/') || n <= sizeof(suffix) - 1 ||
	    strcmp(name + n - (sizeof(suffix) - 1), suffix) != 0)
		return;
	const char *dash = strchr(name, '-');
	if (dash == NULL || dash == name)
		return;
	size_t vlen = (size_t)(name + n - (sizeof(suffix) - 1) - (dash + 1));
	if (vlen == 0)
		return;
	c->pkgs[c->n_pkgs].name = xstrndup(name, (size_t)(dash - name));
	c->pkgs[c->n_pkgs].version = xstrndup(dash + 1, vlen);
	c->n_pkgs++;
}

static int capture_entry(const struct tar_entry *e, void *arg, struct err **errp)
{
	struct snap_capture *c = arg;
	note_package(c, e);
	return snapshot_builder_entry(e, c->builder, errp);
}

static void deferred_fail(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct snap_capture *c = arg;
	if (c->sn->closing)
		return;
	struct err *e = c->error;
	c->error = NULL;
	capture_fail(c, e);
}

/* Fail from inside a files callback: the op is cancelled from the loop. */
static void capture_fail_soon(struct snap_capture *c, struct err *e)
{
	if (c->error) {
		err_free(e);
		return;
	}
	c->error = e;
	defer_call(c->sn->base, deferred_fail, c);
}

static void tar_data(const char *data, size_t len, void *arg)
{
	struct snap_capture *c = arg;
	if (c->error)
		return;
	stall_arm(c);
	struct err *e = NULL;
	if (tar_scan_feed(c->ts, data, len, &e) < 0) {
		if (e->code == ERR_PAYLOAD_TOO_LARGE) {
			struct err *w = err_new(
			    ERR_PAYLOAD_TOO_LARGE,
			    "the workspace is over the snapshot cap (%lld MiB, %lld files; "
			    "--snapshot-max-mb, --snapshot-max-files): choose files with paths",
			    (long long)c->sn->cfg->snapshot_max_mb,
			    (long long)c->sn->cfg->snapshot_max_files);
			err_free(e);
			e = w;
		} else {
			struct err *w = err_new(ERR_UNAVAILABLE,
						"the sandbox sent a malformed tar: %s", e->message);
			err_free(e);
			e = w;
		}
		capture_fail_soon(c, e);
		return;
	}
	while (len > 0) {
		ssize_t n = write(c->fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			capture_fail_soon(c, err_new(ERR_UNAVAILABLE, "the snapshot spool %s: %s",
						     c->tar_path,
						     n < 0 ? strerror(errno) : "short write"));
			return;
		}
		data += n;
		len -= (size_t)n;
	}
}

static int write_file(const char *path, const char *text, size_t len, struct err **errp)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(errp, ERR_UNAVAILABLE, "the snapshot spool %s: %s", tmp,
			       strerror(errno));
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = errno;
			close(fd);
			unlink(tmp);
			return err_set(errp, ERR_UNAVAILABLE, "the snapshot spool %s: %s", tmp,
				       n < 0 ? strerror(err) : "short write");
		}
		off += (size_t)n;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		int err = errno;
		unlink(tmp);
		return err_set(errp, ERR_UNAVAILABLE, "the snapshot spool %s: %s", path,
			       strerror(err));
	}
	return 0;
}

static void tar_done(const struct err *fe, int64_t size, yajl_val answer, void *arg)
{
	(void)size;
	struct snap_capture *c = arg;
	c->op = NULL;
	if (c->error) /* the deferred failure ends it */
		return;
	if (fe && fe->code == ERR_PAYLOAD_TOO_LARGE) {
		capture_fail(
		    c, err_new(ERR_PAYLOAD_TOO_LARGE,
			       "the workspace is over the snapshot cap (%lld MiB, %lld files; "
			       "--snapshot-max-mb, --snapshot-max-files): choose files with "
			       "paths (%s)",
			       (long long)c->sn->cfg->snapshot_max_mb,
			       (long long)c->sn->cfg->snapshot_max_files, fe->message));
		return;
	}
	if (fe) {
		capture_fail(
		    c, err_new(fe->code, "snapshot of session %s: %s", c->session, fe->message));
		return;
	}
	struct err *e = NULL;
	if (tar_scan_finish(c->ts, &e) < 0) {
		capture_fail(c, err_new(ERR_UNAVAILABLE, "the sandbox sent a malformed tar: %s",
					e->message));
		err_free(e);
		return;
	}
	char sha[TAR_SHA256_HEX + 1];
	tar_scan_sha256(c->ts, sha);
	yajl_val skipped = json_get(answer, "skipped");
	struct snapshot_tail t = {
	    .size = tar_scan_bytes(c->ts),
	    .sha256 = sha,
	    .packages = c->pkgs,
	    .n_packages = c->n_pkgs,
	    .skipped = skipped && YAJL_IS_ARRAY(skipped) ? skipped : NULL,
	};
	size_t len = 0;
	char *manifest = snapshot_builder_finish(c->builder, &t, &len, &e);
	if (manifest == NULL) {
		capture_fail(c, e);
		return;
	}
	char jpath[PATH_MAX], name[64];
	snprintf(name, sizeof(name), "%s.json", c->id);
	snap_spool_path(c->sn, jpath, sizeof(jpath), name);
	close(c->fd);
	c->fd = -1;
	if (write_file(jpath, manifest, len, &e) < 0) {
		free(manifest);
		capture_fail(c, e);
		return;
	}
	c->tar_path[0] = '\0'; /* the spool's now: kept */
	log_info("snapshot %s of session %s: %llu files, %llu bytes spooled", c->id, c->session,
		 (unsigned long long)tar_scan_files(c->ts),
		 (unsigned long long)tar_scan_bytes(c->ts));
	snap_upload_queue(c->sn, c->tenant, c->id, manifest, len, c->upload_cb, c->arg);
	free(manifest);
	capture_end(c, NULL);
}

static const struct file_op_cbs tar_cbs = {.data = tar_data, .done = tar_done};

static void tar_start(struct snap_capture *c)
{
	const struct config *cfg = c->sn->cfg;
	uint64_t max_bytes = (uint64_t)cfg->snapshot_max_mb << 20;
	struct snapshot_head h = {
	    .id = c->id,
	    .tenant = c->tenant,
	    .workspace = c->workspace,
	    .session = c->session,
	    .created_at_ms = c->created_ms,
	    .all_paths = c->n_paths == 0,
	    .paths = (const char *const *)c->paths,
	    .n_paths = c->n_paths,
	    .variables = c->vars,
	};
	c->builder = snapshot_builder_new(&h);
	c->ts = tar_scan_new(max_bytes, (uint64_t)cfg->snapshot_max_files, capture_entry, c);
	char name[64];
	snprintf(name, sizeof(name), "%s.tar", c->id);
	snap_spool_path(c->sn, c->tar_path, sizeof(c->tar_path), name);
	c->fd = open(c->tar_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (c->fd < 0) {
		capture_fail(c, err_new(ERR_UNAVAILABLE, "the snapshot spool %s: %s", c->tar_path,
					strerror(errno)));
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "paths");
	if (c->n_paths) {
		jg_arr(g);
		for (size_t i = 0; i < c->n_paths; i++)
			jg_str(g, c->paths[i]);
		jg_arr_end(g);
	} else {
		jg_null(g);
	}
	jg_kv_int(g, "max_bytes", (int64_t)max_bytes);
	jg_kv_int(g, "max_files", cfg->snapshot_max_files);
	jg_obj_end(g);
	size_t plen;
	const char *params = jg_text(g, &plen);
	struct err *e = NULL;
	c->op = manager_snapshot_tar(c->sn->mgr, c->session, FILE_TAR_OUT, params, &tar_cbs, c, &e);
	if (c->op == NULL) {
		capture_fail(c, e);
		return;
	}
	stall_arm(c);
}

/* ---- the variables ---- */

/* The answer line of the variables code in r's output, parsed; NULL when
 * there is none or it is not a JSON object. */
yajl_val snap_vars_answer(const struct exec_result *r)
{
	size_t len = 0;
	char *out = capbuf_render(&r->out, &len);
	yajl_val v = NULL;
	if (out && len <= CAPTURE_VARS_ANSWER_MAX) {
		const char *mark = NULL, *p = out;
		while ((p = memmem(p, len - (size_t)(p - out), SNAP_VARS_MARK,
				   strlen(SNAP_VARS_MARK))) != NULL) {
			mark = p;
			p += strlen(SNAP_VARS_MARK);
		}
		if (mark) {
			const char *js = mark + strlen(SNAP_VARS_MARK);
			const char *nl = memchr(js, '\n', len - (size_t)(js - out));
			size_t jl = nl ? (size_t)(nl - js) : len - (size_t)(js - out);
			v = json_parse(js, jl, NULL);
			if (v && !YAJL_IS_OBJECT(v)) {
				json_free(v);
				v = NULL;
			}
		}
	}
	free(out);
	return v;
}

/* {"saved":[],"modules":{},"skipped":[{"name":"*","reason":why}]}: the
 * variables could not be saved at all. */
static yajl_val vars_failed(const char *why)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "saved");
	jg_arr(g);
	jg_arr_end(g);
	jg_str(g, "modules");
	jg_obj(g);
	jg_obj_end(g);
	jg_str(g, "skipped");
	jg_arr(g);
	jg_obj(g);
	jg_kv_str(g, "name", "*");
	jg_kv_str(g, "reason", why);
	jg_obj_end(g);
	jg_arr_end(g);
	jg_obj_end(g);
	size_t len;
	const char *text = jg_text(g, &len);
	return json_parse(text, len, NULL);
}

static void vars_saved(const struct exec_result *r, const struct err *e, void *arg)
{
	struct snap_capture *c = arg;
	c->exec_running = false;
	if (c->sn->closing)
		return; /* freed by snapshots_free */
	if (c->ending) {
		capture_free(c);
		return;
	}
	char why[300];
	if (e) {
		snprintf(why, sizeof(why), "the variables could not be saved: %.240s", e->message);
		c->vars = vars_failed(why);
	} else if ((c->vars = snap_vars_answer(r)) == NULL) {
		const char *detail = r->reason ? r->reason : r->evalue;
		snprintf(why, sizeof(why), "the variables code gave no answer (%s%s%.200s)",
			 exec_status_name(r->status), detail ? ": " : "", detail ? detail : "");
		c->vars = vars_failed(why);
	}
	tar_start(c);
}

char *snap_vars_code(const char *call, size_t *len)
{
	size_t n = strlen(snapshot_vars_source), cn = strlen(call);
	char *code = xmalloc(n + cn + 3);
	memcpy(code, snapshot_vars_source, n);
	code[n] = '\n';
	memcpy(code + n + 1, call, cn);
	code[n + 1 + cn] = '\n';
	code[n + 2 + cn] = '\0';
	*len = n + 2 + cn;
	return code;
}

static void vars_start(struct snap_capture *c)
{
	size_t n;
	char *code = snap_vars_code("__ci_vars_save()", &n);
	struct err *e = NULL;
	int64_t timeout = c->at_exit ? SNAP_VARS_EXIT_TIMEOUT_S : SNAP_VARS_TIMEOUT_S;
	int rc = manager_snapshot_exec(c->sn->mgr, c->session, code, n, timeout, vars_saved, c, &e);
	free(code);
	if (rc == 0) {
		c->exec_running = true;
		return;
	}
	char why[300];
	snprintf(why, sizeof(why), "the variables could not be saved: %.240s", e->message);
	err_free(e);
	c->vars = vars_failed(why);
	tar_start(c);
}

static void capture_begin(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct snap_capture *c = arg;
	if (c->sn->closing)
		return;
	if (c->variables)
		vars_start(c);
	else
		tar_start(c);
}

int snap_capture_start(struct snapshots *sn, const struct snap_capture_req *req, snap_capture_cb cb,
		       snapshot_cb upload_cb, void *arg, struct err **errp)
{
	if (sn->blobs == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "snapshots are off on this node");
	struct snap_capture *c = xcalloc(1, sizeof(*c));
	c->sn = sn;
	session_new_id(c->id);
	memcpy(c->session, req->session, sizeof(c->session));
	c->tenant = xstrdup(req->tenant);
	c->workspace = xstrdup(req->workspace);
	if (req->n_paths) {
		c->paths = xcalloc(req->n_paths, sizeof(char *));
		for (size_t i = 0; i < req->n_paths; i++)
			c->paths[c->n_paths++] = xstrdup(req->paths[i]);
	}
	c->variables = req->variables;
	c->at_exit = req->at_exit;
	c->created_ms = clock_now_ms();
	c->fd = -1;
	c->cb = cb;
	c->upload_cb = upload_cb;
	c->arg = arg;
	c->stall = evtimer_new(sn->base, stall_cb, c);
	LIST_INSERT_HEAD(&sn->captures, c, link);
	/* From the loop: the callbacks never run inside this call. */
	defer_call(sn->base, capture_begin, c);
	return 0;
}

void snap_captures_close(struct snapshots *sn)
{
	struct snap_capture *c;
	LIST_FOREACH (c, &sn->captures, link) {
		if (c->op)
			files_cancel(c->op);
		c->op = NULL;
		evtimer_del(c->stall);
	}
}

void snap_captures_free(struct snapshots *sn)
{
	struct snap_capture *c;
	while ((c = LIST_FIRST(&sn->captures)) != NULL)
		capture_free(c);
}
