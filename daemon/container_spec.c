/* container_spec.c: one hardened container per session. */
#include "container_spec.h"

#include <stdio.h>
#include <sys/random.h>

#include "json.h"
#include "xalloc.h"

void container_spec_new_name(char *buf, size_t size)
{
	unsigned char r[8];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		abort(); /* the kernel's CSPRNG does not fail once booted */
	snprintf(buf, size, "ci-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
		 r[5], r[6], r[7]);
}

static void kv_entry(yajl_gen g, const char *k, const char *v)
{
	char buf[8192];
	snprintf(buf, sizeof(buf), "%s=%s", k, v);
	jg_str(g, buf);
}

static void ulimit(yajl_gen g, const char *name, int64_t soft, int64_t hard)
{
	jg_obj(g);
	jg_kv_str(g, "Name", name);
	jg_kv_int(g, "Soft", soft);
	jg_kv_int(g, "Hard", hard);
	jg_obj_end(g);
}

char *container_spec_json(const struct session *s, const struct config *cfg,
			  const struct container_spec_args *a, size_t *len)
{
	const char *network = a->network, *proxy_url = a->proxy_url;
	AUTOGEN yajl_gen g = json_gen_new();
	char buf[4096];
	int64_t mem = s->limits.memory_mb * 1024 * 1024;
	int64_t disk = s->limits.disk_mb * 1024 * 1024;

	jg_obj(g);
	jg_kv_str(g, "Image", a->image_tag);
	/* The session's own uid, its gid equal to it (uid_range.h says why). */
	snprintf(buf, sizeof(buf), "%lld:%lld", (long long)s->uid, (long long)s->uid);
	jg_kv_str(g, "User", buf);
	jg_kv_str(g, "Hostname", CONTAINER_HOSTNAME);
	jg_kv_str(g, "WorkingDir", "/workspace");
	jg_str(g, "Env");
	jg_arr(g);
	for (size_t i = 0; i < s->n_env; i++)
		kv_entry(g, s->env[i].key, s->env[i].value);
	/* Ours last, so a client's env can never redirect the runner. */
	kv_entry(g, "SANDBOX_IPC", CONTAINER_IPC_DIR "/ipc.sock");
	kv_entry(g, "SANDBOX_SESSION", s->id);
	/* The uid has no passwd entry in the image: say who we are to the
	 * programs that ask the environment first (getpass, git, pip). */
	kv_entry(g, "USER", "sandbox");
	kv_entry(g, "LOGNAME", "sandbox");
	if (network && proxy_url) {
		static const char *const names[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
						    "https_proxy"};
		for (size_t i = 0; i < 4; i++)
			kv_entry(g, names[i], proxy_url);
		kv_entry(g, "NO_PROXY", "localhost,127.0.0.1");
		kv_entry(g, "no_proxy", "localhost,127.0.0.1");
	}
	jg_arr_end(g);
	jg_str(g, "Labels");
	jg_obj(g);
	jg_kv_str(g, "ci.managed", "true");
	jg_kv_str(g, "ci.session", s->id);
	jg_kv_str(g, "ci.node", s->node);
	jg_kv_str(g, "ci.prefix", cfg->key_prefix);
	/* No tenant label: a warm pool container gets its tenant when claimed,
	 * and labels cannot change; Redis holds the tenant. */
	jg_obj_end(g);

	jg_str(g, "HostConfig");
	jg_obj(g);
	/* The only host path in the sandbox: its own IPC directory, read-only. */
	jg_str(g, "Binds");
	jg_arr(g);
	snprintf(buf, sizeof(buf), "%s:%s:ro", a->ipc_dir, CONTAINER_IPC_DIR);
	jg_str(g, buf);
	jg_arr_end(g);
	jg_kv_str(g, "NetworkMode", network ? network : "none");
	jg_kv_bool(g, "ReadonlyRootfs", true);
	jg_str(g, "CapDrop");
	jg_arr(g);
	jg_str(g, "ALL");
	jg_arr_end(g);
	jg_str(g, "SecurityOpt");
	jg_arr(g);
	jg_str(g, "no-new-privileges");
	if (a->seccomp) {
		/* The API takes the profile's text itself (the CLI reads the file). */
		AUTOFREE char *opt = xmalloc(strlen(a->seccomp) + 9);
		sprintf(opt, "seccomp=%s", a->seccomp);
		jg_str(g, opt);
	}
	jg_arr_end(g);
	/* Disk quota: --storage-opt size is refused on overlay2 here, so the
	 * writable places are size-capped tmpfs (charged to the memory cgroup). */
	jg_str(g, "Tmpfs");
	jg_obj(g);
	snprintf(buf, sizeof(buf), "rw,nosuid,nodev,size=%lldm,uid=%lld,gid=%lld,mode=0700",
		 (long long)s->limits.disk_mb, (long long)s->uid, (long long)s->uid);
	jg_kv_str(g, "/workspace", buf);
	snprintf(buf, sizeof(buf), "rw,nosuid,nodev,size=%lldm,mode=1777",
		 (long long)s->limits.disk_mb);
	jg_kv_str(g, "/tmp", buf);
	jg_obj_end(g);
	jg_kv_int(g, "Memory", mem);
	jg_kv_int(g, "MemorySwap", mem); /* equal: no swap */
	jg_kv_int(g, "NanoCpus", (int64_t)(s->limits.cpus * 1e9));
	jg_kv_int(g, "PidsLimit", s->limits.pids);
	jg_str(g, "Ulimits");
	jg_arr(g);
	ulimit(g, "nofile", 1024, 1024);
	ulimit(g, "fsize", disk, disk);
	ulimit(g, "core", 0, 0);
	jg_arr_end(g);
	jg_kv_bool(g, "Init", true);
	jg_kv_str(g, "IpcMode", "private");
	jg_str(g, "LogConfig");
	jg_obj(g);
	jg_kv_str(g, "Type", "json-file");
	jg_str(g, "Config");
	jg_obj(g);
	jg_kv_str(g, "max-size", "1m");
	jg_kv_str(g, "max-file", "1");
	jg_obj_end(g);
	jg_obj_end(g);
	jg_str(g, "RestartPolicy");
	jg_obj(g);
	jg_kv_str(g, "Name", "no");
	jg_obj_end(g);
	if (s->gvisor)
		jg_kv_str(g, "Runtime", cfg->gvisor_runtime);
	else if (cfg->runtime && cfg->runtime[0])
		jg_kv_str(g, "Runtime", cfg->runtime);
	jg_obj_end(g);
	jg_obj_end(g);

	size_t n;
	const char *text = jg_text(g, &n);
	char *out = xmalloc(n + 1);
	memcpy(out, text, n);
	out[n] = '\0';
	*len = n;
	return out;
}
