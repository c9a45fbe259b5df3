/* network.h: the node's sandbox network for sessions with an allowlist.
 *
 * One internal Docker bridge per node and key prefix (no route out,
 * inter-container traffic off), the egress proxy listening on its gateway
 * address, and a host firewall chain that lets the bridge reach the proxy
 * port and nothing else on the host (not the API, not Redis, not a TCP
 * Docker socket). Set up once, on first use. While any container is on the
 * bridge the chain stays, even when the daemon stops, so the bridge stays
 * shut while nobody serves; once nothing uses them, net_collect removes both
 * (at exit, at start-up, and through ci-ctl gc). */
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

/* One caller waiting for the network. */
struct net_waiter;

/* Make sure the network, proxy and firewall are up; cb runs once, from the
 * loop, with NULL or the reason it failed, unless cancelled. cb may be NULL
 * (bring it up, tell nobody). */
struct net_waiter *net_ensure(struct sandbox_net *n, net_ready_cb cb, void *arg);

/* w's callback will not run (w must not have been called yet). NULL-safe. */
void net_cancel(struct sandbox_net *n, struct net_waiter *w);

/* Valid once ready: the Docker network's name, and the proxy URL sandboxes use. */
const char *net_name(const struct sandbox_net *n);
const char *net_proxy_url(const struct sandbox_net *n);

/* What net_collect found unused (and removed, when asked): the node's
 * network (no container attached), and its firewall chain. */
struct net_leftovers {
	bool network, chain;
	const char *network_name, *bridge, *chain_name; /* borrowed from the net */
};
typedef void (*net_collect_cb)(const struct err *e, const struct net_leftovers *found, void *arg);

/* Find this node's sandbox network and firewall chain when nothing uses
 * them; with remove, remove them (the proxy stops listening on the gateway;
 * the next net_ensure builds everything again). in_use says a session of ours
 * is on the network: then nothing is looked at. cb runs once, from the loop. */
void net_collect(struct sandbox_net *n, bool in_use, bool remove, net_collect_cb cb, void *arg);

/* The egress proxy behind the network (borrowed; NULL when n is NULL). */
struct egress *net_egress(const struct sandbox_net *n);

#endif
