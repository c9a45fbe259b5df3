/* api_auth.c: who the caller is. With --admin-key-file, every call but the
 * probes carries "Authorization: Bearer <key>": the admin key (read from
 * the file at start, kept only as its SHA-256) for the admin routes, a
 * tenant's key (issued by POST /v1/admin/keys, stored hashed in Redis) for
 * everything else. Without the file, every caller is the tenant "default"
 * and may call everything (loopback only; config.c sees to that).
 *
 * A tenant key is looked up in Redis by its id, and what Redis said is
 * cached for KEYS_CACHE_TTL_MS (apikey_cache.h): a revocation made through
 * any daemon on the same Redis is honoured by this one within that time. */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apikey.h"
#include "apikey_cache.h"
#include "clock.h"
#include "digest.h"
#include "log.h"
#include "store.h"
#include "xalloc.h"

/* Short enough that a revoked key stops working everywhere within a
 * second; long enough that a busy client costs Redis a lookup per half
 * second, not one per request. */
#define KEYS_CACHE_TTL_MS 500
#define KEYS_CACHE_MAX 4096
#define ADMIN_KEY_MIN 32
#define ADMIN_KEY_MAX 256
#define ADMIN_KEY_FILE_MAX 4096

static const char *const DEFAULT_TENANT = "default";

/* A call waiting for Redis to say what its key is. */
struct auth_wait {
	struct call *c;
	enum api_auth need;
	api_auth_done_fn done;
	char sha256[DIGEST_HEX_LEN + 1]; /* of the secret the caller sent */
	LIST_ENTRY(auth_wait) link;
};

/* One lookup of a key id in Redis, and every call waiting for it: when the
 * cache entry of a busy key ends, its many concurrent requests cost one
 * lookup, not one each. */
struct key_lookup {
	struct api_keyring *ring;
	char id[APIKEY_ID_LEN + 1];
	struct store_key_op *op;
	LIST_HEAD(, auth_wait) waits;
	LIST_ENTRY(key_lookup) link;
};

struct api_keyring {
	struct http_api *api;
	char admin_sha256[DIGEST_HEX_LEN + 1];
	struct apikey_cache *cache;
	LIST_HEAD(, key_lookup) lookups; /* in flight; few at a time */
};

/* ---- the admin key file ---- */

static int read_admin_key(const char *path, char sha256[DIGEST_HEX_LEN + 1], struct err **errp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return err_set(errp, ERR_BAD_REQUEST, "admin-key-file %s: %s", path,
			       strerror(errno));
	struct stat sb = {0};
	char buf[ADMIN_KEY_FILE_MAX + 1];
	ssize_t n = -1;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
		n = read(fd, buf, sizeof(buf));
	int saved = errno;
	close(fd);
	if (n < 0)
		return err_set(errp, ERR_BAD_REQUEST, "admin-key-file %s: %s", path,
			       S_ISREG(sb.st_mode) ? strerror(saved) : "not a regular file");
	if (n > ADMIN_KEY_FILE_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "admin-key-file %s: larger than %d bytes",
			       path, ADMIN_KEY_FILE_MAX);
	if (sb.st_mode & 077)
		log_warn("admin-key-file %s can be read by its group or others (mode %03o); "
			 "chmod 600 it",
			 path, (unsigned)(sb.st_mode & 0777));
	/* Trim whitespace both ends (an editor's final newline). */
	size_t b = 0, e = (size_t)n;
	while (b < e && (buf[b] == ' ' || buf[b] == '\t' || buf[b] == '\n' || buf[b] == '\r'))
		b++;
	while (e > b && (buf[e - 1] == ' ' || buf[e - 1] == '\t' || buf[e - 1] == '\n' ||
			 buf[e - 1] == '\r'))
		e--;
	int rc = 0;
	bool nul = memchr(buf + b, '\0', e - b) != NULL;
	buf[e] = '\0';
	if (e - b < ADMIN_KEY_MIN)
		rc = err_set(errp, ERR_BAD_REQUEST,
			     "admin-key-file %s: the key is %zu bytes; it must be at least %d "
			     "(e.g. head -c 32 /dev/urandom | base64)",
			     path, e - b, ADMIN_KEY_MIN);
	else if (e - b > ADMIN_KEY_MAX)
		rc = err_set(errp, ERR_BAD_REQUEST,
			     "admin-key-file %s: the key is longer than %d bytes", path,
			     ADMIN_KEY_MAX);
	else if (nul || strpbrk(buf + b, " \t\n\r") != NULL)
		rc =
		    err_set(errp, ERR_BAD_REQUEST,
			    "admin-key-file %s: the key must be one word (no spaces or NUL)", path);
	char id[APIKEY_ID_LEN + 1];
	const char *secret;
	if (rc == 0 && apikey_parse(buf + b, id, &secret) == 0)
		rc = err_set(errp, ERR_BAD_REQUEST,
			     "admin-key-file %s: the key has the shape of a tenant's key; choose "
			     "another",
			     path);
	if (rc == 0)
		digest_sha256_hex(buf + b, e - b, sha256);
	explicit_bzero(buf, sizeof(buf)); /* the admin key lives on as a hash only */
	return rc;
}

int api_auth_start(struct http_api *api, struct err **errp)
{
	const char *path = api->cfg->admin_key_file;
	if (path == NULL || path[0] == '\0')
		return 0;
	struct api_keyring *a = xcalloc(1, sizeof(*a));
	if (read_admin_key(path, a->admin_sha256, errp) < 0) {
		free(a);
		return -1;
	}
	a->api = api;
	a->cache = apikey_cache_new(KEYS_CACHE_MAX, KEYS_CACHE_TTL_MS);
	LIST_INIT(&a->lookups);
	api->auth = a;
	log_info("API keys: on (admin key from %s); key lookups cached %d ms", path,
		 KEYS_CACHE_TTL_MS);
	return 0;
}

static void refuse(struct call *c, enum err_code code, const char *msg)
{
	if (code == ERR_UNAUTHORIZED)
		http_req_add_header(c->req, "WWW-Authenticate", "Bearer");
	api_fail(c, code, "%s", msg);
}

void api_auth_stop(struct http_api *api)
{
	struct api_keyring *a = api->auth;
	if (a == NULL)
		return;
	/* Calls still waiting for Redis are answered now: the loop will not
	 * turn again for their lookups. */
	struct key_lookup *l;
	while ((l = LIST_FIRST(&a->lookups)) != NULL) {
		LIST_REMOVE(l, link);
		store_key_cancel(l->op);
		struct auth_wait *w;
		while ((w = LIST_FIRST(&l->waits)) != NULL) {
			LIST_REMOVE(w, link);
			api_fail(w->c, ERR_UNAVAILABLE, "the daemon is stopping");
			free(w);
		}
		free(l);
	}
	apikey_cache_free(a->cache);
	free(a);
	api->auth = NULL;
}

bool api_auth_enabled(const struct http_api *api)
{
	return api->auth != NULL;
}

void api_auth_forget(struct http_api *api, const char *id)
{
	if (api->auth)
		apikey_cache_drop(api->auth->cache, id);
}

/* ---- checking a call ---- */

static const char MSG_MISSING[] =
    "this call needs an API key: send the header Authorization: Bearer <key>";
static const char MSG_INVALID[] = "the API key is not valid (unknown, revoked or mistyped)";

/* The verdict on a tenant key once its entry is known: 1, or -1 answered. */
static int judge(struct call *c, enum api_auth need, const struct apikey_entry *k, const char *id,
		 const char *sha256)
{
	if (k == NULL || !k->found || !digest_equal(k->sha256, sha256, DIGEST_HEX_LEN)) {
		refuse(c, ERR_UNAUTHORIZED, MSG_INVALID);
		return -1;
	}
	if (need == API_AUTH_ADMIN) {
		refuse(c, ERR_FORBIDDEN, "this route needs the admin key, not a tenant's key");
		return -1;
	}
	snprintf(c->tenant_name, sizeof(c->tenant_name), "%s", k->tenant);
	c->tenant = c->tenant_name;
	snprintf(c->key_id, sizeof(c->key_id), "%s", id);
	c->admin = false;
	return 1;
}

static void key_looked_up(const struct err *e, const struct store_key *k, void *arg)
{
	struct key_lookup *l = arg;
	struct api_keyring *a = l->ring;
	LIST_REMOVE(l, link);
	int64_t now = clock_mono_ms();
	if (e == NULL)
		apikey_cache_put(a->cache, l->id, k != NULL, k ? k->tenant : NULL,
				 k ? k->sha256 : NULL, now);
	while (!LIST_EMPTY(&l->waits)) {
		struct auth_wait *w = LIST_FIRST(&l->waits);
		struct call *c = w->c;
		LIST_REMOVE(w, link);
		/* A client that left while we asked gets no handler run for it;
		 * the reply is then only what frees the request. */
		if (e)
			api_fail(c, ERR_UNAVAILABLE, "cannot check the API key: %s", e->message);
		else if (http_req_client_gone(c->req))
			api_fail(c, ERR_UNAVAILABLE, "the client has gone");
		else if (judge(c, w->need, apikey_cache_get(a->cache, l->id, now), l->id,
			       w->sha256) == 1) {
			/* The server moves a body only right after the request
			 * callback returned; this handler runs later, so the bytes
			 * already buffered must be moved once it has claimed them:
			 * a resume does that, from the loop. */
			http_req_pause_body(c->req);
			http_req_resume_body(c->req);
			w->done(c);
		}
		free(w);
	}
	free(l);
}

int api_auth_check(struct call *c, enum api_auth need, api_auth_done_fn done)
{
	struct api_keyring *a = c->api->auth;
	c->key_id[0] = '\0';
	if (a == NULL) {
		/* No keys: today's single tenant, who is also the operator. */
		c->tenant = DEFAULT_TENANT;
		c->admin = true;
		return 1;
	}
	c->tenant = "";
	c->admin = false;
	if (need == API_AUTH_NONE)
		return 1;
	char token[ADMIN_KEY_MAX + 1];
	const char *hdr = http_req_header(c->req, "Authorization");
	if (hdr == NULL) {
		refuse(c, ERR_UNAUTHORIZED, MSG_MISSING);
		return -1;
	}
	if (apikey_bearer(hdr, token, sizeof(token)) < 0) {
		refuse(c, ERR_UNAUTHORIZED, MSG_INVALID);
		return -1;
	}
	char sha[DIGEST_HEX_LEN + 1];
	char id[APIKEY_ID_LEN + 1];
	const char *secret;
	/* A tenant key's shape says it is not the admin key (api_auth_start
	 * refuses an admin key of that shape), so each call hashes once. */
	if (apikey_parse(token, id, &secret) < 0) {
		digest_sha256_hex(token, strlen(token), sha);
		if (!digest_equal(sha, a->admin_sha256, DIGEST_HEX_LEN)) {
			refuse(c, ERR_UNAUTHORIZED, MSG_INVALID);
			return -1;
		}
		if (need != API_AUTH_ADMIN) {
			refuse(c, ERR_FORBIDDEN,
			       "the admin key is not a tenant's key: use one from POST "
			       "/v1/admin/keys");
			return -1;
		}
		snprintf(c->key_id, sizeof(c->key_id), "admin");
		c->admin = true;
		return 1;
	}
	apikey_hash(secret, sha);
	const struct apikey_entry *k = apikey_cache_get(a->cache, id, clock_mono_ms());
	if (k)
		return judge(c, need, k, id, sha);
	if (!store_connected(c->api->store)) {
		api_fail(c, ERR_UNAVAILABLE, "cannot check the API key: redis is not reachable");
		return -1;
	}
	struct key_lookup *l;
	LIST_FOREACH (l, &a->lookups, link)
		if (strcmp(l->id, id) == 0)
			break;
	if (l == NULL) {
		l = xcalloc(1, sizeof(*l));
		l->ring = a;
		memcpy(l->id, id, sizeof(l->id));
		LIST_INIT(&l->waits);
		LIST_INSERT_HEAD(&a->lookups, l, link);
		l->op = store_key_get(c->api->store, id, key_looked_up, l);
	}
	struct auth_wait *w = xcalloc(1, sizeof(*w));
	w->c = c;
	w->need = need;
	w->done = done;
	memcpy(w->sha256, sha, sizeof(w->sha256));
	/* The body is not read meanwhile: the server buffers at most 64 KiB
	 * of it (its read watermark while a request is being handled) and
	 * still sees the client hang up. */
	LIST_INSERT_HEAD(&l->waits, w, link);
	return 0;
}
