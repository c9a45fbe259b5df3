/* api_packages.c: POST /v1/sessions/{id}/packages, a time-boxed package
 * install (install.h, manager_install.c): the body is read and checked
 * here, the window and pip belong to the manager. */
#include <string.h>

#include "api.h"
#include "install.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "xalloc.h"

/* {"pip": ["name==1.2", ...], "timeout_s": 120}: nothing else. */
static int parse_body(const char *body, size_t len, struct install_request *r, struct err **errp)
{
	memset(r, 0, sizeof(*r));
	AUTOJSON yajl_val v = json_parse(body, len, errp);
	if (v == NULL)
		return -1;
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "expected a JSON object, got %s",
			       json_type_name(v));
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		if (strcmp(k, "pip") != 0 && strcmp(k, "timeout_s") != 0)
			return err_set(errp, ERR_BAD_REQUEST,
				       "unknown field \"%.64s\" (expected pip, timeout_s)", k);
	}
	yajl_val pip = json_get(v, "pip");
	if (pip == NULL || !YAJL_IS_ARRAY(pip))
		return err_set(errp, ERR_BAD_REQUEST,
			       "pip: expected an array of requirements (\"name==1.2\")");
	if (pip->u.array.len == 0)
		return err_set(errp, ERR_BAD_REQUEST, "pip: at least one requirement is needed");
	if (pip->u.array.len > INSTALL_MAX_SPECS)
		return err_set(errp, ERR_BAD_REQUEST, "pip: more than %d requirements",
			       INSTALL_MAX_SPECS);
	r->specs = xcalloc(pip->u.array.len, sizeof(char *));
	for (size_t i = 0; i < pip->u.array.len; i++) {
		yajl_val e = pip->u.array.values[i];
		if (!YAJL_IS_STRING(e))
			return err_set(errp, ERR_BAD_REQUEST, "pip[%zu]: expected a string", i);
		if (install_check_spec(e->u.string, errp) < 0)
			return -1;
		r->specs[r->n_specs++] = xstrdup(e->u.string);
	}
	yajl_val t = json_get(v, "timeout_s");
	if (t) {
		if (!YAJL_IS_INTEGER(t) || YAJL_GET_INTEGER(t) < 1)
			return err_set(errp, ERR_BAD_REQUEST,
				       "timeout_s: expected a whole number of seconds >= 1");
		r->timeout_s = YAJL_GET_INTEGER(t);
	}
	return 0;
}

static void installed_cb(const struct install_result *r, const struct err *e, void *arg)
{
	struct call *c = arg;
	if (e) {
		api_fail_session(c, err_new(e->code, "%s", e->message));
		return;
	}
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "installed");
	jg_arr(g);
	for (size_t i = 0; i < r->n_pkgs; i++) {
		jg_obj(g);
		jg_kv_str(g, "name", r->pkgs[i].name);
		jg_kv_str(g, "version", r->pkgs[i].version);
		jg_obj_end(g);
	}
	jg_arr_end(g);
	if (r->pkgs_truncated)
		jg_kv_bool(g, "installed_truncated", true);
	jg_kv_str(g, "index", r->index_host);
	jg_kv_str(g, "site", INSTALL_SITE);
	jg_kv_int(g, "timeout_s", r->window_s);
	jg_kv_int(g, "window_ms", r->window_ms);
	jg_kv_int(g, "pip_ms", r->pip_ms);
	jg_kv_int(g, "egress_closed", (int64_t)r->closed);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

static void packages_body(struct call *c, const char *body, size_t len)
{
	struct err *e = NULL;
	struct install_request req;
	int rc = parse_body(body, len, &req, &e);
	if (rc == 0)
		rc = manager_install(c->api->mgr, c->id, c->tenant, &req, installed_cb, c, &e);
	install_request_release(&req);
	if (rc < 0)
		api_fail_session(c, e);
}

void api_packages_install(struct call *c)
{
	api_read_body(c, packages_body);
}
