/* container_spec.h: the Docker create body for a session's container.
 *
 * Pure: a session and the config in, the driver's container config out, so
 * every hardening field is checked by a unit test as well as by `docker
 * inspect` in the hostile tests. docs/security.md explains each field. */
#ifndef CI_CONTAINER_SPEC_H
#define CI_CONTAINER_SPEC_H

#include <stddef.h>

#include "config.h"
#include "docker.h"
#include "session.h"

/* Mount point of the session's IPC directory inside the container. */
#define CONTAINER_IPC_DIR "/run/ci"

/* What a container needs beyond the session and the config. Borrowed. */
struct container_spec_args {
	const char *image_tag;
	const char *ipc_dir; /* host directory bind-mounted at CONTAINER_IPC_DIR */
	/* NULL: no network at all; else the (internal) network to join, reaching
	 * out only through the egress proxy at proxy_url. */
	const char *network;
	const char *proxy_url;
	const char *seccomp; /* profile JSON; NULL: the engine's default */
	/* Host directory bind-mounted read-write at /workspace (a loop-mounted
	 * image, workspace_disk.h); NULL: /workspace is a tmpfs. */
	const char *workspace_dir;
};

#define CONTAINER_SPEC_MAX_ENV (SESSION_MAX_KV + 16)

/* The hardened create config of a session's container: spec.docker is
 * what the driver takes (docker_container_create); the rest is the storage
 * its pointers point into. Build with container_spec_build, release with
 * container_spec_release. */
struct container_spec {
	struct docker_container_config docker;
	char *env[CONTAINER_SPEC_MAX_ENV];
	size_t n_env;
	struct docker_kv labels[4];
	char user[64];
	char *binds[2];
	char *security_opt[2];
	char tmpfs_workspace[160], tmpfs_tmp[96];
	struct docker_kv tmpfs[2];
	struct docker_ulimit ulimits[3];
	struct docker_kv log_config[2];
};

void container_spec_build(struct container_spec *spec, const struct session *s,
			  const struct config *cfg, const struct container_spec_args *a);
void container_spec_release(struct container_spec *spec);

/* A fresh container name into buf (at least CONTAINER_NAME_SIZE bytes):
 * "ci-" and 16 random hex digits. Opaque on purpose: Docker's embedded DNS
 * answers reverse lookups on the sandbox network with container names, so a
 * name must not say which session or tenant it serves. Redis maps the
 * session to its container id. */
#define CONTAINER_NAME_SIZE 24
void container_spec_new_name(char *buf, size_t size);

/* Every sandbox's host name: the same for all, so it tells nothing. */
#define CONTAINER_HOSTNAME "sandbox"

#endif
