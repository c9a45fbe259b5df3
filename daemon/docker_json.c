/* docker_json.c: the engine's JSON, both ways: request bodies from the
 * driver's structs, answers into them. Pure, unit-tested and fuzzed: every
 * answer of the engine is read as outside input. */
#include "docker_json.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "xalloc.h"

static char *gen_text(yajl_gen g, size_t *len)
{
	size_t n;
	const char *t = jg_text(g, &n);
	char *out = xmalloc(n + 1);
	memcpy(out, t, n);
	out[n] = '\0';
	*len = n;
	return out;
}

static void str_array(yajl_gen g, const char *key, const char *const *v, size_t n)
{
	jg_str(g, key);
	jg_arr(g);
	for (size_t i = 0; i < n; i++)
		jg_str(g, v[i]);
	jg_arr_end(g);
}

static void kv_object(yajl_gen g, const char *key, const struct docker_kv *kv, size_t n)
{
	jg_str(g, key);
	jg_obj(g);
	for (size_t i = 0; i < n; i++)
		jg_kv_str(g, kv[i].key, kv[i].value);
	jg_obj_end(g);
}

char *docker_json_container_config(const struct docker_container_config *c, size_t *len)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "Image", c->image);
	if (c->user)
		jg_kv_str(g, "User", c->user);
	if (c->hostname)
		jg_kv_str(g, "Hostname", c->hostname);
	if (c->working_dir)
		jg_kv_str(g, "WorkingDir", c->working_dir);
	str_array(g, "Env", c->env, c->n_env);
	kv_object(g, "Labels", c->labels, c->n_labels);
	jg_str(g, "HostConfig");
	jg_obj(g);
	str_array(g, "Binds", c->binds, c->n_binds);
	jg_kv_str(g, "NetworkMode", c->network_mode ? c->network_mode : "none");
	jg_kv_bool(g, "ReadonlyRootfs", c->readonly_rootfs);
	str_array(g, "CapDrop", c->cap_drop, c->n_cap_drop);
	str_array(g, "SecurityOpt", c->security_opt, c->n_security_opt);
	kv_object(g, "Tmpfs", c->tmpfs, c->n_tmpfs);
	jg_kv_int(g, "Memory", c->memory);
	jg_kv_int(g, "MemorySwap", c->memory_swap);
	jg_kv_int(g, "NanoCpus", c->nano_cpus);
	jg_kv_int(g, "PidsLimit", c->pids_limit);
	jg_str(g, "Ulimits");
	jg_arr(g);
	for (size_t i = 0; i < c->n_ulimits; i++) {
		jg_obj(g);
		jg_kv_str(g, "Name", c->ulimits[i].name);
		jg_kv_int(g, "Soft", c->ulimits[i].soft);
		jg_kv_int(g, "Hard", c->ulimits[i].hard);
		jg_obj_end(g);
	}
	jg_arr_end(g);
	jg_kv_bool(g, "Init", c->init);
	if (c->ipc_mode)
		jg_kv_str(g, "IpcMode", c->ipc_mode);
	if (c->log_type) {
		jg_str(g, "LogConfig");
		jg_obj(g);
		jg_kv_str(g, "Type", c->log_type);
		kv_object(g, "Config", c->log_config, c->n_log_config);
		jg_obj_end(g);
	}
	jg_str(g, "RestartPolicy");
	jg_obj(g);
	jg_kv_str(g, "Name", c->restart_policy ? c->restart_policy : "no");
	jg_obj_end(g);
	if (c->runtime && c->runtime[0])
		jg_kv_str(g, "Runtime", c->runtime);
	jg_obj_end(g);
	jg_obj_end(g);
	return gen_text(g, len);
}

char *docker_json_limits(const struct docker_limits *l, size_t *len)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_int(g, "Memory", l->memory);
	jg_kv_int(g, "MemorySwap", l->memory_swap);
	jg_kv_int(g, "NanoCpus", l->nano_cpus);
	jg_kv_int(g, "PidsLimit", l->pids_limit);
	jg_obj_end(g);
	return gen_text(g, len);
}

char *docker_json_network_config(const struct docker_network_config *c, size_t *len)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "Name", c->name);
	jg_kv_str(g, "Driver", "bridge");
	jg_kv_bool(g, "Internal", c->internal);
	jg_kv_bool(g, "CheckDuplicate", true);
	jg_str(g, "Options");
	jg_obj(g);
	jg_kv_str(g, "com.docker.network.bridge.enable_icc", c->icc ? "true" : "false");
	if (c->bridge_name)
		jg_kv_str(g, "com.docker.network.bridge.name", c->bridge_name);
	jg_obj_end(g);
	kv_object(g, "Labels", c->labels, c->n_labels);
	jg_obj_end(g);
	return gen_text(g, len);
}

int docker_json_label_filter(const char *const *labels, size_t n, char *out, size_t size)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	str_array(g, "label", labels, n);
	jg_obj_end(g);
	size_t len;
	const char *filters = jg_text(g, &len);
	/* Percent-encoded for the query string. */
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)filters[i];
		bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			     (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
		if (o + (plain ? 1 : 3) >= size)
			return -1;
		if (plain)
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, size - o, "%%%02X", ch);
	}
	out[o] = '\0';
	return 0;
}

int docker_json_created_id(const char *body, size_t len, char *id, size_t size)
{
	struct err *e = NULL;
	yajl_val v = json_parse(body, len, &e);
	err_free(e);
	const char *cid = json_get_str(v, "Id");
	int rc = -1;
	if (cid && cid[0] && strlen(cid) < size && strlen(cid) <= DOCKER_ID_MAX) {
		snprintf(id, size, "%s", cid);
		rc = 0;
	}
	if (v)
		yajl_tree_free(v);
	return rc;
}

int docker_json_container_state(const char *body, size_t len, const char *network,
				struct docker_container_state *st)
{
	memset(st, 0, sizeof(*st));
	st->exit_code = -1;
	struct err *e = NULL;
	yajl_val v = json_parse(body, len, &e);
	err_free(e);
	yajl_val state = json_get(v, "State");
	if (state == NULL || !YAJL_IS_OBJECT(state)) {
		if (v)
			yajl_tree_free(v);
		return -1;
	}
	yajl_val running = json_get(state, "Running"), oom = json_get(state, "OOMKilled");
	st->running = running && YAJL_IS_TRUE(running);
	st->oom_killed = oom && YAJL_IS_TRUE(oom);
	json_get_int(state, "ExitCode", &st->exit_code);
	if (network) {
		yajl_val nets = json_get(json_get(v, "NetworkSettings"), "Networks");
		const char *ip = json_get_str(json_get(nets, network), "IPAddress");
		if (ip && strlen(ip) < sizeof(st->ip))
			snprintf(st->ip, sizeof(st->ip), "%s", ip);
	}
	yajl_tree_free(v);
	return 0;
}

struct docker_json_list {
	yajl_val tree;
	struct docker_container_summary *items;
	size_t n;
};

struct docker_json_list *docker_json_container_list(const char *body, size_t len)
{
	struct err *e = NULL;
	yajl_val v = json_parse(body, len, &e);
	err_free(e);
	if (v == NULL || !YAJL_IS_ARRAY(v)) {
		if (v)
			yajl_tree_free(v);
		return NULL;
	}
	struct docker_json_list *l = xcalloc(1, sizeof(*l));
	l->tree = v;
	l->items = xcalloc(v->u.array.len, sizeof(*l->items));
	for (size_t i = 0; i < v->u.array.len; i++) {
		yajl_val c = v->u.array.values[i];
		const char *id = json_get_str(c, "Id");
		if (id == NULL || id[0] == '\0' || strlen(id) > DOCKER_ID_MAX)
			continue; /* not a container we could name to the engine */
		struct docker_container_summary *s = &l->items[l->n++];
		s->id = id;
		s->state = json_get_str(c, "State");
		s->session = json_get_str(json_get(c, "Labels"), "ci.session");
	}
	return l;
}

const struct docker_container_summary *docker_json_list_items(const struct docker_json_list *l,
							      size_t *n)
{
	*n = l ? l->n : 0;
	return l ? l->items : NULL;
}

void docker_json_list_free(struct docker_json_list *l)
{
	if (l == NULL)
		return;
	yajl_tree_free(l->tree);
	free(l->items);
	free(l);
}

int docker_json_network_info(const char *body, size_t len, struct docker_network_info *info)
{
	memset(info, 0, sizeof(*info));
	struct err *e = NULL;
	yajl_val v = json_parse(body, len, &e);
	err_free(e);
	if (v == NULL || !YAJL_IS_OBJECT(v)) {
		if (v)
			yajl_tree_free(v);
		return -1;
	}
	yajl_val cfgs = json_get(json_get(v, "IPAM"), "Config");
	const char *gw = cfgs && YAJL_IS_ARRAY(cfgs) && cfgs->u.array.len
			     ? json_get_str(cfgs->u.array.values[0], "Gateway")
			     : NULL;
	if (gw && strlen(gw) < sizeof(info->gateway))
		snprintf(info->gateway, sizeof(info->gateway), "%s", gw);
	yajl_val internal = json_get(v, "Internal");
	info->internal = internal && YAJL_IS_TRUE(internal);
	yajl_val ctrs = json_get(v, "Containers");
	info->n_containers = ctrs && YAJL_IS_OBJECT(ctrs) ? ctrs->u.object.len : 0;
	yajl_tree_free(v);
	return 0;
}

char *docker_json_error_message(const char *body, size_t len)
{
	struct err *e = NULL;
	yajl_val v = json_parse(body, len, &e);
	err_free(e);
	const char *msg = json_get_str(v, "message");
	char *out = msg ? xstrndup(msg, 300) : NULL;
	if (v)
		yajl_tree_free(v);
	return out;
}

/* ---- images ---- */

struct docker_json_image {
	yajl_val tree;
	char *packages_text; /* a copy of ci.packages, cut in place */
	struct docker_package *packages;
	struct docker_image_info info;
};

/* A Debian package name: [a-z0-9][a-z0-9+.-]+ (policy 5.6.1), capped. */
static bool image_pkg_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n < 2 || n > 128 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '+' ||
		      s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

/* A Debian version: [A-Za-z0-9.+~:-], starting with a digit (policy 5.6.12). */
static bool image_pkg_version_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 128 || !(s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr(".+~:-", s[i])))
			return false;
	return true;
}

/* "NAME=VERSION,NAME=VERSION": cut text in place into im->packages. */
static void image_parse_packages(struct docker_json_image *im, const char *label)
{
	im->packages_text = xstrdup(label);
	size_t cap = 1;
	for (const char *p = label; *p; p++)
		cap += *p == ',';
	if (cap > DOCKER_IMAGE_MAX_PACKAGES)
		cap = DOCKER_IMAGE_MAX_PACKAGES;
	im->packages = xcalloc(cap, sizeof(*im->packages));
	size_t n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(im->packages_text, ",", &save); tok && n < cap;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (eq == NULL)
			continue;
		*eq = '\0';
		if (!image_pkg_name_ok(tok) || !image_pkg_version_ok(eq + 1))
			continue;
		im->packages[n].name = tok;
		im->packages[n].version = eq + 1;
		n++;
	}
	im->info.packages = im->packages;
	im->info.n_packages = n;
	im->info.has_packages = true;
}

struct docker_json_image *docker_json_image_info(const char *body, size_t len)
{
	struct err *e = NULL;
	yajl_val v = json_parse(body, len, &e);
	err_free(e);
	const char *id = json_get_str(v, "Id");
	if (v == NULL || !YAJL_IS_OBJECT(v) || id == NULL || id[0] == '\0' ||
	    strlen(id) > DOCKER_ID_MAX) {
		if (v)
			yajl_tree_free(v);
		return NULL;
	}
	struct docker_json_image *im = xcalloc(1, sizeof(*im));
	im->tree = v;
	im->info.id = id;
	im->info.created = json_get_str(v, "Created");
	if (!json_get_int(v, "Size", &im->info.size) || im->info.size < 0)
		im->info.size = -1;
	yajl_val labels = json_get(json_get(v, "Config"), "Labels");
	static const struct {
		const char *key;
		size_t offset;
	} wanted[] = {
	    {"ci.recipe", offsetof(struct docker_image_info, recipe)},
	    {"ci.image", offsetof(struct docker_image_info, profile)},
	    {"ci.protocol", offsetof(struct docker_image_info, protocol)},
	    {"ci.suite", offsetof(struct docker_image_info, suite)},
	    {"ci.debian", offsetof(struct docker_image_info, debian)},
	    {"ci.python", offsetof(struct docker_image_info, python)},
	};
	for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		const char *val = json_get_str(labels, wanted[i].key);
		/* A label is a short token; a long one is not build.sh's. */
		if (val && strlen(val) <= 256)
			*(const char **)((char *)&im->info + wanted[i].offset) = val;
	}
	const char *pk = json_get_str(labels, "ci.packages");
	if (pk)
		image_parse_packages(im, pk);
	return im;
}

const struct docker_image_info *docker_json_image_get(const struct docker_json_image *im)
{
	return im ? &im->info : NULL;
}

void docker_json_image_free(struct docker_json_image *im)
{
	if (im == NULL)
		return;
	yajl_tree_free(im->tree);
	free(im->packages_text);
	free(im->packages);
	free(im);
}

int docker_json_image_ref(const char *ref, char *out, size_t size)
{
	size_t o = 0;
	if (ref == NULL || ref[0] == '\0' || size == 0)
		return -1;
	for (const unsigned char *p = (const unsigned char *)ref; *p; p++) {
		bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9') || strchr("._/:@-", *p);
		if (o + (plain ? 1 : 3) >= size)
			return -1;
		if (plain)
			out[o++] = (char)*p;
		else
			o += (size_t)snprintf(out + o, size - o, "%%%02X", *p);
	}
	out[o] = '\0';
	return 0;
}
