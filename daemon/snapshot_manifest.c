/* snapshot_manifest.c: manifest.json built, parsed and verified; see
 * snapshot_manifest.h.
 *
 * The builder writes members as they become known: the head (id, tenant,
 * ..., variables), then "entries" one by one from the scanner, then the
 * tail (size, sha256, counts, packages, skipped). JSON members have no
 * order, and writing as we go keeps the builder's memory at the text. The
 * parts that come from the sandbox (variables, skipped) are checked by the
 * same functions at build and at parse, so what is built is what parses. */
#include "snapshot_manifest.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "install.h"
#include "json.h"
#include "xalloc.h"

#define PATHS_MAX 64
#define GLOB_MAX 256
#define WORKSPACE_MAX 64

struct snapshot_builder {
	yajl_gen g;
	char id[SNAPSHOT_UUID_LEN + 1];
	struct err *head_err; /* a bad head field, reported by finish */
	uint64_t files, content_bytes;
	bool done;
};

bool snapshot_uuid_valid(const char *s)
{
	if (s == NULL || strlen(s) != SNAPSHOT_UUID_LEN)
		return false;
	for (size_t i = 0; i < SNAPSHOT_UUID_LEN; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
			return false;
		}
	}
	return true;
}

static bool hex64_valid(const char *s)
{
	if (s == NULL || strlen(s) != TAR_SHA256_HEX)
		return false;
	for (size_t i = 0; i < TAR_SHA256_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The workspace name rule of POST /v1/sessions: [A-Za-z0-9._-]{1,64}, not
 * starting with '.'. */
static bool workspace_valid(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;
	if (n == 0 || n > WORKSPACE_MAX || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

/* The structural characters outside strings, plus one: at least the
 * number of values and keys a tree of the text would hold. */
static size_t json_tokens(const char *s, size_t n)
{
	size_t t = 1;
	bool in_str = false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == ',' || c == ':' || c == '[' || c == '{') {
			t++;
		}
	}
	return t;
}

static bool short_str(yajl_val v, size_t max)
{
	return YAJL_IS_STRING(v) && v->u.string[0] != '\0' && strlen(v->u.string) <= max;
}

/* The parser's checks of the descriptive lists (code: ERR_CORRUPT). */

/* variables: {"saved":[name],"modules":{name:module},"skipped":[{"name","reason"}]} */
static int vars_check(yajl_val v, enum err_code code, struct err **errp)
{
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, code, "variables: %s, not an object", json_type_name(v));
	yajl_val saved = json_get(v, "saved"), mods = json_get(v, "modules"),
		 skipped = json_get(v, "skipped");
	if (!YAJL_IS_ARRAY(saved))
		return err_set(errp, code, "variables.saved: not an array");
	if (saved->u.array.len > SNAPSHOT_LIST_MAX)
		return err_set(errp, code, "variables.saved: more than %d names",
			       SNAPSHOT_LIST_MAX);
	for (size_t i = 0; i < saved->u.array.len; i++)
		if (!short_str(saved->u.array.values[i], SNAPSHOT_NAME_MAX))
			return err_set(errp, code, "variables.saved[%zu]: not a name", i);
	if (!YAJL_IS_OBJECT(mods))
		return err_set(errp, code, "variables.modules: not an object");
	if (mods->u.object.len > SNAPSHOT_LIST_MAX)
		return err_set(errp, code, "variables.modules: more than %d names",
			       SNAPSHOT_LIST_MAX);
	for (size_t i = 0; i < mods->u.object.len; i++) {
		const char *k = mods->u.object.keys[i];
		if (k[0] == '\0' || strlen(k) > SNAPSHOT_NAME_MAX ||
		    !short_str(mods->u.object.values[i], SNAPSHOT_NAME_MAX))
			return err_set(errp, code, "variables.modules: entry %zu: not name: module",
				       i);
	}
	if (!YAJL_IS_ARRAY(skipped))
		return err_set(errp, code, "variables.skipped: not an array");
	if (skipped->u.array.len > SNAPSHOT_LIST_MAX)
		return err_set(errp, code, "variables.skipped: more than %d items",
			       SNAPSHOT_LIST_MAX);
	for (size_t i = 0; i < skipped->u.array.len; i++) {
		yajl_val s = skipped->u.array.values[i];
		if (!short_str(json_get(s, "name"), SNAPSHOT_NAME_MAX) ||
		    !short_str(json_get(s, "reason"), SNAPSHOT_NAME_MAX))
			return err_set(errp, code,
				       "variables.skipped[%zu]: not {\"name\",\"reason\"}", i);
	}
	return 0;
}

/* The builder's side of those lists: they come from the sandbox (the
 * kernel's answer, the supervisor's skipped list, package names from the
 * workspace), and they only describe the snapshot, so a bad item is left
 * out and an overlong string cut (at a character) rather than failing the
 * capture: what is written always passes the checks above. */

/* Whether s may be written as a checked string, and how many bytes of it:
 * not NULL or empty, valid UTF-8, cut to max bytes at a character. */
static bool str_fit(const char *s, size_t max, size_t *n)
{
	if (s == NULL || s[0] == '\0')
		return false;
	size_t len = strlen(s);
	if (!json_utf8_valid(s, len))
		return false;
	if (len > max) {
		len = max;
		while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
			len--;
	}
	*n = len;
	return len > 0;
}

static bool item_fit(yajl_val v, size_t max, const char **s, size_t *n)
{
	*s = YAJL_IS_STRING(v) ? v->u.string : NULL;
	return str_fit(*s, max, n);
}

/* [{"<k1>": str, "<k2>": str}] from the array v (or [] when it is not one). */
static void pairs_gen(yajl_gen g, yajl_val v, const char *k1, size_t max1, const char *k2,
		      size_t cap)
{
	jg_arr(g);
	size_t written = 0;
	for (size_t i = 0; YAJL_IS_ARRAY(v) && i < v->u.array.len && written < cap; i++) {
		yajl_val it = v->u.array.values[i];
		const char *a, *b;
		size_t na, nb;
		if (!item_fit(json_get(it, k1), max1, &a, &na) ||
		    !item_fit(json_get(it, k2), SNAPSHOT_NAME_MAX, &b, &nb))
			continue;
		jg_obj(g);
		jg_str(g, k1);
		jg_strn(g, a, na);
		jg_str(g, k2);
		jg_strn(g, b, nb);
		jg_obj_end(g);
		written++;
	}
	jg_arr_end(g);
}

static void vars_gen(yajl_gen g, yajl_val v)
{
	if (!YAJL_IS_OBJECT(v)) {
		jg_null(g);
		return;
	}
	yajl_val saved = json_get(v, "saved"), mods = json_get(v, "modules");
	jg_obj(g);
	jg_str(g, "saved");
	jg_arr(g);
	size_t written = 0;
	for (size_t i = 0; YAJL_IS_ARRAY(saved) && i < saved->u.array.len; i++) {
		const char *s;
		size_t n;
		if (written < SNAPSHOT_LIST_MAX &&
		    item_fit(saved->u.array.values[i], SNAPSHOT_NAME_MAX, &s, &n)) {
			jg_strn(g, s, n);
			written++;
		}
	}
	jg_arr_end(g);
	jg_str(g, "modules");
	jg_obj(g);
	written = 0;
	for (size_t i = 0; YAJL_IS_OBJECT(mods) && i < mods->u.object.len; i++) {
		const char *s;
		size_t nk, nv;
		if (written < SNAPSHOT_LIST_MAX &&
		    str_fit(mods->u.object.keys[i], SNAPSHOT_NAME_MAX, &nk) &&
		    item_fit(mods->u.object.values[i], SNAPSHOT_NAME_MAX, &s, &nv)) {
			jg_strn(g, mods->u.object.keys[i], nk);
			jg_strn(g, s, nv);
			written++;
		}
	}
	jg_obj_end(g);
	jg_str(g, "skipped");
	pairs_gen(g, json_get(v, "skipped"), "name", SNAPSHOT_NAME_MAX, "reason",
		  SNAPSHOT_LIST_MAX);
	jg_obj_end(g);
}

/* skipped: [{"path","reason"}], at most SNAPSHOT_SKIPPED_MAX. */
static int skipped_check(yajl_val v, enum err_code code, struct err **errp)
{
	if (!YAJL_IS_ARRAY(v))
		return err_set(errp, code, "skipped: %s, not an array", json_type_name(v));
	if (v->u.array.len > SNAPSHOT_SKIPPED_MAX)
		return err_set(errp, code, "skipped: more than %d items", SNAPSHOT_SKIPPED_MAX);
	for (size_t i = 0; i < v->u.array.len; i++) {
		yajl_val s = v->u.array.values[i];
		if (!short_str(json_get(s, "path"), TAR_PATH_MAX) ||
		    !short_str(json_get(s, "reason"), SNAPSHOT_NAME_MAX))
			return err_set(errp, code, "skipped[%zu]: not {\"path\",\"reason\"}", i);
	}
	return 0;
}

static int globs_check(const char *const *paths, size_t n, struct err **errp)
{
	if (n > PATHS_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "paths: more than %d globs", PATHS_MAX);
	for (size_t i = 0; i < n; i++)
		if (paths[i] == NULL || paths[i][0] == '\0' || strlen(paths[i]) > GLOB_MAX)
			return err_set(errp, ERR_BAD_REQUEST, "paths[%zu]: not a glob", i);
	return 0;
}

static int head_check(const struct snapshot_head *h, struct err **errp)
{
	if (!snapshot_uuid_valid(h->id))
		return err_set(errp, ERR_BAD_REQUEST, "id: not a lowercase UUID");
	if (h->tenant == NULL || h->tenant[0] == '\0' || strlen(h->tenant) > SNAPSHOT_NAME_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "tenant: empty or too long");
	if (!workspace_valid(h->workspace))
		return err_set(errp, ERR_BAD_REQUEST, "workspace: not a workspace name");
	if (h->session != NULL && !snapshot_uuid_valid(h->session))
		return err_set(errp, ERR_BAD_REQUEST, "session: not a lowercase UUID");
	if (h->created_at_ms < 0)
		return err_set(errp, ERR_BAD_REQUEST, "created_at: before 1970");
	if (!h->all_paths && globs_check(h->paths, h->n_paths, errp) != 0)
		return -1;
	return 0;
}

struct snapshot_builder *snapshot_builder_new(const struct snapshot_head *h)
{
	struct snapshot_builder *b = xcalloc(1, sizeof(*b));
	b->g = json_gen_new();
	if (head_check(h, &b->head_err) != 0)
		return b;
	memcpy(b->id, h->id, sizeof(b->id));
	yajl_gen g = b->g;
	jg_obj(g);
	jg_kv_int(g, "format", 1);
	jg_kv_str(g, "id", h->id);
	jg_kv_str(g, "tenant", h->tenant);
	jg_kv_str(g, "workspace", h->workspace);
	jg_kv_str(g, "session", h->session);
	jg_kv_time(g, "created_at", h->created_at_ms);
	jg_str(g, "paths");
	if (h->all_paths) {
		jg_null(g);
	} else {
		jg_arr(g);
		for (size_t i = 0; i < h->n_paths; i++)
			jg_str(g, h->paths[i]);
		jg_arr_end(g);
	}
	jg_str(g, "variables");
	if (h->variables != NULL)
		vars_gen(g, h->variables);
	else
		jg_null(g);
	jg_str(g, "entries");
	jg_arr(g);
	return b;
}

static size_t gen_len(yajl_gen g)
{
	size_t len = 0;
	jg_text(g, &len);
	return len;
}

int snapshot_builder_entry(const struct tar_entry *e, void *arg, struct err **errp)
{
	struct snapshot_builder *b = arg;
	if (b->head_err != NULL)
		return err_set(errp, b->head_err->code, "snapshot manifest: %s",
			       b->head_err->message);
	if (b->done)
		return err_set(errp, ERR_INTERNAL, "snapshot manifest: finished already");
	/* The tail is at most a few hundred KiB (1000 skipped of 5 KiB
	 * each at most): leave it 8 MiB. */
	if (gen_len(b->g) > SNAPSHOT_MANIFEST_MAX - 8 * 1024 * 1024)
		return err_set(errp, ERR_PAYLOAD_TOO_LARGE,
			       "snapshot manifest: its entries pass %d MiB",
			       SNAPSHOT_MANIFEST_MAX / (1024 * 1024) - 8);
	yajl_gen g = b->g;
	jg_obj(g);
	jg_kv_str(g, "path", e->path);
	jg_kv_str(g, "type", e->dir ? "dir" : "file");
	if (!e->dir) {
		jg_kv_int(g, "size", (int64_t)e->size);
		b->files++;
		b->content_bytes += e->size;
	}
	jg_kv_int(g, "mode", e->mode & 0777);
	if (!e->dir)
		jg_kv_str(g, "sha256", e->sha256);
	jg_obj_end(g);
	return 0;
}

char *snapshot_builder_finish(struct snapshot_builder *b, const struct snapshot_tail *t,
			      size_t *len, struct err **errp)
{
	if (b->head_err != NULL) {
		err_give(errp, b->head_err);
		b->head_err = NULL;
		b->done = true;
		err_wrap(errp, "snapshot manifest");
		return NULL;
	}
	if (b->done) {
		err_set(errp, ERR_INTERNAL, "snapshot manifest: finished twice");
		return NULL;
	}
	b->done = true;
	if (!hex64_valid(t->sha256)) {
		err_set(errp, ERR_BAD_REQUEST,
			"snapshot manifest: sha256: not 64 lowercase hex digits");
		return NULL;
	}
	yajl_gen g = b->g;
	jg_arr_end(g);
	jg_kv_int(g, "size", (int64_t)t->size);
	jg_kv_int(g, "files", (int64_t)b->files);
	jg_kv_str(g, "sha256", t->sha256);
	jg_kv_int(g, "content_bytes", (int64_t)b->content_bytes);
	jg_str(g, "packages");
	jg_arr(g);
	size_t written = 0;
	for (size_t i = 0; i < t->n_packages && written < SNAPSHOT_LIST_MAX; i++) {
		size_t nn, nv;
		if (!str_fit(t->packages[i].name, SNAPSHOT_NAME_MAX, &nn) ||
		    !str_fit(t->packages[i].version, SNAPSHOT_NAME_MAX, &nv))
			continue;
		jg_obj(g);
		jg_str(g, "name");
		jg_strn(g, t->packages[i].name, nn);
		jg_str(g, "version");
		jg_strn(g, t->packages[i].version, nv);
		jg_obj_end(g);
		written++;
	}
	jg_arr_end(g);
	jg_str(g, "skipped");
	pairs_gen(g, t->skipped, "path", TAR_PATH_MAX, "reason", SNAPSHOT_SKIPPED_MAX);
	jg_obj_end(g);
	size_t n = 0;
	const char *text = jg_text(g, &n);
	if (n > SNAPSHOT_MANIFEST_MAX) {
		err_set(errp, ERR_PAYLOAD_TOO_LARGE, "snapshot manifest: %zu bytes, over %d MiB", n,
			SNAPSHOT_MANIFEST_MAX / (1024 * 1024));
		return NULL;
	}
	if (json_tokens(text, n) > SNAPSHOT_TOKENS_MAX) {
		err_set(errp, ERR_PAYLOAD_TOO_LARGE,
			"snapshot manifest: more than %d JSON tokens (entries and variables)",
			SNAPSHOT_TOKENS_MAX);
		return NULL;
	}
	char *out = xmalloc(n + 1);
	memcpy(out, text, n);
	out[n] = '\0';
	*len = n;
	return out;
}

void snapshot_builder_free(struct snapshot_builder *b)
{
	if (b == NULL)
		return;
	json_gen_cleanup(&b->g);
	err_free(b->head_err);
	free(b);
}

/* The parser. */

static int digits(const char *s, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* "2026-11-30T14:30:10Z" or with ".123" milliseconds (what jg_kv_time
 * writes); as epoch ms. */
static int time_parse(const char *s, int64_t *out)
{
	if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
	    s[16] != ':')
		return -1;
	int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2), h = digits(s + 11, 2),
	    mi = digits(s + 14, 2), sec = digits(s + 17, 2), ms = 0;
	const char *p = s + 19;
	if (*p == '.') {
		ms = digits(p + 1, 3);
		p += 4;
	}
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 ||
	    mi > 59 || sec < 0 || sec > 60 || ms < 0 || strcmp(p, "Z") != 0)
		return -1;
	struct tm tm = {.tm_year = y - 1900,
			.tm_mon = mo - 1,
			.tm_mday = d,
			.tm_hour = h,
			.tm_min = mi,
			.tm_sec = sec};
	*out = (int64_t)timegm(&tm) * 1000 + ms;
	return 0;
}

/* A non-negative integer member below 2^53 (what a reader of JSON keeps exactly). */
static int get_count(yajl_val obj, const char *key, uint64_t *out)
{
	int64_t v = 0;
	if (!json_get_int(obj, key, &v) || v < 0 || v > (INT64_C(1) << 53))
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static int entry_parse(yajl_val v, size_t i, const char *prev, bool prev_dir,
		       struct snapshot_entry *out, struct err **errp)
{
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_CORRUPT, "entries[%zu]: not an object", i);
	const char *path = json_get_str(v, "path");
	if (path == NULL)
		return err_set(errp, ERR_CORRUPT, "entries[%zu].path: not a string", i);
	AUTOERR struct err *pe = NULL;
	if (tar_path_check(path, strlen(path), &pe) != 0)
		return err_set(errp, ERR_CORRUPT, "entries[%zu].path: %s", i, pe->message);
	const char *why = tar_order_check(prev, prev_dir, path);
	if (why != NULL)
		return err_set(errp, ERR_CORRUPT, "entries[%zu].path: %s", i, why);
	const char *type = json_get_str(v, "type");
	if (type == NULL || (strcmp(type, "dir") != 0 && strcmp(type, "file") != 0))
		return err_set(errp, ERR_CORRUPT, "entries[%zu].type: not \"dir\" or \"file\"", i);
	int64_t mode = 0;
	if (!json_get_int(v, "mode", &mode) || mode < 0 || mode > 0777)
		return err_set(errp, ERR_CORRUPT, "entries[%zu].mode: not an integer in 0..0777",
			       i);
	*out = (struct snapshot_entry){.path = path, .dir = type[0] == 'd', .mode = (uint32_t)mode};
	if (out->dir) {
		int64_t size = 0;
		yajl_val sz = json_get(v, "size");
		if ((sz != NULL && (!json_get_int(v, "size", &size) || size != 0)) ||
		    json_get(v, "sha256") != NULL)
			return err_set(errp, ERR_CORRUPT,
				       "entries[%zu]: a directory with a size or sha256", i);
		return 0;
	}
	if (get_count(v, "size", &out->size) != 0)
		return err_set(errp, ERR_CORRUPT, "entries[%zu].size: not a byte count", i);
	const char *sha = json_get_str(v, "sha256");
	if (!hex64_valid(sha))
		return err_set(errp, ERR_CORRUPT,
			       "entries[%zu].sha256: not 64 lowercase hex digits", i);
	memcpy(out->sha256, sha, sizeof(out->sha256));
	return 0;
}

static int packages_check(yajl_val v, struct err **errp)
{
	if (!YAJL_IS_ARRAY(v))
		return err_set(errp, ERR_CORRUPT, "packages: not an array");
	if (v->u.array.len > SNAPSHOT_LIST_MAX)
		return err_set(errp, ERR_CORRUPT, "packages: more than %d items",
			       SNAPSHOT_LIST_MAX);
	for (size_t i = 0; i < v->u.array.len; i++) {
		yajl_val p = v->u.array.values[i];
		if (!short_str(json_get(p, "name"), SNAPSHOT_NAME_MAX) ||
		    !short_str(json_get(p, "version"), SNAPSHOT_NAME_MAX))
			return err_set(errp, ERR_CORRUPT,
				       "packages[%zu]: not {\"name\",\"version\"}", i);
	}
	return 0;
}

static int paths_check(yajl_val v, struct err **errp)
{
	if (v == NULL || YAJL_IS_NULL(v))
		return 0;
	if (!YAJL_IS_ARRAY(v))
		return err_set(errp, ERR_CORRUPT, "paths: not an array or null");
	if (v->u.array.len > PATHS_MAX)
		return err_set(errp, ERR_CORRUPT, "paths: more than %d globs", PATHS_MAX);
	for (size_t i = 0; i < v->u.array.len; i++)
		if (!short_str(v->u.array.values[i], GLOB_MAX))
			return err_set(errp, ERR_CORRUPT, "paths[%zu]: not a glob", i);
	return 0;
}

static int manifest_fields(struct snapshot_manifest *m, uint64_t max_entries, struct err **errp)
{
	yajl_val r = m->root;
	int64_t format = 0;
	if (!YAJL_IS_OBJECT(r))
		return err_set(errp, ERR_CORRUPT, "%s, not an object", json_type_name(r));
	if (!json_get_int(r, "format", &format) || format != 1)
		return err_set(errp, ERR_CORRUPT, "format: not 1");
	const char *id = json_get_str(r, "id");
	if (!snapshot_uuid_valid(id))
		return err_set(errp, ERR_CORRUPT, "id: not a lowercase UUID");
	memcpy(m->id, id, sizeof(m->id));
	m->tenant = json_get_str(r, "tenant");
	if (m->tenant == NULL || m->tenant[0] == '\0' || strlen(m->tenant) > SNAPSHOT_NAME_MAX)
		return err_set(errp, ERR_CORRUPT, "tenant: not a tenant name");
	m->workspace = json_get_str(r, "workspace");
	if (!workspace_valid(m->workspace))
		return err_set(errp, ERR_CORRUPT, "workspace: not a workspace name");
	yajl_val session = json_get(r, "session");
	if (YAJL_IS_NULL(session))
		m->session = NULL;
	else if (YAJL_IS_STRING(session) && snapshot_uuid_valid(session->u.string))
		m->session = session->u.string;
	else
		return err_set(errp, ERR_CORRUPT, "session: not a lowercase UUID or null");
	m->created_at = json_get_str(r, "created_at");
	if (m->created_at == NULL || time_parse(m->created_at, &m->created_at_ms) != 0)
		return err_set(errp, ERR_CORRUPT, "created_at: not an RFC 3339 UTC time");
	if (get_count(r, "size", &m->size) != 0)
		return err_set(errp, ERR_CORRUPT, "size: not a byte count");
	if (get_count(r, "files", &m->files) != 0)
		return err_set(errp, ERR_CORRUPT, "files: not a count");
	if (get_count(r, "content_bytes", &m->content_bytes) != 0)
		return err_set(errp, ERR_CORRUPT, "content_bytes: not a byte count");
	const char *sha = json_get_str(r, "sha256");
	if (!hex64_valid(sha))
		return err_set(errp, ERR_CORRUPT, "sha256: not 64 lowercase hex digits");
	memcpy(m->sha256, sha, sizeof(m->sha256));

	/* The four descriptive parts may be left out (a manifest another tool
	 * wrote): absent is null, or an empty list. */
	m->paths = json_get(r, "paths");
	if (paths_check(m->paths, errp) != 0)
		return -1;
	if (YAJL_IS_NULL(m->paths))
		m->paths = NULL;
	m->variables = json_get(r, "variables");
	if (YAJL_IS_NULL(m->variables))
		m->variables = NULL;
	else if (m->variables != NULL && vars_check(m->variables, ERR_CORRUPT, errp) != 0)
		return -1;
	m->packages = json_get(r, "packages");
	if (m->packages != NULL && packages_check(m->packages, errp) != 0)
		return -1;
	m->skipped = json_get(r, "skipped");
	if (m->skipped != NULL && skipped_check(m->skipped, ERR_CORRUPT, errp) != 0)
		return -1;

	yajl_val entries = json_get(r, "entries");
	if (!YAJL_IS_ARRAY(entries))
		return err_set(errp, ERR_CORRUPT, "entries: not an array");
	size_t n = entries->u.array.len;
	if (max_entries > 0 && n > max_entries)
		return err_set(errp, ERR_CORRUPT, "entries: %zu, more than the %llu allowed", n,
			       (unsigned long long)max_entries);
	m->entries = xcalloc(n > 0 ? n : 1, sizeof(*m->entries));
	uint64_t files = 0, content = 0;
	for (size_t i = 0; i < n; i++) {
		const struct snapshot_entry *prev = i > 0 ? &m->entries[i - 1] : NULL;
		if (entry_parse(entries->u.array.values[i], i, prev ? prev->path : NULL,
				prev ? prev->dir : false, &m->entries[i], errp) != 0)
			return -1;
		m->n_entries = i + 1;
		if (!m->entries[i].dir) {
			files++;
			content += m->entries[i].size;
		}
	}
	if (files != m->files)
		return err_set(errp, ERR_CORRUPT, "files: %llu, but the entries hold %llu files",
			       (unsigned long long)m->files, (unsigned long long)files);
	if (content != m->content_bytes)
		return err_set(errp, ERR_CORRUPT,
			       "content_bytes: %llu, but the entries' sizes add up to %llu",
			       (unsigned long long)m->content_bytes, (unsigned long long)content);
	if (content > m->size || m->size < 1024)
		return err_set(errp, ERR_CORRUPT, "size: %llu, less than the files it holds",
			       (unsigned long long)m->size);
	return 0;
}

struct snapshot_manifest *snapshot_manifest_parse(const char *text, size_t len,
						  uint64_t max_entries, struct err **errp)
{
	if (len > SNAPSHOT_MANIFEST_MAX) {
		err_set(errp, ERR_CORRUPT, "snapshot manifest is corrupt: %zu bytes, over %d MiB",
			len, SNAPSHOT_MANIFEST_MAX / (1024 * 1024));
		return NULL;
	}
	if (json_tokens(text, len) > SNAPSHOT_TOKENS_MAX) {
		err_set(errp, ERR_CORRUPT, "snapshot manifest is corrupt: more than %d JSON tokens",
			SNAPSHOT_TOKENS_MAX);
		return NULL;
	}
	struct err *e = NULL;
	yajl_val root = json_parse(text, len, &e);
	if (root == NULL) {
		e->code = ERR_CORRUPT;
		err_wrap(&e, "snapshot manifest is corrupt");
		err_give(errp, e);
		return NULL;
	}
	struct snapshot_manifest *m = xcalloc(1, sizeof(*m));
	m->root = root;
	if (manifest_fields(m, max_entries, &e) != 0) {
		if (m->id[0] != '\0')
			err_wrap(&e, "snapshot %s is corrupt: manifest", m->id);
		else
			err_wrap(&e, "snapshot manifest is corrupt");
		err_give(errp, e);
		snapshot_manifest_free(m);
		return NULL;
	}
	return m;
}

void snapshot_manifest_free(struct snapshot_manifest *m)
{
	if (m == NULL)
		return;
	free(m->entries);
	json_free(m->root);
	free(m);
}

/* The verifier. */

struct snapshot_verify {
	const struct snapshot_manifest *m;
	size_t next;
};

struct snapshot_verify *snapshot_verify_new(const struct snapshot_manifest *m)
{
	struct snapshot_verify *v = xcalloc(1, sizeof(*v));
	v->m = m;
	return v;
}

void snapshot_verify_free(struct snapshot_verify *v)
{
	free(v);
}

int snapshot_verify_entry(const struct tar_entry *e, void *arg, struct err **errp)
{
	struct snapshot_verify *v = arg;
	const struct snapshot_manifest *m = v->m;
	if (v->next >= m->n_entries)
		return err_set(errp, ERR_CORRUPT, "snapshot %s is corrupt: %s: not in the manifest",
			       m->id, e->path);
	const struct snapshot_entry *want = &m->entries[v->next];
	if (strcmp(want->path, e->path) != 0)
		return err_set(errp, ERR_CORRUPT,
			       "snapshot %s is corrupt: entry %zu is %s, the manifest has %s",
			       m->id, v->next, e->path, want->path);
	if (want->dir != e->dir)
		return err_set(errp, ERR_CORRUPT,
			       "snapshot %s is corrupt: %s: a %s in the tar, a %s in the manifest",
			       m->id, e->path, e->dir ? "directory" : "file",
			       want->dir ? "directory" : "file");
	if (want->mode != (e->mode & 0777))
		return err_set(errp, ERR_CORRUPT,
			       "snapshot %s is corrupt: %s: mode %o, the manifest has %o", m->id,
			       e->path, e->mode & 0777, want->mode);
	if (!e->dir && want->size != e->size)
		return err_set(errp, ERR_CORRUPT,
			       "snapshot %s is corrupt: %s: %llu bytes, the manifest has %llu",
			       m->id, e->path, (unsigned long long)e->size,
			       (unsigned long long)want->size);
	if (!e->dir && strcmp(want->sha256, e->sha256) != 0)
		return err_set(errp, ERR_CORRUPT,
			       "snapshot %s is corrupt: %s: sha256 does not match the manifest",
			       m->id, e->path);
	v->next++;
	return 0;
}

void snapshot_verify_scan_error(const struct snapshot_verify *v, struct err **errp)
{
	if (errp == NULL || *errp == NULL || (*errp)->code == ERR_CORRUPT)
		return;
	(*errp)->code = ERR_CORRUPT;
	err_wrap(errp, "snapshot %s is corrupt", v->m->id);
}

int snapshot_verify_finish(struct snapshot_verify *v, const struct tar_scan *ts, struct err **errp)
{
	const struct snapshot_manifest *m = v->m;
	if (v->next < m->n_entries)
		return err_set(errp, ERR_CORRUPT,
			       "snapshot %s is corrupt: the tar ends before %s (entry %zu of %zu)",
			       m->id, m->entries[v->next].path, v->next + 1, m->n_entries);
	if (tar_scan_bytes(ts) != m->size)
		return err_set(
		    errp, ERR_CORRUPT,
		    "snapshot %s is corrupt: the tar is %llu bytes, the manifest says %llu", m->id,
		    (unsigned long long)tar_scan_bytes(ts), (unsigned long long)m->size);
	char sha[TAR_SHA256_HEX + 1];
	tar_scan_sha256(ts, sha);
	if (strcmp(sha, m->sha256) != 0)
		return err_set(
		    errp, ERR_CORRUPT,
		    "snapshot %s is corrupt: the tar's sha256 does not match the manifest", m->id);
	return 0;
}
