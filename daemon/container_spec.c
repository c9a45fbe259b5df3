/* container_spec.c: one hardened container per session, as the driver's
 * container config. */
#include "container_spec.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "xalloc.h"

void container_spec_new_name(char *buf, size_t size)
{
	unsigned char r[8];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		abort(); /* the kernel's CSPRNG does not fail once booted */
	snprintf(buf, size, "ci-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
		 r[5], r[6], r[7]);
}

static void env_add(struct container_spec *spec, const char *k, const char *v)
{
	if (spec->n_env >= CONTAINER_SPEC_MAX_ENV)
		abort(); /* session.c caps the client's env well below */
	size_t n = strlen(k) + strlen(v) + 2;
	char *e = xmalloc(n);
	snprintf(e, n, "%s=%s", k, v);
	spec->env[spec->n_env++] = e;
}

void container_spec_build(struct container_spec *spec, const struct session *s,
			  const struct config *cfg, const struct container_spec_args *a)
{
	static const char *const cap_drop[] = {"ALL"};
	static const char *const proxy_names[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
						  "https_proxy"};
	memset(spec, 0, sizeof(*spec));
	struct docker_container_config *d = &spec->docker;
	int64_t mem = s->limits.memory_mb * 1024 * 1024;
	int64_t disk = s->limits.disk_mb * 1024 * 1024;

	d->image = a->image_tag;
	/* The session's own uid, its gid equal to it (uid_range.h says why). */
	snprintf(spec->user, sizeof(spec->user), "%lld:%lld", (long long)s->uid, (long long)s->uid);
	d->user = spec->user;
	d->hostname = CONTAINER_HOSTNAME;
	d->working_dir = "/workspace";

	for (size_t i = 0; i < s->n_env; i++)
		env_add(spec, s->env[i].key, s->env[i].value);
	/* Ours last, so a client's env can never redirect the runner. */
	env_add(spec, "SANDBOX_IPC", CONTAINER_IPC_DIR "/ipc.sock");
	env_add(spec, "SANDBOX_SESSION", s->id);
	/* Programs that ask the environment first (getpass, git, pip) find a
	 * name even for a uid outside the image's passwd range. */
	env_add(spec, "USER", "sandbox");
	env_add(spec, "LOGNAME", "sandbox");
	if (a->network && a->proxy_url) {
		for (size_t i = 0; i < 4; i++)
			env_add(spec, proxy_names[i], a->proxy_url);
		env_add(spec, "NO_PROXY", "localhost,127.0.0.1");
		env_add(spec, "no_proxy", "localhost,127.0.0.1");
	}
	d->env = (const char *const *)spec->env;
	d->n_env = spec->n_env;

	/* No tenant label: a warm pool container gets its tenant when claimed,
	 * and labels cannot change; Redis holds the tenant. */
	spec->labels[0] = (struct docker_kv){"ci.managed", "true"};
	spec->labels[1] = (struct docker_kv){"ci.session", s->id};
	spec->labels[2] = (struct docker_kv){"ci.node", s->node};
	spec->labels[3] = (struct docker_kv){"ci.prefix", cfg->key_prefix};
	d->labels = spec->labels;
	d->n_labels = 4;

	/* The only host path in the sandbox: its own IPC directory, read-only. */
	size_t n = strlen(a->ipc_dir) + sizeof(CONTAINER_IPC_DIR) + 8;
	spec->binds[0] = xmalloc(n);
	snprintf(spec->binds[0], n, "%s:%s:ro", a->ipc_dir, CONTAINER_IPC_DIR);
	d->binds = (const char *const *)spec->binds;
	d->n_binds = 1;
	if (a->workspace_dir) {
		/* The session's own file system (nosuid, nodev and noexec come from its
		 * mount on the host); its size is its budget, apart from memory. */
		n = strlen(a->workspace_dir) + sizeof("/workspace") + 8;
		spec->binds[1] = xmalloc(n);
		snprintf(spec->binds[1], n, "%s:/workspace:rw", a->workspace_dir);
		d->n_binds = 2;
	}
	d->network_mode = a->network ? a->network : "none";
	d->readonly_rootfs = true;
	d->cap_drop = cap_drop;
	d->n_cap_drop = 1;
	spec->security_opt[0] = xstrdup("no-new-privileges");
	d->n_security_opt = 1;
	if (a->seccomp) {
		/* The API takes the profile's text itself (the CLI reads the file). */
		spec->security_opt[1] = xmalloc(strlen(a->seccomp) + 9);
		sprintf(spec->security_opt[1], "seccomp=%s", a->seccomp);
		d->n_security_opt = 2;
	}
	d->security_opt = (const char *const *)spec->security_opt;

	/* Disk quota: --storage-opt size is refused on overlay2 here, so the
	 * writable places are a loop-mounted image (/workspace, when the node
	 * can: workspace_disk.h) and size-capped tmpfs (charged to the memory
	 * cgroup: /tmp always, /workspace otherwise). */
	snprintf(spec->tmpfs_workspace, sizeof(spec->tmpfs_workspace),
		 "rw,nosuid,nodev,size=%lldm,uid=%lld,gid=%lld,mode=0700",
		 (long long)s->limits.disk_mb, (long long)s->uid, (long long)s->uid);
	snprintf(spec->tmpfs_tmp, sizeof(spec->tmpfs_tmp), "rw,nosuid,nodev,size=%lldm,mode=1777",
		 (long long)s->limits.disk_mb);
	spec->tmpfs[0] = (struct docker_kv){"/tmp", spec->tmpfs_tmp};
	spec->tmpfs[1] = (struct docker_kv){"/workspace", spec->tmpfs_workspace};
	d->tmpfs = spec->tmpfs;
	d->n_tmpfs = a->workspace_dir ? 1 : 2;

	d->memory = mem;
	d->memory_swap = mem; /* equal: no swap */
	d->nano_cpus = (int64_t)(s->limits.cpus * 1e9);
	d->pids_limit = s->limits.pids;
	spec->ulimits[0] = (struct docker_ulimit){"nofile", 1024, 1024};
	spec->ulimits[1] = (struct docker_ulimit){"fsize", disk, disk};
	spec->ulimits[2] = (struct docker_ulimit){"core", 0, 0};
	d->ulimits = spec->ulimits;
	d->n_ulimits = 3;
	d->init = true;
	d->ipc_mode = "private";
	d->log_type = "json-file";
	spec->log_config[0] = (struct docker_kv){"max-size", "1m"};
	spec->log_config[1] = (struct docker_kv){"max-file", "1"};
	d->log_config = spec->log_config;
	d->n_log_config = 2;
	d->restart_policy = "no";
	if (s->gvisor)
		d->runtime = cfg->gvisor_runtime;
	else if (cfg->runtime && cfg->runtime[0])
		d->runtime = cfg->runtime;
}

void container_spec_release(struct container_spec *spec)
{
	for (size_t i = 0; i < spec->n_env; i++)
		free(spec->env[i]);
	free(spec->binds[0]);
	free(spec->binds[1]);
	free(spec->security_opt[0]);
	free(spec->security_opt[1]);
	memset(spec, 0, sizeof(*spec));
}
