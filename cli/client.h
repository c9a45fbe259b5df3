/*
 * client.h: the blocking HTTP client ci-ctl's commands use to talk to
 * ci-daemon.  This is the only part of ci-ctl that knows about libcurl.
 */
#ifndef CLI_CLIENT_H
#define CLI_CLIENT_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

struct err;
struct client;

/* Largest answer read into memory; streamed bodies are not capped. */
#define CLIENT_BODY_MAX ((size_t)64 << 20)

/*
 * Receives a 2xx body as it arrives.  Returns 0, or -1 with err set to
 * abort the transfer; client_do() then fails with that error.
 */
typedef int (*client_data_cb)(const char *data, size_t len, void *arg, struct err **err);

struct client_req {
	const char *method;       /* "GET", "POST", "PUT" or "DELETE" */
	const char *path;         /* already escaped, starts with '/' */
	const char *content_type; /* of body or upload; NULL sends none */
	const char *accept;       /* NULL: application/json */
	const void *body;         /* request body, or NULL for none */
	size_t body_len;
	FILE *upload;           /* streamed as the body instead, if set */
	long long upload_size;  /* bytes in upload; -1: unknown (chunked) */
	client_data_cb on_data; /* if set, a 2xx body goes here, unbuffered */
	void *arg;
	/* Whole-request limit in seconds.  0 means none, for transfers whose
	 * size is the user's business; a stall guard still applies.
	 * CLIENT_ENDLESS: no limit and no stall guard either, for a stream that
	 * may rightly stay quiet for hours; only the connect timeout (and TCP
	 * keepalive) remain. */
	long timeout_s;
	/* If set, checked about once a second and on every chunk: once it is
	 * non-zero the transfer stops and client_do() fails with an
	 * "interrupted" error.  For a SIGINT handler to set. */
	const volatile sig_atomic_t *cancel;
	/* With cancel: called once, from inside the transfer, when *cancel
	 * first turns 1, and the transfer goes on; it stops at 2 (a second
	 * Ctrl-C).  For a command whose Ctrl-C asks the server to stop the
	 * work (exec: POST .../interrupt), whose answer is still worth reading. */
	void (*on_cancel)(void *cancel_arg);
	void *cancel_arg;
};

#define CLIENT_ENDLESS (-1L)

struct client_resp {
	long status;
	char *body; /* NUL-terminated buffered answer; "" when streamed */
	size_t len;
};

/*
 * Makes a client for `server`: "http://host:port[/prefix]",
 * "https://...", "host:port", or "unix:/path/to.sock" (also
 * "unix:///path").  api_key may be NULL.  Returns NULL with err
 * (bad_request: a usage error) on a bad URL.  Free with client_free().
 */
struct client *client_new(const char *server, const char *api_key, struct err **err);
void client_free(struct client *c);

/* Verify https:// servers against the CA certificates in path (PEM)
 * instead of the system's; NULL or "" goes back to the system's. */
void client_set_cacert(struct client *c, const char *path);

/* The server as the user named it, for messages.  Borrowed. */
const char *client_server(const struct client *c);

/*
 * Performs one request and fills resp (release it with
 * client_resp_release(), also after a failure).  Returns 0 for a 2xx
 * answer.  Returns -1 with err set for a transport failure (unavailable,
 * peer_status 0), for a non-2xx answer (peer_status set, peer_code and the
 * message taken from the {"error":{...}} body when there is one, code the
 * matching err_code or unavailable, and the raw body left in resp), or for
 * a failure reported by on_data.
 */
int client_do(struct client *c, const struct client_req *req, struct client_resp *resp,
	      struct err **err);
void client_resp_release(struct client_resp *resp);

#endif
