/* api_quota.c: GET/PUT /v1/admin/tenants/{tenant}/quota, GET
 * /v1/admin/tenants/{tenant}/usage and GET /v1/usage (the caller's own
 * tenant). The counting is store_quota.c's; admission is api_quota_gate.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "json.h"
#include "xalloc.h"

/* A route's flow: the tenant it is about, and what was read so far. */
struct quota_flow {
	struct api_quota_wait *w;
	struct call *c;
	char tenant[64];
	struct quota_override o;
	bool usage; /* the usage answer, after the override */
};

static void flow_free(void *arg)
{
	free(arg);
}

static struct quota_flow *flow_new(struct call *c, const char *tenant, bool usage)
{
	struct quota_flow *f = xcalloc(1, sizeof(*f));
	snprintf(f->tenant, sizeof(f->tenant), "%s", tenant);
	f->usage = usage;
	f->c = c;
	f->w = api_quota_wait_new(c, f, flow_free);
	return f;
}

/* The flow is over: what it read into *out, and c, the caller's to answer;
 * or, with e, c answered with it and NULL. */
static struct call *flow_end(struct quota_flow *f, const struct err *e, struct quota_flow *out)
{
	struct call *c = api_quota_wait_done(f->w);
	*out = *f;
	free(f);
	if (e) {
		api_reply(c, 0, NULL, e);
		return NULL;
	}
	return c;
}

/* "quota": the effective values (the flags read now, the override over
 * them). */
static void effective_json(yajl_gen g, const struct call *c, const struct quota_override *o)
{
	struct quota d, eff;
	quota_from_config(c->api->cfg, &d);
	quota_merge(&d, o, &eff);
	jg_str(g, "quota");
	quota_to_json(&eff, g);
}

static void reply_quota(struct call *c, const struct quota_flow *f)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "tenant", f->tenant);
	effective_json(g, c, &f->o);
	jg_str(g, "overrides");
	quota_override_to_json(&f->o, g);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

static void usage_done(const struct err *e, const struct store_quota_usage *u, void *arg)
{
	struct quota_flow copy;
	struct call *c = flow_end(arg, e, &copy);
	if (c == NULL)
		return;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "tenant", copy.tenant);
	jg_str(g, "usage");
	jg_obj(g);
	jg_kv_int(g, "sessions", u->sessions);
	jg_kv_int(g, "executions", u->executions);
	jg_kv_int(g, "memory_mb", u->memory_mb);
	jg_kv_int(g, "disk_mb", u->disk_mb);
	jg_str(g, "exec_seconds_last_hour");
	jg_double(g, (double)u->exec_ms_last_hour / 1000.0);
	jg_kv_int(g, "requests_last_second", u->requests_last_second);
	jg_obj_end(g);
	effective_json(g, c, &copy.o);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

static void override_read(const struct err *e, const struct quota_override *o, void *arg)
{
	struct quota_flow *f = arg, copy;
	if (e) {
		flow_end(f, e, &copy);
		return;
	}
	f->o = *o;
	struct call *c = f->c;
	api_quota_learn(c->api, f->tenant, o);
	if (f->usage) {
		api_quota_wait_set_op(f->w,
				      store_quota_usage(c->api->store, f->tenant, usage_done, f));
		return;
	}
	c = flow_end(f, NULL, &copy);
	reply_quota(c, &copy);
}

static void start_read(struct call *c, const char *tenant, bool usage)
{
	struct quota_flow *f = flow_new(c, tenant, usage);
	api_quota_wait_set_op(f->w, store_quota_get(c->api->store, tenant, override_read, f));
}

void api_quota_get(struct call *c)
{
	start_read(c, c->route_tenant, false);
}

void api_quota_usage(struct call *c)
{
	start_read(c, c->route_tenant, true);
}

void api_quota_usage_own(struct call *c)
{
	start_read(c, c->tenant, true);
}

static void put_done(const struct err *e, void *arg)
{
	struct quota_flow *f = arg, copy;
	api_audit(f->c, "admin_quota_set", api_audit_outcome(e), f->tenant);
	struct call *c = flow_end(f, e, &copy);
	if (c == NULL)
		return;
	api_quota_learn(c->api, copy.tenant, &copy.o);
	reply_quota(c, &copy);
}

static void put_body(struct call *c, const char *body, size_t len)
{
	struct err *e = NULL;
	struct quota_override o;
	if (quota_override_parse(body, len, &o, &e) < 0) {
		api_reply(c, 0, NULL, e);
		err_free(e);
		return;
	}
	struct quota_flow *f = flow_new(c, c->route_tenant, false);
	f->o = o;
	struct store_quota_op *op = NULL;
	if (store_quota_put(c->api->store, f->tenant, &o, put_done, f, &op, &e) < 0) {
		api_audit(c, "admin_quota_set", api_audit_outcome(e), f->tenant);
		struct quota_flow copy;
		flow_end(f, e, &copy);
		err_free(e);
		return;
	}
	api_quota_wait_set_op(f->w, op);
}

void api_quota_put(struct call *c)
{
	api_read_body(c, put_body);
}
