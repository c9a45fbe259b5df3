/* snapshot.c: the node's snapshot engine (snapshot.h): the spool, the
 * upload queue and its retries, the index calls, deletes and retention.
 * Capturing is snapshot_capture.c's, restoring snapshot_restore.c's.
 *
 * One upload runs at a time (a node's uplink is one pipe; two 100 MB
 * snapshots in parallel finish no sooner than in a row) and the queue is
 * the spool directory itself: each snapshot is <id>.tar and <id>.json, the
 * manifest written last, so a daemon that starts finds every snapshot it
 * owes the store and nothing half-taken (a tar without its manifest is a
 * capture that never ended, and is removed). */
#include "snapshot.h"
#include "snapshot_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blobstore.h"
#include "clock.h"
#include "config.h"
#include "json.h"
#include "log.h"
#include "quota.h"
#include "store_quota.h"
#include "store_snapshots.h"
#include "xalloc.h"

/* Backoff between upload attempts while the store is down. */
#define UPLOAD_BACKOFF_MIN_MS 1000
#define UPLOAD_BACKOFF_MAX_MS 60000
/* Retention removes at most this many per tenant per run
 * (--snapshot-retention-every-s). */
#define RETENTION_BATCH 100
#define RETENTION_TENANTS 100

struct snap_upload {
	struct snapshots *sn;
	char id[SESSION_ID_LEN + 1];
	char *tenant;
	char *workspace;
	int64_t created_ms;
	char *manifest; /* the spooled manifest's text */
	size_t manifest_len;
	int attempts;
	char *error; /* the last attempt's */
	bool indexed_pending;
	struct blob_op *op;
	int stage;      /* 0 the tar, 1 the manifest, 2 the index */
	snapshot_cb cb; /* the first attempt's listener (a POST waiting) */
	void *arg;
	TAILQ_ENTRY(snap_upload) q;
};

bool snapshot_id_valid(const char *s)
{
	return session_id_valid(s);
}

void snap_key(char *buf, size_t size, const char *tenant, const char *id, const char *object)
{
	snprintf(buf, size, "snapshots/%s/%s/%s", tenant, id, object);
}

void snap_spool_path(const struct snapshots *sn, char *buf, size_t size, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", sn->spool, name);
	if (n < 0 || (size_t)n >= size)
		buf[0] = '\0'; /* no such file: the open fails and says so */
}

/* ---- records ---- */

int64_t snap_parse_time(const char *s)
{
	struct tm tm = {0};
	int frac = 0;
	if (s == NULL)
		return -1;
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end == NULL)
		return -1;
	if (*end == '.') {
		int digits = 0;
		for (end++; *end >= '0' && *end <= '9'; end++)
			if (digits++ < 3)
				frac = frac * 10 + (*end - '0');
		while (digits > 0 && digits < 3) {
			frac *= 10;
			digits++;
		}
	}
	if (strcmp(end, "Z") != 0)
		return -1;
	time_t t = timegm(&tm);
	return t < 0 ? -1 : (int64_t)t * 1000 + frac;
}

char *snap_record_json(const char *manifest, size_t len, const char *state, const char *error,
		       int attempts, size_t *out_len)
{
	AUTOJSON yajl_val m = json_parse(manifest, len, NULL);
	if (m == NULL || !YAJL_IS_OBJECT(m))
		return NULL;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	for (size_t i = 0; i < m->u.object.len; i++) {
		const char *k = m->u.object.keys[i];
		if (strcmp(k, "entries") == 0 || strcmp(k, "format") == 0 ||
		    strcmp(k, "tenant") == 0 || strcmp(k, "state") == 0 ||
		    strcmp(k, "error") == 0 || strcmp(k, "attempts") == 0)
			continue;
		jg_str(g, k);
		jg_value(g, m->u.object.values[i]);
	}
	jg_kv_str(g, "state", state);
	if (error) {
		jg_kv_str(g, "error", error);
		jg_kv_int(g, "attempts", attempts);
	}
	jg_obj_end(g);
	size_t n;
	const char *text = jg_text(g, &n);
	char *out = xstrndup(text, n);
	*out_len = n;
	return out;
}

/* ---- uploads ---- */

static void upload_next(struct snapshots *sn);

static void upload_free(struct snap_upload *u)
{
	free(u->tenant);
	free(u->workspace);
	free(u->manifest);
	free(u->error);
	free(u);
}

static void spool_remove(struct snapshots *sn, const char *id)
{
	char path[PATH_MAX], name[64];
	snprintf(name, sizeof(name), "%s.tar", id);
	snap_spool_path(sn, path, sizeof(path), name);
	unlink(path);
	snprintf(name, sizeof(name), "%s.json", id);
	snap_spool_path(sn, path, sizeof(path), name);
	unlink(path);
}

/* Tell the POST that waits, once. */
static void upload_tell(struct snap_upload *u, int status, const char *state)
{
	if (u->cb == NULL)
		return;
	size_t len = 0;
	char *rec =
	    snap_record_json(u->manifest, u->manifest_len, state, u->error, u->attempts, &len);
	snapshot_cb cb = u->cb;
	u->cb = NULL;
	if (rec)
		cb(NULL, status, rec, len, u->arg);
	else {
		struct err e = {.code = ERR_INTERNAL, .message = (char *)"snapshot: no record"};
		cb(&e, 0, NULL, 0, u->arg);
	}
	free(rec);
}

static void index_written(const struct err *e, const char *const *json, const size_t *len, size_t n,
			  void *arg);

/* Write the record: pending (with the error) or stored. */
static void upload_index(struct snap_upload *u, const char *state, bool last)
{
	size_t len = 0;
	char *rec = snap_record_json(u->manifest, u->manifest_len, state,
				     strcmp(state, "stored") ? u->error : NULL, u->attempts, &len);
	if (rec == NULL)
		return;
	store_snapshot_put(u->sn->store, u->tenant, u->id, u->workspace, u->created_ms, rec, len,
			   last ? index_written : NULL, last ? u : NULL);
	free(rec);
}

static void upload_done(struct snapshots *sn, struct snap_upload *u)
{
	TAILQ_REMOVE(&sn->uploads, u, q);
	sn->n_uploads--;
	upload_free(u);
	upload_next(sn);
}

static void index_written(const struct err *e, const char *const *json, const size_t *len, size_t n,
			  void *arg)
{
	(void)json;
	(void)len;
	(void)n;
	struct snap_upload *u = arg;
	struct snapshots *sn = u->sn;
	if (sn->closing)
		return; /* freed with the queue */
	if (e) {
		/* The objects are stored; only the index lags: the next
		 * attempt writes it (the objects are put again: same bytes). */
		log_warn("snapshot %s: stored, but not indexed yet: %s", u->id, e->message);
		free(u->error);
		u->error = xstrdup(e->message);
		u->op = NULL;
		u->stage = 0;
		u->attempts++;
		int ms = UPLOAD_BACKOFF_MIN_MS;
		struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
		evtimer_add(sn->upload_timer, &tv);
		return;
	}
	log_info("snapshot %s: stored (%d attempt%s)", u->id, u->attempts + 1,
		 u->attempts ? "s" : "");
	spool_remove(sn, u->id);
	free(u->error);
	u->error = NULL;
	sn->stats.taken++;
	upload_tell(u, 201, "stored");
	upload_done(sn, u);
}

static void upload_step(struct snap_upload *u);

static void upload_failed(struct snap_upload *u, const struct err *e)
{
	struct snapshots *sn = u->sn;
	u->op = NULL;
	u->stage = 0;
	u->attempts++;
	sn->stats.upload_retries++;
	free(u->error);
	u->error = xstrdup(e->message);
	int ms = UPLOAD_BACKOFF_MIN_MS;
	for (int i = 1; i < u->attempts && ms < UPLOAD_BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > UPLOAD_BACKOFF_MAX_MS)
		ms = UPLOAD_BACKOFF_MAX_MS;
	log_warn("snapshot %s: upload attempt %d failed: %s; retrying in %d ms", u->id, u->attempts,
		 e->message, ms);
	upload_index(u, "pending", false);
	upload_tell(u, 202, "pending");
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(sn->upload_timer, &tv);
}

static void upload_put_done(const struct blob_result *r, void *arg)
{
	struct snap_upload *u = arg;
	u->op = NULL;
	if (r->error) {
		upload_failed(u, r->error);
		return;
	}
	u->stage++;
	upload_step(u);
}

static void upload_step(struct snap_upload *u)
{
	struct snapshots *sn = u->sn;
	if (u->stage == 2) {
		upload_index(u, "stored", true);
		return;
	}
	char key[BLOB_KEY_MAX + 1], path[PATH_MAX], name[64];
	snprintf(name, sizeof(name), "%s.%s", u->id, u->stage == 0 ? "tar" : "json");
	snap_spool_path(sn, path, sizeof(path), name);
	snap_key(key, sizeof(key), u->tenant, u->id,
		 u->stage == 0 ? "workspace.tar" : "manifest.json");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		char msg[PATH_MAX + 64];
		snprintf(msg, sizeof(msg), "spool file %s: %s", path, strerror(errno));
		log_error("snapshot %s: %s; the snapshot is lost", u->id, msg);
		sn->stats.failed++;
		struct err e = {.code = ERR_INTERNAL, .message = msg};
		if (u->cb) {
			snapshot_cb cb = u->cb;
			u->cb = NULL;
			cb(&e, 0, NULL, 0, u->arg);
		}
		upload_done(sn, u);
		return;
	}
	struct blob_source src = {.fd = fd};
	struct err *e = NULL;
	u->op = blobstore_put(sn->blobs, key, &src, upload_put_done, u, &e);
	close(fd);
	if (u->op == NULL) {
		upload_failed(u, e);
		err_free(e);
	}
}

static void upload_next(struct snapshots *sn)
{
	struct snap_upload *u = TAILQ_FIRST(&sn->uploads);
	if (u == NULL || u->op != NULL || evtimer_pending(sn->upload_timer, NULL))
		return;
	if (!u->indexed_pending) {
		u->indexed_pending = true;
		upload_index(u, "pending", false);
	}
	upload_step(u);
}

static void upload_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	upload_next(arg);
}

void snap_upload_queue(struct snapshots *sn, const char *tenant, const char *id,
		       const char *manifest, size_t len, snapshot_cb cb, void *arg)
{
	AUTOJSON yajl_val m = json_parse(manifest, len, NULL);
	struct snap_upload *u = xcalloc(1, sizeof(*u));
	u->sn = sn;
	snprintf(u->id, sizeof(u->id), "%s", id);
	u->tenant = xstrdup(tenant);
	const char *ws = json_get_str(m, "workspace");
	u->workspace = xstrdup(ws && session_workspace_valid(ws) ? ws : id);
	u->created_ms = snap_parse_time(json_get_str(m, "created_at"));
	if (u->created_ms <= 0)
		u->created_ms = clock_now_ms();
	u->manifest = xstrndup(manifest, len);
	u->manifest_len = len;
	u->cb = cb;
	u->arg = arg;
	TAILQ_INSERT_TAIL(&sn->uploads, u, q);
	sn->n_uploads++;
	upload_next(sn);
}

/* ---- the spool at start ---- */

static int read_small_file(const char *path, size_t max, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
		close(fd);
		return -1;
	}
	char *buf = xmalloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got != (size_t)st.st_size) {
		free(buf);
		return -1;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

/* Queue what a previous daemon left in the spool; remove what it never
 * finished (a tar without its manifest; a restore's temporary). */
static void spool_resume(struct snapshots *sn)
{
	DIR *d = opendir(sn->spool);
	if (d == NULL)
		return;
	struct dirent *de;
	size_t queued = 0, removed = 0;
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (n[0] == '.')
			continue;
		char id[SESSION_ID_LEN + 1] = "";
		const char *dot = strchr(n, '.');
		bool is_tar = false;
		if (dot == NULL)
			dot = "";
		else if ((size_t)(dot - n) == SESSION_ID_LEN) {
			memcpy(id, n, SESSION_ID_LEN);
			is_tar = strcmp(dot, ".tar") == 0;
		}
		char path[PATH_MAX];
		snap_spool_path(sn, path, sizeof(path), n);
		if (!snapshot_id_valid(id) ||
		    (strcmp(dot, ".tar") != 0 && strcmp(dot, ".json") != 0)) {
			unlink(path); /* a restore's or a capture's temporary */
			removed++;
			continue;
		}
		if (!is_tar)
			continue;
		char jpath[PATH_MAX], jname[64];
		snprintf(jname, sizeof(jname), "%s.json", id);
		snap_spool_path(sn, jpath, sizeof(jpath), jname);
		char *manifest = NULL;
		size_t len = 0;
		if (read_small_file(jpath, SNAP_MANIFEST_MAX, &manifest, &len) < 0) {
			unlink(path);
			removed++;
			continue;
		}
		AUTOJSON yajl_val m = json_parse(manifest, len, NULL);
		const char *tenant = json_get_str(m, "tenant");
		if (tenant == NULL) {
			log_warn("snapshot spool: %s has no tenant; removed", jname);
			unlink(path);
			unlink(jpath);
			removed++;
		} else {
			snap_upload_queue(sn, tenant, id, manifest, len, NULL, NULL);
			queued++;
		}
		free(manifest);
	}
	closedir(d);
	if (queued || removed)
		log_info("snapshot spool: %zu snapshot%s to upload, %zu unfinished file%s removed",
			 queued, queued == 1 ? "" : "s", removed, removed == 1 ? "" : "s");
}

/* ---- the exit snapshot ---- */

struct exit_ctx {
	manager_done_cb done;
	void *done_arg;
};

static void exit_captured(const struct err *e, const char *snap_id, void *arg)
{
	struct exit_ctx *x = arg;
	if (e == NULL)
		log_info("exit snapshot %s spooled", snap_id);
	x->done(e, x->done_arg);
	free(x);
}

static void exit_hook(void *arg, const struct session *s, manager_done_cb done, void *done_arg)
{
	struct snapshots *sn = arg;
	struct snap_capture_req req = {
	    .tenant = s->tenant,
	    .workspace = session_workspace_name(s),
	    .paths = s->persist.paths,
	    .n_paths = s->persist.n_paths,
	    .variables = s->persist.variables,
	    .at_exit = true,
	};
	memcpy(req.session, s->id, sizeof(req.session));
	struct exit_ctx *x = xcalloc(1, sizeof(*x));
	x->done = done;
	x->done_arg = done_arg;
	struct err *e = NULL;
	if (sn->blobs == NULL)
		err_set(&e, ERR_UNAVAILABLE, "snapshots are off on this node");
	else if (snap_capture_start(sn, &req, exit_captured, NULL, x, &e) == 0)
		return;
	done(e, done_arg);
	err_free(e);
	free(x);
}

/* ---- taking one ---- */

struct take_ctx {
	snapshot_cb cb;
	void *arg;
};

static void take_captured(const struct err *e, const char *snap_id, void *arg)
{
	(void)snap_id;
	struct take_ctx *t = arg;
	if (e) {
		t->cb(e, 0, NULL, 0, t->arg);
		free(t);
	}
	/* else: the upload's first attempt answers (take_uploaded) */
}

static void take_uploaded(const struct err *e, int status, const char *json, size_t len, void *arg)
{
	struct take_ctx *t = arg;
	t->cb(e, status, json, len, t->arg);
	free(t);
}

int snapshot_take(struct snapshots *sn, const char *id, const char *tenant,
		  const struct snapshot_options *o, snapshot_cb cb, void *arg, struct err **errp)
{
	if (sn->blobs == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "snapshots are off on this node");
	const struct session *s = manager_get(sn->mgr, id, tenant);
	if (s == NULL)
		return err_set(errp, ERR_NOT_FOUND, "no session %s", id);
	struct snap_capture_req req = {
	    .tenant = tenant,
	    .workspace = o->workspace ? o->workspace : session_workspace_name(s),
	    .paths = o->paths,
	    .n_paths = o->n_paths,
	    .variables = o->variables,
	};
	memcpy(req.session, s->id, sizeof(req.session));
	struct take_ctx *t = xcalloc(1, sizeof(*t));
	t->cb = cb;
	t->arg = arg;
	if (snap_capture_start(sn, &req, take_captured, take_uploaded, t, errp) < 0) {
		free(t);
		return -1;
	}
	return 0;
}

/* ---- the index ---- */

void snapshot_list(struct snapshots *sn, const char *tenant, const char *workspace, size_t limit,
		   snapshot_list_cb cb, void *arg)
{
	store_snapshots_list(sn->store, tenant, workspace, limit, cb, arg);
}

void snapshot_get(struct snapshots *sn, const char *tenant, const char *snap_id,
		  snapshot_list_cb cb, void *arg)
{
	store_snapshot_get(sn->store, tenant, snap_id, cb, arg);
}

void snapshot_workspaces(struct snapshots *sn, const char *tenant, snapshot_list_cb cb, void *arg)
{
	store_snapshot_workspaces(sn->store, tenant, 1000, cb, arg);
}

/* A delete: the manifest goes first (the snapshot no longer exists for a
 * restore), then the tar, then the record. */
struct delete_ctx {
	struct snapshots *sn;
	char *tenant;
	char id[SESSION_ID_LEN + 1];
	int stage;
	bool internal; /* retention's: told even while closing (it frees its own) */
	snapshot_list_cb cb;
	void *arg;
};

static void delete_step(struct delete_ctx *d);

static void delete_free(struct delete_ctx *d)
{
	free(d->tenant);
	free(d);
}

/* Closing: an API caller is not told (it is gone); retention is. */
static bool delete_drop(struct delete_ctx *d)
{
	if (!d->sn->closing)
		return false;
	if (d->internal && d->cb)
		d->cb(NULL, NULL, NULL, 0, d->arg);
	delete_free(d);
	return true;
}

static void delete_object_done(const struct blob_result *r, void *arg)
{
	struct delete_ctx *d = arg;
	if (delete_drop(d))
		return;
	if (r->error) {
		struct err *e =
		    err_new(r->error->code, "snapshot %s: the store refused the delete: %s", d->id,
			    r->error->message);
		d->cb(e, NULL, NULL, 0, d->arg);
		err_free(e);
		free(d->tenant);
		free(d);
		return;
	}
	d->stage++;
	delete_step(d);
}

static void delete_indexed(const struct err *e, const char *const *json, const size_t *len,
			   size_t n, void *arg)
{
	struct delete_ctx *d = arg;
	if (delete_drop(d))
		return;
	if (d->cb)
		d->cb(e, json, len, n, d->arg);
	delete_free(d);
}

static void delete_step(struct delete_ctx *d)
{
	if (d->stage >= 2) {
		store_snapshot_delete(d->sn->store, d->tenant, d->id, delete_indexed, d);
		return;
	}
	char key[BLOB_KEY_MAX + 1];
	snap_key(key, sizeof(key), d->tenant, d->id,
		 d->stage == 0 ? "manifest.json" : "workspace.tar");
	struct err *e = NULL;
	if (blobstore_delete(d->sn->blobs, key, delete_object_done, d, &e) == NULL) {
		if (d->cb)
			d->cb(e, NULL, NULL, 0, d->arg);
		err_free(e);
		free(d->tenant);
		free(d);
	}
}

static void delete_found(const struct err *e, const char *const *json, const size_t *len, size_t n,
			 void *arg)
{
	struct delete_ctx *d = arg;
	if (delete_drop(d))
		return;
	if (e || n == 0) {
		if (d->cb)
			d->cb(e, NULL, NULL, 0, d->arg);
		delete_free(d);
		return;
	}
	AUTOJSON yajl_val rec = json_parse(json[0], len[0], NULL);
	const char *state = json_get_str(rec, "state");
	if (state && strcmp(state, "pending") == 0 && !d->internal) {
		struct err *be =
		    err_new(ERR_BUSY,
			    "snapshot %s is still being uploaded; delete it once it is "
			    "stored",
			    d->id);
		if (d->cb)
			d->cb(be, NULL, NULL, 0, d->arg);
		err_free(be);
		delete_free(d);
		return;
	}
	delete_step(d);
}

static void delete_start(struct snapshots *sn, const char *tenant, const char *snap_id,
			 snapshot_list_cb cb, void *arg, bool internal)
{
	struct delete_ctx *d = xcalloc(1, sizeof(*d));
	d->internal = internal;
	d->sn = sn;
	d->tenant = xstrdup(tenant);
	snprintf(d->id, sizeof(d->id), "%s", snap_id);
	d->cb = cb;
	d->arg = arg;
	if (sn->blobs == NULL) {
		d->stage = 2;
		delete_step(d);
		return;
	}
	store_snapshot_get(sn->store, tenant, snap_id, delete_found, d);
}

void snapshot_delete(struct snapshots *sn, const char *tenant, const char *snap_id,
		     snapshot_list_cb cb, void *arg)
{
	delete_start(sn, tenant, snap_id, cb, arg, false);
}

/* ---- retention ---- */

struct retention_run {
	struct snapshots *sn;
	char **tenants;
	size_t n, next;
};

static void retention_tenant(struct retention_run *r);
static void retention_limits(const struct err *e, const struct quota_override *o, void *arg);

static void retention_end(struct retention_run *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->tenants[i]);
	free(r->tenants);
	r->sn->retention_running = false;
	free(r);
}

struct retention_delete {
	struct retention_run *run;
	size_t left;
};

static void retention_deleted(const struct err *e, const char *const *json, const size_t *len,
			      size_t n, void *arg)
{
	(void)json;
	(void)len;
	struct retention_delete *rd = arg;
	if (e && !rd->run->sn->closing)
		log_warn("snapshot retention: %s", e->message);
	else if (n)
		rd->run->sn->stats.expired++;
	if (--rd->left == 0) {
		struct retention_run *r = rd->run;
		free(rd);
		retention_tenant(r);
	}
}

static void retention_found(const struct err *e, const char *const *json, const size_t *len,
			    size_t n, void *arg)
{
	struct retention_run *r = arg;
	if (r->sn->closing) {
		retention_end(r);
		return;
	}
	if (e || n == 0) {
		if (e)
			log_warn("snapshot retention: %s", e->message);
		retention_tenant(r);
		return;
	}
	const char *tenant = r->tenants[r->next - 1];
	struct retention_delete *rd = xcalloc(1, sizeof(*rd));
	rd->run = r;
	rd->left = 1; /* held until every delete is started */
	for (size_t i = 0; i < n; i++) {
		AUTOJSON yajl_val rec = json_parse(json[i], len[i], NULL);
		const char *id = json_get_str(rec, "id");
		const char *state = json_get_str(rec, "state");
		if (!snapshot_id_valid(id) || (state && strcmp(state, "pending") == 0))
			continue; /* one still uploading is not the reaper's */
		rd->left++;
		log_info("snapshot %s of tenant %s: removed by retention", id, tenant);
		delete_start(r->sn, tenant, id, retention_deleted, rd, true);
	}
	retention_deleted(NULL, NULL, NULL, 0, rd);
}

static void retention_tenant(struct retention_run *r)
{
	if (r->next >= r->n || r->sn->closing) {
		retention_end(r);
		return;
	}
	const char *tenant = r->tenants[r->next++];
	/* The tenant's quota record may set its own snapshot_keep and
	 * snapshot_max_age_s (quota.h); the flags are the defaults. */
	store_quota_get(r->sn->store, tenant, retention_limits, r);
}

static void retention_limits(const struct err *e, const struct quota_override *o, void *arg)
{
	struct retention_run *r = arg;
	if (r->sn->closing) {
		retention_end(r);
		return;
	}
	const char *tenant = r->tenants[r->next - 1];
	if (e)
		log_warn("snapshot retention of tenant %s: its quotas: %s; the flags apply", tenant,
			 e->message);
	struct quota d, eff;
	quota_from_config(r->sn->cfg, &d);
	quota_merge(&d, e ? NULL : o, &eff);
	int64_t age = eff.v[QUOTA_SNAPSHOT_MAX_AGE_S];
	int64_t cutoff = age > 0 ? clock_now_ms() - age * 1000 : 0; /* 0: none by age */
	store_snapshots_expired(r->sn->store, tenant, eff.v[QUOTA_SNAPSHOT_KEEP], cutoff,
				RETENTION_BATCH, retention_found, r);
}

static void retention_tenants(const struct err *e, const char *const *json, const size_t *len,
			      size_t n, void *arg)
{
	struct retention_run *r = arg;
	if (e || r->sn->closing) {
		retention_end(r);
		return;
	}
	r->tenants = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		r->tenants[r->n++] = xstrndup(json[i], len[i]);
	retention_tenant(r);
}

static void retention_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct snapshots *sn = arg;
	struct timeval tv = {sn->cfg->snapshot_retention_every_s, 0};
	evtimer_add(sn->retention_timer, &tv);
	if (sn->retention_running || sn->blobs == NULL || !store_connected(sn->store))
		return;
	sn->retention_running = true;
	struct retention_run *r = xcalloc(1, sizeof(*r));
	r->sn = sn;
	store_snapshot_tenants(sn->store, RETENTION_TENANTS, retention_tenants, r);
}

/* ---- the engine ---- */

struct snapshots *snapshots_new(const struct snapshots_deps *d, struct err **errp)
{
	struct snapshots *sn = xcalloc(1, sizeof(*sn));
	sn->base = d->base;
	sn->cfg = d->cfg;
	sn->mgr = d->mgr;
	sn->store = d->store;
	sn->blobs = d->blobs;
	TAILQ_INIT(&sn->uploads);
	LIST_INIT(&sn->captures);
	LIST_INIT(&sn->restores);
	snprintf(sn->spool, sizeof(sn->spool), "%s/spool", d->cfg->state_dir);
	if (mkdir(sn->spool, 0700) < 0 && errno != EEXIST) {
		err_set(errp, ERR_INTERNAL, "snapshot spool %s: %s", sn->spool, strerror(errno));
		free(sn);
		return NULL;
	}
	sn->upload_timer = evtimer_new(d->base, upload_timer_cb, sn);
	sn->retention_timer = evtimer_new(d->base, retention_cb, sn);
	struct timeval tv = {d->cfg->snapshot_retention_every_s, 0};
	evtimer_add(sn->retention_timer, &tv);
	if (sn->blobs)
		spool_resume(sn);
	manager_set_exit_snapshot(d->mgr, exit_hook, sn);
	return sn;
}

void snapshots_stats(const struct snapshots *sn, struct snapshots_stats *out)
{
	*out = sn->stats;
	out->pending = sn->n_uploads;
}

void snapshots_close(struct snapshots *sn)
{
	if (sn == NULL || sn->closing)
		return;
	sn->closing = true;
	manager_set_exit_snapshot(sn->mgr, NULL, NULL);
	snap_captures_close(sn);
	snap_restores_close(sn);
	struct snap_upload *u;
	TAILQ_FOREACH (u, &sn->uploads, q) {
		if (u->op)
			blob_cancel(u->op);
		u->op = NULL;
		u->cb = NULL;
	}
	evtimer_del(sn->upload_timer);
	evtimer_del(sn->retention_timer);
}

void snapshots_free(struct snapshots *sn)
{
	if (sn == NULL)
		return;
	snapshots_close(sn);
	snap_captures_free(sn);
	snap_restores_free(sn);
	struct snap_upload *u;
	while ((u = TAILQ_FIRST(&sn->uploads)) != NULL) {
		TAILQ_REMOVE(&sn->uploads, u, q);
		upload_free(u);
	}
	event_free(sn->upload_timer);
	event_free(sn->retention_timer);
	free(sn);
}
