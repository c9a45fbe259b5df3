/* api_requests.h: the API's request bodies, parsed from JSON into typed
 * requests. Below the API nobody sees the wire format: the manager and the
 * session rules take these structs. */
#ifndef CI_API_REQUESTS_H
#define CI_API_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_tree.h>

#include "err.h"
#include "manager.h"
#include "session.h"

/* POST /v1/sessions from the body's text (len bytes): an empty or blank
 * body is a request for all defaults, like null. On success *r owns its
 * strings (session_request_release); on failure it is left empty. */
int api_parse_session_body(const char *body, size_t len, struct session_request *r,
			   struct err **errp);

/* PATCH /v1/sessions/{id} from the body's text; as api_parse_patch_request. */
int api_parse_patch_body(const char *body, size_t len, struct session_request *r,
			 struct err **errp);

/* POST /v1/sessions: body NULL (or null) is a request for all defaults.
 * On success *r owns its strings (session_request_release); on failure it
 * is left empty. */
/* A JSON array of persist globs (or null: none) into *out (xcalloc'd
 * strings, *n of them), checked by session_check_globs; what names it in
 * errors. On failure what was taken is still the caller's to free. */
/* Whether a JSON text has a \u0000 escape (a string would end there). */
bool api_body_has_nul(const char *body, size_t len);

int api_parse_globs(yajl_val v, const char *what, char ***out, size_t *n, struct err **errp);

int api_parse_session_request(yajl_val body, struct session_request *r, struct err **errp);

/* PATCH /v1/sessions/{id}: only "network" may change; the allowlist it
 * carries (none when absent) replaces the session's. */
int api_parse_patch_request(yajl_val body, struct session_request *r, struct err **errp);

/* The body (len bytes of JSON) of POST /v1/sessions/{id}/exec (oneshot
 * false: "stream" allowed) or of the one-shot POST /v1/exec (oneshot true:
 * "image" allowed), into struct exec_request (manager.h: the manager takes
 * it). On success *r owns its strings (exec_request_release). */
int api_parse_exec_request(const char *body, size_t len, bool oneshot, struct exec_request *r,
			   struct err **errp);
void exec_request_release(struct exec_request *r);

/* The body of POST /v1/sessions/{id}/runs (oneshot false) or POST /v1/runs
 * (oneshot true: "image" allowed) into struct run_request (runs.h). On
 * success *r owns its strings (run_request_release). */
struct run_request;
int api_parse_run_request(const char *body, size_t len, bool oneshot, struct run_request *r,
			  struct err **errp);

#endif
