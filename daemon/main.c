/* main.c: ci-daemon. Load the config, wire the modules onto one event loop,
 * serve until SIGTERM or SIGINT, then end the node's sessions and exit. */
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "clock.h"
#include "cluster.h"
#include "config.h"
#include "defer.h"
#include "docker.h"
#include "egress.h"
#include "fdbudget.h"
#include "forward.h"
#include "http_api.h"
#include "log.h"
#include "manager.h"
#include "network.h"
#include "proc.h"
#include "procstat.h"
#include "store.h"
#include "tls.h"
#include "version.h"
#include "workflow.h"

extern char **environ;

/* A stop that takes longer than this (a hung engine) exits anyway. */
#define SHUTDOWN_LIMIT_S 20

struct daemon_ctx {
	struct event_base *base;
	struct http_api *api;
	struct manager *mgr;
	struct config *cfg;
	int argc;
	char **argv;
	bool stopping;
	int64_t drain_deadline_ms;
	int64_t exit_deadline_ms;
	struct docker *docker;
	struct egress *egress;
	struct tls *tls; /* NULL: plain HTTP */
	struct event *drain_timer;
	struct event *fd_timer;
	bool fd_short;           /* the budget refuses new sessions and tunnels */
	struct workflow wf;      /* runs, the fixer, the stateless tier, reviews (workflow.h) */
	struct forwarder *fwd;   /* calls for other nodes' sessions (forward.h) */
	struct cluster *cluster; /* heartbeats and the node view (cluster.h) */
};

static int64_t rlim_to_i64(rlim_t v)
{
	return v == RLIM_INFINITY || v > (rlim_t)INT32_MAX ? INT32_MAX : (int64_t)v;
}

/* Raise the soft RLIMIT_NOFILE to the hard limit, and return the soft limit
 * in force. The customary soft 1024 is a relic of select(); nothing in the
 * daemon uses select (libevent runs on epoll, curl and hiredis on libevent),
 * and every session with network may hold 64 tunnels of two descriptors. */
static int64_t nofile_raise(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		log_warn("file descriptors: getrlimit: %s", strerror(errno));
		return 0;
	}
	rlim_t before = rl.rlim_cur;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
		/* An unlimited hard limit is still bounded by fs.nr_open. */
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			log_warn("file descriptors: cannot raise the soft limit %llu to %llu: %s",
				 (unsigned long long)before, (unsigned long long)rl.rlim_cur,
				 strerror(errno));
			rl.rlim_cur = before;
		} else {
			log_info("file descriptors: soft limit raised from %llu to %llu (the hard "
				 "limit)",
				 (unsigned long long)before, (unsigned long long)rl.rlim_cur);
		}
	} else {
		log_info("file descriptors: soft limit %llu is the hard limit",
			 (unsigned long long)rl.rlim_cur);
	}
	return rlim_to_i64(rl.rlim_cur);
}

/* The cross-check of the descriptor budget (fdbudget.h): what is really
 * open, and the limit, which someone may have changed from outside
 * (prlimit). Scanning costs about a microsecond per open descriptor, so it
 * runs less often the more there are. */
static void fd_check_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct daemon_ctx *d = arg;
	struct fdbudget *b = &fdbudget_daemon;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		fdbudget_set_limit(b, rlim_to_i64(rl.rlim_cur));
	int64_t open_now = fdbudget_count_open();
	if (open_now >= 0)
		fdbudget_observe(b, open_now);
	else if (errno == EMFILE || errno == ENFILE)
		fdbudget_exhausted(b);
	/* Said when it starts and when it ends, not every second meanwhile. */
	bool short_now = fdbudget_room(b, FDBUDGET_EGRESS) < FDBUDGET_SESSION_ROOM;
	if (short_now != d->fd_short)
		log_at(short_now ? LOG_LEVEL_WARN : LOG_LEVEL_INFO,
		       "file descriptors: %lld in use of %lld (api %lld, egress %lld, ipc %lld, "
		       "uncounted %lld); new sessions and tunnels are %s",
		       (long long)fdbudget_in_use(b), (long long)b->limit,
		       (long long)b->used[FDBUDGET_HTTP], (long long)b->used[FDBUDGET_EGRESS],
		       (long long)b->used[FDBUDGET_IPC], (long long)b->other,
		       short_now ? "refused" : "admitted again");
	d->fd_short = short_now;
	int64_t ms = 1000 + (open_now > 0 ? open_now / 10 : 0);
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(d->fd_timer, &tv);
}

/* The proxy asks the manager, which exists only after the proxy does. */
static bool egress_lookup(const char *src_ip, struct egress_peer *peer, void *arg)
{
	struct daemon_ctx *d = arg;
	return d->mgr && manager_egress_lookup(src_ip, peer, d->mgr);
}

/* Exit once Docker has answered everything we asked: a container create or
 * removal still in flight would otherwise leave a container behind. */
static void exit_when_docker_idle(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct daemon_ctx *d = arg;
	if (docker_pending(d->docker) > 0 && clock_mono_ms() < d->exit_deadline_ms) {
		struct timeval tick = {0, 20000};
		event_base_once(d->base, -1, EV_TIMEOUT, exit_when_docker_idle, d, &tick);
		return;
	}
	log_info("done; exiting");
	/* Close event streams properly, and give the last bytes a moment to go. */
	http_api_end_streams(d->api);
	struct timeval flush = {0, 100000};
	event_base_loopexit(d->base, &flush);
}

static void shutdown_done(const struct err *e, void *arg)
{
	(void)e;
	struct daemon_ctx *d = arg;
	d->exit_deadline_ms = clock_mono_ms() + 5000;
	exit_when_docker_idle(-1, 0, d);
}

/* Drain: wait for running executions (bounded), then either end every
 * session or leave the containers for the next daemon to adopt. */
static void drain_check(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct daemon_ctx *d = arg;
	size_t running = manager_execs_in_flight(d->mgr);
	if (running > 0 && clock_mono_ms() < d->drain_deadline_ms) {
		struct timeval tick = {0, 20000};
		evtimer_add(d->drain_timer, &tick);
		return;
	}
	if (running > 0)
		log_warn("drain timeout: %zu executions still running are cut off", running);
	if (d->cfg->remove_on_exit) {
		log_info("drained; removing every session (remove-on-exit)");
		http_api_stop(d->api);
		manager_shutdown(d->mgr, "the daemon was stopped", false, shutdown_done, d);
		struct timeval limit = {SHUTDOWN_LIMIT_S, 0};
		event_base_loopexit(d->base, &limit);
		return;
	}
	log_info("drained; %zu sessions keep running for the next daemon to adopt",
		 manager_count(d->mgr));
	manager_flush_clocks(d->mgr);
	manager_shutdown(d->mgr, "warm pool released at exit", true, shutdown_done, d);
	struct timeval limit = {SHUTDOWN_LIMIT_S, 0};
	event_base_loopexit(d->base, &limit);
}

static void begin_drain(struct daemon_ctx *d, const char *why)
{
	if (d->stopping)
		return;
	d->stopping = true;
	log_info(
	    "%s: draining (no new sessions or executions; %zu running may finish within %llds)",
	    why, manager_execs_in_flight(d->mgr), (long long)d->cfg->drain_timeout_s);
	manager_set_draining(d->mgr, true);
	d->drain_deadline_ms = clock_mono_ms() + d->cfg->drain_timeout_s * 1000;
	d->drain_timer = evtimer_new(d->base, drain_check, d);
	defer_event(d->drain_timer);
}

/* POST /v1/admin/drain (ci-ctl drain). */
static void drain_requested(void *arg)
{
	begin_drain(arg, "drain requested through the API");
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
	begin_drain(d, strsignal((int)sig));
}

struct reload_tally {
	size_t applied, restart;
};

/* One option differs between the running configuration and the file. */
static void reload_change(const char *key, const char *before, const char *after, bool applied,
			  void *arg)
{
	struct reload_tally *t = arg;
	if (applied) {
		t->applied++;
		log_info("SIGHUP: %s: %s -> %s", key, before, after);
	} else {
		t->restart++;
		log_warn("SIGHUP: %s changed: needs a restart; still %s (the file says %s)", key,
			 before, after);
	}
}

/* What the running parts hold of the options just applied: the log level,
 * the server's limits and certificate, the egress trusted list, the pool's
 * sizes. The rest is read where it is used. */
static void reload_apply(struct daemon_ctx *d)
{
	const struct config *cfg = d->cfg;
	log_threshold = (enum log_level)log_level_parse(cfg->log_level);
	log_format = (enum log_format)log_format_parse(cfg->log_format);
	http_api_reload(d->api);
	struct err *e = NULL;
	if (d->tls && cfg->tls_cert[0]) {
		if (tls_reload(d->tls, cfg->tls_cert, cfg->tls_key, &e) < 0) {
			log_warn("SIGHUP: %s; new connections keep the previous certificate",
				 e->message);
			err_free(e);
			e = NULL;
		} else {
			log_info("SIGHUP: TLS certificate reloaded: %s", tls_describe(d->tls));
		}
	} else if ((d->tls != NULL) != (cfg->tls_cert[0] != '\0')) {
		log_warn("SIGHUP: tls-cert and tls-key %s: needs a restart; the listener still "
			 "speaks %s",
			 d->tls ? "cleared" : "set", d->tls ? "TLS" : "plain HTTP");
	}
	if (egress_set_trusted(d->egress, cfg->egress_trusted, &e) < 0) {
		log_warn("SIGHUP: %s; the previous trusted list stays", e->message);
		err_free(e);
		e = NULL;
	}
	if (egress_reload_hosts(d->egress, &e) < 0)
		err_free(e); /* logged there; the previous hosts file stays in use */
	manager_pool_resize(d->mgr);
	workflow_reload(&d->wf, cfg, d->api);
	if (d->fwd && forwarder_reload(d->fwd, cfg, &e) < 0) {
		log_warn("SIGHUP: %s; the peers' previous secret and CA stay", e->message);
		err_free(e);
		e = NULL;
	}
}

/* SIGHUP: read the configuration again and apply what can change live
 * (the option table's last column), naming each option that changed, and
 * each one that needs a restart. */
static void on_reload_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	struct daemon_ctx *d = arg;
	struct config fresh, merged;
	struct err *e = NULL;
	if (config_load(&fresh, d->argc, d->argv, environ, &e) != 0) {
		log_warn("SIGHUP: configuration not reloaded: %s", e ? e->message : "help asked");
		err_free(e);
		config_free(&fresh);
		return;
	}
	/* The file is valid alone; what would run (its live options with the
	 * running restart ones) must be valid too. */
	config_copy(&merged, d->cfg);
	config_reload_into(&merged, &fresh, NULL, NULL);
	int ok = config_validate(&merged, &e);
	config_free(&merged);
	if (ok < 0) {
		log_warn("SIGHUP: configuration not reloaded: %s", e->message);
		err_free(e);
		config_free(&fresh);
		return;
	}
	struct reload_tally t = {0};
	config_reload_into(d->cfg, &fresh, reload_change, &t);
	config_free(&fresh);
	reload_apply(d);
	if (t.applied + t.restart == 0)
		log_info("SIGHUP: configuration reloaded; no option changed");
	else
		log_info("SIGHUP: configuration reloaded; %zu options applied, %zu need a restart",
			 t.applied, t.restart);
}

/* libevent's own warnings go to our log (stamped, escaped, JSON when asked)
 * rather than raw to stderr. */
static void libevent_log(int severity, const char *msg)
{
	enum log_level level = severity == EVENT_LOG_DEBUG  ? LOG_LEVEL_DEBUG
			       : severity == EVENT_LOG_MSG  ? LOG_LEVEL_INFO
			       : severity == EVENT_LOG_WARN ? LOG_LEVEL_WARN
							    : LOG_LEVEL_ERROR;
	log_at(level, "libevent: %s", msg);
}

int main(int argc, char **argv)
{
	struct config cfg;
	struct err *e = NULL;
	int rc = config_load(&cfg, argc, argv, environ, &e);
	if (rc == CONFIG_LOAD_VERSION)
		printf("ci-daemon %s (git %s)\n", ci_version, ci_git);
	if (rc == CONFIG_LOAD_HELP || rc == CONFIG_LOAD_VERSION) {
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
	log_format = (enum log_format)log_format_parse(cfg.log_format);
	event_set_log_callback(libevent_log);
	signal(SIGPIPE, SIG_IGN);
	procstat_init();
	fdbudget_init(&fdbudget_daemon, nofile_raise(), cfg.fd_reserve);
	curl_global_init(CURL_GLOBAL_DEFAULT);

	int status = 1;
	struct daemon_ctx d = {0};
	struct docker *docker = NULL;
	struct store *store = NULL;
	struct egress *egress = NULL;
	struct sandbox_net *net = NULL;
	struct event *sigterm = NULL, *sigint = NULL, *sighup = NULL;
	d.cfg = &cfg;
	d.argc = argc;
	d.argv = argv;
	d.base = event_base_new();
	if (d.base == NULL) {
		fprintf(stderr, "ci-daemon: event_base_new failed\n");
		goto out;
	}
	/* First: a certificate that does not load stops the start before
	 * anything is adopted or started. */
	if (cfg.tls_cert[0] && (d.tls = tls_new(cfg.tls_cert, cfg.tls_key, &e)) == NULL)
		goto fail;
	docker = docker_new(d.base, cfg.docker);
	d.docker = docker;
	store = store_new(d.base, cfg.redis, cfg.key_prefix, cfg.node, cfg.tombstone_ttl_s, &e);
	if (store == NULL)
		goto fail;
	store_set_sentinel_timeout(store, cfg.redis_sentinel_timeout_ms);
	egress =
	    egress_new(d.base, cfg.egress_hosts_file, cfg.egress_trusted, egress_lookup, &d, &e);
	if (egress == NULL || egress_set_resolver(egress, cfg.egress_resolver, &e) < 0)
		goto fail;
	d.egress = egress;
	net = net_new(d.base, &cfg, docker, egress);
	d.mgr = manager_new(d.base, &cfg, docker, store, net, &e);
	if (d.mgr == NULL)
		goto fail;
	d.api = http_api_new(d.base, &cfg, d.mgr, docker, store, egress);
	if (workflow_start(&d.wf, d.base, &cfg, d.mgr, store, d.api, &e) < 0)
		goto fail;
	if (d.tls)
		http_api_set_tls(d.api, d.tls);
	if (http_api_listen(d.api, &e) < 0)
		goto fail;
	http_api_set_drain(d.api, drain_requested, &d);
	if ((d.fwd = forwarder_new(d.base, &cfg, &e)) == NULL)
		goto fail;
	d.cluster = cluster_new(d.base, &cfg, store, d.mgr);
	http_api_set_cluster(d.api, d.cluster, d.fwd);
	sigterm = evsignal_new(d.base, SIGTERM, on_stop_signal, &d);
	sigint = evsignal_new(d.base, SIGINT, on_stop_signal, &d);
	sighup = evsignal_new(d.base, SIGHUP, on_reload_signal, &d);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	evsignal_add(sighup, NULL);
	d.fd_timer = evtimer_new(d.base, fd_check_cb, &d);
	fd_check_cb(-1, 0, &d);
	log_info("file descriptors: %lld open of %lld; clients, tunnels and sessions may use %lld "
		 "(tunnels and new sessions stop %lld earlier)",
		 (long long)fdbudget_in_use(&fdbudget_daemon), (long long)fdbudget_daemon.limit,
		 (long long)fdbudget_room(&fdbudget_daemon, FDBUDGET_HTTP),
		 (long long)fdbudget_margin(&fdbudget_daemon));
	log_info("ci-daemon %s (git %s) listening on %s%s (node %s, redis %s, docker %s, key "
		 "prefix '%s')",
		 ci_version, ci_git, cfg.listen, d.tls ? " over TLS" : "", cfg.node, cfg.redis,
		 cfg.docker, cfg.key_prefix);
	if (d.tls)
		log_info("TLS certificate: %s", tls_describe(d.tls));
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
	if (sighup)
		event_free(sighup);
	if (d.drain_timer)
		event_free(d.drain_timer);
	if (d.fd_timer)
		event_free(d.fd_timer);
	/* The runs' waiting calls are answered and freed with the api; answers
	 * still on their way to the runs (executions, Redis) are dropped from
	 * here on, and their tokens freed last, after the parts that hold them. */
	/* Forwarded calls end first: they hold the api's requests. */
	forwarder_free(d.fwd);
	http_api_free(d.api);
	cluster_free(d.cluster);
	workflow_close(&d.wf);
	tls_free(d.tls);
	if (status == 0)
		manager_release_state_dir(d.mgr);
	manager_free(d.mgr);
	net_free(net);
	proc_free_all();
	egress_free(egress);
	store_free(store);
	docker_free(docker);
	workflow_free(&d.wf);
	if (d.base)
		event_base_free(d.base);
	curl_global_cleanup();
	config_free(&cfg);
	return status;
}
