/* config.h: the daemon's settings, one table row per option.
 *
 * Each option has a config-file key, a command-line flag (the key with
 * dashes) and an environment variable (CID_ + the key in capitals; a bare CI_
 * prefix would collide with what CI systems set). Precedence, lowest first:
 * built-in default, config file, environment, command line. */
#ifndef CI_CONFIG_H
#define CI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct config {
	char *listen;
	char *redis;
	int redis_sentinel_timeout_ms;
	char *docker;
	char *state_dir;
	char *key_prefix;
	char *node;
	char *log_level;
	char *log_format;
	char *config_file;
	char *image;         /* the default image profile */
	char *pip_index_url; /* package installs' index; "" = off */
	int64_t install_max_timeout_s;
	char *images;             /* "python=ci/python:latest,..." profile → Docker tag */
	char *runtime;            /* Docker runtime for session containers ("" = engine default) */
	char *gvisor_runtime;     /* the Docker runtime name behind runtime "gvisor" */
	char *egress_hosts_file;  /* hosts-style overrides for the egress proxy's resolver */
	char *egress_trusted;     /* IP[:PORT],... the proxy may reach although private */
	char *seccomp_profile;    /* "" = built in, "engine" = the engine's default, or a path */
	char *egress_resolver;    /* system, hosts-only or IP:PORT */
	char *admin_key_file;     /* "" = single tenant "default", loopback only */
	char *tls_cert, *tls_key; /* PEM files; both "" = plain HTTP */
	bool plain_http_behind_proxy; /* a TLS-terminating proxy is in front */

	int64_t idle_timeout_s, max_idle_timeout_s;
	int64_t max_lifetime_s; /* no session lives longer, however active */
	int64_t memory_mb, max_memory_mb;
	double cpus, max_cpus;
	int64_t pids, max_pids;
	int64_t disk_mb, max_disk_mb;
	int64_t exec_timeout_s, max_exec_timeout_s;

	int64_t egress_proxy_port; /* on the sandbox network's gateway, the same at every start */
	int64_t pool_size;         /* warm containers kept ready for the default image */
	int64_t pool_max;          /* ... and the most it grows to with bursts (pool.h) */
	int64_t pool_memory_mb;    /* ... within this much host memory */
	int64_t pool_network_size; /* ... and on the sandbox network, for allowlists */
	int64_t output_cap_bytes;
	int64_t max_sessions;
	/* Several nodes on one Redis (cluster.h): how often this node heartbeats,
	 * after how long without one it is lost, and where peers reach it. */
	int64_t heartbeat_ms, node_lost_ms;
	char *advertise_url;
	int64_t sandbox_uid_base, sandbox_uid_count; /* each session gets its own uid */
	int64_t start_timeout_s;
	int64_t kill_grace_ms;
	int64_t ipc_hello_timeout_ms; /* pending runner connections are closed after it */
	int64_t tombstone_ttl_s;
	int64_t max_body_bytes;
	int64_t drain_timeout_s;
	bool remove_on_exit;
	char *workspace_backend;            /* loop or tmpfs (workspace_disk.h) */
	int64_t workspace_disk_headroom_mb; /* free disk no new workspace image may take */
	bool ipc_tmpfs;               /* the sessions' IPC directories on a tmpfs of their own */
	int64_t http_head_timeout_s;  /* a request head, from its first byte */
	int64_t http_idle_timeout_s;  /* waiting for a request */
	int64_t max_connections;      /* API connections in all */
	int64_t max_conns_per_peer;   /* ... and from one source address */
	int64_t max_conns_per_tenant; /* ... busy with one tenant's requests */
	int64_t http_reserved_conns;  /* beyond max_connections, for the probes */
	int64_t http_body_timeout_s;  /* a request body's time, before ... */
	int64_t http_body_min_rate;   /* ... a second more per this many bytes */
	int64_t max_event_streams;    /* GET /v1/events streams on this node */
	int64_t max_event_streams_per_tenant; /* ... of one tenant */
	int64_t fd_reserve;                   /* descriptors kept from outside input (fdbudget.h) */
	int64_t audit_max_entries;            /* the audit stream's MAXLEN ~ */
	int64_t max_runs, run_ttl_s;          /* runs held in memory; their records' TTL */
	int64_t max_runs_per_tenant;          /* ... of them running or in review, per tenant */
	int64_t failure_hopeless_after, failure_memory_ttl_s;
	int64_t review_ttl_s;     /* review cases in Redis (store_reviews.h) */
	char *review_webhook_url; /* "" = no webhook (webhook.h) */
	char *review_webhook_secret_file;
	/* Per-tenant quotas' defaults (quota.h); 0 = unlimited. */
	int64_t quota_sessions, quota_executions, quota_memory_mb, quota_disk_mb;
	int64_t quota_exec_seconds_per_hour, quota_requests_per_second;
	bool quota_stateless;
	int64_t quota_stateless_runs;
	/* The fixer model (fixer_target.h): the default, and what requests may name. */
	char *fixer_url, *fixer_model, *fixer_key_file;
	char *fixer_allowed_urls; /* comma-separated URL prefixes; "" = none */
	char *fixer_key_dir;      /* "" = requests may not name key files */
	/* The Origins every route accepts besides the daemon's own
	 * (http_guard.h), comma-separated; "" = none. /mcp also accepts
	 * mcp_allowed_origins (the older, /mcp-only option). */
	char *allowed_origins;
	char *mcp_allowed_origins;
	int64_t fixer_timeout_ms;
	/* The stateless tier (stateless.h). */
	char *stateless; /* "on" or "off" */
	char *stateless_bwrap, *stateless_python;
	int64_t stateless_timeout_s, stateless_memory_mb, stateless_max_running;
	/* The snapshot stores (blobstore.h). */
	char *store, *store_endpoint, *store_region, *store_credentials_file;
	int64_t store_timeout_ms, store_retries;
	/* Snapshots (snapshot.h): caps of one, retention per tenant. */
	int64_t snapshot_max_mb, snapshot_max_files, snapshot_keep, snapshot_max_age_s;
	int64_t snapshot_retention_every_s;
	/* Forwarding to the owner of a session (forward.h). */
	char *cluster_secret_file, *peer_ca_file;
	int64_t forward_max_inflight, forward_connect_timeout_ms, forward_stall_timeout_s;
};

/* Defaults in *cfg. Strings are owned by cfg (config_free). */
void config_defaults(struct config *cfg);
void config_free(struct config *cfg);

/* Apply a config file's text ("key = value" lines, '#' comments). */
int config_apply_text(struct config *cfg, const char *text, const char *origin, struct err **errp);

/* Apply CID_* variables from envp (NULL-terminated "K=V"). */
int config_apply_env(struct config *cfg, char *const *envp, struct err **errp);

/* Apply one option by key ("listen", "max-memory-mb" and "max_memory_mb" alike). */
int config_set(struct config *cfg, const char *key, const char *value, const char *origin,
	       struct err **errp);

/* Load in precedence order: defaults, the file named by --config/CID_CONFIG,
 * environment, argv flags. Returns 0, -1 with *errp (an unknown option, one
 * without its value, a bad value, a failed check), CONFIG_LOAD_HELP when
 * --help was asked (usage printed) or CONFIG_LOAD_VERSION for --version
 * (the caller prints it). A true/false option alone means true. */
#define CONFIG_LOAD_HELP 1
#define CONFIG_LOAD_VERSION 2
int config_load(struct config *cfg, int argc, char **argv, char *const *envp, struct err **errp);

/* Cross-field checks: defaults within maxima, the listener rule (a
 * non-loopback, non-unix listen needs admin-key-file, and TLS or
 * plain-http-behind-proxy), tls-cert and tls-key together. */
int config_validate(const struct config *cfg, struct err **errp);

/* The Docker tag of an image profile, or NULL when the profile is unknown. */
char *config_image_tag(const struct config *cfg, const char *profile);

/* Whether listen is loopback or a unix socket. */
bool config_listen_is_local(const char *listen);

/* dst (uninitialised) becomes a deep copy of src; config_free frees it. */
void config_copy(struct config *dst, const struct config *src);

/* SIGHUP: for every option whose value differs between dst (running) and
 * src (just loaded), call fn (may be NULL) with its key and both values as
 * text ("(secret)" for a secret), and whether it was applied: a live row's
 * value is copied into dst, a restart row's is not (the option table's
 * last column). Returns how many differ. */
typedef void (*config_change_fn)(const char *key, const char *before, const char *after,
				 bool applied, void *arg);
size_t config_reload_into(struct config *dst, const struct config *src, config_change_fn fn,
			  void *arg);

/* Whether a reload applies the option (false for unknown keys). */
bool config_option_is_live(const char *key);

/* Print the option table (for --help). */
void config_usage(const char *prog);

#endif
