/* config.c: the option table, and loading it from file, environment and flags. */
#include "config.h"
#include "install.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "blobstore.h"
#include "fixer_target.h"
#include "log.h"
#include "resolver.h"
#include "xalloc.h"

enum opt_type { OPT_STR, OPT_INT, OPT_DOUBLE, OPT_BOOL };

/* The last column says what SIGHUP does with a row, and every row says it
 * (a row without it does not compile: -Wmissing-field-initializers).
 * OPT_LIVE: a reload copies the new value into the running configuration,
 * so its readers must read it where they use it (cfg->x, not a copy made
 * at start), or be told (main.c's reload). OPT_RESTART: the value stays
 * until a restart, and a reload that finds it changed logs it by name.
 * OPT_SECRET (with either): the value is never logged. */
enum opt_flags { OPT_LIVE = 0, OPT_RESTART = 1 << 0, OPT_SECRET = 1 << 1 };

struct opt {
	const char *key;
	enum opt_type type;
	size_t offset;
	const char *def;
	double min, max; /* numeric bounds */
	const char *help;
	unsigned flags; /* enum opt_flags */
};

#define O(field) offsetof(struct config, field)

static const struct opt opt_table[] = {
    {"config", OPT_STR, O(config_file), "", 0, 0, "config file to read (key = value lines)",
     OPT_RESTART},
    {"listen", OPT_STR, O(listen), "127.0.0.1:8080", 0, 0, "HOST:PORT or unix:PATH for the API",
     OPT_RESTART},
    {"tls-cert", OPT_STR, O(tls_cert), "", 0, 0,
     "PEM certificate (chain) for the API listener; with tls-key, the listener speaks TLS "
     "(1.2 or later); re-read on SIGHUP",
     OPT_LIVE},
    {"tls-key", OPT_STR, O(tls_key), "", 0, 0, "PEM private key of tls-cert; re-read on SIGHUP",
     OPT_LIVE},
    {"plain-http-behind-proxy", OPT_BOOL, O(plain_http_behind_proxy), "false", 0, 0,
     "a TLS-terminating proxy is in front: a non-loopback listener may speak plain HTTP",
     OPT_RESTART},
    {"admin-key-file", OPT_STR, O(admin_key_file), "", 0, 0,
     "file holding the admin key; set, every call needs a key (tenants, quotas); empty = one "
     "tenant \"default\", loopback only",
     OPT_RESTART},
    {"redis", OPT_STR, O(redis), "redis://127.0.0.1:6379", 0, 0,
     "redis://HOST:PORT[/DB], unix:///PATH, or "
     "sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB] (the master found and followed through "
     "Redis Sentinel)",
     OPT_RESTART},
    {"redis-sentinel-timeout-ms", OPT_INT, O(redis_sentinel_timeout_ms), "1000", 50, 30000,
     "with a sentinel:// redis: how long one sentinel may take to answer before the next is "
     "asked",
     OPT_RESTART},
    {"docker", OPT_STR, O(docker), "/var/run/docker.sock", 0, 0, "Docker engine unix socket",
     OPT_RESTART},
    {"state-dir", OPT_STR, O(state_dir), "/var/lib/ci", 0, 0,
     "per-session IPC directories live here", OPT_RESTART},
    {"key-prefix", OPT_STR, O(key_prefix), "ci:", 0, 0, "prefix of every Redis key", OPT_RESTART},
    {"node", OPT_STR, O(node), "", 0, 0, "this daemon's node name (default: hostname)",
     OPT_RESTART},
    {"log-level", OPT_STR, O(log_level), "info", 0, 0, "debug, info, warn or error", OPT_LIVE},
    {"log-format", OPT_STR, O(log_format), "text", 0, 0,
     "text (timestamp level message key=value...) or json (one object per line: ts, level, "
     "msg and fields)",
     OPT_LIVE},
    {"image", OPT_STR, O(image), "python", 0, 0, "default image profile", OPT_RESTART},
    {"images", OPT_STR, O(images), "python=ci/python:latest", 0, 0,
     "image profiles: NAME=TAG[,NAME=TAG...]", OPT_RESTART},
    {"runtime", OPT_STR, O(runtime), "", 0, 0,
     "Docker runtime for sandboxes (e.g. runsc); empty = engine default", OPT_RESTART},
    {"gvisor-runtime", OPT_STR, O(gvisor_runtime), "runsc", 0, 0,
     "Docker runtime behind a session's \"runtime\": \"gvisor\"", OPT_RESTART},
    {"egress-hosts-file", OPT_STR, O(egress_hosts_file), "", 0, 0,
     "hosts-style file (IP NAME...) the egress proxy consults before DNS; re-read on SIGHUP",
     OPT_RESTART},
    {"egress-trusted", OPT_STR, O(egress_trusted), "", 0, 0,
     "IP[:PORT] or [IPv6][:PORT],... the egress proxy may reach although private or local",
     OPT_LIVE},
    {"egress-resolver", OPT_STR, O(egress_resolver), "system", 0, 0,
     "names beyond the hosts file: system (resolv.conf's nameservers, no search domains), "
     "hosts-only (no DNS at all) or IP:PORT of one nameserver",
     OPT_RESTART},
    {"egress-proxy-port", OPT_INT, O(egress_proxy_port), "3128", 1, 65535,
     "port of the egress proxy on the sandbox network's gateway (fixed, so sandboxes "
     "keep their proxy across restarts)",
     OPT_RESTART},
    {"seccomp-profile", OPT_STR, O(seccomp_profile), "", 0, 0,
     "seccomp profile for sandboxes: empty = built in, 'engine' = Docker's default, or a JSON "
     "file",
     OPT_RESTART},
    {"idle-timeout-s", OPT_INT, O(idle_timeout_s), "600", 1, 86400 * 7,
     "default idle timeout of a session", OPT_LIVE},
    {"max-idle-timeout-s", OPT_INT, O(max_idle_timeout_s), "86400", 1, 86400 * 7,
     "largest idle timeout a client may ask for", OPT_LIVE},
    {"max-lifetime-s", OPT_INT, O(max_lifetime_s), "86400", 1, 86400 * 30,
     "longest a session may live, however active (requests may lower it)", OPT_LIVE},
    {"memory-mb", OPT_INT, O(memory_mb), "512", 16, 1 << 20, "default memory limit", OPT_LIVE},
    {"max-memory-mb", OPT_INT, O(max_memory_mb), "4096", 16, 1 << 20, "largest memory limit",
     OPT_LIVE},
    {"cpus", OPT_DOUBLE, O(cpus), "1.0", 0.01, 1024, "default CPU limit", OPT_LIVE},
    {"max-cpus", OPT_DOUBLE, O(max_cpus), "2.0", 0.01, 1024, "largest CPU limit", OPT_LIVE},
    {"pids", OPT_INT, O(pids), "128", 8, 1 << 20, "default process limit", OPT_LIVE},
    {"max-pids", OPT_INT, O(max_pids), "1024", 8, 1 << 20, "largest process limit", OPT_LIVE},
    {"disk-mb", OPT_INT, O(disk_mb), "512", 1, 1 << 20, "default /workspace size", OPT_LIVE},
    {"max-disk-mb", OPT_INT, O(max_disk_mb), "4096", 1, 1 << 20, "largest /workspace size",
     OPT_LIVE},
    {"exec-timeout-s", OPT_INT, O(exec_timeout_s), "60", 1, 86400, "default execution limit",
     OPT_LIVE},
    {"max-exec-timeout-s", OPT_INT, O(max_exec_timeout_s), "60", 1, 86400,
     "largest execution limit", OPT_LIVE},
    {"pip-index-url", OPT_STR, O(pip_index_url), "", 0, 0,
     "package index for POST /v1/sessions/{id}/packages (http:// or https://, PEP 503 "
     "simple); its host is opened to the session for the install window only; empty: "
     "installs are off (503)",
     OPT_LIVE},
    {"install-max-timeout-s", OPT_INT, O(install_max_timeout_s), "300", 1, 3600,
     "longest install window (timeout_s of a package install; also its default)", OPT_LIVE},
    {"pool-size", OPT_INT, O(pool_size), "2", 0, 256,
     "warm sandboxes kept started for the default image and limits", OPT_LIVE},
    {"pool-max", OPT_INT, O(pool_max), "32", 0, 256,
     "most warm sandboxes of the default kind the pool grows to when creates come in "
     "bursts (the most in any 10 s of the last 5 minutes); at or below pool-size: no growth",
     OPT_LIVE},
    {"pool-memory-mb", OPT_INT, O(pool_memory_mb), "512", 0, 1 << 20,
     "host memory the grown pool may hold, at 16 MiB a warm sandbox", OPT_LIVE},
    {"pool-network-size", OPT_INT, O(pool_network_size), "0", 0, 256,
     "warm sandboxes on the sandbox network, for sessions with an allowlist", OPT_LIVE},
    {"output-cap-bytes", OPT_INT, O(output_cap_bytes), "1048576", 1024, 64 << 20,
     "cap on stdout and on stderr of one execution", OPT_LIVE},
    {"max-sessions", OPT_INT, O(max_sessions), "1000", 1, 1000000, "sessions on this node",
     OPT_LIVE},
    {"sandbox-uid-base", OPT_INT, O(sandbox_uid_base), "200000", 1000, 2000000000,
     "first host uid for sandboxes; each session runs as its own uid (and gid)", OPT_RESTART},
    {"sandbox-uid-count", OPT_INT, O(sandbox_uid_count), "4096", 1, 1 << 24,
     "how many uids from sandbox-uid-base (daemons sharing a host: disjoint ranges)", OPT_RESTART},
    {"start-timeout-s", OPT_INT, O(start_timeout_s), "30", 1, 600,
     "container start to kernel ready", OPT_LIVE},
    {"kill-grace-ms", OPT_INT, O(kill_grace_ms), "2000", 0, 60000,
     "deadline to hard kill when the kernel ignores the interrupt", OPT_LIVE},
    {"ipc-hello-timeout-ms", OPT_INT, O(ipc_hello_timeout_ms), "5000", 100, 600000,
     "a sandbox connection that has not said hello by then is closed", OPT_LIVE},
    {"tombstone-ttl-s", OPT_INT, O(tombstone_ttl_s), "86400", 1, 86400 * 30,
     "how long an ended session still answers 410", OPT_RESTART},
    {"max-body-bytes", OPT_INT, O(max_body_bytes), "2097152", 1024, 64 << 20,
     "largest JSON request body", OPT_LIVE},
    {"drain-timeout-s", OPT_INT, O(drain_timeout_s), "30", 0, 3600,
     "on SIGTERM, how long running executions may finish", OPT_LIVE},
    {"ipc-tmpfs", OPT_BOOL, O(ipc_tmpfs), "true", 0, 0,
     "mount a tmpfs for the sessions' IPC directories (hides the state-dir path from "
     "sandboxes)",
     OPT_RESTART},
    {"workspace-backend", OPT_STR, O(workspace_backend), "loop", 0, 0,
     "where /workspace lives: loop (an ext4 image of disk_mb on the host's disk, its own "
     "budget; falls back to tmpfs where the node cannot) or tmpfs (charged to memory)",
     OPT_RESTART},
    {"workspace-disk-headroom-mb", OPT_INT, O(workspace_disk_headroom_mb), "2048", 0, 1 << 30,
     "with workspace-backend loop: free space under the state directory that no workspace "
     "image may take (the snapshot spool and store, logs); a create that would leave less "
     "is refused (503)",
     OPT_LIVE},
    {"remove-on-exit", OPT_BOOL, O(remove_on_exit), "false", 0, 0,
     "remove session containers when the daemon exits", OPT_LIVE},
    {"http-head-timeout-s", OPT_INT, O(http_head_timeout_s), "10", 1, 3600,
     "an API request head must be complete this long after its first byte", OPT_LIVE},
    {"http-idle-timeout-s", OPT_INT, O(http_idle_timeout_s), "30", 1, 86400,
     "an API connection waiting for a request (new or keep-alive) is closed after this", OPT_LIVE},
    {"max-connections", OPT_INT, O(max_connections), "4096", 16, 1000000, "API connections in all",
     OPT_LIVE},
    {"max-conns-per-peer", OPT_INT, O(max_conns_per_peer), "512", 1, 1000000,
     "API connections from one source address (an IPv6 /64)", OPT_LIVE},
    {"max-conns-per-tenant", OPT_INT, O(max_conns_per_tenant), "1024", 1, 1000000,
     "API connections busy with one tenant's requests at once (event streams included); one "
     "more is answered 429 and closed",
     OPT_LIVE},
    {"http-reserved-conns", OPT_INT, O(http_reserved_conns), "16", 0, 1024,
     "connections accepted beyond max-connections when every one is busy, for /healthz and "
     "/readyz only (anything else on them: 503)",
     OPT_LIVE},
    {"http-body-timeout-s", OPT_INT, O(http_body_timeout_s), "30", 1, 86400,
     "a request body must be in this long after the handler asks for it, plus a second for "
     "each http-body-min-rate bytes received (else 408, and the connection closes)",
     OPT_LIVE},
    {"http-body-min-rate", OPT_INT, O(http_body_min_rate), "1024", 1, 1 << 30,
     "bytes a second a request body must average past http-body-timeout-s", OPT_LIVE},
    {"max-event-streams", OPT_INT, O(max_event_streams), "1024", 1, 1000000,
     "GET /v1/events streams open on this node (one more: 503)", OPT_LIVE},
    {"max-event-streams-per-tenant", OPT_INT, O(max_event_streams_per_tenant), "32", 1, 1000000,
     "GET /v1/events streams one tenant may have open on this node (one more: 429)", OPT_LIVE},
    {"max-runs", OPT_INT, O(max_runs), "256", 1, 100000,
     "runs this node holds in memory (running, waiting for a review, or finished in the last "
     "10 minutes; older finished ones are answered from Redis)",
     OPT_LIVE},
    {"max-runs-per-tenant", OPT_INT, O(max_runs_per_tenant), "64", 1, 100000,
     "runs one tenant may have running or waiting for a review on this node", OPT_LIVE},
    {"run-ttl-s", OPT_INT, O(run_ttl_s), "86400", 60, 31536000,
     "how long a run's record stays in Redis (GET /v1/runs/{id})", OPT_LIVE},
    {"audit-max-entries", OPT_INT, O(audit_max_entries), "100000", 10, 100000000,
     "the audit stream in Redis is trimmed to about this many entries (MAXLEN ~; the log "
     "keeps every entry)",
     OPT_RESTART},
    {"failure-memory-ttl-s", OPT_INT, O(failure_memory_ttl_s), "604800", 60, 31536000,
     "a failure pattern not seen for this long is forgotten (each sighting refreshes it)",
     OPT_LIVE},
    {"failure-hopeless-after", OPT_INT, O(failure_hopeless_after), "3", 1, 1000,
     "a failure pattern whose repair (by a rule or the fixer) was tried this many times and "
     "never worked is hopeless: runs skip its retries (sightings without a repair never count)",
     OPT_LIVE},
    {"review-ttl-s", OPT_INT, O(review_ttl_s), "604800", 60, 31536000,
     "a review case (pending or decided) is kept this long in Redis", OPT_RESTART},
    {"review-webhook-url", OPT_STR, O(review_webhook_url), "", 0, 0,
     "http(s) URL told of each new review case (POST, signed with review-webhook-secret-file, "
     "retried with backoff); empty = none",
     OPT_RESTART},
    {"review-webhook-secret-file", OPT_STR, O(review_webhook_secret_file), "", 0, 0,
     "file holding the webhook's HMAC-SHA256 secret; read at start and on SIGHUP", OPT_LIVE},
    {"fd-reserve", OPT_INT, O(fd_reserve), "64", 16, 1 << 20,
     "file descriptors never handed to clients, tunnels or sessions (Docker, Redis, helpers)",
     OPT_RESTART},
    {"quota-sessions", OPT_INT, O(quota_sessions), "0", 0, 1000000000,
     "live sessions per tenant (all nodes on the Redis); 0 = unlimited; a tenant's own quota "
     "overrides it",
     OPT_LIVE},
    {"quota-executions", OPT_INT, O(quota_executions), "0", 0, 1000000000,
     "concurrent executions per tenant; 0 = unlimited", OPT_LIVE},
    {"quota-memory-mb", OPT_INT, O(quota_memory_mb), "0", 0, 1000000000,
     "the memory limits of a tenant's live sessions, summed; 0 = unlimited", OPT_LIVE},
    {"quota-disk-mb", OPT_INT, O(quota_disk_mb), "0", 0, 1000000000,
     "the disk_mb of a tenant's live sessions, summed; 0 = unlimited", OPT_LIVE},
    {"quota-exec-seconds-per-hour", OPT_INT, O(quota_exec_seconds_per_hour), "0", 0, 1000000000,
     "execution wall time per tenant in a sliding hour; 0 = unlimited", OPT_LIVE},
    {"quota-requests-per-second", OPT_INT, O(quota_requests_per_second), "0", 0, 1000000000,
     "API requests per tenant and second (a token bucket holding twice that); 0 = unlimited",
     OPT_LIVE},
    {"quota-stateless", OPT_BOOL, O(quota_stateless), "true", 0, 0,
     "whether a tenant's runs may take the stateless rung of their ladder (with --stateless "
     "on); a tenant's own \"stateless\" quota overrides it",
     OPT_LIVE},
    {"quota-stateless-runs", OPT_INT, O(quota_stateless_runs), "1", 0, 1000000000,
     "a tenant's runs in the stateless tier at once, per node; 0 = up to "
     "stateless-max-running",
     OPT_LIVE},
    {"fixer-url", OPT_STR, O(fixer_url), "", 0, 0,
     "the default fixer model's OpenAI-compatible API base (http://HOST:PORT/v1); \"\" = none",
     OPT_LIVE},
    {"fixer-model", OPT_STR, O(fixer_model), "", 0, 0, "the default fixer's model name", OPT_LIVE},
    {"fixer-key-file", OPT_STR, O(fixer_key_file), "", 0, 0,
     "file holding the default fixer's bearer token; read at start and on SIGHUP", OPT_LIVE},
    {"fixer-timeout-ms", OPT_INT, O(fixer_timeout_ms), "20000", 100, 120000,
     "deadline of one fixer request", OPT_LIVE},
    {"fixer-allowed-urls", OPT_STR, O(fixer_allowed_urls), "", 0, 0,
     "comma-separated URL prefixes a request's own fixer.url may start with; \"\" = a request "
     "may not name a URL",
     OPT_LIVE},
    {"allowed-origins", OPT_STR, O(allowed_origins), "", 0, 0,
     "comma-separated Origin values every route accepts (exact, e.g. http://localhost:6274), "
     "besides the daemon's own (its reviewer's page); \"\" = a request with any other Origin "
     "header is refused (403: a web page must not drive the API)",
     OPT_LIVE},
    {"mcp-allowed-origins", OPT_STR, O(mcp_allowed_origins), "", 0, 0,
     "comma-separated Origin values /mcp accepts besides --allowed-origins (exact, e.g. "
     "http://localhost:6274); \"\" = none more",
     OPT_LIVE},
    {"fixer-key-dir", OPT_STR, O(fixer_key_dir), "", 0, 0,
     "directory of key files a request's fixer.api_key_file may name, one subdirectory per "
     "tenant (DIR/TENANT/NAME: a tenant names only its own; read at start and on SIGHUP); "
     "\"\" = none",
     OPT_LIVE},
    {"stateless", OPT_STR, O(stateless), "on", 0, 0,
     "on or off: the stateless tier (the ladder's \"stateless\" rung, python3 on the host in "
     "bubblewrap); off, the rung is never taken",
     OPT_RESTART},
    {"stateless-bwrap", OPT_STR, O(stateless_bwrap), "/usr/bin/bwrap", 0, 0,
     "bubblewrap binary of the stateless tier (a weak, Docker-free fallback)", OPT_RESTART},
    {"stateless-python", OPT_STR, O(stateless_python), "/usr/bin/python3", 0, 0,
     "the host's python3 the stateless tier runs (stdlib only: -I -S)", OPT_RESTART},
    {"stateless-timeout-s", OPT_INT, O(stateless_timeout_s), "10", 1, 60,
     "wall-clock limit of one stateless run (its CPU limit is one second more)", OPT_RESTART},
    {"stateless-memory-mb", OPT_INT, O(stateless_memory_mb), "256", 64, 4096,
     "memory of one stateless run, all its processes together (a watchdog on their "
     "proportional set size kills it above; each process's address space is capped at it "
     "too)",
     OPT_RESTART},
    {"stateless-max-running", OPT_INT, O(stateless_max_running), "4", 1, 32,
     "stateless runs at once; more are refused (each runs as its own host uid, just below "
     "sandbox-uid-base)",
     OPT_RESTART},
    /* The snapshot stores (blobstore.h). */
    {"store", OPT_STR, O(store), "", 0, 0,
     "where snapshots go: dir:PATH or s3://bucket/prefix (empty = dir:<state-dir>/store)",
     OPT_RESTART},
    {"store-endpoint", OPT_STR, O(store_endpoint), "", 0, 0,
     "an s3:// store's endpoint, http(s)://host[:port], addressed path-style", OPT_RESTART},
    {"store-region", OPT_STR, O(store_region), "us-east-1", 0, 0,
     "an s3:// store's signing region (SigV4)", OPT_RESTART},
    {"store-credentials-file", OPT_STR, O(store_credentials_file), "", 0, 0,
     "an s3:// store's keys: two lines (access key, secret) or aws_access_key_id= and "
     "aws_secret_access_key=; re-read on SIGHUP; empty = AWS_ACCESS_KEY_ID and "
     "AWS_SECRET_ACCESS_KEY",
     OPT_RESTART},
    {"store-timeout-ms", OPT_INT, O(store_timeout_ms), "60000", 1000, 3600000,
     "deadline of one request to an s3:// store (one part of an upload); a get fails when "
     "under 1 KiB/s for that long",
     OPT_RESTART},
    {"store-retries", OPT_INT, O(store_retries), "4", 1, 10,
     "retries of a request to an s3:// store on a 5xx or a connection failure (backoff 250 ms "
     "doubling, at most 8 s)",
     OPT_RESTART},
    /* Snapshots (snapshot.h, docs/snapshots.md). */
    {"snapshot-max-mb", OPT_INT, O(snapshot_max_mb), "1024", 1, 65536,
     "the largest snapshot (its tar, MiB); a larger workspace is refused (413): choose files "
     "with persist.paths",
     OPT_LIVE},
    {"snapshot-max-files", OPT_INT, O(snapshot_max_files), "50000", 1, 100000,
     "the most entries (files and directories) one snapshot holds", OPT_LIVE},
    {"snapshot-keep", OPT_INT, O(snapshot_keep), "50", 0, 100000,
     "snapshots kept per workspace of a tenant (older ones are deleted; 0 = no count limit)",
     OPT_LIVE},
    {"snapshot-max-age-s", OPT_INT, O(snapshot_max_age_s), "2592000", 1, 315360000,
     "snapshots older than this are deleted (default 30 days)", OPT_LIVE},
    {"snapshot-retention-every-s", OPT_INT, O(snapshot_retention_every_s), "60", 1, 86400,
     "how often retention runs", OPT_RESTART},
    {"heartbeat-ms", OPT_INT, O(heartbeat_ms), "1000", 100, 60000,
     "how often this node writes its heartbeat (load, room, URL) to Redis", OPT_RESTART},
    {"node-lost-ms", OPT_INT, O(node_lost_ms), "4000", 300, 600000,
     "a node without a heartbeat for this long is lost: its sessions answer 410 node_lost "
     "(more than twice heartbeat-ms)",
     OPT_RESTART},
    {"advertise-url", OPT_STR, O(advertise_url), "", 0, 0,
     "http://HOST:PORT or https://HOST:PORT where peer nodes reach this node's API; default: "
     "from a TCP listen address that is not a wildcard, else none (no forwarded calls)",
     OPT_RESTART},
    /* Forwarding a call to the node that owns its session (forward.h). */
    {"cluster-secret-file", OPT_STR, O(cluster_secret_file), "", 0, 0,
     "file holding the secret the nodes of one cluster share (at least 32 bytes; a forwarded "
     "call carries it, so the owner knows a peer from a client); read at start and on SIGHUP; "
     "empty = this node forwards nothing",
     OPT_LIVE},
    {"peer-ca-file", OPT_STR, O(peer_ca_file), "", 0, 0,
     "PEM CA bundle a peer's https:// certificate is checked against (its host name too); "
     "empty = the system's store; re-read on SIGHUP",
     OPT_LIVE},
    {"forward-max-inflight", OPT_INT, O(forward_max_inflight), "256", 1, 65536,
     "calls this node forwards at once; more are answered 503", OPT_LIVE},
    {"forward-connect-timeout-ms", OPT_INT, O(forward_connect_timeout_ms), "2000", 100, 60000,
     "a forwarded call's connect (and TLS handshake) to the owner", OPT_LIVE},
    {"forward-stall-timeout-s", OPT_INT, O(forward_stall_timeout_s), "0", 0, 86400,
     "a forwarded call ends when the owner sends nothing for this long (while the caller "
     "keeps up); 0 = the longest execution or install window plus 30 s",
     OPT_LIVE},
};

#define OPT_COUNT (sizeof(opt_table) / sizeof(opt_table[0]))

static const struct opt *opt_find(const char *key)
{
	char norm[64];
	size_t n = strlen(key);
	if (n >= sizeof(norm))
		return NULL;
	for (size_t i = 0; i <= n; i++)
		norm[i] = key[i] == '_' ? '-' : (char)tolower((unsigned char)key[i]);
	for (size_t i = 0; i < OPT_COUNT; i++)
		if (strcmp(opt_table[i].key, norm) == 0)
			return &opt_table[i];
	return NULL;
}

static int opt_assign(struct config *cfg, const struct opt *o, const char *value,
		      const char *origin, struct err **errp)
{
	char *field = (char *)cfg + o->offset;
	char *end = NULL;
	switch (o->type) {
	case OPT_STR: {
		char **s = (char **)field;
		free(*s);
		*s = xstrdup(value);
		return 0;
	}
	case OPT_INT: {
		errno = 0;
		long long v = strtoll(value, &end, 10);
		if (errno || end == value || *end != '\0')
			return err_set(errp, ERR_BAD_REQUEST, "%s: %s: not an integer: '%s'",
				       origin, o->key, value);
		if (v < o->min || v > o->max)
			return err_set(errp, ERR_BAD_REQUEST, "%s: %s: %lld is outside %.0f..%.0f",
				       origin, o->key, v, o->min, o->max);
		*(int64_t *)field = v;
		return 0;
	}
	case OPT_DOUBLE: {
		errno = 0;
		double v = strtod(value, &end);
		if (errno || end == value || *end != '\0' || !isfinite(v))
			return err_set(errp, ERR_BAD_REQUEST, "%s: %s: not a number: '%s'", origin,
				       o->key, value);
		if (v < o->min || v > o->max)
			return err_set(errp, ERR_BAD_REQUEST, "%s: %s: %g is outside %g..%g",
				       origin, o->key, v, o->min, o->max);
		*(double *)field = v;
		return 0;
	}
	case OPT_BOOL:
		if (!strcmp(value, "true") || !strcmp(value, "yes") || !strcmp(value, "1"))
			*(bool *)field = true;
		else if (!strcmp(value, "false") || !strcmp(value, "no") || !strcmp(value, "0"))
			*(bool *)field = false;
		else
			return err_set(errp, ERR_BAD_REQUEST,
				       "%s: %s: expected true or false: '%s'", origin, o->key,
				       value);
		return 0;
	}
	return err_set(errp, ERR_INTERNAL, "bad option type");
}

void config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < OPT_COUNT; i++)
		if (opt_assign(cfg, &opt_table[i], opt_table[i].def, "default", NULL) < 0)
			abort(); /* a bad default is a programming error */
}

void config_free(struct config *cfg)
{
	for (size_t i = 0; i < OPT_COUNT; i++)
		if (opt_table[i].type == OPT_STR) {
			char **s = (char **)((char *)cfg + opt_table[i].offset);
			free(*s);
			*s = NULL;
		}
}

int config_set(struct config *cfg, const char *key, const char *value, const char *origin,
	       struct err **errp)
{
	const struct opt *o = opt_find(key);
	if (o == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "%s: unknown option '%s'", origin, key);
	return opt_assign(cfg, o, value, origin, errp);
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int config_apply_text(struct config *cfg, const char *text, const char *origin, struct err **errp)
{
	AUTOFREE char *copy = xstrdup(text);
	char *save = NULL;
	int lineno = 0;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		line = trim(line);
		if (*line == '\0' || *line == '#')
			continue;
		char *eq = strchr(line, '=');
		if (eq == NULL)
			return err_set(errp, ERR_BAD_REQUEST, "%s:%d: expected 'key = value'",
				       origin, lineno);
		*eq = '\0';
		char where[256];
		snprintf(where, sizeof(where), "%s:%d", origin, lineno);
		if (config_set(cfg, trim(line), trim(eq + 1), where, errp) < 0)
			return -1;
	}
	return 0;
}

int config_apply_env(struct config *cfg, char *const *envp, struct err **errp)
{
	for (; envp && *envp; envp++) {
		if (strncmp(*envp, "CID_", 4) != 0)
			continue;
		const char *eq = strchr(*envp, '=');
		if (eq == NULL)
			continue;
		AUTOFREE char *key = xstrndup(*envp + 4, (size_t)(eq - *envp - 4));
		char origin[96];
		snprintf(origin, sizeof(origin), "environment CID_%s", key);
		if (config_set(cfg, key, eq + 1, origin, errp) < 0)
			return -1;
	}
	return 0;
}

static int config_read_file(struct config *cfg, const char *path, struct err **errp)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "config file %s: %s", path, strerror(errno));
	char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	bool more = !feof(f);
	fclose(f);
	if (more)
		return err_set(errp, ERR_BAD_REQUEST, "config file %s: larger than 64 KiB", path);
	buf[n] = '\0';
	return config_apply_text(cfg, buf, path, errp);
}

void config_usage(const char *prog)
{
	printf("usage: %s [--OPTION VALUE]... | --help | --version\n\n"
	       "Every option is also a config-file key (listen = ...) and an environment\n"
	       "variable (CID_LISTEN=...). Command line beats environment beats file.\n"
	       "A true/false option given alone (--remove-on-exit) means true. Options marked\n"
	       "(restart) keep their value on SIGHUP; the others are reloaded.\n\n",
	       prog);
	for (size_t i = 0; i < OPT_COUNT; i++) {
		const struct opt *o = &opt_table[i];
		printf("  --%-20s %s%s%s%s%s\n", o->key, o->help, *o->def ? " [" : "", o->def,
		       *o->def ? "]" : "", o->flags & OPT_RESTART ? " (restart)" : "");
	}
}

static bool bool_word(const char *v)
{
	static const char *const words[] = {"true", "false", "yes", "no", "1", "0"};
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcmp(v, words[i]) == 0)
			return true;
	return false;
}

/* One command-line option at argv[*i]: its row and value (*i moves past
 * what was used). Says which is wrong: unknown, a value missing, or a value
 * given to --help or --version. Those two come back with *o NULL. */
static int argv_option(int argc, char **argv, int *i, const struct opt **o, const char **value,
		       struct err **errp)
{
	const char *arg = argv[*i];
	*o = NULL;
	*value = NULL;
	if (!strcmp(arg, "-h"))
		return 0;
	if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0' || arg[2] == '=')
		return err_set(errp, ERR_BAD_REQUEST, "unexpected argument '%s' (see --help)", arg);
	const char *eq = strchr(arg, '=');
	AUTOFREE char *key = eq ? xstrndup(arg + 2, (size_t)(eq - arg - 2)) : xstrdup(arg + 2);
	if (!strcmp(key, "help") || !strcmp(key, "version")) {
		if (eq)
			return err_set(errp, ERR_BAD_REQUEST, "option --%s takes no value", key);
		return 0;
	}
	*o = opt_find(key);
	if (*o == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "unknown option --%s (see --help)", key);
	const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
	if (eq)
		*value = eq + 1;
	else if ((*o)->type == OPT_BOOL)
		*value = next && bool_word(next) ? argv[++*i] : "true";
	else if (next && strncmp(next, "--", 2) != 0)
		*value = argv[++*i];
	else
		return err_set(errp, ERR_BAD_REQUEST, "option --%s needs a value", key);
	return 0;
}

/* Two passes over argv: the first checks every argument and finds --config
 * (the file is applied before the environment and the other flags), --help
 * and --version; the second applies the flags. */
int config_load(struct config *cfg, int argc, char **argv, char *const *envp, struct err **errp)
{
	config_defaults(cfg);
	const char *file = NULL;
	for (char *const *e = envp; e && *e; e++)
		if (strncmp(*e, "CID_CONFIG=", 11) == 0)
			file = *e + 11;
	bool help = false, version = false;
	for (int i = 1; i < argc; i++) {
		const struct opt *o;
		const char *value;
		const char *arg = argv[i];
		if (argv_option(argc, argv, &i, &o, &value, errp) < 0)
			return -1;
		if (o == NULL && !strcmp(arg, "--version"))
			version = true;
		else if (o == NULL)
			help = true;
		else if (!strcmp(o->key, "config"))
			file = value;
	}
	if (help) {
		config_usage(argv[0]);
		return CONFIG_LOAD_HELP;
	}
	if (version)
		return CONFIG_LOAD_VERSION;
	if (file && *file && config_read_file(cfg, file, errp) < 0)
		return -1;
	if (config_apply_env(cfg, envp, errp) < 0)
		return -1;
	for (int i = 1; i < argc; i++) {
		const struct opt *o;
		const char *value;
		if (argv_option(argc, argv, &i, &o, &value, errp) < 0)
			return -1;
		if (o == NULL)
			continue;
		char origin[96];
		snprintf(origin, sizeof(origin), "--%s", o->key);
		if (opt_assign(cfg, o, value, origin, errp) < 0)
			return -1;
	}
	if (cfg->node[0] == '\0') {
		char host[256] = "node";
		gethostname(host, sizeof(host) - 1);
		free(cfg->node);
		cfg->node = xstrdup(host);
	}
	return config_validate(cfg, errp);
}

/* Loopback or a unix socket. A name other than localhost, or an address
 * that does not parse, is not: the listener would refuse it anyway. */
bool config_listen_is_local(const char *listen)
{
	if (strncmp(listen, "unix:", 5) == 0)
		return true;
	if (strncmp(listen, "localhost:", 10) == 0)
		return true;
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(listen, ':');
	size_t n = colon ? (size_t)(colon - listen) : 0;
	if (colon == NULL || n + 1 > sizeof(host))
		return false;
	memcpy(host, listen, n);
	host[n] = '\0';
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
		host[n - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a6) == 1)
			return IN6_IS_ADDR_LOOPBACK(&a6) ||
			       (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	}
	return false;
}

/* A listener others can reach hands the sandbox fleet to whoever reaches
 * it: it needs keys (who may call) and TLS or a proxy's (the keys must not
 * cross the network in clear). The message names what is missing. */
static int validate_listener(const struct config *cfg, struct err **errp)
{
	bool cert = cfg->tls_cert[0] != '\0', key = cfg->tls_key[0] != '\0';
	if (cert != key)
		return err_set(errp, ERR_BAD_REQUEST,
			       "%s is set but %s is not: TLS needs both the certificate and its "
			       "key",
			       cert ? "tls-cert" : "tls-key", cert ? "tls-key" : "tls-cert");
	if (config_listen_is_local(cfg->listen))
		return 0;
	bool keys = cfg->admin_key_file[0] != '\0';
	bool transport = cert || cfg->plain_http_behind_proxy;
	if (keys && transport)
		return 0;
	static const char want_keys[] = "--admin-key-file (API keys)";
	static const char want_tls[] =
	    "TLS (--tls-cert and --tls-key) or --plain-http-behind-proxy "
	    "(a TLS-terminating proxy is in front)";
	return err_set(errp, ERR_BAD_REQUEST,
		       "listen %s is not loopback: it needs %s%s%s; or listen on 127.0.0.1:PORT "
		       "or unix:PATH",
		       cfg->listen, keys ? "" : want_keys, keys || transport ? "" : ", and ",
		       transport ? "" : want_tls);
}

int config_validate(const struct config *cfg, struct err **errp)
{
	if (cfg->pip_index_url && cfg->pip_index_url[0]) {
		char authority[300];
		if (install_index_authority(cfg->pip_index_url, authority, sizeof(authority),
					    errp) < 0)
			return -1;
	}
	if (cfg->idle_timeout_s > cfg->max_idle_timeout_s)
		return err_set(errp, ERR_BAD_REQUEST,
			       "idle-timeout-s %lld exceeds max-idle-timeout-s %lld",
			       (long long)cfg->idle_timeout_s, (long long)cfg->max_idle_timeout_s);
	if (cfg->memory_mb > cfg->max_memory_mb)
		return err_set(errp, ERR_BAD_REQUEST, "memory-mb exceeds max-memory-mb");
	if (cfg->cpus > cfg->max_cpus)
		return err_set(errp, ERR_BAD_REQUEST, "cpus exceeds max-cpus");
	if (cfg->pids > cfg->max_pids)
		return err_set(errp, ERR_BAD_REQUEST, "pids exceeds max-pids");
	if (cfg->disk_mb > cfg->max_disk_mb)
		return err_set(errp, ERR_BAD_REQUEST, "disk-mb exceeds max-disk-mb");
	if (cfg->exec_timeout_s > cfg->max_exec_timeout_s)
		return err_set(errp, ERR_BAD_REQUEST, "exec-timeout-s exceeds max-exec-timeout-s");
	if (log_level_valid(cfg->log_level) == false)
		return err_set(errp, ERR_BAD_REQUEST,
			       "log-level: expected debug, info, warn or error");
	if (validate_listener(cfg, errp) < 0)
		return -1;
	if (cfg->node_lost_ms <= 2 * cfg->heartbeat_ms)
		return err_set(
		    errp, ERR_BAD_REQUEST,
		    "node-lost-ms %lld must be more than twice heartbeat-ms %lld (one late "
		    "heartbeat must not lose a node)",
		    (long long)cfg->node_lost_ms, (long long)cfg->heartbeat_ms);
	if (cfg->advertise_url[0] && strncmp(cfg->advertise_url, "http://", 7) != 0 &&
	    strncmp(cfg->advertise_url, "https://", 8) != 0)
		return err_set(errp, ERR_BAD_REQUEST,
			       "advertise-url: expected http://HOST:PORT or https://HOST:PORT");
	if (strcmp(cfg->workspace_backend, "loop") != 0 &&
	    strcmp(cfg->workspace_backend, "tmpfs") != 0)
		return err_set(errp, ERR_BAD_REQUEST, "workspace-backend: expected loop or tmpfs");
	if (strcmp(cfg->stateless, "on") != 0 && strcmp(cfg->stateless, "off") != 0)
		return err_set(errp, ERR_BAD_REQUEST, "stateless: expected on or off");
	if (log_format_parse(cfg->log_format) < 0)
		return err_set(errp, ERR_BAD_REQUEST, "log-format: expected text or json");
	if (cfg->sandbox_uid_base + cfg->sandbox_uid_count > INT32_MAX)
		return err_set(errp, ERR_BAD_REQUEST,
			       "sandbox-uid-base + sandbox-uid-count passes the largest uid");
	if (cfg->sandbox_uid_count <
	    cfg->max_sessions + (cfg->pool_max > cfg->pool_size ? cfg->pool_max : cfg->pool_size) +
		cfg->pool_network_size)
		return err_set(errp, ERR_BAD_REQUEST,
			       "sandbox-uid-count %lld is smaller than max-sessions plus the warm "
			       "pools: every session needs a uid of its own",
			       (long long)cfg->sandbox_uid_count);
	if (strlen(cfg->key_prefix) > 64)
		return err_set(errp, ERR_BAD_REQUEST, "key-prefix: longer than 64 bytes");
	/* Socket paths are <state-dir>/s/<36-char id>/ipc.sock; sun_path holds 108. */
	if (strlen(cfg->state_dir) > 60)
		return err_set(errp, ERR_BAD_REQUEST,
			       "state-dir %s: longer than 60 bytes (unix socket paths are limited)",
			       cfg->state_dir);
	if (resolver_parse_spec(cfg->egress_resolver, &(enum resolver_mode){0},
				&(struct sockaddr_storage){0}, errp) < 0)
		return -1;
	if (blobstore_check_config(cfg->store, cfg->store_endpoint, cfg->store_region, errp) < 0)
		return -1;
	if (fixer_target_check_config(cfg, errp) < 0)
		return -1;
	char *tag = config_image_tag(cfg, cfg->image);
	if (tag == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "image: profile '%s' is not in images '%s'",
			       cfg->image, cfg->images);
	free(tag);
	return 0;
}

/* The value as text, for the reload's log lines. */
static void opt_format(const struct opt *o, const struct config *cfg, char *out, size_t size)
{
	const char *field = (const char *)cfg + o->offset;
	if (o->flags & OPT_SECRET) {
		snprintf(out, size, "(secret)");
		return;
	}
	switch (o->type) {
	case OPT_STR: {
		const char *v = *(char *const *)field;
		snprintf(out, size, "%s", *v ? v : "\"\"");
		return;
	}
	case OPT_INT: snprintf(out, size, "%lld", (long long)*(const int64_t *)field); return;
	case OPT_DOUBLE: snprintf(out, size, "%g", *(const double *)field); return;
	case OPT_BOOL: snprintf(out, size, "%s", *(const bool *)field ? "true" : "false"); return;
	}
}

static bool opt_differ(const struct opt *o, const struct config *a, const struct config *b)
{
	const char *fa = (const char *)a + o->offset, *fb = (const char *)b + o->offset;
	switch (o->type) {
	case OPT_STR: return strcmp(*(char *const *)fa, *(char *const *)fb) != 0;
	case OPT_INT: return *(const int64_t *)fa != *(const int64_t *)fb;
	case OPT_DOUBLE: return *(const double *)fa != *(const double *)fb;
	case OPT_BOOL: return *(const bool *)fa != *(const bool *)fb;
	}
	return false;
}

static void opt_copy(const struct opt *o, struct config *dst, const struct config *src)
{
	char *d = (char *)dst + o->offset;
	const char *s = (const char *)src + o->offset;
	switch (o->type) {
	case OPT_STR:
		free(*(char **)d);
		*(char **)d = xstrdup(*(char *const *)s);
		return;
	case OPT_INT: memcpy(d, s, sizeof(int64_t)); return;
	case OPT_DOUBLE: memcpy(d, s, sizeof(double)); return;
	case OPT_BOOL: memcpy(d, s, sizeof(bool)); return;
	}
}

void config_copy(struct config *dst, const struct config *src)
{
	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; i < OPT_COUNT; i++)
		opt_copy(&opt_table[i], dst, src);
}

size_t config_reload_into(struct config *dst, const struct config *src, config_change_fn fn,
			  void *arg)
{
	size_t changed = 0;
	for (size_t i = 0; i < OPT_COUNT; i++) {
		const struct opt *o = &opt_table[i];
		if (!opt_differ(o, dst, src))
			continue;
		changed++;
		bool live = !(o->flags & OPT_RESTART);
		if (fn) {
			char before[256], after[256];
			opt_format(o, dst, before, sizeof(before));
			opt_format(o, src, after, sizeof(after));
			fn(o->key, before, after, live, arg);
		}
		if (live)
			opt_copy(o, dst, src);
	}
	return changed;
}

bool config_option_is_live(const char *key)
{
	const struct opt *o = opt_find(key);
	return o && !(o->flags & OPT_RESTART);
}

char *config_image_tag(const struct config *cfg, const char *profile)
{
	size_t plen = strlen(profile);
	const char *p = cfg->images;
	while (p && *p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		if (eq && (size_t)(eq - p) == plen && strncmp(p, profile, plen) == 0 &&
		    eq + 1 < p + len)
			return xstrndup(eq + 1, (size_t)(p + len - eq - 1));
		p = comma ? comma + 1 : NULL;
	}
	return NULL;
}
