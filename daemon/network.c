/* network.c: internal Docker network + egress proxy listener + host firewall. */
#include "network.h"

#include <stdio.h>
#include <string.h>

#include "defer.h"
#include "json.h"
#include "log.h"
#include "proc.h"
#include "xalloc.h"

enum net_state { NET_DOWN, NET_STARTING, NET_READY, NET_FAILED, NET_REMOVING };

struct waiter {
	net_ready_cb cb;
	void *arg;
	struct waiter *next;
};

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
	struct waiter *waiters;
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

void net_free(struct sandbox_net *n)
{
	if (n == NULL)
		return;
	struct waiter *w = n->waiters;
	while (w) {
		struct waiter *next = w->next;
		free(w);
		w = next;
	}
	free(n);
}

static void notify(struct sandbox_net *n, const char *error)
{
	struct waiter *w = n->waiters;
	n->waiters = NULL;
	struct err e = {.code = ERR_UNAVAILABLE, .message = (char *)error};
	while (w) {
		struct waiter *next = w->next;
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

static void inspected(const struct docker_response *resp, void *arg)
{
	struct sandbox_net *n = arg;
	if (resp->status != 200) {
		struct err *e = docker_error(resp, "inspect network");
		fail(n, e->message);
		err_free(e);
		return;
	}
	struct err *e = NULL;
	yajl_val v = json_parse(resp->body, resp->len, &e);
	yajl_val cfgs = json_get(json_get(v, "IPAM"), "Config");
	const char *gw = cfgs && YAJL_IS_ARRAY(cfgs) && cfgs->u.array.len
			     ? json_get_str(cfgs->u.array.values[0], "Gateway")
			     : NULL;
	yajl_val internal = json_get(v, "Internal");
	if (gw == NULL || strlen(gw) >= sizeof(n->gateway) || !internal ||
	    !YAJL_IS_TRUE(internal)) {
		if (v)
			yajl_tree_free(v);
		err_free(e);
		fail(n, "the network has no gateway or is not internal");
		return;
	}
	snprintf(n->gateway, sizeof(n->gateway), "%s", gw);
	yajl_tree_free(v);
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

static void created(const struct docker_response *resp, void *arg)
{
	struct sandbox_net *n = arg;
	if (resp->status != 201 && resp->status != 409) {
		struct err *e = docker_error(resp, "create network");
		fail(n, e->message);
		err_free(e);
		return;
	}
	char path[128];
	snprintf(path, sizeof(path), "/networks/%s", n->name);
	docker_request(n->docker, "GET", path, NULL, 0, inspected, n);
}

static void ready_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct sandbox_net *n = arg;
	if (n->state == NET_READY)
		notify(n, NULL);
}

void net_ensure(struct sandbox_net *n, net_ready_cb cb, void *arg)
{
	struct waiter *w = xcalloc(1, sizeof(*w));
	w->cb = cb;
	w->arg = arg;
	w->next = n->waiters;
	n->waiters = w;
	if (n->state == NET_READY) {
		defer_call(n->base, ready_deferred, n);
		return;
	}
	if (n->state == NET_STARTING || n->state == NET_REMOVING)
		return; /* collect_finish starts it again for the waiters */
	n->state = NET_STARTING;
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "Name", n->name);
	jg_kv_str(g, "Driver", "bridge");
	jg_kv_bool(g, "Internal", true);
	jg_kv_bool(g, "CheckDuplicate", true);
	jg_str(g, "Options");
	jg_obj(g);
	jg_kv_str(g, "com.docker.network.bridge.enable_icc", "false");
	jg_kv_str(g, "com.docker.network.bridge.name", n->bridge);
	jg_obj_end(g);
	jg_str(g, "Labels");
	jg_obj(g);
	jg_kv_str(g, "ci.managed", "true");
	jg_kv_str(g, "ci.node", n->cfg->node);
	jg_kv_str(g, "ci.prefix", n->cfg->key_prefix);
	jg_obj_end(g);
	jg_obj_end(g);
	size_t len;
	const char *body = jg_text(g, &len);
	docker_request(n->docker, "POST", "/networks/create", body, len, created, n);
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
	bool remove;
	net_collect_cb cb;
	void *arg;
	struct net_leftovers found;
	int step; /* removal command being run */
};

static void collect_finish(struct collect_op *op, const struct err *e)
{
	struct sandbox_net *n = op->n;
	if (n->state == NET_REMOVING) {
		n->state = NET_DOWN;
		n->gateway[0] = n->proxy_url[0] = '\0';
		if (n->waiters) {
			/* A networked create came while we removed: build it again. */
			struct waiter *w = n->waiters;
			n->waiters = NULL;
			while (w) {
				struct waiter *next = w->next;
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

static void collect_network_removed(const struct docker_response *resp, void *arg)
{
	struct collect_op *op = arg;
	if (resp->status != 204 && resp->status != 404) {
		/* A container joined meanwhile (403, active endpoints): in use. */
		struct err *e = docker_error(resp, "remove network");
		log_info("gc: sandbox network %s stays: %s", op->n->name, e->message);
		err_free(e);
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
		char path[128];
		snprintf(path, sizeof(path), "/networks/%s", n->name);
		docker_request(n->docker, "DELETE", path, NULL, 0, collect_network_removed, op);
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

static void collect_inspected(const struct docker_response *resp, void *arg)
{
	struct collect_op *op = arg;
	struct sandbox_net *n = op->n;
	if (resp->status == 200) {
		struct err *e = NULL;
		yajl_val v = json_parse(resp->body, resp->len, &e);
		yajl_val ctrs = json_get(v, "Containers");
		bool empty =
		    v && (ctrs == NULL || (YAJL_IS_OBJECT(ctrs) && ctrs->u.object.len == 0));
		if (v)
			yajl_tree_free(v);
		err_free(e);
		if (!empty) {
			collect_finish(op, NULL); /* someone is on it */
			return;
		}
		op->found.network = true;
	} else if (resp->status != 404) {
		struct err *e = docker_error(resp, "inspect network");
		collect_finish(op, e);
		err_free(e);
		return;
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
	/* A network being set up, or removed already, is nobody's leftover. */
	if (in_use || n->state == NET_STARTING || n->state == NET_REMOVING) {
		collect_later(op);
		return;
	}
	char path[128];
	snprintf(path, sizeof(path), "/networks/%s", n->name);
	docker_request(n->docker, "GET", path, NULL, 0, collect_inspected, op);
}
