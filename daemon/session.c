/* session.c: validation of create requests, and the session's own rules. */
#include "session.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

#include "json.h"
#include "netpolicy.h"
#include "xalloc.h"

static const char *const state_names[] = {
    [SESSION_STARTING] = "starting", [SESSION_READY] = "ready", [SESSION_BUSY] = "busy",
    [SESSION_EXPIRED] = "expired",   [SESSION_DEAD] = "dead",
};

const char *session_state_name(enum session_state st)
{
	return (unsigned)st < sizeof(state_names) / sizeof(state_names[0]) ? state_names[st]
									   : "dead";
}

void session_new_id(char *buf)
{
	uuid_t u;
	uuid_generate_random(u);
	uuid_unparse_lower(u, buf);
}

bool session_id_valid(const char *s)
{
	if (s == NULL || strlen(s) != SESSION_ID_LEN)
		return false;
	for (int i = 0; i < SESSION_ID_LEN; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-'
			 : !(isdigit((unsigned char)s[i]) || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return true;
}

static void kv_free(struct session_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

void session_free(struct session *s)
{
	if (s == NULL)
		return;
	free(s->tenant);
	free(s->image);
	for (size_t i = 0; i < s->n_allow; i++)
		free(s->allow[i]);
	free(s->allow);
	kv_free(s->env, s->n_env);
	kv_free(s->metadata, s->n_metadata);
	free(s->node);
	free(s->container_id);
	free(s);
}

/* An integer field in [min, max]; absent keeps *out. */
static int take_int(yajl_val obj, const char *where, const char *key, int64_t min, int64_t max,
		    int64_t *out, struct err **errp)
{
	yajl_val v = json_get(obj, key);
	if (v == NULL || YAJL_IS_NULL(v))
		return 0;
	if (!YAJL_IS_INTEGER(v))
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: expected an integer, got %s", where,
			       key, json_type_name(v));
	int64_t x = YAJL_GET_INTEGER(v);
	if (x < min)
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: %lld is below the minimum %lld", where,
			       key, (long long)x, (long long)min);
	if (x > max)
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: %lld exceeds the server maximum %lld",
			       where, key, (long long)x, (long long)max);
	*out = x;
	return 0;
}

static int take_double(yajl_val obj, const char *where, const char *key, double min, double max,
		       double *out, struct err **errp)
{
	yajl_val v = json_get(obj, key);
	if (v == NULL || YAJL_IS_NULL(v))
		return 0;
	if (!YAJL_IS_NUMBER(v))
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: expected a number, got %s", where, key,
			       json_type_name(v));
	double x = YAJL_GET_DOUBLE(v);
	if (YAJL_IS_INTEGER(v))
		x = (double)YAJL_GET_INTEGER(v);
	if (!isfinite(x) || x < min)
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: %g is below the minimum %g", where,
			       key, x, min);
	if (x > max)
		return err_set(errp, ERR_BAD_REQUEST, "%s%s: %g exceeds the server maximum %g",
			       where, key, x, max);
	*out = x;
	return 0;
}

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

/* host, host:port, *.suffix or *.suffix:port, a canonical IPv4 literal or
 * [IPv6]; netpolicy holds the rules (the egress proxy interprets them). */
static bool allow_entry_valid(const char *s)
{
	return netpolicy_check_entry(s, NULL) == 0;
}

static bool env_key_valid(const char *k)
{
	if (!(isalpha((unsigned char)k[0]) || k[0] == '_'))
		return false;
	for (const char *p = k; *p; p++)
		if (!(isalnum((unsigned char)*p) || *p == '_'))
			return false;
	/* SANDBOX_* belong to the runner; a client must not redirect it. */
	return strlen(k) <= 128 && strncmp(k, "SANDBOX_", 8) != 0;
}

static int take_kv(yajl_val obj, const char *key, bool env_rules, struct session_kv **out,
		   size_t *n_out, struct err **errp)
{
	yajl_val v = json_get(obj, key);
	if (v == NULL || YAJL_IS_NULL(v))
		return 0;
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "%s: expected an object, got %s", key,
			       json_type_name(v));
	if (v->u.object.len > SESSION_MAX_KV)
		return err_set(errp, ERR_BAD_REQUEST, "%s: more than %d entries", key,
			       SESSION_MAX_KV);
	size_t total = 0;
	struct session_kv *kv = xcalloc(v->u.object.len, sizeof(*kv));
	size_t n = 0;
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		yajl_val val = v->u.object.values[i];
		if (!YAJL_IS_STRING(val)) {
			err_set(errp, ERR_BAD_REQUEST, "%s.%s: expected a string, got %s", key, k,
				json_type_name(val));
			goto fail;
		}
		if (env_rules ? !env_key_valid(k) : (k[0] == '\0' || strlen(k) > 128)) {
			err_set(errp, ERR_BAD_REQUEST, "%s: invalid name '%.64s'", key, k);
			goto fail;
		}
		total += strlen(k) + strlen(val->u.string);
		if (total > SESSION_MAX_KV_BYTES) {
			err_set(errp, ERR_BAD_REQUEST, "%s: larger than %d bytes", key,
				SESSION_MAX_KV_BYTES);
			goto fail;
		}
		kv[n].key = xstrdup(k);
		kv[n].value = xstrdup(val->u.string);
		n++;
	}
	*out = kv;
	*n_out = n;
	return 0;
fail:
	kv_free(kv, n);
	return -1;
}

static int take_limits(yajl_val body, const struct config *cfg, struct session_limits *lim,
		       struct err **errp)
{
	lim->memory_mb = cfg->memory_mb;
	lim->cpus = cfg->cpus;
	lim->pids = cfg->pids;
	lim->disk_mb = cfg->disk_mb;
	lim->exec_timeout_s = cfg->exec_timeout_s;
	yajl_val v = json_get(body, "limits");
	if (v == NULL || YAJL_IS_NULL(v))
		return 0;
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "limits: expected an object, got %s",
			       json_type_name(v));
	static const char *const known[] = {"memory_mb", "cpus",           "pids",
					    "disk_mb",   "exec_timeout_s", NULL};
	if (check_keys(v, "limits: ", known, errp) < 0 ||
	    take_int(v, "limits.", "memory_mb", 16, cfg->max_memory_mb, &lim->memory_mb, errp) <
		0 ||
	    take_double(v, "limits.", "cpus", 0.01, cfg->max_cpus, &lim->cpus, errp) < 0 ||
	    take_int(v, "limits.", "pids", 8, cfg->max_pids, &lim->pids, errp) < 0 ||
	    take_int(v, "limits.", "disk_mb", 1, cfg->max_disk_mb, &lim->disk_mb, errp) < 0 ||
	    take_int(v, "limits.", "exec_timeout_s", 1, cfg->max_exec_timeout_s,
		     &lim->exec_timeout_s, errp) < 0)
		return -1;
	return 0;
}

static int take_network(yajl_val body, struct session *s, struct err **errp)
{
	yajl_val net = json_get(body, "network");
	if (net == NULL || YAJL_IS_NULL(net))
		return 0;
	if (!YAJL_IS_OBJECT(net))
		return err_set(errp, ERR_BAD_REQUEST, "network: expected an object, got %s",
			       json_type_name(net));
	static const char *const known[] = {"allow", NULL};
	if (check_keys(net, "network: ", known, errp) < 0)
		return -1;
	yajl_val allow = json_get(net, "allow");
	if (allow == NULL || YAJL_IS_NULL(allow))
		return 0;
	if (!YAJL_IS_ARRAY(allow))
		return err_set(errp, ERR_BAD_REQUEST, "network.allow: expected an array, got %s",
			       json_type_name(allow));
	if (allow->u.array.len > SESSION_MAX_ALLOW)
		return err_set(errp, ERR_BAD_REQUEST, "network.allow: more than %d entries",
			       SESSION_MAX_ALLOW);
	s->allow = xcalloc(allow->u.array.len, sizeof(char *));
	for (size_t i = 0; i < allow->u.array.len; i++) {
		yajl_val e = allow->u.array.values[i];
		if (!YAJL_IS_STRING(e))
			return err_set(errp, ERR_BAD_REQUEST,
				       "network.allow[%zu]: expected a string", i);
		struct err *why = NULL;
		if (netpolicy_check_entry(e->u.string, &why) < 0) {
			err_set(errp, ERR_BAD_REQUEST, "network.allow[%zu]: %s", i, why->message);
			err_free(why);
			return -1;
		}
		s->allow[s->n_allow++] = xstrdup(e->u.string);
	}
	return 0;
}

struct session *session_from_request(yajl_val body, const struct config *cfg, const char *tenant,
				     struct err **errp)
{
	struct session *s = xcalloc(1, sizeof(*s));
	s->tenant = xstrdup(tenant);
	s->state = SESSION_STARTING;
	s->idle_timeout_s = cfg->idle_timeout_s;
	s->max_lifetime_s = cfg->max_lifetime_s;
	const char *image = cfg->image;
	if (body != NULL && !YAJL_IS_NULL(body)) {
		if (!YAJL_IS_OBJECT(body)) {
			err_set(errp, ERR_BAD_REQUEST, "body: expected a JSON object, got %s",
				json_type_name(body));
			goto fail;
		}
		static const char *const known[] = {"image",    "idle_timeout_s", "max_lifetime_s",
						    "limits",   "network",        "env",
						    "metadata", "runtime",        NULL};
		if (check_keys(body, "", known, errp) < 0)
			goto fail;
		yajl_val img = json_get(body, "image");
		if (img && !YAJL_IS_NULL(img)) {
			if (!YAJL_IS_STRING(img)) {
				err_set(errp, ERR_BAD_REQUEST, "image: expected a string, got %s",
					json_type_name(img));
				goto fail;
			}
			image = img->u.string;
		}
		if (take_int(body, "", "idle_timeout_s", 1, cfg->max_idle_timeout_s,
			     &s->idle_timeout_s, errp) < 0 ||
		    take_int(body, "", "max_lifetime_s", 1, cfg->max_lifetime_s, &s->max_lifetime_s,
			     errp) < 0)
			goto fail;
		yajl_val rt = json_get(body, "runtime");
		if (rt && !YAJL_IS_NULL(rt)) {
			if (!YAJL_IS_STRING(rt) ||
			    (strcmp(rt->u.string, "runc") && strcmp(rt->u.string, "gvisor"))) {
				err_set(errp, ERR_BAD_REQUEST,
					"runtime: expected \"runc\" or \"gvisor\"");
				goto fail;
			}
			s->gvisor = strcmp(rt->u.string, "gvisor") == 0;
		}
	}
	char *tag = config_image_tag(cfg, image);
	if (tag == NULL) {
		err_set(errp, ERR_BAD_REQUEST, "image: unknown image '%.64s'", image);
		goto fail;
	}
	free(tag);
	s->image = xstrdup(image);
	if (take_limits(body, cfg, &s->limits, errp) < 0 || take_network(body, s, errp) < 0 ||
	    take_kv(body, "env", true, &s->env, &s->n_env, errp) < 0 ||
	    take_kv(body, "metadata", false, &s->metadata, &s->n_metadata, errp) < 0)
		goto fail;
	s->networked = s->n_allow > 0;
	if (s->gvisor && s->n_allow > 0) {
		/* gVisor's own network stack does not work on these hosts; the
		 * stronger tier is for sessions without network. */
		err_set(errp, ERR_BAD_REQUEST,
			"runtime gvisor cannot be combined with network.allow");
		goto fail;
	}
	return s;
fail:
	session_free(s);
	return NULL;
}

void session_touch(struct session *s, int64_t now_ms)
{
	s->last_active_at_ms = now_ms;
	int64_t idle_end = now_ms + s->idle_timeout_s * 1000;
	int64_t life_end = s->created_at_ms + s->max_lifetime_s * 1000;
	s->expires_at_ms = s->max_lifetime_s > 0 && life_end < idle_end ? life_end : idle_end;
}

bool session_lifetime_bound(const struct session *s)
{
	return s->max_lifetime_s > 0 &&
	       s->expires_at_ms == s->created_at_ms + s->max_lifetime_s * 1000;
}

int session_check_exec(const struct session *s, struct err **errp)
{
	switch (s->state) {
	case SESSION_READY: return 0;
	case SESSION_BUSY:
		return err_set(errp, ERR_BUSY, "session %s is busy: an execution is running",
			       s->id);
	case SESSION_STARTING:
		return err_set(errp, ERR_BUSY, "session %s is still starting", s->id);
	case SESSION_EXPIRED: return err_set(errp, ERR_EXPIRED, "session %s has expired", s->id);
	case SESSION_DEAD: return err_set(errp, ERR_EXPIRED, "session %s has ended", s->id);
	}
	return err_set(errp, ERR_INTERNAL, "session %s: bad state", s->id);
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
	if (internal) {
		jg_kv_str(g, "node", s->node);
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
	yajl_tree_free(rec);
	return s;
fail:
	yajl_tree_free(rec);
	session_free(s);
	return NULL;
}
