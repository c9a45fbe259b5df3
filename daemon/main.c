/* main.c: ci-daemon. Load the config, wire the modules onto one event loop,
 * serve until SIGTERM or SIGINT, then end the node's sessions and exit. */
#include <curl/curl.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "docker.h"
#include "egress.h"
#include "http_api.h"
#include "log.h"
#include "manager.h"
#include "network.h"
#include "store.h"

extern char **environ;

/* A stop that takes longer than this (a hung engine) exits anyway. */
#define SHUTDOWN_LIMIT_S 20

struct daemon_ctx {
	struct event_base *base;
	struct http_api *api;
	struct manager *mgr;
	bool stopping;
};

/* The proxy asks the manager, which exists only after the proxy does. */
static bool egress_lookup(const char *src_ip, struct egress_peer *peer, void *arg)
{
	struct daemon_ctx *d = arg;
	return d->mgr && manager_egress_lookup(src_ip, peer, d->mgr);
}

static void shutdown_done(const struct err *e, void *arg)
{
	(void)e;
	struct daemon_ctx *d = arg;
	log_info("all sessions ended; exiting");
	event_base_loopexit(d->base, NULL);
}

static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct daemon_ctx *d = arg;
	if (d->stopping) {
		log_warn("second %s: exiting now", strsignal((int)sig));
		event_base_loopbreak(d->base);
		return;
	}
	d->stopping = true;
	log_info("%s: no new connections; ending sessions", strsignal((int)sig));
	http_api_stop(d->api);
	manager_shutdown(d->mgr, "the daemon was stopped", shutdown_done, d);
	struct timeval limit = {SHUTDOWN_LIMIT_S, 0};
	event_base_loopexit(d->base, &limit);
}

int main(int argc, char **argv)
{
	struct config cfg;
	struct err *e = NULL;
	int rc = config_load(&cfg, argc, argv, environ, &e);
	if (rc == 1) {
		config_free(&cfg);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "ci-daemon: %s\n", e->message);
		err_free(e);
		config_free(&cfg);
		return 2;
	}
	log_threshold = (enum log_level)log_level_parse(cfg.log_level);
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);

	int status = 1;
	struct daemon_ctx d = {0};
	struct docker *docker = NULL;
	struct store *store = NULL;
	struct egress *egress = NULL;
	struct sandbox_net *net = NULL;
	struct event *sigterm = NULL, *sigint = NULL;
	d.base = event_base_new();
	if (d.base == NULL) {
		fprintf(stderr, "ci-daemon: event_base_new failed\n");
		goto out;
	}
	docker = docker_new(d.base, cfg.docker);
	store = store_new(d.base, cfg.redis, cfg.key_prefix, cfg.node, cfg.tombstone_ttl_s, &e);
	if (store == NULL)
		goto fail;
	egress =
	    egress_new(d.base, cfg.egress_hosts_file, cfg.egress_trusted, egress_lookup, &d, &e);
	if (egress == NULL)
		goto fail;
	net = net_new(d.base, &cfg, docker, egress);
	d.mgr = manager_new(d.base, &cfg, docker, store, net, &e);
	if (d.mgr == NULL)
		goto fail;
	d.api = http_api_new(d.base, &cfg, d.mgr, docker, store, egress);
	if (http_api_listen(d.api, &e) < 0)
		goto fail;
	sigterm = evsignal_new(d.base, SIGTERM, on_stop_signal, &d);
	sigint = evsignal_new(d.base, SIGINT, on_stop_signal, &d);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	manager_reap_orphans(d.mgr);
	log_info("ci-daemon listening on %s (node %s, redis %s, docker %s, key prefix '%s')",
		 cfg.listen, cfg.node, cfg.redis, cfg.docker, cfg.key_prefix);
	event_base_dispatch(d.base);
	status = 0;
	goto out;
fail:
	fprintf(stderr, "ci-daemon: %s\n", e->message);
	err_free(e);
	status = 1;
out:
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	http_api_free(d.api);
	manager_free(d.mgr);
	net_free(net);
	egress_free(egress);
	store_free(store);
	docker_free(docker);
	if (d.base)
		event_base_free(d.base);
	curl_global_cleanup();
	config_free(&cfg);
	return status;
}
