/* network.c: internal Docker network + egress proxy listener + host firewall. */
#include "network.h"

#include <stdio.h>
#include <string.h>

#include "defer.h"
#include "log.h"
#include "proc.h"
#include "xalloc.h"

enum net_state { NET_DOWN, NET_STARTING, NET_READY, NET_FAILED, NET_REMOVING };

struct net_waiter {
	net_ready_cb cb;
	void *arg;
	struct net_waiter *next;
};

struct collect_op;

struct sandbox_net {
	struct event_base *base;
	const struct config *cfg;
	struct docker *docker;
	struct egress *egress;
	enum net_state state;
	char name[64];   /* Docker network */
	char bridge[16]; /* host interface */
	char chain[32];  /* iptables chain */
	char gateway[64];
	char proxy_url[128];
	int port;
	int step; /* firewall command being run */
	struct net_waiter *waiters;
	struct collect_op *collecting; /* in progress; net_free frees them */
	struct event *retry_ok;
};

static unsigned fnv(const char *a, const char *b)
{
	unsigned h = 2166136261u;
	for (const char *p = a; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	for (const char *p = b; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

struct sandbox_net *net_new(struct event_base *base, const struct config *cfg,
			    struct docker *docker, struct egress *egress)
{
	struct sandbox_net *n = xcalloc(1, sizeof(*n));
	n->base = base;
	n->cfg = cfg;
	n->docker = docker;
	n->egress = egress;
	unsigned h = fnv(cfg->key_prefix, cfg->node);
	snprintf(n->name, sizeof(n->name), "ci-egress-%08x", h);
	snprintf(n->bridge, sizeof(n->bridge), "ci%08x", h);
	snprintf(n->chain, sizeof(n->chain), "CI-IN-%08x", h);
	return n;
}

static void collect_free_all(struct sandbox_net *n);

void net_free(struct sandbox_net *n)
{
	if (n == NULL)
		return;
	struct net_waiter *w = n->waiters;
	while (w) {
		struct net_waiter *next = w->next;
		free(w);
		w = next;
	}
	collect_free_all(n);
	free(n);
}

static void notify(struct sandbox_net *n, const char *error)
{
	struct net_waiter *w = n->waiters;
	n->waiters = NULL;
	struct err e = {.code = ERR_UNAVAILABLE, .message = (char *)error};
	while (w) {
		struct net_waiter *next = w->next;
		if (w->cb)
			w->cb(error ? &e : NULL, w->arg);
		free(w);
		w = next;
	}
}

static void fail(struct sandbox_net *n, const char *msg)
{
	log_warn("sandbox network %s: %s", n->name, msg);
	n->state = NET_DOWN; /* the next session with an allowlist tries again */
	notify(n, msg);
}

/* The firewall: a chain of our own, flushed and refilled on every start so a
 * previous daemon's port leaves nothing open, jumped to from INPUT for
 * packets arriving on the sandbox bridge. */
static void firewall_step(struct sandbox_net *n);

static void firewall_done(int status, void *arg)
{
	struct sandbox_net *n = arg;
	/* Step 0 creates the chain (fails harmlessly when it exists) and step 4
	 * checks for the jump (fails when it is missing, then step 5 adds it). */
	if (status != 0 && n->step != 0 && n->step != 4) {
		fail(n, "a host firewall (iptables) step failed: is iptables installed, and is the "
			"daemon root?");
		return;
	}
	if (n->step == 4 && status == 0)
		n->step++; /* the jump is already there */
	n->step++;
	firewall_step(n);
}

static void firewall_step(struct sandbox_net *n)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", n->port);
	char *cmds[][16] = {
	    {"iptables", "-w", "-N", n->chain, NULL},
	    {"iptables", "-w", "-F", n->chain, NULL},
	    {"iptables", "-w", "-A", n->chain, "-d", n->gateway, "-p", "tcp", "--dport", port, "-j",
	     "ACCEPT", NULL},
	    {"iptables", "-w", "-A", n->chain, "-j", "DROP", NULL},
	    {"iptables", "-w", "-C", "INPUT", "-i", n->bridge, "-j", n->chain, NULL},
	    {"iptables", "-w", "-I", "INPUT", "1", "-i", n->bridge, "-j", n->chain, NULL},
	};
	if (n->step >= (int)(sizeof(cmds) / sizeof(cmds[0]))) {
		n->state = NET_READY;
		snprintf(n->proxy_url, sizeof(n->proxy_url), "http://%s:%d", n->gateway, n->port);
		log_info("sandbox network %s ready: bridge %s, proxy %s, firewall chain %s",
			 n->name, n->bridge, n->proxy_url, n->chain);
		notify(n, NULL);
		return;
	}
	proc_run(n->base, cmds[n->step], firewall_done, n);
}

static void inspected(const struct docker_result *r, const struct docker_network_info *info,
		      void *arg)
{
	struct sandbox_net *n = arg;
	if (r->error) {
		fail(n, r->error->message);
		return;
	}
	if (info->gateway[0] == '\0' || !info->internal) {
		fail(n, "the network has no gateway or is not internal");
		return;
	}
	snprintf(n->gateway, sizeof(n->gateway), "%s", info->gateway);
	struct err *le = NULL;
	/* A fixed port: containers adopted after a restart keep the proxy URL
	 * they were started with, and the firewall opens the same port. The
	 * gateway differs per bridge, so daemons on one host do not collide. */
	if (egress_listen(n->egress, n->gateway, (int)n->cfg->egress_proxy_port, &n->port, &le) <
	    0) {
		fail(n, le->message);
		err_free(le);
		return;
	}
	n->step = 0;
	firewall_step(n);
}

static void created(const struct docker_result *r, void *arg)
{
	struct sandbox_net *n = arg;
	if (r->error && r->status != 409) { /* 409: it is there already */
		fail(n, r->error->message);
		return;
	}
	docker_network_inspect(n->docker, n->name, inspected, n);
}

static void ready_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sandbox_net *n = arg;
	if (n->state == NET_READY)
		notify(n, NULL);
}

struct net_waiter *net_ensure(struct sandbox_net *n, net_ready_cb cb, void *arg)
{
	struct net_waiter *w = xcalloc(1, sizeof(*w));
	w->cb = cb;
	w->arg = arg;
	w->next = n->waiters;
	n->waiters = w;
	if (n->state == NET_READY) {
		defer_call(n->base, ready_deferred, n);
		return w;
	}
	if (n->state == NET_STARTING || n->state == NET_REMOVING)
		return w; /* collect_finish starts it again for the waiters */
	n->state = NET_STARTING;
	const struct docker_kv labels[] = {
	    {"ci.managed", "true"}, {"ci.node", n->cfg->node}, {"ci.prefix", n->cfg->key_prefix}};
	struct docker_network_config nc = {.name = n->name,
					   .bridge_name = n->bridge,
					   .internal = true,
					   .icc = false,
					   .labels = labels,
					   .n_labels = 3};
	docker_network_create(n->docker, &nc, created, n);
	return w;
}

void net_cancel(struct sandbox_net *n, struct net_waiter *w)
{
	(void)n;
	if (w)
		w->cb = NULL; /* freed when the waiters are told */
}

const char *net_name(const struct sandbox_net *n)
{
	return n->name;
}

const char *net_proxy_url(const struct sandbox_net *n)
{
	return n->proxy_url;
}

struct egress *net_egress(const struct sandbox_net *n)
{
	return n ? n->egress : NULL;
}

/* ---- leftovers ---- */

struct collect_op {
	struct sandbox_net *n;
	struct collect_op *next; /* in n->collecting, until it ends */
	bool remove;
	net_collect_cb cb;
	void *arg;
	struct net_leftovers found;
	int step; /* removal command being run */
};

/* Collections cut short by the daemon's exit: nobody waits for them. */
static void collect_free_all(struct sandbox_net *n)
{
	while (n->collecting) {
		struct collect_op *op = n->collecting;
		n->collecting = op->next;
		free(op);
	}
}

static void collect_finish(struct collect_op *op, const struct err *e)
{
	struct sandbox_net *n = op->n;
	for (struct collect_op **pp = &n->collecting; *pp; pp = &(*pp)->next)
		if (*pp == op) {
			*pp = op->next;
			break;
		}
	if (n->state == NET_REMOVING) {
		n->state = NET_DOWN;
		n->gateway[0] = n->proxy_url[0] = '\0';
		if (n->waiters) {
			/* A networked create came while we removed: build it again. */
			struct net_waiter *w = n->waiters;
			n->waiters = NULL;
			while (w) {
				struct net_waiter *next = w->next;
				net_ensure(n, w->cb, w->arg);
				free(w);
				w = next;
			}
		}
	}
	op->cb(e, &op->found, op->arg);
	free(op);
}

static void collect_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	collect_finish(arg, NULL);
}

static void collect_later(struct collect_op *op)
{
	defer_call(op->n->base, collect_deferred, op);
}

/* The chain goes last: the jump from INPUT (may be gone already), its rules,
 * the chain itself. Failures are fine: what is not there is not a leftover. */
static void collect_chain_step(struct collect_op *op);

static void collect_chain_done(int status, void *arg)
{
	(void)status;
	struct collect_op *op = arg;
	op->step++;
	collect_chain_step(op);
}

static void collect_chain_step(struct collect_op *op)
{
	struct sandbox_net *n = op->n;
	char *cmds[][12] = {
	    {"iptables", "-w", "-D", "INPUT", "-i", n->bridge, "-j", n->chain, NULL},
	    {"iptables", "-w", "-F", n->chain, NULL},
	    {"iptables", "-w", "-X", n->chain, NULL},
	};
	if (!op->found.chain || op->step >= (int)(sizeof(cmds) / sizeof(cmds[0]))) {
		if (op->found.network || op->found.chain)
			log_info("gc: removed sandbox network %s%s%s", n->name,
				 op->found.chain ? " and firewall chain " : "",
				 op->found.chain ? n->chain : "");
		collect_finish(op, NULL);
		return;
	}
	proc_run(n->base, cmds[op->step], collect_chain_done, op);
}

static void collect_network_removed(const struct docker_result *r, void *arg)
{
	struct collect_op *op = arg;
	if (r->error) {
		/* A container joined meanwhile (403, active endpoints): in use. */
		log_info("gc: sandbox network %s stays: %s", op->n->name, r->error->message);
		op->found.network = op->found.chain = false;
		collect_finish(op, NULL);
		return;
	}
	op->step = 0;
	collect_chain_step(op);
}

static void collect_remove(struct collect_op *op)
{
	struct sandbox_net *n = op->n;
	n->state = NET_REMOVING;
	if (n->gateway[0])
		egress_unlisten(n->egress, n->gateway);
	if (op->found.network) {
		docker_network_remove(n->docker, n->name, collect_network_removed, op);
		return;
	}
	op->step = 0;
	collect_chain_step(op);
}

static void collect_chain_listed(int status, void *arg)
{
	struct collect_op *op = arg;
	op->found.chain = status == 0;
	if (op->remove && (op->found.network || op->found.chain)) {
		collect_remove(op);
		return;
	}
	collect_finish(op, NULL);
}

static void collect_inspected(const struct docker_result *r, const struct docker_network_info *info,
			      void *arg)
{
	struct collect_op *op = arg;
	struct sandbox_net *n = op->n;
	if (r->error && r->status != 404) {
		collect_finish(op, r->error);
		return;
	}
	if (r->error == NULL) {
		if (info->n_containers > 0) {
			collect_finish(op, NULL); /* someone is on it */
			return;
		}
		op->found.network = true;
	}
	/* Is the chain there (the network may be gone, the chain not)? */
	char *cmd[] = {"iptables", "-w", "-n", "-L", n->chain, NULL};
	proc_run(n->base, cmd, collect_chain_listed, op);
}

void net_collect(struct sandbox_net *n, bool in_use, bool remove, net_collect_cb cb, void *arg)
{
	struct collect_op *op = xcalloc(1, sizeof(*op));
	op->n = n;
	op->remove = remove;
	op->cb = cb;
	op->arg = arg;
	op->found.network_name = n->name;
	op->found.bridge = n->bridge;
	op->found.chain_name = n->chain;
	op->next = n->collecting;
	n->collecting = op;
	/* A network being set up, or removed already, is nobody's leftover. */
	if (in_use || n->state == NET_STARTING || n->state == NET_REMOVING) {
		collect_later(op);
		return;
	}
	docker_network_inspect(n->docker, n->name, collect_inspected, op);
}
