/* session.c: the rules of a session: create requests validated against the
 * config, ids, clocks, states. No wire format here (session_json.c has the
 * JSON of records and views, api_requests.c the parsing of requests). */
#include "session.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

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

static const bool transitions[5][5] = {
    /* to:                  starting ready  busy   expired dead */
    [SESSION_STARTING] = {false, true, false, true, true},
    [SESSION_READY] = {false, false, true, true, true},
    [SESSION_BUSY] = {false, true, false, true, true},
    [SESSION_EXPIRED] = {false, false, false, false, false},
    [SESSION_DEAD] = {false, false, false, false, false},
};

bool session_state_allowed(enum session_state from, enum session_state to)
{
	return (unsigned)from < 5 && (unsigned)to < 5 && transitions[from][to];
}

bool session_set_state(struct session *s, enum session_state to)
{
	if (!session_state_allowed(s->state, to))
		return false;
	s->state = to;
	return true;
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

void session_kv_free(struct session_kv *kv, size_t n)
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
	session_kv_free(s->env, s->n_env);
	session_kv_free(s->metadata, s->n_metadata);
	free(s->node);
	free(s->container_id);
	free(s->workspace);
	session_persist_clear(&s->persist);
	free(s);
}

const char *session_workspace_name(const struct session *s)
{
	return s->workspace ? s->workspace : s->id;
}

bool session_workspace_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > SESSION_WORKSPACE_MAX || name[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int session_check_globs(char *const *globs, size_t n, struct err **errp)
{
	if (n > SESSION_PERSIST_MAX_PATHS)
		return err_set(errp, ERR_BAD_REQUEST, "paths: more than %d globs",
			       SESSION_PERSIST_MAX_PATHS);
	for (size_t i = 0; i < n; i++) {
		const char *g = globs[i];
		size_t len = strlen(g);
		if (len == 0 || len > SESSION_PERSIST_PATH_MAX)
			return err_set(errp, ERR_BAD_REQUEST, "paths[%zu]: a glob of 1 to %d bytes",
				       i, SESSION_PERSIST_PATH_MAX);
		if (g[0] == '/')
			return err_set(errp, ERR_BAD_REQUEST,
				       "paths[%zu] '%.64s': globs are relative to /workspace", i,
				       g);
		for (const char *p = g; *p;) {
			const char *slash = strchr(p, '/');
			size_t seg = slash ? (size_t)(slash - p) : strlen(p);
			if (seg == 2 && p[0] == '.' && p[1] == '.')
				return err_set(errp, ERR_BAD_REQUEST,
					       "paths[%zu] '%.64s': a '..' component", i, g);
			if (!slash)
				break;
			p = slash + 1;
		}
	}
	return 0;
}

void session_persist_clear(struct session_persist *p)
{
	for (size_t i = 0; i < p->n_paths; i++)
		free(p->paths[i]);
	free(p->paths);
	memset(p, 0, sizeof(*p));
}

void session_persist_copy(struct session_persist *dst, const struct session_persist *src)
{
	*dst = *src;
	dst->paths = NULL;
	dst->n_paths = 0;
	if (src->n_paths) {
		dst->paths = xcalloc(src->n_paths, sizeof(char *));
		for (size_t i = 0; i < src->n_paths; i++)
			dst->paths[dst->n_paths++] = xstrdup(src->paths[i]);
	}
}

/* An integer in [min, max]. */
static int check_int(const char *what, int64_t x, int64_t min, int64_t max, struct err **errp)
{
	if (x < min)
		return err_set(errp, ERR_BAD_REQUEST, "%s: %lld is below the minimum %lld", what,
			       (long long)x, (long long)min);
	if (x > max)
		return err_set(errp, ERR_BAD_REQUEST, "%s: %lld exceeds the server maximum %lld",
			       what, (long long)x, (long long)max);
	return 0;
}

static int check_double(const char *what, double x, double min, double max, struct err **errp)
{
	if (!isfinite(x) || x < min)
		return err_set(errp, ERR_BAD_REQUEST, "%s: %g is below the minimum %g", what, x,
			       min);
	if (x > max)
		return err_set(errp, ERR_BAD_REQUEST, "%s: %g exceeds the server maximum %g", what,
			       x, max);
	return 0;
}

int session_check_allow(char *const *allow, size_t n, struct err **errp)
{
	if (n > SESSION_MAX_ALLOW)
		return err_set(errp, ERR_BAD_REQUEST, "network.allow: more than %d entries",
			       SESSION_MAX_ALLOW);
	for (size_t i = 0; i < n; i++) {
		struct err *why = NULL;
		if (netpolicy_check_entry(allow[i], &why) < 0) {
			err_set(errp, ERR_BAD_REQUEST, "network.allow[%zu]: %s", i, why->message);
			err_free(why);
			return -1;
		}
	}
	return 0;
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

static int check_kv(const char *what, const struct session_kv *kv, size_t n, bool env_rules,
		    struct err **errp)
{
	if (n > SESSION_MAX_KV)
		return err_set(errp, ERR_BAD_REQUEST, "%s: more than %d entries", what,
			       SESSION_MAX_KV);
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		const char *k = kv[i].key;
		if (env_rules ? !env_key_valid(k) : (k[0] == '\0' || strlen(k) > 128))
			return err_set(errp, ERR_BAD_REQUEST, "%s: invalid name '%.64s'", what, k);
		total += strlen(k) + strlen(kv[i].value);
		if (total > SESSION_MAX_KV_BYTES)
			return err_set(errp, ERR_BAD_REQUEST, "%s: larger than %d bytes", what,
				       SESSION_MAX_KV_BYTES);
	}
	return 0;
}

static int take_limits(const struct session_request *r, const struct config *cfg,
		       struct session_limits *lim, struct err **errp)
{
	lim->memory_mb = cfg->memory_mb;
	lim->cpus = cfg->cpus;
	lim->pids = cfg->pids;
	lim->disk_mb = cfg->disk_mb;
	lim->exec_timeout_s = cfg->exec_timeout_s;
	if (r == NULL)
		return 0;
	const struct session_limits *in = &r->limits;
	if ((r->set & SRQ_MEMORY) &&
	    check_int("limits.memory_mb", in->memory_mb, 16, cfg->max_memory_mb, errp) < 0)
		return -1;
	if ((r->set & SRQ_CPUS) &&
	    check_double("limits.cpus", in->cpus, 0.01, cfg->max_cpus, errp) < 0)
		return -1;
	if ((r->set & SRQ_PIDS) && check_int("limits.pids", in->pids, 8, cfg->max_pids, errp) < 0)
		return -1;
	if ((r->set & SRQ_DISK) &&
	    check_int("limits.disk_mb", in->disk_mb, 1, cfg->max_disk_mb, errp) < 0)
		return -1;
	if ((r->set & SRQ_EXEC_TIMEOUT) && check_int("limits.exec_timeout_s", in->exec_timeout_s, 1,
						     cfg->max_exec_timeout_s, errp) < 0)
		return -1;
	if (r->set & SRQ_MEMORY)
		lim->memory_mb = in->memory_mb;
	if (r->set & SRQ_CPUS)
		lim->cpus = in->cpus;
	if (r->set & SRQ_PIDS)
		lim->pids = in->pids;
	if (r->set & SRQ_DISK)
		lim->disk_mb = in->disk_mb;
	if (r->set & SRQ_EXEC_TIMEOUT)
		lim->exec_timeout_s = in->exec_timeout_s;
	return 0;
}

struct session_kv *session_kv_dup(const struct session_kv *kv, size_t n)
{
	struct session_kv *out = xcalloc(n, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		out[i].key = xstrdup(kv[i].key);
		out[i].value = xstrdup(kv[i].value);
	}
	return out;
}

void session_request_release(struct session_request *r)
{
	if (r == NULL)
		return;
	free(r->image);
	for (size_t i = 0; i < r->n_allow; i++)
		free(r->allow[i]);
	free(r->allow);
	session_kv_free(r->env, r->n_env);
	session_kv_free(r->metadata, r->n_metadata);
	free(r->restore);
	free(r->workspace);
	session_persist_clear(&r->persist);
	memset(r, 0, sizeof(*r));
}

struct session *session_from_request(const struct session_request *r, const struct config *cfg,
				     const char *tenant, struct err **errp)
{
	struct session *s = xcalloc(1, sizeof(*s));
	s->tenant = xstrdup(tenant);
	s->state = SESSION_STARTING;
	s->idle_timeout_s = cfg->idle_timeout_s;
	s->max_lifetime_s = cfg->max_lifetime_s;
	const char *image = r && (r->set & SRQ_IMAGE) ? r->image : cfg->image;
	if (r && (r->set & SRQ_IDLE_TIMEOUT)) {
		if (check_int("idle_timeout_s", r->idle_timeout_s, 1, cfg->max_idle_timeout_s,
			      errp) < 0)
			goto fail;
		s->idle_timeout_s = r->idle_timeout_s;
	}
	if (r && (r->set & SRQ_MAX_LIFETIME)) {
		if (check_int("max_lifetime_s", r->max_lifetime_s, 1, cfg->max_lifetime_s, errp) <
		    0)
			goto fail;
		s->max_lifetime_s = r->max_lifetime_s;
	}
	s->gvisor = r && (r->set & SRQ_RUNTIME) && r->gvisor;
	char *tag = config_image_tag(cfg, image);
	if (tag == NULL) {
		err_set(errp, ERR_BAD_REQUEST, "image: unknown image '%.64s'", image);
		goto fail;
	}
	free(tag);
	s->image = xstrdup(image);
	if (take_limits(r, cfg, &s->limits, errp) < 0)
		goto fail;
	if (r && (r->set & SRQ_ALLOW)) {
		if (session_check_allow(r->allow, r->n_allow, errp) < 0)
			goto fail;
		s->allow = xcalloc(r->n_allow, sizeof(char *));
		for (size_t i = 0; i < r->n_allow; i++)
			s->allow[s->n_allow++] = xstrdup(r->allow[i]);
	}
	if (r && (r->set & SRQ_ENV)) {
		if (check_kv("env", r->env, r->n_env, true, errp) < 0)
			goto fail;
		s->env = session_kv_dup(r->env, r->n_env);
		s->n_env = r->n_env;
	}
	if (r && (r->set & SRQ_METADATA)) {
		if (check_kv("metadata", r->metadata, r->n_metadata, false, errp) < 0)
			goto fail;
		s->metadata = session_kv_dup(r->metadata, r->n_metadata);
		s->n_metadata = r->n_metadata;
	}
	if (r && (r->set & SRQ_RESTORE) && (r->set & SRQ_WORKSPACE)) {
		err_set(errp, ERR_BAD_REQUEST,
			"restore and workspace: give one (a snapshot id, or a workspace's name)");
		goto fail;
	}
	if (r && (r->set & SRQ_WORKSPACE)) {
		if (!session_workspace_valid(r->workspace)) {
			err_set(errp, ERR_BAD_REQUEST,
				"workspace: '%.64s' is not a name of 1 to %d letters, digits, '.', "
				"'_' or '-' (not starting with '.')",
				r->workspace ? r->workspace : "", SESSION_WORKSPACE_MAX);
			goto fail;
		}
		s->workspace = xstrdup(r->workspace);
	}
	if (r && (r->set & SRQ_PERSIST)) {
		if (session_check_globs(r->persist.paths, r->persist.n_paths, errp) < 0)
			goto fail;
		session_persist_copy(&s->persist, &r->persist);
	}
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
