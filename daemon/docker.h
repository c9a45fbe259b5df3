/* docker.h: the Docker Engine API over its unix socket, on the event loop.
 *
 * libcurl's multi interface runs on our libevent base (the wiring of curl's
 * docs/examples/multi-event.c), so a 600 ms container create never holds up
 * another session's execution. The API version is negotiated once at start
 * (GET /version); requests made before that wait for it. Docker is used for
 * lifecycle only: create, start, kill, remove, inspect, list. */
#ifndef CI_DOCKER_H
#define CI_DOCKER_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define DOCKER_MAX_RESPONSE (16u << 20)

struct docker_response {
	long status;      /* HTTP status; 0 when the request never got an answer */
	const char *body; /* NUL-terminated; borrowed, valid during the callback */
	size_t len;
	const char *error; /* transport error text when status is 0 */
};

/* Runs exactly once per request, never inside the call that made it. */
typedef void (*docker_cb)(const struct docker_response *resp, void *arg);

struct docker;

/* A client for the engine at sock_path. Caller owns it (docker_free). */
struct docker *docker_new(struct event_base *base, const char *sock_path);

/* Free the client; requests in flight are dropped without their callbacks
 * (only used at shutdown). */
void docker_free(struct docker *d);

/* Send METHOD /vX.Y<path> with an optional JSON body (copied). */
void docker_request(struct docker *d, const char *method, const char *path, const char *body,
		    size_t blen, docker_cb cb, void *arg);

/* Requests sent or queued and not answered yet. */
size_t docker_pending(const struct docker *d);

/* Whether the engine answered the last contact (negotiation or a request). */
bool docker_reachable(const struct docker *d);

/* The negotiated API version ("1.41"), or NULL before negotiation. */
const char *docker_api_version(const struct docker *d);

/* An error describing a failed response ("docker: 404 No such container"),
 * with the API code it maps to. Caller frees. */
struct err *docker_error(const struct docker_response *resp, const char *what);

#endif
