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

/* The body of POST /containers/create. With network NULL the container has
 * no network at all; else it joins that (internal) network and reaches out
 * only through the egress proxy at proxy_url. Caller frees. */
char *container_spec_json(const struct session *s, const struct config *cfg, const char *image_tag,
			  const char *ipc_dir, const char *network, const char *proxy_url,
			  size_t *len);

/* The container name for a session ("ci-<id>"), into buf. */
void container_spec_name(const struct session *s, char *buf, size_t size);

#endif
