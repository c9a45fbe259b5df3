/* docker_internal.h: the driver's transport, shared by its files only
 * (docker.c, docker_api.c, docker_json.c). No other file includes this. */
#ifndef CI_DOCKER_INTERNAL_H
#define CI_DOCKER_INTERNAL_H

#include "docker.h"

/* One answer of the engine; body NUL-terminated, borrowed for the callback. */
struct docker_response {
	long status;      /* HTTP status; 0 when the request never got an answer */
	const char *body; /* never NULL */
	size_t len;
	const char *error; /* transport error text when status is 0 */
};

/* Runs once per call, from the loop, also for a cancelled call (cancelled
 * true): the typed layer then undoes what must be undone and tells nobody. */
typedef void (*docker_raw_cb)(const struct docker_response *resp, bool cancelled, void *ctx);

/* Send METHOD /vX.Y<path> with an optional JSON body (copied). ctx belongs
 * to the call: free_ctx (may be NULL) releases it after on_response ran, or
 * when the client is freed first. */
struct docker_call *docker_call_start(struct docker *d, const char *method, const char *path,
				      const char *body, size_t blen, docker_raw_cb on_response,
				      void *ctx, void (*free_ctx)(void *ctx));

/* An error describing a failed response ("what: docker: 404 No such
 * container"), with the API code it maps to. Caller frees. */
struct err *docker_error(const struct docker_response *resp, const char *what);

#endif
