/* network.h: the node's sandbox network for sessions with an allowlist.
 *
 * One internal Docker bridge per node and key prefix (no route out,
 * inter-container traffic off), the egress proxy listening on its gateway
 * address, and a host firewall chain that lets the bridge reach the proxy
 * port and nothing else on the host (not the API, not Redis, not a TCP
 * Docker socket). Set up once, on first use; the firewall chain is left in
 * place when the daemon stops, so the bridge stays shut while nobody serves. */
#ifndef CI_NETWORK_H
#define CI_NETWORK_H

#include <event2/event.h>

#include "config.h"
#include "docker.h"
#include "egress.h"
#include "err.h"

struct sandbox_net;

typedef void (*net_ready_cb)(const struct err *e, void *arg);

struct sandbox_net *net_new(struct event_base *base, const struct config *cfg,
			    struct docker *docker, struct egress *egress);
void net_free(struct sandbox_net *n);

/* Make sure the network, proxy and firewall are up; cb runs once, from the
 * loop, with NULL or the reason it failed. */
void net_ensure(struct sandbox_net *n, net_ready_cb cb, void *arg);

/* Valid once ready: the Docker network's name, and the proxy URL sandboxes use. */
const char *net_name(const struct sandbox_net *n);
const char *net_proxy_url(const struct sandbox_net *n);

/* The egress proxy behind the network (borrowed; NULL when n is NULL). */
struct egress *net_egress(const struct sandbox_net *n);

#endif
