/* api_keys.c: /v1/admin/keys: issuing, listing and revoking tenants' API
 * keys (admin key only; the table says so). The key itself is shown once,
 * in the answer to its creation; Redis keeps the SHA-256 of its secret.
 *
 * The body is parsed here rather than in api_requests.c: it is two
 * members. A "quota" is the tenant's, written first (as PUT
 * /v1/admin/tenants/{tenant}/quota would), then the key. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apikey.h"
#include "json.h"
#include "log.h"
#include "quota.h"
#include "store.h"
#include "xalloc.h"

static bool keys_on(struct call *c)
{
	if (api_auth_enabled(c->api))
		return true;
	api_fail(c, ERR_BAD_REQUEST,
		 "API keys are off: start the daemon with --admin-key-file to use them");
	return false;
}

/* ---- POST /v1/admin/keys ---- */

struct key_create {
	struct call *c;
	struct store_key k;
	char key[APIKEY_LEN + 1]; /* shown once, in the answer */
	bool has_quota;
	struct quota_override quota; /* the tenant's, written before the key */
	struct api_quota_wait *w;    /* while the quota is written */
};

static void key_create_free(void *arg)
{
	struct key_create *kc = arg;
	explicit_bzero(kc->key, sizeof(kc->key));
	free(kc);
}

static void key_stored(const struct err *e, void *arg)
{
	void *ctx;
	struct call *c = api_wait_done(arg, &ctx);
	struct key_create *kc = ctx;
	if (c == NULL) { /* the daemon stopped and answered the call */
		key_create_free(kc);
		return;
	}
	char target[128];
	snprintf(target, sizeof(target), "key %s of tenant %s", kc->k.id, kc->k.tenant);
	api_audit(c, "admin_key_create", api_audit_outcome(e), target);
	if (e) {
		api_reply(c, 0, NULL, e);
	} else {
		log_info("API key %s issued for tenant %s", kc->k.id, kc->k.tenant);
		AUTOGEN yajl_gen g = json_gen_new();
		jg_obj(g);
		jg_kv_str(g, "id", kc->k.id);
		jg_kv_str(g, "key", kc->key);
		jg_kv_str(g, "tenant", kc->k.tenant);
		jg_kv_time(g, "created", kc->k.created * 1000);
		jg_obj_end(g);
		api_reply(c, 201, g, NULL);
	}
	key_create_free(kc);
}

/* The tenant's quota is written (the same as PUT
 * /v1/admin/tenants/{tenant}/quota): now the key. A quota that could not be
 * written leaves no key behind. */
static void quota_written(const struct err *e, void *arg)
{
	struct key_create *kc = arg;
	struct call *c = api_quota_wait_done(kc->w);
	kc->w = NULL;
	api_audit(c, "admin_quota_set", api_audit_outcome(e), kc->k.tenant);
	if (e) {
		api_reply(c, 0, NULL, e);
		key_create_free(kc);
		return;
	}
	api_quota_learn(c->api, kc->k.tenant, &kc->quota);
	store_key_put(c->api->store, &kc->k, key_stored, api_wait_new(c, kc));
}

/* {"tenant": NAME, "quota": {...}?}: the tenant (borrowed from v) and the
 * quota (NULL when absent), or -1. */
static int parse_create(yajl_val v, const char **tenant, yajl_val *quota, struct err **errp)
{
	if (!YAJL_IS_OBJECT(v))
		return err_set(errp, ERR_BAD_REQUEST, "the body must be a JSON object");
	for (size_t i = 0; i < v->u.object.len; i++) {
		const char *k = v->u.object.keys[i];
		if (strcmp(k, "tenant") != 0 && strcmp(k, "quota") != 0)
			return err_set(errp, ERR_BAD_REQUEST, "unknown field '%.64s'", k);
	}
	yajl_val t = json_get(v, "tenant"), q = json_get(v, "quota");
	if (t == NULL || !YAJL_IS_STRING(t))
		return err_set(errp, ERR_BAD_REQUEST, "tenant: a string is required");
	if (!apikey_tenant_valid(YAJL_GET_STRING(t)))
		return err_set(errp, ERR_BAD_REQUEST,
			       "tenant: must be 1 to 63 of a-z, 0-9, '_' and '-', starting with a "
			       "letter or digit");
	if (q && YAJL_IS_NULL(q))
		q = NULL;
	if (q && !YAJL_IS_OBJECT(q))
		return err_set(errp, ERR_BAD_REQUEST, "quota: expected an object, got %s",
			       json_type_name(q));
	*tenant = YAJL_GET_STRING(t);
	*quota = q;
	return 0;
}

static void create_body(struct call *c, const char *body, size_t len)
{
	AUTOERR struct err *e = NULL;
	yajl_val v = json_parse(body, len, &e);
	const char *tenant = NULL;
	yajl_val quota = NULL;
	struct quota_override o;
	if (v == NULL || parse_create(v, &tenant, &quota, &e) < 0 ||
	    (quota && quota_override_from_json(quota, &o, &e) < 0)) {
		e->code = ERR_BAD_REQUEST;
		json_free(v);
		api_reply(c, 0, NULL, e);
		return;
	}
	struct key_create *kc = xcalloc(1, sizeof(*kc));
	kc->c = c;
	apikey_generate(kc->k.id, kc->key, kc->k.sha256);
	snprintf(kc->k.tenant, sizeof(kc->k.tenant), "%s", tenant);
	kc->k.created = (int64_t)time(NULL);
	kc->has_quota = quota != NULL;
	if (quota)
		kc->quota = o;
	json_free(v);
	if (!kc->has_quota) {
		store_key_put(c->api->store, &kc->k, key_stored, api_wait_new(c, kc));
		return;
	}
	/* Registered, so that a daemon stopping meanwhile frees kc and c. */
	kc->w = api_quota_wait_new(c, kc, key_create_free);
	struct store_quota_op *op = NULL;
	if (store_quota_put(c->api->store, kc->k.tenant, &kc->quota, quota_written, kc, &op, &e) <
	    0) {
		c = api_quota_wait_done(kc->w);
		api_audit(c, "admin_quota_set", api_audit_outcome(e), kc->k.tenant);
		api_reply(c, 0, NULL, e);
		key_create_free(kc);
		return;
	}
	api_quota_wait_set_op(kc->w, op);
}

void api_keys_create(struct call *c)
{
	if (keys_on(c))
		api_read_body(c, create_body);
}

/* ---- GET /v1/admin/keys[?tenant=T] ---- */

static void keys_listed(const struct err *e, const struct store_key *keys, size_t n, void *arg)
{
	struct call *c = api_wait_answered(arg, e);
	if (c == NULL)
		return;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "keys");
	jg_arr(g);
	for (size_t i = 0; i < n; i++) {
		jg_obj(g);
		jg_kv_str(g, "id", keys[i].id);
		jg_kv_str(g, "tenant", keys[i].tenant);
		jg_kv_time(g, "created", keys[i].created * 1000);
		jg_obj_end(g);
	}
	jg_arr_end(g);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

/* The value of tenant=... in the query (decoded; caller frees), NULL when
 * absent; -1 when it is there but not a tenant name. */
static int query_tenant(const char *q, char **out)
{
	*out = NULL;
	while (q && *q) {
		size_t n = strcspn(q, "&");
		if (n > 7 && strncmp(q, "tenant=", 7) == 0) {
			free(*out);
			*out = http_percent_decode(q + 7, n - 7);
			if (*out == NULL || !apikey_tenant_valid(*out)) {
				free(*out);
				*out = NULL;
				return -1;
			}
		} else if (n == 7 && strncmp(q, "tenant=", 7) == 0) {
			return -1;
		}
		q += n;
		q += *q == '&';
	}
	return 0;
}

void api_keys_list(struct call *c)
{
	if (!keys_on(c))
		return;
	char *tenant = NULL;
	if (query_tenant(http_req_query(c->req), &tenant) < 0) {
		api_fail(c, ERR_BAD_REQUEST, "tenant: not a tenant name");
		return;
	}
	store_key_list(c->api->store, tenant, keys_listed, api_wait_new(c, NULL));
	free(tenant);
}

/* ---- DELETE /v1/admin/keys/{key} ---- */

struct key_revoke {
	char id[APIKEY_ID_LEN + 1];
};

static void key_deleted(const struct err *e, bool existed, void *arg)
{
	void *ctx;
	struct call *c = api_wait_done(arg, &ctx);
	struct key_revoke *kr = ctx;
	if (c == NULL) {
		free(kr);
		return;
	}
	/* Whatever Redis answered, this daemon stops trusting what it cached;
	 * the others do within their cache's lifetime. */
	api_auth_forget(c->api, kr->id);
	char target[64];
	snprintf(target, sizeof(target), "key %s", kr->id);
	api_audit(c, "admin_key_revoke",
		  e         ? api_audit_outcome(e)
		  : existed ? "ok"
			    : "not_found",
		  target);
	if (e)
		api_reply(c, 0, NULL, e);
	else if (!existed)
		api_fail(c, ERR_NOT_FOUND, "no key %s", kr->id);
	else {
		log_info("API key %s revoked", kr->id);
		api_reply(c, 204, NULL, NULL);
	}
	free(kr);
}

void api_keys_revoke(struct call *c)
{
	if (!keys_on(c))
		return;
	if (!apikey_id_valid(c->key)) {
		api_fail(c, ERR_NOT_FOUND, "no key %.64s", c->key);
		return;
	}
	struct key_revoke *kr = xcalloc(1, sizeof(*kr));
	memcpy(kr->id, c->key, sizeof(kr->id)); /* valid: 16 digits and a NUL */
	store_key_del(c->api->store, kr->id, key_deleted, api_wait_new(c, kr));
}
