/* snapshot_restore.c: a snapshot into a fresh session (snapshot.h).
 *
 *   resolve ──► manifest ──► tar into the spool ──► ws_untar ──► commit ──► variables
 *   (index)     (parsed,     (scanner + verifier:    (streamed,   (only when
 *                checked)     every file's sha256)    paused)      all passed)
 *
 * The tar is checked whole before the sandbox sees a byte of it: a corrupt
 * or partial snapshot is refused with a clear error and nothing applied.
 * It is fetched into a spool file (the store's get has no backpressure;
 * the sandbox's upload does), then streamed to the supervisor, which
 * extracts it into a staging directory and moves it into /workspace only
 * on the commit. A snapshot listed in the index as pending (its upload
 * retrying) is not restorable yet; one the index does not know (uploaded
 * by another tool in ci's format) is looked up in the store itself. */
#include "snapshot_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blobstore.h"
#include "clock.h"
#include "config.h"
#include "defer.h"
#include "exec_result.h"
#include "files.h"
#include "json.h"
#include "log.h"
#include "snapshot_manifest.h"
#include "store_snapshots.h"
#include "tar_scan.h"
#include "xalloc.h"

#define RESTORE_CHUNK FILES_CHUNK

struct snap_restore {
	struct snapshots *sn;
	char session[SESSION_ID_LEN + 1];
	char *tenant;
	char snap_id[SESSION_ID_LEN + 1];
	char *workspace;
	int64_t disk_mb;
	int64_t start_us;
	char *mtext; /* the manifest as fetched */
	size_t mlen;
	struct snapshot_manifest *m;
	struct snapshot_verify *v;
	struct tar_scan *ts;
	int fd;
	char tmp_path[PATH_MAX];
	struct blob_op *op;
	struct file_op *fop;
	bool pump_wanted; /* writable came before fop was known */
	bool sent_all;
	bool store_pending, exec_pending; /* answers still to come (close) */
	struct err *sink_error;
	yajl_val loaded;
	struct event *stall;
	snapshot_cb cb;
	void *arg;
	LIST_ENTRY(snap_restore) link;
};

static void restore_free(struct snap_restore *r)
{
	LIST_REMOVE(r, link);
	if (r->op)
		blob_cancel(r->op);
	if (r->fop)
		files_cancel(r->fop);
	if (r->fd >= 0)
		close(r->fd);
	if (r->tmp_path[0])
		unlink(r->tmp_path);
	tar_scan_free(r->ts);
	snapshot_verify_free(r->v);
	snapshot_manifest_free(r->m);
	json_free(r->loaded);
	err_free(r->sink_error);
	free(r->mtext);
	free(r->tenant);
	free(r->workspace);
	if (r->stall)
		event_free(r->stall);
	free(r);
}

/* The outcome, told from the loop: the end may come from inside a files
 * callback, and the listener may end the session (a failed restore), whose
 * files queue must not be freed under that callback. */
struct restore_told {
	snapshot_cb cb;
	void *arg;
	struct snapshots *sn;
	struct err *e;
	char *json;
	size_t len;
};

static void restore_tell(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct restore_told *t = arg;
	if (!t->sn->closing)
		t->cb(t->e, t->e ? 0 : 200, t->json, t->len, t->arg);
	err_free(t->e);
	free(t->json);
	free(t);
}

static void restore_end(struct snap_restore *r, const struct err *e, const char *json, size_t len)
{
	if (e)
		log_warn("restore of snapshot %s into session %s: %s",
			 r->snap_id[0] ? r->snap_id : "(latest)", r->session, e->message);
	else if (json && strcmp(json, "null") != 0)
		r->sn->stats.restored++;
	struct restore_told *t = xcalloc(1, sizeof(*t));
	t->cb = r->cb;
	t->arg = r->arg;
	t->sn = r->sn;
	t->e = e ? err_new(e->code, "%s", e->message) : NULL;
	t->json = json ? xstrndup(json, len) : NULL;
	t->len = json ? len : 0;
	defer_call(r->sn->base, restore_tell, t);
	restore_free(r);
}

static void restore_fail(struct snap_restore *r, struct err *e)
{
	restore_end(r, e, NULL, 0);
	err_free(e);
}

static void stall_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct snap_restore *r = arg;
	restore_fail(r, err_new(ERR_UNAVAILABLE, "restore of snapshot %s: no progress for %d s",
				r->snap_id, SNAP_STALL_S));
}

static void stall_arm(struct snap_restore *r)
{
	struct timeval tv = {SNAP_STALL_S, 0};
	evtimer_add(r->stall, &tv);
}

/* ---- the end: the variables, the answer ---- */

static void answer(struct snap_restore *r)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "snapshot", r->snap_id);
	jg_kv_str(g, "workspace", r->m->workspace);
	jg_kv_int(g, "files", (int64_t)r->m->files);
	jg_kv_int(g, "size", (int64_t)r->m->size);
	jg_kv_int(g, "content_bytes", (int64_t)r->m->content_bytes);
	jg_kv_str(g, "sha256", r->m->sha256);
	jg_kv_int(g, "ms", (clock_mono_us() - r->start_us) / 1000);
	jg_str(g, "variables");
	if (r->loaded)
		jg_value(g, r->loaded);
	else
		jg_null(g);
	jg_str(g, "packages");
	if (r->m->packages)
		jg_value(g, r->m->packages);
	else {
		jg_arr(g);
		jg_arr_end(g);
	}
	jg_obj_end(g);
	size_t len;
	const char *text = jg_text(g, &len);
	log_info("snapshot %s restored into session %s (%llu files, %llu bytes)", r->snap_id,
		 r->session, (unsigned long long)r->m->files, (unsigned long long)r->m->size);
	restore_end(r, NULL, text, len);
}

static void vars_loaded(const struct exec_result *res, const struct err *e, void *arg)
{
	struct snap_restore *r = arg;
	r->exec_pending = false;
	if (r->sn->closing)
		return;
	if (e)
		log_warn("restore of snapshot %s: the variables were not loaded: %s", r->snap_id,
			 e->message);
	else
		r->loaded = snap_vars_answer(res);
	answer(r);
}

static void vars_load(struct snap_restore *r)
{
	size_t n;
	char *code = snap_vars_code("__ci_vars_load()", &n);
	struct err *e = NULL;
	int rc = manager_snapshot_exec(r->sn->mgr, r->session, code, n, SNAP_VARS_TIMEOUT_S,
				       vars_loaded, r, &e);
	free(code);
	if (rc == 0) {
		r->exec_pending = true;
		return;
	}
	log_warn("restore of snapshot %s: the variables were not loaded: %s", r->snap_id,
		 e->message);
	err_free(e);
	answer(r);
}

/* ---- the sandbox's side: ws_untar ---- */

static void pump(struct snap_restore *r)
{
	char buf[RESTORE_CHUNK];
	while (!r->sent_all) {
		ssize_t n = read(r->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			restore_fail(r, err_new(ERR_INTERNAL, "the restore spool %s: %s",
						r->tmp_path, strerror(errno)));
			return;
		}
		if (n == 0) {
			r->sent_all = true;
			files_tar_in_end(r->fop, true);
			return;
		}
		stall_arm(r);
		if (files_put_data(r->fop, buf, (size_t)n))
			return; /* writable resumes */
	}
}

static void untar_writable(void *arg)
{
	struct snap_restore *r = arg;
	if (r->fop == NULL) {
		r->pump_wanted = true; /* from inside files_start_tar */
		return;
	}
	pump(r);
}

static void untar_done(const struct err *fe, int64_t size, yajl_val ans, void *arg)
{
	(void)size;
	struct snap_restore *r = arg;
	r->fop = NULL;
	if (fe) {
		restore_fail(
		    r, err_new(fe->code == ERR_PAYLOAD_TOO_LARGE ? ERR_PAYLOAD_TOO_LARGE : fe->code,
			       "restore of snapshot %s: the sandbox refused it: %s", r->snap_id,
			       fe->message));
		return;
	}
	bool applied = false;
	json_path_bool(ans, "applied", &applied);
	if (!applied) {
		restore_fail(r, err_new(ERR_INTERNAL,
					"restore of snapshot %s: the sandbox did not apply it",
					r->snap_id));
		return;
	}
	close(r->fd);
	r->fd = -1;
	unlink(r->tmp_path);
	r->tmp_path[0] = '\0';
	evtimer_del(r->stall); /* the variables code has its own deadline */
	vars_load(r);
}

static const struct file_op_cbs untar_cbs = {.writable = untar_writable, .done = untar_done};

static void untar_start(struct snap_restore *r)
{
	if (lseek(r->fd, 0, SEEK_SET) < 0) {
		restore_fail(r, err_new(ERR_INTERNAL, "the restore spool %s: %s", r->tmp_path,
					strerror(errno)));
		return;
	}
	struct err *e = NULL;
	r->fop = manager_snapshot_tar(r->sn->mgr, r->session, FILE_TAR_IN, NULL, &untar_cbs, r, &e);
	if (r->fop == NULL) {
		restore_fail(r, e);
		return;
	}
	stall_arm(r);
	if (r->pump_wanted) {
		r->pump_wanted = false;
		pump(r);
	}
}

/* ---- the tar from the store, checked ---- */

static int tar_sink(void *arg, const void *buf, size_t len)
{
	struct snap_restore *r = arg;
	struct err *e = NULL;
	if (tar_scan_feed(r->ts, buf, len, &e) < 0) {
		r->sink_error = e;
		return -1;
	}
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(r->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->sink_error =
			    err_new(ERR_UNAVAILABLE, "the restore spool %s: %s", r->tmp_path,
				    n < 0 ? strerror(errno) : "short write");
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	stall_arm(r);
	return 0;
}

static void tar_got(const struct blob_result *res, void *arg)
{
	struct snap_restore *r = arg;
	r->op = NULL;
	struct err *e = NULL;
	if (r->sink_error) {
		e = r->sink_error;
		r->sink_error = NULL;
		if (e->code == ERR_BAD_REQUEST || e->code == ERR_PAYLOAD_TOO_LARGE) {
			struct err *w = err_new(ERR_CORRUPT, "snapshot %s is corrupt: %s",
						r->snap_id, e->message);
			err_free(e);
			e = w;
		}
		restore_fail(r, e);
		return;
	}
	if (res->error) {
		if (res->error->code == ERR_NOT_FOUND)
			e = err_new(ERR_CORRUPT,
				    "snapshot %s is corrupt: its manifest is in the store but its "
				    "workspace.tar is not",
				    r->snap_id);
		else
			e = err_new(res->error->code, "snapshot %s: the store: %s", r->snap_id,
				    res->error->message);
		restore_fail(r, e);
		return;
	}
	if (tar_scan_finish(r->ts, &e) < 0) {
		struct err *w =
		    err_new(ERR_CORRUPT, "snapshot %s is corrupt: %s", r->snap_id, e->message);
		err_free(e);
		restore_fail(r, w);
		return;
	}
	if (snapshot_verify_finish(r->v, r->ts, &e) < 0) {
		restore_fail(r, e);
		return;
	}
	untar_start(r);
}

static void tar_fetch(struct snap_restore *r)
{
	uint64_t disk = (uint64_t)r->disk_mb << 20;
	if (r->m->content_bytes > disk) {
		restore_fail(
		    r,
		    err_new(ERR_PAYLOAD_TOO_LARGE,
			    "snapshot %s holds %llu MiB of files; this session's disk is %lld MiB "
			    "(ask for a larger limits.disk_mb)",
			    r->snap_id, (unsigned long long)(r->m->content_bytes >> 20),
			    (long long)r->disk_mb));
		return;
	}
	char name[96];
	snprintf(name, sizeof(name), "restore-%s-%s.tmp", r->snap_id, r->session);
	snap_spool_path(r->sn, r->tmp_path, sizeof(r->tmp_path), name);
	r->fd = open(r->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (r->fd < 0) {
		r->tmp_path[0] = '\0';
		{
			restore_fail(
			    r, err_new(ERR_UNAVAILABLE, "the restore spool: %s", strerror(errno)));
			return;
		}
	}
	r->v = snapshot_verify_new(r->m);
	r->ts = tar_scan_new(r->m->size, (uint64_t)r->sn->cfg->snapshot_max_files,
			     snapshot_verify_entry, r->v);
	char key[BLOB_KEY_MAX + 1];
	snap_key(key, sizeof(key), r->tenant, r->snap_id, "workspace.tar");
	struct blob_sink sink = {.write = tar_sink, .arg = r, .max_bytes = r->m->size};
	struct err *e = NULL;
	r->op = blobstore_get(r->sn->blobs, key, &sink, tar_got, r, &e);
	if (r->op == NULL) {
		restore_fail(r, e);
		return;
	}
	stall_arm(r);
}

/* ---- the manifest ---- */

static int manifest_sink(void *arg, const void *buf, size_t len)
{
	struct snap_restore *r = arg;
	if (r->mlen + len > SNAP_MANIFEST_MAX)
		return -1;
	r->mtext = xrealloc(r->mtext, r->mlen + len + 1);
	memcpy(r->mtext + r->mlen, buf, len);
	r->mlen += len;
	r->mtext[r->mlen] = '\0';
	return 0;
}

static void manifest_got(const struct blob_result *res, void *arg)
{
	struct snap_restore *r = arg;
	r->op = NULL;
	struct err *e = NULL;
	if (res->error) {
		if (res->error->code == ERR_NOT_FOUND)
			e = err_new(ERR_NOT_FOUND, "no snapshot %s", r->snap_id);
		else if (res->error->code == ERR_PAYLOAD_TOO_LARGE)
			e = err_new(ERR_CORRUPT,
				    "snapshot %s is corrupt: its manifest is over %u MiB",
				    r->snap_id, SNAP_MANIFEST_MAX >> 20);
		else
			e = err_new(res->error->code, "snapshot %s: the store: %s", r->snap_id,
				    res->error->message);
		restore_fail(r, e);
		return;
	}
	r->m = snapshot_manifest_parse(r->mtext ? r->mtext : "", r->mlen,
				       (uint64_t)r->sn->cfg->snapshot_max_files, &e);
	if (r->m == NULL) {
		/* ERR_CORRUPT naming the field; one the parser could not read the id
		 * of is named here by the id it was fetched by. */
		if (strstr(e->message, r->snap_id) == NULL) {
			static const char generic[] = "snapshot manifest is corrupt: ";
			const char *what = e->message;
			if (strncmp(what, generic, sizeof(generic) - 1) == 0)
				what += sizeof(generic) - 1;
			struct err *w = err_new(ERR_CORRUPT, "snapshot %s is corrupt: manifest: %s",
						r->snap_id, what);
			err_free(e);
			e = w;
		}
		restore_fail(r, e);
		return;
	}
	if (strcmp(r->m->id, r->snap_id) != 0 || strcmp(r->m->tenant, r->tenant) != 0) {
		restore_fail(r,
			     err_new(ERR_CORRUPT,
				     "snapshot %s is corrupt: its manifest names another snapshot "
				     "or tenant",
				     r->snap_id));
		return;
	}
	tar_fetch(r);
}

static void manifest_fetch(struct snap_restore *r)
{
	char key[BLOB_KEY_MAX + 1];
	snap_key(key, sizeof(key), r->tenant, r->snap_id, "manifest.json");
	struct blob_sink sink = {.write = manifest_sink, .arg = r, .max_bytes = SNAP_MANIFEST_MAX};
	struct err *e = NULL;
	r->op = blobstore_get(r->sn->blobs, key, &sink, manifest_got, r, &e);
	if (r->op == NULL) {
		restore_fail(r, e);
		return;
	}
	stall_arm(r);
}

/* ---- which snapshot ---- */

static void resolved(const struct err *e, const char *const *json, const size_t *len, size_t n,
		     void *arg)
{
	struct snap_restore *r = arg;
	r->store_pending = false;
	if (r->sn->closing)
		return;
	if (e) {
		restore_fail(
		    r, err_new(ERR_UNAVAILABLE, "restore: the snapshot index: %s", e->message));
		return;
	}
	if (r->workspace) {
		/* The latest stored one of the workspace; none: a new workspace. */
		for (size_t i = 0; i < n; i++) {
			AUTOJSON yajl_val rec = json_parse(json[i], len[i], NULL);
			const char *id = json_get_str(rec, "id"), *st = json_get_str(rec, "state");
			if (snapshot_id_valid(id) && st && strcmp(st, "stored") == 0) {
				snprintf(r->snap_id, sizeof(r->snap_id), "%s", id);
				break;
			}
		}
		if (r->snap_id[0] == '\0') {
			restore_end(r, NULL, "null", 4);
			return;
		}
		manifest_fetch(r);
		return;
	}
	if (n > 0) {
		AUTOJSON yajl_val rec = json_parse(json[0], len[0], NULL);
		const char *st = json_get_str(rec, "state");
		if (st && strcmp(st, "pending") == 0) {
			const char *why = json_get_str(rec, "error");
			restore_fail(r,
				     err_new(ERR_UNAVAILABLE,
					     "snapshot %s is not in the store yet: its upload is "
					     "being retried (%.200s)",
					     r->snap_id, why ? why : "in progress"));
			return;
		}
	}
	manifest_fetch(r); /* not indexed: maybe uploaded by another tool */
}

int snapshot_restore(struct snapshots *sn, const char *id, const char *tenant, const char *snap_id,
		     const char *workspace, snapshot_cb cb, void *arg, struct err **errp)
{
	if (sn->blobs == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "snapshots are off on this node");
	if (snap_id && !snapshot_id_valid(snap_id))
		return err_set(errp, ERR_BAD_REQUEST, "restore: '%.64s' is not a snapshot id",
			       snap_id);
	const struct session *s = manager_get(sn->mgr, id, tenant);
	if (s == NULL)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	struct snap_restore *r = xcalloc(1, sizeof(*r));
	r->sn = sn;
	memcpy(r->session, s->id, sizeof(r->session));
	r->tenant = xstrdup(tenant);
	if (snap_id)
		snprintf(r->snap_id, sizeof(r->snap_id), "%s", snap_id);
	r->workspace = workspace ? xstrdup(workspace) : NULL;
	r->disk_mb = s->limits.disk_mb;
	r->start_us = clock_mono_us();
	r->fd = -1;
	r->cb = cb;
	r->arg = arg;
	r->stall = evtimer_new(sn->base, stall_cb, r);
	LIST_INSERT_HEAD(&sn->restores, r, link);
	r->store_pending = true;
	if (snap_id)
		store_snapshot_get(sn->store, tenant, snap_id, resolved, r);
	else
		store_snapshots_list(sn->store, tenant, workspace, 20, resolved, r);
	return 0;
}

void snap_restores_close(struct snapshots *sn)
{
	struct snap_restore *r;
	LIST_FOREACH (r, &sn->restores, link) {
		if (r->op)
			blob_cancel(r->op);
		r->op = NULL;
		if (r->fop)
			files_cancel(r->fop);
		r->fop = NULL;
		evtimer_del(r->stall);
	}
}

void snap_restores_free(struct snapshots *sn)
{
	struct snap_restore *r;
	while ((r = LIST_FIRST(&sn->restores)) != NULL)
		restore_free(r);
}
