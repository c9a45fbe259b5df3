/* session_json.h: a session as JSON. The Redis record holds what a restarted
 * daemon needs to adopt the session; the API view is what clients see. */
#ifndef CI_SESSION_JSON_H
#define CI_SESSION_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <yajl/yajl_gen.h>

#include "err.h"
#include "session.h"

/* The API view of a session, as one JSON object. With internal set, the
 * Redis record: also the fields only the daemon needs to recover it (node,
 * container, uid, env). */
void session_to_json(const struct session *s, yajl_gen g, bool internal);

/* A session from its Redis record (session_to_json with internal set), for
 * adoption after a restart. The record is checked like any outside input.
 * Caller owns the result. */
struct session *session_from_record(const char *json, size_t len, struct err **errp);

#endif
