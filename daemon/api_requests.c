/* api_requests.c: request bodies from the wire (JSON) into typed requests.
 *
 * Only the API touches the wire format: what is checked here is the shape
 * (an object, known members, the right JSON types, caps on counts before
 * anything is copied); the rules about values (ranges against the server's
 * maxima, names, allowlist entries) are session.c's. A null member counts as
 * absent. */
#include "api_requests.h"

#include <stdio.h>
#include <string.h>

#include "json.h"
#include "runs.h"
#include "xalloc.h"

/* Only the members we know; a typo ("memroy_mb") must not pass silently. */
static int check_keys(yajl_val obj, const char *where, const char *const *known, struct err **errp)
{
	for (size_t i = 0; i < obj->u.object.len; i++) {
		const char *k = obj->u.object.keys[i];
		bool ok = false;
		for (const char *const *p = known; *p; p++)
			if (strcmp(*p, k) == 0)
				ok = true;
		if (!ok)
			return err_set(errp, ERR_BAD_REQUEST, "%sunknown field '%s'", where, k);
	}
	return 0;
}

static yajl_val member(yajl_val obj, const char *key)
{
	yajl_val v = json_get(obj, key);
	return v && !YAJL_IS_NULL(v) ? v : NULL;
}

/* 1 and *out when present, 0 when absent, -1 on a type error. */
static int take_int(yajl_val obj, const char *where, const char *key, int64_t *out,
		    struct err **errp)
{
	yajl_val v = member(obj, key);
	if (v == NULL)
		return 0;
	if (!YAJL_IS_INTEGER(v))
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: expected an integer, got %s", where,
			       key, json_type_name(v));
	*out = YAJL_GET_INTEGER(v);
	return 1;
}

static int take_number(yajl_val obj, const char *where, const char *key, double *out,
		       struct err **errp)
{
	yajl_val v = member(obj, key);
	if (v == NULL)
		return 0;
	if (!YAJL_IS_NUMBER(v))
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: expected a number, got %s", where, key,
			       json_type_name(v));
	*out = YAJL_IS_INTEGER(v) ? (double)YAJL_GET_INTEGER(v) : YAJL_GET_DOUBLE(v);
	return 1;
}

/* Set flag in *set when the member was there; -1 on a type error. */
static int take_int_field(yajl_val obj, const char *where, const char *key, int64_t *out,
			  unsigned flag, unsigned *set, struct err **errp)
{
	int rc = take_int(obj, where, key, out, errp);
	if (rc > 0)
		*set |= flag;
	return rc < 0 ? -1 : 0;
}

static int take_limits(yajl_val body, struct session_request *r, struct err **errp)
{
	yajl_val v = member(body, "limits");
	if (v == NULL)
		return 0;
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "limits: expected an object, got %s",
			       json_type_name(v));
	static const char *const known[] = {"memory_mb", "cpus",           "pids",
					    "disk_mb",   "exec_timeout_s", NULL};
	if (check_keys(v, "limits: ", known, errp) < 0 ||
	    take_int_field(v, "limits.", "memory_mb", &r->limits.memory_mb, SRQ_MEMORY, &r->set,
			   errp) < 0)
		return -1;
	int rc = take_number(v, "limits.", "cpus", &r->limits.cpus, errp);
	if (rc < 0)
		return -1;
	if (rc > 0)
		r->set |= SRQ_CPUS;
	if (take_int_field(v, "limits.", "pids", &r->limits.pids, SRQ_PIDS, &r->set, errp) < 0 ||
	    take_int_field(v, "limits.", "disk_mb", &r->limits.disk_mb, SRQ_DISK, &r->set, errp) <
		0 ||
	    take_int_field(v, "limits.", "exec_timeout_s", &r->limits.exec_timeout_s,
			   SRQ_EXEC_TIMEOUT, &r->set, errp) < 0)
		return -1;
	return 0;
}

static int take_network(yajl_val body, struct session_request *r, struct err **errp)
{
	yajl_val net = member(body, "network");
	if (net == NULL)
		return 0;
	if (!YAJL_IS_OBJECT(net))
		return err_set(errp, ERR_BAD_REQUEST, "network: expected an object, got %s",
			       json_type_name(net));
	static const char *const known[] = {"allow", NULL};
	if (check_keys(net, "network: ", known, errp) < 0)
		return -1;
	yajl_val allow = member(net, "allow");
	if (allow == NULL)
		return 0;
	if (!YAJL_IS_ARRAY(allow))
		return err_set(errp, ERR_BAD_REQUEST, "network.allow: expected an array, got %s",
			       json_type_name(allow));
	if (allow->u.array.len > SESSION_MAX_ALLOW)
		return err_set(errp, ERR_BAD_REQUEST, "network.allow: more than %d entries",
			       SESSION_MAX_ALLOW);
	r->allow = xcalloc(allow->u.array.len, sizeof(char *));
	r->set |= SRQ_ALLOW;
	for (size_t i = 0; i < allow->u.array.len; i++) {
		yajl_val e = allow->u.array.values[i];
		if (!YAJL_IS_STRING(e))
			return err_set(errp, ERR_BAD_REQUEST,
				       "network.allow[%zu]: expected a string", i);
		r->allow[r->n_allow++] = xstrdup(e->u.string);
	}
	return 0;
}

static int take_kv(yajl_val body, const char *key, unsigned flag, struct session_request *r,
		   struct session_kv **out, size_t *n_out, struct err **errp)
{
	yajl_val v = member(body, key);
	if (v == NULL)
		return 0;
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "%s: expected an object, got %s", key,
			       json_type_name(v));
	if (v->u.object.len > SESSION_MAX_KV)
		return err_set(errp, ERR_BAD_REQUEST, "%s: more than %d entries", key,
			       SESSION_MAX_KV);
	*out = xcalloc(v->u.object.len, sizeof(**out));
	r->set |= flag;
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		yajl_val val = v->u.object.values[i];
		if (!YAJL_IS_STRING(val))
			return err_set(errp, ERR_BAD_REQUEST, "%s.%s: expected a string, got %s",
				       key, k, json_type_name(val));
		(*out)[*n_out].key = xstrdup(k);
		(*out)[*n_out].value = xstrdup(val->u.string);
		(*n_out)++;
	}
	return 0;
}

/* A string array (globs) into *out; "null" leaves it empty. */
static int take_globs(yajl_val v, const char *what, char ***out, size_t *n, struct err **errp)
{
	if (v == NULL || YAJL_IS_NULL(v))
		return 0;
	if (!YAJL_IS_ARRAY(v))
		return err_set(errp, ERR_BAD_REQUEST, "%s: expected an array of globs or null",
			       what);
	if (v->u.array.len > SESSION_PERSIST_MAX_PATHS)
		return err_set(errp, ERR_BAD_REQUEST, "%s: more than %d globs", what,
			       SESSION_PERSIST_MAX_PATHS);
	*out = xcalloc(v->u.array.len ? v->u.array.len : 1, sizeof(char *));
	for (size_t i = 0; i < v->u.array.len; i++) {
		yajl_val e = v->u.array.values[i];
		if (!YAJL_IS_STRING(e))
			return err_set(errp, ERR_BAD_REQUEST, "%s[%zu]: expected a string", what,
				       i);
		(*out)[(*n)++] = xstrdup(e->u.string);
	}
	return session_check_globs(*out, *n, errp);
}

int api_parse_globs(yajl_val v, const char *what, char ***out, size_t *n, struct err **errp)
{
	return take_globs(v, what, out, n, errp);
}

static int take_bool(yajl_val obj, const char *where, const char *key, bool dflt, bool *out,
		     struct err **errp)
{
	yajl_val v = member(obj, key);
	*out = dflt;
	if (v == NULL)
		return 0;
	if (!YAJL_IS_TRUE(v) && !YAJL_IS_FALSE(v))
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: expected true or false", where, key);
	*out = YAJL_IS_TRUE(v);
	return 0;
}

/* "restore", "workspace" and "persist" (snapshots). */
static int take_durable(yajl_val body, struct session_request *r, struct err **errp)
{
	yajl_val v = member(body, "restore");
	if (v) {
		if (!YAJL_IS_STRING(v))
			return err_set(errp, ERR_BAD_REQUEST,
				       "restore: expected a snapshot id (a string)");
		r->restore = xstrdup(v->u.string);
		r->set |= SRQ_RESTORE;
	}
	v = member(body, "workspace");
	if (v) {
		if (!YAJL_IS_STRING(v))
			return err_set(errp, ERR_BAD_REQUEST,
				       "workspace: expected a workspace's name (a string)");
		r->workspace = xstrdup(v->u.string);
		r->set |= SRQ_WORKSPACE;
	}
	v = member(body, "persist");
	if (v == NULL || YAJL_IS_NULL(v))
		return 0;
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "persist: expected an object or null");
	static const char *const known[] = {"paths", "variables", "on_end", NULL};
	if (check_keys(v, "persist: ", known, errp) < 0)
		return -1;
	r->set |= SRQ_PERSIST;
	r->persist.set = true;
	if (take_globs(member(v, "paths"), "persist.paths", &r->persist.paths, &r->persist.n_paths,
		       errp) < 0 ||
	    take_bool(v, "persist.", "variables", true, &r->persist.variables, errp) < 0 ||
	    take_bool(v, "persist.", "on_end", true, &r->persist.on_end, errp) < 0)
		return -1;
	return 0;
}

int api_parse_session_request(yajl_val body, struct session_request *r, struct err **errp)
{
	memset(r, 0, sizeof(*r));
	if (body == NULL || YAJL_IS_NULL(body))
		return 0;
	if (!YAJL_IS_OBJECT(body))
		return err_set(errp, ERR_BAD_REQUEST, "body: expected a JSON object, got %s",
			       json_type_name(body));
	static const char *const known[] = {
	    "image",    "idle_timeout_s", "max_lifetime_s", "limits",    "network", "env",
	    "metadata", "runtime",        "restore",        "workspace", "persist", NULL};
	if (check_keys(body, "", known, errp) < 0)
		goto fail;
	yajl_val img = member(body, "image");
	if (img) {
		if (!YAJL_IS_STRING(img)) {
			err_set(errp, ERR_BAD_REQUEST, "image: expected a string, got %s",
				json_type_name(img));
			goto fail;
		}
		r->image = xstrdup(img->u.string);
		r->set |= SRQ_IMAGE;
	}
	if (take_int_field(body, "", "idle_timeout_s", &r->idle_timeout_s, SRQ_IDLE_TIMEOUT,
			   &r->set, errp) < 0 ||
	    take_int_field(body, "", "max_lifetime_s", &r->max_lifetime_s, SRQ_MAX_LIFETIME,
			   &r->set, errp) < 0)
		goto fail;
	yajl_val rt = member(body, "runtime");
	if (rt) {
		if (!YAJL_IS_STRING(rt) ||
		    (strcmp(rt->u.string, "runc") && strcmp(rt->u.string, "gvisor"))) {
			err_set(errp, ERR_BAD_REQUEST, "runtime: expected \"runc\" or \"gvisor\"");
			goto fail;
		}
		r->gvisor = strcmp(rt->u.string, "gvisor") == 0;
		r->set |= SRQ_RUNTIME;
	}
	if (take_limits(body, r, errp) < 0 || take_network(body, r, errp) < 0 ||
	    take_kv(body, "env", SRQ_ENV, r, &r->env, &r->n_env, errp) < 0 ||
	    take_kv(body, "metadata", SRQ_METADATA, r, &r->metadata, &r->n_metadata, errp) < 0 ||
	    take_durable(body, r, errp) < 0)
		goto fail;
	return 0;
fail:
	session_request_release(r);
	return -1;
}

int api_parse_patch_request(yajl_val body, struct session_request *r, struct err **errp)
{
	memset(r, 0, sizeof(*r));
	if (body == NULL || !YAJL_IS_OBJECT(body))
		return err_set(errp, ERR_BAD_REQUEST, "body: expected a JSON object");
	for (size_t i = 0; i < body->u.object.len; i++)
		if (strcmp(body->u.object.keys[i], "network") != 0)
			return err_set(errp, ERR_BAD_REQUEST,
				       "unknown field '%.64s' (only network can change)",
				       body->u.object.keys[i]);
	if (take_network(body, r, errp) < 0) {
		session_request_release(r);
		return -1;
	}
	/* What a PATCH says is the whole new list: no allow means none. */
	r->set |= SRQ_ALLOW;
	return 0;
}

/* Parse body's text with parse; r is left empty on failure. */
static int parse_text(const char *body, size_t len,
		      int (*parse)(yajl_val, struct session_request *, struct err **),
		      struct session_request *r, struct err **errp)
{
	memset(r, 0, sizeof(*r));
	yajl_val v = json_parse(body, len, errp);
	if (v == NULL)
		return -1;
	int rc = parse(v, r, errp);
	yajl_tree_free(v);
	return rc;
}

static bool has_nul_escape(const char *text, size_t len);

bool api_body_has_nul(const char *body, size_t len)
{
	return has_nul_escape(body, len);
}

int api_parse_session_body(const char *body, size_t len, struct session_request *r,
			   struct err **errp)
{
	/* A C string ends at a NUL: "a\u0000b" would pass as "a" (a glob, a
	 * workspace name, an env value). */
	if (has_nul_escape(body, len)) {
		memset(r, 0, sizeof(*r));
		return err_set(errp, ERR_BAD_REQUEST,
			       "body: holds a NUL character (\\u0000), which no field may");
	}
	for (size_t i = 0; i < len; i++)
		if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t')
			return parse_text(body, len, api_parse_session_request, r, errp);
	return api_parse_session_request(NULL, r, errp); /* blank: all defaults */
}

int api_parse_patch_body(const char *body, size_t len, struct session_request *r, struct err **errp)
{
	return parse_text(body, len, api_parse_patch_request, r, errp);
}

void exec_request_release(struct exec_request *r)
{
	if (r == NULL)
		return;
	free(r->code);
	free(r->image);
	memset(r, 0, sizeof(*r));
}

/* Whether the JSON text has a \u0000 escape: the tree's strings end at a
 * NUL, so code with one would run cut short. An escape is a backslash
 * preceded by an even number of backslashes (outside strings valid JSON
 * has none). */
/* The body's "code": a string (copied into *code, its length in *len), or
 * -1 naming what it was instead. */
static int take_code(yajl_val v, char **code, size_t *len, struct err **errp)
{
	yajl_val jcode = json_get(v, "code");
	if (jcode == NULL || !YAJL_IS_STRING(jcode))
		return err_set(errp, ERR_BAD_REQUEST, "code: expected a string, got %s",
			       json_type_name(jcode));
	*code = xstrdup(jcode->u.string);
	*len = strlen(*code);
	return 0;
}

static bool has_nul_escape(const char *text, size_t len)
{
	for (size_t i = 0; i + 6 <= len; i++) {
		if (text[i] != '\\' || text[i + 1] != 'u' || strncmp(text + i + 2, "0000", 4) != 0)
			continue;
		size_t before = 0;
		while (before < i && text[i - 1 - before] == '\\')
			before++;
		if (before % 2 == 0)
			return true;
	}
	return false;
}

const char *const exec_languages[] = {"python", "javascript", "bash", NULL};

/* The body's "language", if any: one of exec_languages; *out stays NULL
 * for Python (the kernel's own path, whose frame does not name it). */
static int take_language(yajl_val v, const char **out, struct err **errp)
{
	yajl_val j = member(v, "language");
	if (j == NULL)
		return 0;
	if (!YAJL_IS_STRING(j))
		return err_set(errp, ERR_BAD_REQUEST,
			       "language: expected a string (python, javascript or bash), got %s",
			       json_type_name(j));
	for (size_t i = 0; exec_languages[i]; i++) {
		if (strcmp(j->u.string, exec_languages[i]) == 0) {
			*out = i == 0 ? NULL : exec_languages[i];
			return 0;
		}
	}
	return err_set(errp, ERR_BAD_REQUEST,
		       "language: '%.32s' is not one of python, javascript, bash", j->u.string);
}

int api_parse_exec_request(const char *body, size_t len, bool oneshot, struct exec_request *r,
			   struct err **errp)
{
	memset(r, 0, sizeof(*r));
	if (has_nul_escape(body, len))
		return err_set(errp, ERR_BAD_REQUEST,
			       "code: holds a NUL character (\\u0000), which Python source cannot");
	const char *extra = oneshot ? "image" : "stream";
	yajl_val v = json_parse(body, len, errp);
	if (v == NULL)
		return -1;
	if (!YAJL_IS_OBJECT(v)) {
		err_set(errp, ERR_BAD_REQUEST, "body: expected a JSON object, got %s",
			json_type_name(v));
		goto fail;
	}
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		if (strcmp(k, "code") && strcmp(k, "timeout_s") && strcmp(k, extra) &&
		    strcmp(k, "language")) {
			err_set(errp, ERR_BAD_REQUEST, "unknown field '%.64s'", k);
			goto fail;
		}
	}
	if (take_code(v, &r->code, &r->len, errp) < 0)
		goto fail;
	if (take_language(v, &r->language, errp) < 0)
		goto fail;
	yajl_val jt = member(v, "timeout_s");
	if (jt) {
		if (!YAJL_IS_NUMBER(jt)) {
			err_set(errp, ERR_BAD_REQUEST, "timeout_s: expected a number, got %s",
				json_type_name(jt));
			goto fail;
		}
		double t = YAJL_IS_INTEGER(jt) ? (double)YAJL_GET_INTEGER(jt) : YAJL_GET_DOUBLE(jt);
		if (!(t >= 1 && t <= 86400)) {
			err_set(errp, ERR_BAD_REQUEST, "timeout_s: %g is outside 1..86400", t);
			goto fail;
		}
		r->timeout_s = (int64_t)(t + 0.999); /* rounded up: never less time */
	}
	yajl_val jx = member(v, extra);
	if (jx && oneshot) {
		if (!YAJL_IS_STRING(jx)) {
			err_set(errp, ERR_BAD_REQUEST, "image: expected a string, got %s",
				json_type_name(jx));
			goto fail;
		}
		r->image = xstrdup(jx->u.string);
	} else if (jx) {
		if (!YAJL_IS_TRUE(jx) && !YAJL_IS_FALSE(jx)) {
			err_set(errp, ERR_BAD_REQUEST, "stream: expected a boolean, got %s",
				json_type_name(jx));
			goto fail;
		}
		r->stream = YAJL_IS_TRUE(jx);
	}
	yajl_tree_free(v);
	return 0;
fail:
	yajl_tree_free(v);
	exec_request_release(r);
	return -1;
}

/* ---- runs ---- */

static int run_fixer_field(yajl_val f, const char *key, char **out, struct err **errp)
{
	yajl_val v = member(f, key);
	if (v == NULL)
		return 0;
	if (!YAJL_IS_STRING(v) || v->u.string[0] == '\0' || strlen(v->u.string) > 1024)
		return err_set(errp, ERR_BAD_REQUEST,
			       "fixer.%s: expected a non-empty string of at most 1024 bytes", key);
	*out = xstrdup(v->u.string);
	return 0;
}

static int run_parse_fixer(yajl_val f, struct run_request *r, struct err **errp)
{
	r->fixer_set = true;
	if (f == NULL || YAJL_IS_NULL(f)) {
		r->fixer_null = true;
		return 0;
	}
	if (!YAJL_IS_OBJECT(f))
		return err_set(errp, ERR_BAD_REQUEST, "fixer: expected an object or null, got %s",
			       json_type_name(f));
	for (size_t i = 0; i < f->u.object.len; i++) {
		const char *k = f->u.object.keys[i];
		if (strcmp(k, "url") && strcmp(k, "model") && strcmp(k, "api_key_file"))
			return err_set(errp, ERR_BAD_REQUEST, "fixer: unknown field '%.64s'", k);
	}
	if (run_fixer_field(f, "url", &r->fixer_url, errp) < 0 ||
	    run_fixer_field(f, "model", &r->fixer_model, errp) < 0 ||
	    run_fixer_field(f, "api_key_file", &r->fixer_key_file, errp) < 0)
		return -1;
	return 0;
}

static int run_parse_ladder(yajl_val a, struct run_request *r, struct err **errp)
{
	if (!YAJL_IS_ARRAY(a))
		return err_set(errp, ERR_BAD_REQUEST, "on_failure: expected an array, got %s",
			       json_type_name(a));
	if (a->u.array.len > RUN_MAX_LADDER)
		return err_set(errp, ERR_BAD_REQUEST, "on_failure: at most %d modes",
			       RUN_MAX_LADDER);
	for (size_t i = 0; i < a->u.array.len; i++) {
		yajl_val m = a->u.array.values[i];
		const char *s = YAJL_IS_STRING(m) ? m->u.string : "";
		enum run_mode mode;
		if (strcmp(s, "manual") == 0)
			mode = RUN_MODE_MANUAL;
		else if (strcmp(s, "stateless") == 0)
			mode = RUN_MODE_STATELESS;
		else if (strcmp(s, "review") == 0)
			mode = RUN_MODE_REVIEW;
		else
			return err_set(errp, ERR_BAD_REQUEST,
				       "on_failure[%zu]: expected \"manual\", \"stateless\" or "
				       "\"review\"",
				       i);
		for (size_t j = 0; j < r->n_on_failure; j++)
			if (r->on_failure[j] == mode)
				return err_set(errp, ERR_BAD_REQUEST, "on_failure: \"%s\" twice",
					       s);
		r->on_failure[r->n_on_failure++] = mode;
	}
	return 0;
}

int api_parse_run_request(const char *body, size_t len, bool oneshot, struct run_request *r,
			  struct err **errp)
{
	memset(r, 0, sizeof(*r));
	r->max_attempts = RUN_DEFAULT_ATTEMPTS;
	r->on_failure[0] = RUN_MODE_MANUAL;
	r->n_on_failure = 1;
	if (has_nul_escape(body, len))
		return err_set(
		    errp, ERR_BAD_REQUEST,
		    "a string holds a NUL character (\\u0000), which Python source cannot");
	yajl_val v = json_parse(body, len, errp);
	if (v == NULL)
		return -1;
	static const char *const known[] = {"code",      "goal",  "max_attempts",
					    "timeout_s", "fixer", "on_failure",
					    "stream",    "image", "retry_hopeless"};
	if (!YAJL_IS_OBJECT(v)) {
		err_set(errp, ERR_BAD_REQUEST, "body: expected a JSON object, got %s",
			json_type_name(v));
		goto fail;
	}
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		size_t j = 0;
		while (j < sizeof(known) / sizeof(known[0]) && strcmp(k, known[j]))
			j++;
		if (j == sizeof(known) / sizeof(known[0]) ||
		    (!oneshot && strcmp(k, "image") == 0)) {
			err_set(errp, ERR_BAD_REQUEST, "unknown field '%.64s'", k);
			goto fail;
		}
	}
	if (take_code(v, &r->code, &r->len, errp) < 0)
		goto fail;
	yajl_val jg = member(v, "goal");
	if (jg) {
		if (!YAJL_IS_STRING(jg) || strlen(jg->u.string) > RUN_GOAL_MAX) {
			err_set(errp, ERR_BAD_REQUEST,
				"goal: expected a string of at most %d bytes", RUN_GOAL_MAX);
			goto fail;
		}
		r->goal = xstrdup(jg->u.string);
	}
	int64_t n;
	int got = take_int(v, "", "max_attempts", &n, errp);
	if (got < 0)
		goto fail;
	if (got && (n < 1 || n > RUN_MAX_ATTEMPTS)) {
		err_set(errp, ERR_BAD_REQUEST, "max_attempts: %lld is outside 1..%d", (long long)n,
			RUN_MAX_ATTEMPTS);
		goto fail;
	}
	if (got)
		r->max_attempts = (int)n;
	if ((got = take_int(v, "", "timeout_s", &n, errp)) < 0)
		goto fail;
	if (got && (n < 1 || n > 86400)) {
		err_set(errp, ERR_BAD_REQUEST, "timeout_s: %lld is outside 1..86400", (long long)n);
		goto fail;
	}
	if (got)
		r->timeout_s = n;
	if (json_get(v, "fixer") && run_parse_fixer(json_get(v, "fixer"), r, errp) < 0)
		goto fail;
	yajl_val jl = member(v, "on_failure");
	if (jl) {
		r->n_on_failure = 0;
		if (run_parse_ladder(jl, r, errp) < 0)
			goto fail;
	}
	yajl_val js = member(v, "stream");
	if (js) {
		if (!YAJL_IS_TRUE(js) && !YAJL_IS_FALSE(js)) {
			err_set(errp, ERR_BAD_REQUEST, "stream: expected a boolean, got %s",
				json_type_name(js));
			goto fail;
		}
		r->stream = YAJL_IS_TRUE(js);
	}
	yajl_val jh = member(v, "retry_hopeless");
	if (jh) {
		if (!YAJL_IS_TRUE(jh) && !YAJL_IS_FALSE(jh)) {
			err_set(errp, ERR_BAD_REQUEST, "retry_hopeless: expected a boolean, got %s",
				json_type_name(jh));
			goto fail;
		}
		r->retry_hopeless = YAJL_IS_TRUE(jh);
	}
	yajl_val ji = member(v, "image");
	if (ji) {
		if (!YAJL_IS_STRING(ji)) {
			err_set(errp, ERR_BAD_REQUEST, "image: expected a string, got %s",
				json_type_name(ji));
			goto fail;
		}
		r->image = xstrdup(ji->u.string);
	}
	yajl_tree_free(v);
	return 0;
fail:
	yajl_tree_free(v);
	run_request_release(r);
	return -1;
}

void run_request_release(struct run_request *r)
{
	free(r->code);
	free(r->goal);
	free(r->fixer_url);
	free(r->fixer_model);
	free(r->fixer_key_file);
	free(r->image);
	memset(r, 0, sizeof(*r));
}
