/* api_load.c: what one tenant may hold of this node's connections (issue
 * 28, finding 1): a budget of connections busy with its requests
 * (max-conns-per-tenant), and of GET /v1/events streams, per tenant and in
 * all (max-event-streams-per-tenant, max-event-streams).
 *
 * A connection serves one request at a time, so a tenant's busy
 * connections are its calls in flight here: counted from when the caller
 * is known (api.c's route_authorized) to api_call_free. A stream is a call
 * that lasts, so it is in both counts. Calls made inside the daemon (the
 * MCP tools' subcalls) ride on a request already counted. Without the
 * budget, one tenant holding every connection with silent streams or
 * trickled bodies answered everyone else 503. */
#include "api.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "xalloc.h"

/* A tenant that holds something here. */
struct api_load {
	char tenant[64];
	unsigned conns, streams;
	LIST_ENTRY(api_load) link;
};

static struct api_load *load_get(struct http_api *api, const char *tenant)
{
	struct api_load *l;
	LIST_FOREACH (l, &api->loads, link)
		if (strcmp(l->tenant, tenant) == 0)
			return l;
	l = xcalloc(1, sizeof(*l));
	snprintf(l->tenant, sizeof(l->tenant), "%s", tenant);
	LIST_INSERT_HEAD(&api->loads, l, link);
	return l;
}

static void load_maybe_free(struct api_load *l)
{
	if (l->conns == 0 && l->streams == 0) {
		LIST_REMOVE(l, link);
		free(l);
	}
}

/* A refusal: the connection closes after it, so that what it held is
 * free again at once. */
static void refuse(struct call *c, enum err_code code, const char *msg)
{
	log_info_limited("api: refused %s %s for tenant %s: %s", http_req_method(c->req),
			 http_req_path(c->req), c->tenant, msg);
	http_req_close_after(c->req);
	if (code == ERR_QUOTA_EXCEEDED)
		http_req_add_header(c->req, "Retry-After", "1");
	api_fail(c, code, "%s", msg);
}

bool api_load_admit(struct call *c)
{
	if (c->sink || c->load_counted)
		return true;
	struct api_load *l = load_get(c->api, c->tenant);
	if (l->conns >= (unsigned)c->api->cfg->max_conns_per_tenant) {
		char msg[192];
		snprintf(msg, sizeof(msg),
			 "tenant %.64s has %u requests in flight on this node, its most "
			 "(max-conns-per-tenant); retry when one ends",
			 c->tenant, l->conns);
		load_maybe_free(l);
		refuse(c, ERR_QUOTA_EXCEEDED, msg);
		return false;
	}
	l->conns++;
	c->load_counted = true;
	return true;
}

bool api_load_stream_begin(struct call *c)
{
	struct http_api *api = c->api;
	char msg[192];
	if (api->n_streams >= (unsigned)api->cfg->max_event_streams) {
		snprintf(msg, sizeof(msg),
			 "this node serves %u event streams, its most (max-event-streams); retry "
			 "shortly",
			 api->n_streams);
		refuse(c, ERR_UNAVAILABLE, msg);
		return false;
	}
	struct api_load *l = load_get(api, c->tenant);
	if (l->streams >= (unsigned)api->cfg->max_event_streams_per_tenant) {
		snprintf(msg, sizeof(msg),
			 "tenant %.64s has %u event streams open on this node, its most "
			 "(max-event-streams-per-tenant)",
			 c->tenant, l->streams);
		load_maybe_free(l);
		refuse(c, ERR_QUOTA_EXCEEDED, msg);
		return false;
	}
	l->streams++;
	api->n_streams++;
	c->stream_counted = true;
	return true;
}

void api_load_release(struct call *c)
{
	if (!c->load_counted && !c->stream_counted)
		return;
	struct api_load *l = load_get(c->api, c->tenant);
	if (c->load_counted && l->conns > 0)
		l->conns--;
	if (c->stream_counted) {
		if (l->streams > 0)
			l->streams--;
		c->api->n_streams--;
	}
	c->load_counted = c->stream_counted = false;
	load_maybe_free(l);
}

void api_load_free_all(struct http_api *api)
{
	while (!LIST_EMPTY(&api->loads)) {
		struct api_load *l = LIST_FIRST(&api->loads);
		LIST_REMOVE(l, link);
		free(l);
	}
}
