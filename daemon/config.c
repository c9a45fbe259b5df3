/* config.c: the option table, and loading it from file, environment and flags. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "resolver.h"
#include "xalloc.h"

enum opt_type { OPT_STR, OPT_INT, OPT_DOUBLE, OPT_BOOL };

struct opt {
	const char *key;
	enum opt_type type;
	size_t offset;
	const char *def;
	double min, max; /* numeric bounds */
	const char *help;
};

#define O(field) offsetof(struct config, field)

static const struct opt opt_table[] = {
    {"config", OPT_STR, O(config_file), "", 0, 0, "config file to read (key = value lines)"},
    {"listen", OPT_STR, O(listen), "127.0.0.1:8080", 0, 0, "HOST:PORT or unix:PATH for the API"},
    {"admin-key-file", OPT_STR, O(admin_key_file), "", 0, 0,
     "file holding the admin key; set, every call needs a key (tenants, quotas); empty = one "
     "tenant \"default\", loopback only"},
    {"redis", OPT_STR, O(redis), "redis://127.0.0.1:6379", 0, 0,
     "redis://HOST:PORT[/DB] or unix:///PATH"},
    {"docker", OPT_STR, O(docker), "/var/run/docker.sock", 0, 0, "Docker engine unix socket"},
    {"state-dir", OPT_STR, O(state_dir), "/var/lib/ci", 0, 0,
     "per-session IPC directories live here"},
    {"key-prefix", OPT_STR, O(key_prefix), "ci:", 0, 0, "prefix of every Redis key"},
    {"node", OPT_STR, O(node), "", 0, 0, "this daemon's node name (default: hostname)"},
    {"log-level", OPT_STR, O(log_level), "info", 0, 0, "debug, info, warn or error"},
    {"image", OPT_STR, O(image), "python", 0, 0, "default image profile"},
    {"images", OPT_STR, O(images), "python=ci/python:latest", 0, 0,
     "image profiles: NAME=TAG[,NAME=TAG...]"},
    {"runtime", OPT_STR, O(runtime), "", 0, 0,
     "Docker runtime for sandboxes (e.g. runsc); empty = engine default"},
    {"gvisor-runtime", OPT_STR, O(gvisor_runtime), "runsc", 0, 0,
     "Docker runtime behind a session's \"runtime\": \"gvisor\""},
    {"egress-hosts-file", OPT_STR, O(egress_hosts_file), "", 0, 0,
     "hosts-style file (IP NAME...) the egress proxy consults before DNS; re-read on SIGHUP"},
    {"egress-trusted", OPT_STR, O(egress_trusted), "", 0, 0,
     "IP[:PORT] or [IPv6][:PORT],... the egress proxy may reach although private or local"},
    {"egress-resolver", OPT_STR, O(egress_resolver), "system", 0, 0,
     "names beyond the hosts file: system (resolv.conf's nameservers, no search domains), "
     "hosts-only (no DNS at all) or IP:PORT of one nameserver"},
    {"egress-proxy-port", OPT_INT, O(egress_proxy_port), "3128", 1, 65535,
     "port of the egress proxy on the sandbox network's gateway (fixed, so sandboxes "
     "keep their proxy across restarts)"},
    {"seccomp-profile", OPT_STR, O(seccomp_profile), "", 0, 0,
     "seccomp profile for sandboxes: empty = built in, 'engine' = Docker's default, or a JSON "
     "file"},
    {"idle-timeout-s", OPT_INT, O(idle_timeout_s), "600", 1, 86400 * 7,
     "default idle timeout of a session"},
    {"max-idle-timeout-s", OPT_INT, O(max_idle_timeout_s), "86400", 1, 86400 * 7,
     "largest idle timeout a client may ask for"},
    {"max-lifetime-s", OPT_INT, O(max_lifetime_s), "86400", 1, 86400 * 30,
     "longest a session may live, however active (requests may lower it)"},
    {"memory-mb", OPT_INT, O(memory_mb), "512", 16, 1 << 20, "default memory limit"},
    {"max-memory-mb", OPT_INT, O(max_memory_mb), "4096", 16, 1 << 20, "largest memory limit"},
    {"cpus", OPT_DOUBLE, O(cpus), "1.0", 0.01, 1024, "default CPU limit"},
    {"max-cpus", OPT_DOUBLE, O(max_cpus), "2.0", 0.01, 1024, "largest CPU limit"},
    {"pids", OPT_INT, O(pids), "128", 8, 1 << 20, "default process limit"},
    {"max-pids", OPT_INT, O(max_pids), "1024", 8, 1 << 20, "largest process limit"},
    {"disk-mb", OPT_INT, O(disk_mb), "512", 1, 1 << 20, "default /workspace size"},
    {"max-disk-mb", OPT_INT, O(max_disk_mb), "4096", 1, 1 << 20, "largest /workspace size"},
    {"exec-timeout-s", OPT_INT, O(exec_timeout_s), "60", 1, 86400, "default execution limit"},
    {"max-exec-timeout-s", OPT_INT, O(max_exec_timeout_s), "60", 1, 86400,
     "largest execution limit"},
    {"pool-size", OPT_INT, O(pool_size), "2", 0, 256,
     "warm sandboxes kept started for the default image and limits"},
    {"pool-network-size", OPT_INT, O(pool_network_size), "0", 0, 256,
     "warm sandboxes on the sandbox network, for sessions with an allowlist"},
    {"output-cap-bytes", OPT_INT, O(output_cap_bytes), "1048576", 1024, 64 << 20,
     "cap on stdout and on stderr of one execution"},
    {"max-sessions", OPT_INT, O(max_sessions), "1000", 1, 1000000, "sessions on this node"},
    {"sandbox-uid-base", OPT_INT, O(sandbox_uid_base), "200000", 1000, 2000000000,
     "first host uid for sandboxes; each session runs as its own uid (and gid)"},
    {"sandbox-uid-count", OPT_INT, O(sandbox_uid_count), "4096", 1, 1 << 24,
     "how many uids from sandbox-uid-base (daemons sharing a host: disjoint ranges)"},
    {"start-timeout-s", OPT_INT, O(start_timeout_s), "30", 1, 600,
     "container start to kernel ready"},
    {"kill-grace-ms", OPT_INT, O(kill_grace_ms), "2000", 0, 60000,
     "deadline to hard kill when the kernel ignores the interrupt"},
    {"ipc-hello-timeout-ms", OPT_INT, O(ipc_hello_timeout_ms), "5000", 100, 600000,
     "a sandbox connection that has not said hello by then is closed"},
    {"tombstone-ttl-s", OPT_INT, O(tombstone_ttl_s), "86400", 1, 86400 * 30,
     "how long an ended session still answers 410"},
    {"max-body-bytes", OPT_INT, O(max_body_bytes), "2097152", 1024, 64 << 20,
     "largest JSON request body"},
    {"drain-timeout-s", OPT_INT, O(drain_timeout_s), "30", 0, 3600,
     "on SIGTERM, how long running executions may finish"},
    {"ipc-tmpfs", OPT_BOOL, O(ipc_tmpfs), "true", 0, 0,
     "mount a tmpfs for the sessions' IPC directories (hides the state-dir path from "
     "sandboxes)"},
    {"remove-on-exit", OPT_BOOL, O(remove_on_exit), "false", 0, 0,
     "remove session containers when the daemon exits"},
    {"http-head-timeout-s", OPT_INT, O(http_head_timeout_s), "10", 1, 3600,
     "an API request head must be complete this long after its first byte"},
    {"http-idle-timeout-s", OPT_INT, O(http_idle_timeout_s), "30", 1, 86400,
     "an API connection waiting for a request (new or keep-alive) is closed after this"},
    {"max-connections", OPT_INT, O(max_connections), "4096", 16, 1000000, "API connections in all"},
    {"max-conns-per-peer", OPT_INT, O(max_conns_per_peer), "512", 1, 1000000,
     "API connections from one source address (an IPv6 /64)"},
    {"fd-reserve", OPT_INT, O(fd_reserve), "64", 16, 1 << 20,
     "file descriptors never handed to clients, tunnels or sessions (Docker, Redis, helpers)"},
    {"quota-sessions", OPT_INT, O(quota_sessions), "0", 0, 1000000000,
     "live sessions per tenant (all nodes on the Redis); 0 = unlimited; a tenant's own quota "
     "overrides it"},
    {"quota-executions", OPT_INT, O(quota_executions), "0", 0, 1000000000,
     "concurrent executions per tenant; 0 = unlimited"},
    {"quota-memory-mb", OPT_INT, O(quota_memory_mb), "0", 0, 1000000000,
     "the memory limits of a tenant's live sessions, summed; 0 = unlimited"},
    {"quota-exec-seconds-per-hour", OPT_INT, O(quota_exec_seconds_per_hour), "0", 0, 1000000000,
     "execution wall time per tenant in a sliding hour; 0 = unlimited"},
    {"quota-requests-per-second", OPT_INT, O(quota_requests_per_second), "0", 0, 1000000000,
     "API requests per tenant and second (a token bucket holding twice that); 0 = unlimited"},
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
	printf("usage: %s [--OPTION VALUE]...\n\n"
	       "Every option is also a config-file key (listen = ...) and an environment\n"
	       "variable (CID_LISTEN=...). Command line beats environment beats file.\n\n",
	       prog);
	for (size_t i = 0; i < OPT_COUNT; i++) {
		const struct opt *o = &opt_table[i];
		printf("  --%-20s %s%s%s%s\n", o->key, o->help, *o->def ? " [" : "", o->def,
		       *o->def ? "]" : "");
	}
}

/* Two passes over argv: first to find --config (the file is applied before
 * the environment and the other flags), then the flags themselves. */
int config_load(struct config *cfg, int argc, char **argv, char *const *envp, struct err **errp)
{
	config_defaults(cfg);
	const char *file = NULL;
	for (char *const *e = envp; e && *e; e++)
		if (strncmp(*e, "CID_CONFIG=", 11) == 0)
			file = *e + 11;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			config_usage(argv[0]);
			return 1;
		}
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			file = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			file = argv[i] + 9;
	}
	if (file && *file && config_read_file(cfg, file, errp) < 0)
		return -1;
	if (config_apply_env(cfg, envp, errp) < 0)
		return -1;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strncmp(arg, "--", 2) != 0)
			return err_set(errp, ERR_BAD_REQUEST, "unexpected argument '%s'", arg);
		const char *eq = strchr(arg, '=');
		AUTOFREE char *key =
		    eq ? xstrndup(arg + 2, (size_t)(eq - arg - 2)) : xstrdup(arg + 2);
		const char *value;
		if (eq)
			value = eq + 1;
		else if (i + 1 < argc)
			value = argv[++i];
		else
			return err_set(errp, ERR_BAD_REQUEST, "option --%s needs a value", key);
		char origin[96];
		snprintf(origin, sizeof(origin), "--%s", key);
		if (config_set(cfg, key, value, origin, errp) < 0)
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

static bool listen_is_local(const char *listen)
{
	if (strncmp(listen, "unix:", 5) == 0)
		return true;
	return strncmp(listen, "127.", 4) == 0 || strncmp(listen, "localhost:", 10) == 0 ||
	       strncmp(listen, "[::1]:", 6) == 0;
}

int config_validate(const struct config *cfg, struct err **errp)
{
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
	if (!listen_is_local(cfg->listen))
		/* No API keys exist yet, so a non-loopback listener would hand the
		 * sandbox fleet to anyone on the network. */
		return err_set(errp, ERR_BAD_REQUEST,
			       "listen %s: refusing a non-loopback address without API keys; "
			       "use 127.0.0.1:PORT or unix:PATH",
			       cfg->listen);
	if (cfg->sandbox_uid_base + cfg->sandbox_uid_count > INT32_MAX)
		return err_set(errp, ERR_BAD_REQUEST,
			       "sandbox-uid-base + sandbox-uid-count passes the largest uid");
	if (cfg->sandbox_uid_count < cfg->max_sessions + cfg->pool_size + cfg->pool_network_size)
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
	char *tag = config_image_tag(cfg, cfg->image);
	if (tag == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "image: profile '%s' is not in images '%s'",
			       cfg->image, cfg->images);
	free(tag);
	return 0;
}

void config_reload_into(struct config *dst, const struct config *src, char *changed, size_t size)
{
	/* Limits, clocks and caps apply to what comes next; addresses, the
	 * state directory and the key prefix would orphan what exists. */
	static const char *const live[] = {"log-level",
					   "idle-timeout-s",
					   "max-idle-timeout-s",
					   "memory-mb",
					   "max-memory-mb",
					   "cpus",
					   "max-cpus",
					   "pids",
					   "max-pids",
					   "disk-mb",
					   "max-disk-mb",
					   "exec-timeout-s",
					   "max-exec-timeout-s",
					   "output-cap-bytes",
					   "max-lifetime-s",
					   "max-sessions",
					   "kill-grace-ms",
					   "start-timeout-s",
					   "drain-timeout-s",
					   "remove-on-exit",
					   "quota-sessions",
					   "quota-executions",
					   "quota-memory-mb",
					   "quota-exec-seconds-per-hour",
					   "quota-requests-per-second",
					   NULL};
	changed[0] = '\0';
	for (const char *const *k = live; *k; k++) {
		const struct opt *o = opt_find(*k);
		char *d = (char *)dst + o->offset;
		const char *s = (const char *)src + o->offset;
		bool differ;
		if (o->type == OPT_STR) {
			differ = strcmp(*(char **)d, *(char *const *)s) != 0;
			if (differ) {
				free(*(char **)d);
				*(char **)d = xstrdup(*(char *const *)s);
			}
		} else {
			size_t n = o->type == OPT_INT      ? sizeof(int64_t)
				   : o->type == OPT_DOUBLE ? sizeof(double)
							   : sizeof(bool);
			differ = memcmp(d, s, n) != 0;
			memcpy(d, s, n);
		}
		if (differ) {
			size_t used = strlen(changed);
			snprintf(changed + used, size - used, "%s%s", used ? ", " : "", *k);
		}
	}
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
