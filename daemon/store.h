/* store.h: the session registry and its clocks in Redis (hiredis async).
 *
 * Keys, all under the configurable prefix P (docs/operations.md):
 *   P session:<id>          the session record (JSON), TTL = its idle timeout
 *   P expiry:<node>         sorted set: session id → expires_at (ms)
 *   P node:<node>:sessions  set of the node's session ids
 *   P tomb:<id>             why and when a session ended (JSON), 24 h
 * Redis is reached through hiredis's libevent adapter: nothing here blocks. */
#ifndef CI_STORE_H
#define CI_STORE_H

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "session.h"

struct store;

/* Parse redis://HOST:PORT[/DB] or unix:///PATH. host or path is malloc'd. */
int store_parse_url(const char *url, char **host, int *port, char **path, int *db,
		    struct err **errp);

/* Connect (and keep reconnecting) to url. Caller owns it (store_free). */
struct store *store_new(struct event_base *base, const char *url, const char *prefix,
			const char *node, int64_t tombstone_ttl_s, struct err **errp);
void store_free(struct store *st);

/* Whether Redis answered recently. */
bool store_connected(const struct store *st);

/* Completion of a write: NULL err on success (err borrowed). Runs once,
 * never inside the call that started it. */
typedef void (*store_done_cb)(const struct err *e, void *arg);

/* A write in flight, until its callback ran. */
struct store_op;

/* Write the session record and its clock. */
struct store_op *store_session_put(struct store *st, const struct session *s, store_done_cb cb,
				   void *arg);

/* op's callback will not run (op must not have completed). NULL-safe. */
void store_cancel(struct store_op *op);

/* Slide the clock after activity; fire and forget. Only the clock moves
 * (the record's TTL and its score in the expiry set): rewriting the whole
 * record after every execution cost half the daemon's work per exec. The
 * expiry set is the authority on expires_at; store_node_records reads it. */
void store_session_touch(struct store *st, const struct session *s);

/* Remove the record and clock, leave a tombstone with the reason. */
void store_session_end(struct store *st, const struct session *s, const char *reason,
		       store_done_cb cb, void *arg);

/* A tombstone, if any: found false when there is none (or Redis failed). The
 * strings are borrowed for the call. */
typedef void (*store_tomb_cb)(bool found, const char *reason, int64_t ended_at_ms,
			      const char *state, void *arg);
void store_tombstone_get(struct store *st, const char *id, store_tomb_cb cb, void *arg);

/* Every record of this node: cb gets the record texts (borrowed for the
 * call) with each one's expires_at from the expiry set (0 when absent), or an
 * error. Ids whose record has expired are dropped from the node
 * set on the way. */
typedef void (*store_records_cb)(const struct err *e, const char *const *records,
				 const size_t *lens, const int64_t *expires_ms, size_t n,
				 void *arg);
void store_node_records(struct store *st, store_records_cb cb, void *arg);

/* Called each time the connection to Redis is (re-)established, so the
 * owner can write its registry back (Redis may have lost it). */
void store_set_connect_cb(struct store *st, void (*cb)(void *arg), void *arg);

#endif
