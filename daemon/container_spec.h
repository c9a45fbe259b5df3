/* container_spec.h: the Docker create body for a session's container.
 *
 * Pure: a session and the config in, JSON out, so every hardening field is
 * checked by a unit test as well as by `docker inspect` in the integration
 * tests. docs/security.md explains each field. */
#ifndef CI_CONTAINER_SPEC_H
#define CI_CONTAINER_SPEC_H

#include <stddef.h>

#include "config.h"
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
};

/* The body of POST /containers/create. Caller frees. */
char *container_spec_json(const struct session *s, const struct config *cfg,
			  const struct container_spec_args *a, size_t *len);

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
