/* docker_api.c: the driver's typed calls: engine paths and answers for
 * containers and networks, over docker.c's transport. */
#include <stdio.h>
#include <string.h>

#include "docker.h"
#include "docker_internal.h"
#include "docker_json.h"
#include "xalloc.h"

/* docker_internal.h says what this is. */
struct err *docker_error(const struct docker_response *resp, const char *what)
{
	if (resp->status == 0)
		return err_new(ERR_UNAVAILABLE, "%s: docker: %s", what, resp->error);
	AUTOFREE char *msg = docker_json_error_message(resp->body, resp->len);
	enum err_code code = resp->status == 404   ? ERR_NOT_FOUND
			     : resp->status >= 500 ? ERR_UNAVAILABLE
						   : ERR_INTERNAL;
	return err_new(code, "%s: docker: %ld %.300s", what, resp->status,
		       msg ? msg : "(no message)");
}

/* One typed call in flight: the caller's callback and what the answer needs. */
struct call_ctx {
	struct docker *d;
	const char *what; /* "create container": the errors' context */
	union {
		docker_done_cb done;
		docker_created_cb created;
		docker_inspect_cb inspect;
		docker_list_cb list;
		docker_network_cb network;
		docker_image_cb image;
	} cb;
	void *arg;
	char *network;           /* inspect: the network whose address is wanted */
	long ok_status, also_ok; /* statuses that are success */
};

static void ctx_free(void *p)
{
	struct call_ctx *c = p;
	free(c->network);
	free(c);
}

static struct call_ctx *ctx_new(struct docker *d, const char *what, void *arg, long ok,
				long also_ok)
{
	struct call_ctx *c = xcalloc(1, sizeof(*c));
	c->d = d;
	c->what = what;
	c->arg = arg;
	c->ok_status = ok;
	c->also_ok = also_ok;
	return c;
}

/* The result of resp for ctx: success, or an error the caller frees. */
static struct err *result_error(const struct call_ctx *c, const struct docker_response *resp)
{
	if (resp->status != 0 && (resp->status == c->ok_status || resp->status == c->also_ok))
		return NULL;
	return docker_error(resp, c->what);
}

static void done_response(const struct docker_response *resp, bool cancelled, void *p)
{
	struct call_ctx *c = p;
	if (cancelled || c->cb.done == NULL)
		return;
	struct err *e = result_error(c, resp);
	struct docker_result r = {.error = e, .status = resp->status};
	c->cb.done(&r, c->arg);
	err_free(e);
}

static struct docker_call *simple_call(struct docker *d, const char *method, const char *path,
				       const char *body, size_t blen, const char *what, long ok,
				       long also_ok, docker_done_cb cb, void *arg)
{
	struct call_ctx *c = ctx_new(d, what, arg, ok, also_ok);
	c->cb.done = cb;
	return docker_call_start(d, method, path, body, blen, done_response, c, ctx_free);
}

/* ---- containers ---- */

static void created_response(const struct docker_response *resp, bool cancelled, void *p)
{
	struct call_ctx *c = p;
	char id[DOCKER_ID_MAX + 1] = "";
	struct err *e = result_error(c, resp);
	if (e == NULL && docker_json_created_id(resp->body, resp->len, id, sizeof(id)) < 0)
		e = err_new(ERR_INTERNAL, "%s: no Id in Docker's answer", c->what);
	if (cancelled) {
		/* Nobody wants it any more: it must not outlive the request. */
		if (e == NULL)
			docker_container_remove(c->d, id, NULL, NULL);
		err_free(e);
		return;
	}
	struct docker_result r = {.error = e, .status = resp->status};
	c->cb.created(&r, e ? NULL : id, c->arg);
	err_free(e);
}

struct docker_call *docker_container_create(struct docker *d, const char *name,
					    const struct docker_container_config *cfg,
					    docker_created_cb cb, void *arg)
{
	size_t len;
	AUTOFREE char *body = docker_json_container_config(cfg, &len);
	char path[256];
	snprintf(path, sizeof(path), "/containers/create?name=%s", name);
	struct call_ctx *c = ctx_new(d, "create container", arg, 201, 201);
	c->cb.created = cb;
	return docker_call_start(d, "POST", path, body, len, created_response, c, ctx_free);
}

struct docker_call *docker_container_start(struct docker *d, const char *id, docker_done_cb cb,
					   void *arg)
{
	char path[256];
	snprintf(path, sizeof(path), "/containers/%s/start", id);
	/* 304: it was running already. */
	return simple_call(d, "POST", path, NULL, 0, "start container", 204, 304, cb, arg);
}

static void inspect_response(const struct docker_response *resp, bool cancelled, void *p)
{
	struct call_ctx *c = p;
	if (cancelled)
		return;
	struct docker_container_state st;
	struct err *e = result_error(c, resp);
	if (e == NULL && docker_json_container_state(resp->body, resp->len, c->network, &st) < 0)
		e = err_new(ERR_INTERNAL, "%s: an answer without a State", c->what);
	struct docker_result r = {.error = e, .status = resp->status};
	c->cb.inspect(&r, e ? NULL : &st, c->arg);
	err_free(e);
}

struct docker_call *docker_container_inspect(struct docker *d, const char *id, const char *network,
					     docker_inspect_cb cb, void *arg)
{
	char path[256];
	snprintf(path, sizeof(path), "/containers/%s/json", id);
	struct call_ctx *c = ctx_new(d, "inspect container", arg, 200, 200);
	c->cb.inspect = cb;
	c->network = network ? xstrdup(network) : NULL;
	return docker_call_start(d, "GET", path, NULL, 0, inspect_response, c, ctx_free);
}

struct docker_call *docker_container_update(struct docker *d, const char *id,
					    const struct docker_limits *lim, docker_done_cb cb,
					    void *arg)
{
	size_t len;
	AUTOFREE char *body = docker_json_limits(lim, &len);
	char path[256];
	snprintf(path, sizeof(path), "/containers/%s/update", id);
	return simple_call(d, "POST", path, body, len, "apply limits", 200, 200, cb, arg);
}

struct docker_call *docker_container_remove(struct docker *d, const char *id, docker_done_cb cb,
					    void *arg)
{
	char path[256];
	snprintf(path, sizeof(path), "/containers/%s?force=true&v=true", id);
	return simple_call(d, "DELETE", path, NULL, 0, "remove container", 204, 404, cb, arg);
}

static void list_response(const struct docker_response *resp, bool cancelled, void *p)
{
	struct call_ctx *c = p;
	if (cancelled)
		return;
	struct err *e = result_error(c, resp);
	struct docker_json_list *l = NULL;
	if (e == NULL && (l = docker_json_container_list(resp->body, resp->len)) == NULL)
		e = err_new(ERR_UNAVAILABLE, "docker: bad container list");
	size_t n = 0;
	const struct docker_container_summary *items = docker_json_list_items(l, &n);
	struct docker_result r = {.error = e, .status = resp->status};
	c->cb.list(&r, items, n, c->arg);
	docker_json_list_free(l);
	err_free(e);
}

struct docker_call *docker_container_list(struct docker *d, const char *const *labels,
					  size_t n_labels, docker_list_cb cb, void *arg)
{
	char filters[1536], path[2048];
	if (docker_json_label_filter(labels, n_labels, filters, sizeof(filters)) < 0)
		filters[0] = '\0'; /* labels are ours and short; cannot happen */
	snprintf(path, sizeof(path), "/containers/json?all=true&filters=%s", filters);
	struct call_ctx *c = ctx_new(d, "list containers", arg, 200, 200);
	c->cb.list = cb;
	return docker_call_start(d, "GET", path, NULL, 0, list_response, c, ctx_free);
}

/* ---- networks ---- */

struct docker_call *docker_network_create(struct docker *d, const struct docker_network_config *cfg,
					  docker_done_cb cb, void *arg)
{
	size_t len;
	AUTOFREE char *body = docker_json_network_config(cfg, &len);
	return simple_call(d, "POST", "/networks/create", body, len, "create network", 201, 201, cb,
			   arg);
}

static void network_response(const struct docker_response *resp, bool cancelled, void *p)
{
	struct call_ctx *c = p;
	if (cancelled)
		return;
	struct docker_network_info info;
	struct err *e = result_error(c, resp);
	if (e == NULL && docker_json_network_info(resp->body, resp->len, &info) < 0)
		e = err_new(ERR_INTERNAL, "%s: a malformed answer", c->what);
	struct docker_result r = {.error = e, .status = resp->status};
	c->cb.network(&r, e ? NULL : &info, c->arg);
	err_free(e);
}

struct docker_call *docker_network_inspect(struct docker *d, const char *name, docker_network_cb cb,
					   void *arg)
{
	char path[256];
	snprintf(path, sizeof(path), "/networks/%s", name);
	struct call_ctx *c = ctx_new(d, "inspect network", arg, 200, 200);
	c->cb.network = cb;
	return docker_call_start(d, "GET", path, NULL, 0, network_response, c, ctx_free);
}

struct docker_call *docker_network_remove(struct docker *d, const char *name, docker_done_cb cb,
					  void *arg)
{
	char path[256];
	snprintf(path, sizeof(path), "/networks/%s", name);
	return simple_call(d, "DELETE", path, NULL, 0, "remove network", 204, 404, cb, arg);
}

/* ---- images ---- */

static void image_response(const struct docker_response *resp, bool cancelled, void *p)
{
	struct call_ctx *c = p;
	if (cancelled)
		return;
	struct err *e = result_error(c, resp);
	struct docker_json_image *im = NULL;
	if (e == NULL && (im = docker_json_image_info(resp->body, resp->len)) == NULL)
		e = err_new(ERR_UNAVAILABLE, "%s: a malformed answer", c->what);
	struct docker_result r = {.error = e, .status = resp->status};
	c->cb.image(&r, docker_json_image_get(im), c->arg);
	docker_json_image_free(im);
	err_free(e);
}

struct docker_call *docker_image_inspect(struct docker *d, const char *ref, docker_image_cb cb,
					 void *arg)
{
	char enc[768], path[1024];
	/* An empty or huge reference: the engine answers it (404 or 400). */
	if (docker_json_image_ref(ref, enc, sizeof(enc)) < 0)
		snprintf(enc, sizeof(enc), "%%00");
	snprintf(path, sizeof(path), "/images/%s/json", enc);
	struct call_ctx *c = ctx_new(d, "inspect image", arg, 200, 200);
	c->cb.image = cb;
	return docker_call_start(d, "GET", path, NULL, 0, image_response, c, ctx_free);
}
