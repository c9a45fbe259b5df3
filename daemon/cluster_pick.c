/* cluster_pick.c: the pure parts of the cluster (cluster.h): reading a
 * heartbeat (from Redis, so from outside: every field checked), choosing
 * the node a new session goes to, and the URL this node advertises. */
#include "cluster.h"

#include <stdio.h>
#include <string.h>

#include "json.h"

/* A heartbeat is a few hundred bytes; more is not one. */
#define HEARTBEAT_MAX 4096

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > CLUSTER_NODE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

static bool url_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0)
		return true;
	if (n > CLUSTER_URL_MAX ||
	    (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

static bool num(yajl_val v, const char *key, int64_t *out)
{
	return json_get_int(v, key, out) && *out >= 0;
}

int cluster_node_parse(const char *json, size_t len, struct cluster_node *n, struct err **errp)
{
	memset(n, 0, sizeof(*n));
	if (len > HEARTBEAT_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "heartbeat of %zu bytes (at most %d)", len,
			       HEARTBEAT_MAX);
	AUTOJSON yajl_val v = json_parse(json, len, errp);
	if (v == NULL)
		return -1;
	const char *name = json_get_str(v, "node"), *url = json_get_str(v, "url");
	const char *version = json_get_str(v, "version");
	yajl_val draining = json_get(v, "draining");
	if (name == NULL || !name_ok(name))
		return err_set(errp, ERR_BAD_REQUEST, "heartbeat: node missing or malformed");
	if (url == NULL || !url_ok(url))
		return err_set(errp, ERR_BAD_REQUEST, "heartbeat of %s: url malformed", name);
	if (!num(v, "sessions", &n->sessions) || !num(v, "max_sessions", &n->max_sessions) ||
	    !num(v, "room", &n->room) || !num(v, "pool_ready", &n->pool_ready) ||
	    !num(v, "started_ms", &n->started_ms) || !num(v, "heartbeat_ms", &n->heartbeat_ms) ||
	    draining == NULL || !(YAJL_IS_TRUE(draining) || YAJL_IS_FALSE(draining)))
		return err_set(errp, ERR_BAD_REQUEST,
			       "heartbeat of %s: a field is missing or "
			       "not of its type",
			       name);
	snprintf(n->name, sizeof(n->name), "%s", name);
	snprintf(n->url, sizeof(n->url), "%s", url);
	snprintf(n->version, sizeof(n->version), "%s", version ? version : "");
	n->draining = YAJL_IS_TRUE(draining);
	n->live = true;
	return 0;
}

int cluster_pick(const struct cluster_node *nodes, size_t n, const char *self, size_t *asked)
{
	int best = -1;
	*asked = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cluster_node *c = &nodes[i];
		if (!c->live || strcmp(c->name, self) == 0)
			continue;
		++*asked;
		if (c->draining || c->url[0] == '\0' || c->room <= 0)
			continue;
		if (best < 0 || c->room > nodes[best].room ||
		    (c->room == nodes[best].room && strcmp(c->name, nodes[best].name) < 0))
			best = (int)i;
	}
	return best;
}

void cluster_advertise_url(const char *advertise, const char *listen, bool tls, char *out,
			   size_t size)
{
	if (advertise && advertise[0]) {
		snprintf(out, size, "%s", advertise);
		return;
	}
	out[0] = '\0';
	if (listen == NULL || strncmp(listen, "unix:", 5) == 0)
		return;
	const char *colon = strrchr(listen, ':');
	if (colon == NULL || colon == listen || colon[1] == '\0')
		return;
	size_t hl = (size_t)(colon - listen);
	/* A wildcard says nothing of where peers reach us. */
	static const char *const wild[] = {"0.0.0.0", "[::]", "::", "*", "[::0]"};
	for (size_t i = 0; i < sizeof(wild) / sizeof(wild[0]); i++)
		if (strlen(wild[i]) == hl && strncmp(listen, wild[i], hl) == 0)
			return;
	snprintf(out, size, "%s://%s", tls ? "https" : "http", listen);
}
