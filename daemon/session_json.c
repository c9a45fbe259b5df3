/* session_json.c: a session as JSON: its Redis record (written here, read
 * back at adoption) and the API's view of it. */
#include "session_json.h"

#include <stdio.h>
#include <string.h>

#include "json.h"
#include "netpolicy.h"
#include "xalloc.h"

/* An allowlist entry of a record: checked again, a record is outside input. */
static bool allow_entry_valid(const char *s)
{
	return netpolicy_check_entry(s, NULL) == 0;
}

static void kv_to_json(yajl_gen g, const char *key, const struct session_kv *kv, size_t n)
{
	jg_str(g, key);
	jg_obj(g);
	for (size_t i = 0; i < n; i++)
		jg_kv_str(g, kv[i].key, kv[i].value);
	jg_obj_end(g);
}

void session_to_json(const struct session *s, yajl_gen g, bool internal)
{
	jg_obj(g);
	jg_kv_str(g, "id", s->id);
	jg_kv_str(g, "tenant", s->tenant);
	jg_kv_str(g, "state", session_state_name(s->state));
	jg_kv_str(g, "image", s->image);
	jg_kv_str(g, "runtime", s->gvisor ? "gvisor" : "runc");
	jg_kv_time(g, "created_at", s->created_at_ms);
	jg_kv_time(g, "last_active_at", s->last_active_at_ms);
	jg_kv_time(g, "expires_at", s->expires_at_ms);
	jg_kv_int(g, "idle_timeout_s", s->idle_timeout_s);
	jg_kv_int(g, "max_lifetime_s", s->max_lifetime_s);
	jg_str(g, "limits");
	jg_obj(g);
	jg_kv_int(g, "memory_mb", s->limits.memory_mb);
	jg_str(g, "cpus");
	jg_double(g, s->limits.cpus);
	jg_kv_int(g, "pids", s->limits.pids);
	jg_kv_int(g, "disk_mb", s->limits.disk_mb);
	jg_kv_int(g, "exec_timeout_s", s->limits.exec_timeout_s);
	jg_obj_end(g);
	jg_str(g, "network");
	jg_obj(g);
	jg_str(g, "allow");
	jg_arr(g);
	for (size_t i = 0; i < s->n_allow; i++)
		jg_str(g, s->allow[i]);
	jg_arr_end(g);
	jg_obj_end(g);
	if (internal)
		kv_to_json(g, "env", s->env, s->n_env);
	kv_to_json(g, "metadata", s->metadata, s->n_metadata);
	jg_kv_str(g, "workspace", session_workspace_name(s));
	jg_str(g, "persist");
	if (s->persist.set) {
		jg_obj(g);
		jg_str(g, "paths");
		if (s->persist.n_paths) {
			jg_arr(g);
			for (size_t i = 0; i < s->persist.n_paths; i++)
				jg_str(g, s->persist.paths[i]);
			jg_arr_end(g);
		} else {
			jg_null(g);
		}
		jg_kv_bool(g, "variables", s->persist.variables);
		jg_kv_bool(g, "on_end", s->persist.on_end);
		jg_obj_end(g);
	} else {
		jg_null(g);
	}
	/* Which node runs it (several nodes on one Redis: cluster.h). */
	jg_kv_str(g, "node", s->node);
	if (internal) {
		jg_kv_str(g, "container_id", s->container_id);
		jg_kv_int(g, "created_at_ms", s->created_at_ms);
		jg_kv_int(g, "last_active_at_ms", s->last_active_at_ms);
		jg_kv_int(g, "expires_at_ms", s->expires_at_ms);
		jg_kv_str(g, "net_ip", s->net_ip);
		jg_kv_int(g, "uid", s->uid);
	}
	jg_obj_end(g);
}

static int record_kv(yajl_val rec, const char *key, struct session_kv **out, size_t *n)
{
	yajl_val v = json_get(rec, key);
	if (v == NULL || !YAJL_IS_OBJECT(v))
		return 0;
	size_t len = v->u.object.len < SESSION_MAX_KV ? v->u.object.len : SESSION_MAX_KV;
	*out = xcalloc(len, sizeof(**out));
	for (size_t i = 0; i < len; i++) {
		yajl_val val = v->u.object.values[i];
		if (!YAJL_IS_STRING(val))
			continue;
		(*out)[*n].key = xstrdup(v->u.object.keys[i]);
		(*out)[*n].value = xstrdup(val->u.string);
		(*n)++;
	}
	return 0;
}

/* A record's persist: checked again (a record is outside input); what is
 * malformed is dropped, never half-kept. */
static void record_persist(yajl_val v, struct session_persist *p)
{
	memset(p, 0, sizeof(*p));
	if (v == NULL || !YAJL_IS_OBJECT(v))
		return;
	yajl_val paths = json_get(v, "paths"), var = json_get(v, "variables"),
		 end = json_get(v, "on_end");
	if (paths && YAJL_IS_ARRAY(paths) && paths->u.array.len <= SESSION_PERSIST_MAX_PATHS) {
		p->paths = xcalloc(paths->u.array.len ? paths->u.array.len : 1, sizeof(char *));
		for (size_t i = 0; i < paths->u.array.len; i++)
			if (YAJL_IS_STRING(paths->u.array.values[i]))
				p->paths[p->n_paths++] =
				    xstrdup(paths->u.array.values[i]->u.string);
		if (session_check_globs(p->paths, p->n_paths, NULL) < 0) {
			session_persist_clear(p);
			return;
		}
	}
	p->set = true;
	p->variables = var && YAJL_IS_TRUE(var);
	p->on_end = end && YAJL_IS_TRUE(end);
}

struct session *session_from_record(const char *json, size_t len, struct err **errp)
{
	yajl_val rec = json_parse(json, len, errp);
	if (rec == NULL)
		return NULL;
	struct session *s = xcalloc(1, sizeof(*s));
	const char *id = json_get_str(rec, "id"), *tenant = json_get_str(rec, "tenant"),
		   *image = json_get_str(rec, "image"), *node = json_get_str(rec, "node"),
		   *cid = json_get_str(rec, "container_id"), *ip = json_get_str(rec, "net_ip"),
		   *runtime = json_get_str(rec, "runtime");
	yajl_val lim = json_get(rec, "limits");
	if (!session_id_valid(id) || tenant == NULL || image == NULL || node == NULL ||
	    lim == NULL || !YAJL_IS_OBJECT(lim)) {
		err_set(errp, ERR_BAD_REQUEST, "session record: missing or malformed fields");
		goto fail;
	}
	memcpy(s->id, id, SESSION_ID_LEN + 1);
	s->tenant = xstrndup(tenant, 128);
	s->image = xstrndup(image, 128);
	s->node = xstrndup(node, 256);
	s->container_id = cid ? xstrndup(cid, 128) : NULL;
	snprintf(s->net_ip, sizeof(s->net_ip), "%s", ip ? ip : "");
	s->networked = s->net_ip[0] != '\0';
	s->gvisor = runtime && strcmp(runtime, "gvisor") == 0;
	s->state = SESSION_READY;
	json_get_int(rec, "created_at_ms", &s->created_at_ms);
	json_get_int(rec, "last_active_at_ms", &s->last_active_at_ms);
	json_get_int(rec, "expires_at_ms", &s->expires_at_ms);
	json_get_int(rec, "idle_timeout_s", &s->idle_timeout_s);
	json_get_int(rec, "max_lifetime_s", &s->max_lifetime_s);
	if (!json_get_int(rec, "uid", &s->uid) || s->uid < 1 || s->uid > INT32_MAX) {
		err_set(errp, ERR_BAD_REQUEST, "session record: no valid uid");
		goto fail;
	}
	json_get_int(lim, "memory_mb", &s->limits.memory_mb);
	json_get_int(lim, "pids", &s->limits.pids);
	json_get_int(lim, "disk_mb", &s->limits.disk_mb);
	json_get_int(lim, "exec_timeout_s", &s->limits.exec_timeout_s);
	yajl_val cpus = json_get(lim, "cpus");
	if (cpus && YAJL_IS_NUMBER(cpus))
		s->limits.cpus =
		    YAJL_IS_INTEGER(cpus) ? (double)YAJL_GET_INTEGER(cpus) : YAJL_GET_DOUBLE(cpus);
	if (s->idle_timeout_s < 1 || s->limits.exec_timeout_s < 1 || s->limits.memory_mb < 1) {
		err_set(errp, ERR_BAD_REQUEST, "session record: limits out of bounds");
		goto fail;
	}
	yajl_val allow = json_get(json_get(rec, "network"), "allow");
	if (allow && YAJL_IS_ARRAY(allow)) {
		size_t n =
		    allow->u.array.len < SESSION_MAX_ALLOW ? allow->u.array.len : SESSION_MAX_ALLOW;
		s->allow = xcalloc(n, sizeof(char *));
		for (size_t i = 0; i < n; i++)
			if (YAJL_IS_STRING(allow->u.array.values[i]) &&
			    allow_entry_valid(allow->u.array.values[i]->u.string))
				s->allow[s->n_allow++] =
				    xstrdup(allow->u.array.values[i]->u.string);
	}
	record_kv(rec, "env", &s->env, &s->n_env);
	record_kv(rec, "metadata", &s->metadata, &s->n_metadata);
	const char *ws = json_get_str(rec, "workspace");
	if (ws && session_workspace_valid(ws) && strcmp(ws, s->id) != 0)
		s->workspace = xstrdup(ws);
	record_persist(json_get(rec, "persist"), &s->persist);
	yajl_tree_free(rec);
	return s;
fail:
	yajl_tree_free(rec);
	session_free(s);
	return NULL;
}
