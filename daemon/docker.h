/* docker.h: the Docker Engine driver. Typed calls over the engine's API on
 * its unix socket, on the event loop.
 *
 * libcurl's multi interface runs on our libevent base (the wiring of curl's
 * docs/examples/multi-event.c), so a 600 ms container create never holds up
 * another session's execution. The API version is negotiated once at start
 * (GET /version); calls made before that wait for it. Docker is used for
 * lifecycle only. Nothing outside the driver (docker*.c) builds an engine
 * path or reads the engine's JSON: callers give and get the structs below.
 *
 * Every call returns a handle and runs its callback exactly once, never
 * inside the call that started it, unless cancelled (docker_cancel): then
 * the callback never runs, and a container whose create was cancelled is
 * removed by the driver once the engine has made it. */
#ifndef CI_DOCKER_H
#define CI_DOCKER_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define DOCKER_MAX_RESPONSE (16u << 20)
#define DOCKER_ID_MAX 128

struct docker;
struct docker_call;

/* How a call ended. error is NULL on success; status is the engine's HTTP
 * status (0 when it never answered), for callers that treat one (a 404 on
 * a remove, a 409 on a network create) as a result rather than a failure.
 * Borrowed for the callback. */
struct docker_result {
	const struct err *error;
	long status;
};

typedef void (*docker_done_cb)(const struct docker_result *r, void *arg);

/* A client for the engine at sock_path. Caller owns it (docker_free). */
struct docker *docker_new(struct event_base *base, const char *sock_path);

/* Free the client; calls in flight are dropped without their callbacks
 * (only used at shutdown). */
void docker_free(struct docker *d);

/* The callback of c will not run. NULL-safe; c must not have completed. */
void docker_cancel(struct docker_call *c);

/* Calls sent or queued and not answered yet. */
size_t docker_pending(const struct docker *d);

/* Whether the engine answered the last contact (negotiation or a call). */
bool docker_reachable(const struct docker *d);

/* The negotiated API version ("1.41"), or NULL before negotiation. */
const char *docker_api_version(const struct docker *d);

/* ---- containers ---- */

struct docker_kv {
	const char *key, *value;
};

struct docker_ulimit {
	const char *name;
	int64_t soft, hard;
};

/* What POST /containers/create takes, as far as we use it. Borrowed by the
 * create call, which copies what it needs before it returns. */
struct docker_container_config {
	const char *image;
	const char *user;
	const char *hostname;
	const char *working_dir;
	const char *const *env; /* "KEY=value" */
	size_t n_env;
	const struct docker_kv *labels;
	size_t n_labels;
	const char *const *binds; /* "host:container:ro" */
	size_t n_binds;
	const char *network_mode;
	bool readonly_rootfs;
	const char *const *cap_drop;
	size_t n_cap_drop;
	const char *const *security_opt;
	size_t n_security_opt;
	const struct docker_kv *tmpfs; /* mount point → options */
	size_t n_tmpfs;
	int64_t memory, memory_swap, nano_cpus, pids_limit;
	const struct docker_ulimit *ulimits;
	size_t n_ulimits;
	bool init;
	const char *ipc_mode;
	const char *log_type;
	const struct docker_kv *log_config;
	size_t n_log_config;
	const char *restart_policy;
	const char *runtime; /* NULL: the engine's default */
};

/* The container's id (borrowed) on success. */
typedef void (*docker_created_cb)(const struct docker_result *r, const char *id, void *arg);
struct docker_call *docker_container_create(struct docker *d, const char *name,
					    const struct docker_container_config *cfg,
					    docker_created_cb cb, void *arg);

struct docker_call *docker_container_start(struct docker *d, const char *id, docker_done_cb cb,
					   void *arg);

struct docker_container_state {
	bool running;
	bool oom_killed;
	int64_t exit_code;
	char ip[64]; /* its address on the network asked for, "" when none */
};

/* With network set, the container's address on that network too. state is
 * NULL unless the call succeeded. */
typedef void (*docker_inspect_cb)(const struct docker_result *r,
				  const struct docker_container_state *state, void *arg);
struct docker_call *docker_container_inspect(struct docker *d, const char *id, const char *network,
					     docker_inspect_cb cb, void *arg);

struct docker_limits {
	int64_t memory, memory_swap, nano_cpus, pids_limit;
};
struct docker_call *docker_container_update(struct docker *d, const char *id,
					    const struct docker_limits *lim, docker_done_cb cb,
					    void *arg);

/* Remove with force (a running container is killed) and its anonymous
 * volumes. A container that is not there (404) counts as removed. cb may be
 * NULL (fire and forget). */
struct docker_call *docker_container_remove(struct docker *d, const char *id, docker_done_cb cb,
					    void *arg);

struct docker_container_summary {
	const char *id;
	const char *state;   /* "running", "exited", ... */
	const char *session; /* its ci.session label, or NULL */
};

/* Containers (all states) carrying every label of labels ("key=value"). The
 * array is borrowed for the callback. */
typedef void (*docker_list_cb)(const struct docker_result *r,
			       const struct docker_container_summary *list, size_t n, void *arg);
struct docker_call *docker_container_list(struct docker *d, const char *const *labels,
					  size_t n_labels, docker_list_cb cb, void *arg);

/* ---- networks ---- */

struct docker_network_config {
	const char *name;
	const char *bridge_name; /* the host interface */
	bool internal;
	bool icc; /* traffic between containers */
	const struct docker_kv *labels;
	size_t n_labels;
};

/* A network of that name that already exists answers status 409. */
struct docker_call *docker_network_create(struct docker *d, const struct docker_network_config *cfg,
					  docker_done_cb cb, void *arg);

struct docker_network_info {
	char gateway[64]; /* the first IPAM config's gateway, "" when none */
	bool internal;
	size_t n_containers; /* attached now */
};
typedef void (*docker_network_cb)(const struct docker_result *r,
				  const struct docker_network_info *info, void *arg);
struct docker_call *docker_network_inspect(struct docker *d, const char *name, docker_network_cb cb,
					   void *arg);

/* A network that is not there (404) counts as removed; one with containers
 * on it answers status 403. */
struct docker_call *docker_network_remove(struct docker *d, const char *name, docker_done_cb cb,
					  void *arg);

/* ---- images ---- */

/* One package of an image's ci.packages label ("NAME=VERSION,..."). */
struct docker_package {
	const char *name, *version;
};

#define DOCKER_IMAGE_MAX_PACKAGES 1024

/* What an image says of itself: the engine's id, creation time and size,
 * and the ci.* labels images/python/build.sh writes (NULL when the image
 * lacks one). packages is ci.packages parsed (entries that are not a sane
 * Debian name and version skipped, at most DOCKER_IMAGE_MAX_PACKAGES);
 * has_packages says whether the label was there at all. Borrowed for the
 * callback. */
struct docker_image_info {
	const char *id;
	const char *created; /* as the engine says it (RFC 3339) */
	int64_t size;
	const char *recipe, *profile, *protocol, *suite, *debian, *python;
	const struct docker_package *packages;
	size_t n_packages;
	bool has_packages;
};

/* GET /images/{ref}/json. An image the engine does not have answers status
 * 404 (and an error); info is NULL unless the call succeeded. */
typedef void (*docker_image_cb)(const struct docker_result *r, const struct docker_image_info *info,
				void *arg);
struct docker_call *docker_image_inspect(struct docker *d, const char *ref, docker_image_cb cb,
					 void *arg);

#endif
