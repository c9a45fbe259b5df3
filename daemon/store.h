/* store.h: the session registry and its clocks in Redis (hiredis async).
 *
 * Keys, all under the configurable prefix P (docs/operations.md):
 *   P session:<id>          the session record (JSON), TTL = its idle timeout
 *   P expiry:<node>         sorted set: session id → expires_at (ms)
 *   P node:<node>:sessions  set of the node's session ids
 *   P tomb:<id>             why and when a session ended (JSON), 24 h
 *   P key:<key id>          an API key: hash of tenant, sha256 (of its
 *                           secret, hex) and created (unix s); store_keys.c
 *   P keys                  set of the key ids
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

/* sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB] (store_sentinel.c):
 * up to STORE_SENTINELS_MAX sentinels (port 26379 when omitted; an IPv6
 * one as [ADDR]:PORT), the master's name (letters, digits, - _ .). The
 * strings are malloc'd: store_sentinel_url_clear frees them (also after a
 * failed parse, which leaves u empty). */
#define STORE_SENTINELS_MAX 16
#define STORE_SENTINEL_NAME_MAX 64
struct store_sentinel_url {
	size_t n;
	char *host[STORE_SENTINELS_MAX];
	int port[STORE_SENTINELS_MAX];
	char *master;
	int db;
};
int store_sentinel_parse_url(const char *url, struct store_sentinel_url *u, struct err **errp);
void store_sentinel_url_clear(struct store_sentinel_url *u);

/* A master's address as a sentinel gave it (not NUL-terminated, lengths
 * given): an IPv4 or IPv6 literal that is not unspecified, broadcast or
 * multicast, and a port 1-65535 in digits. 0 with the address in out and
 * the port in *port, or -1. */
#define STORE_SENTINEL_ADDR_MAX 46
int store_sentinel_check_addr(const char *host, size_t hlen, const char *port, size_t plen,
			      char out[STORE_SENTINEL_ADDR_MAX], int *out_port);

/* Connect (and keep reconnecting) to url. Caller owns it (store_free). */
struct store *store_new(struct event_base *base, const char *url, const char *prefix,
			const char *node, int64_t tombstone_ttl_s, struct err **errp);
void store_free(struct store *st);

/* Whether Redis answered recently. */
bool store_connected(const struct store *st);

/* With a sentinel:// URL: the deadline of one question to a sentinel
 * (default 1000 ms). No-op otherwise. */
void store_set_sentinel_timeout(struct store *st, int ms);

/* What /readyz and /metrics say of a sentinel:// store; NULL / false / 0
 * for another URL. The strings are the store's, valid until its next
 * loop turn. The master in use ("HOST:PORT", NULL before the first); the
 * sentinels' name for it; whether the master is being asked for again; the
 * last problem met (a sentinel's, or the master's), NULL after a success;
 * the master changes this daemon followed. */
const char *store_master(const struct store *st);
const char *store_master_name(const struct store *st);
bool store_resolving(const struct store *st);
const char *store_problem(const struct store *st);
uint64_t store_failovers(const struct store *st);
/* Inside the connect callback: whether this connection is to another
 * master than the last one (a failover), so what the old one acknowledged
 * may be missing here, not only what it never got. */
bool store_master_is_new(const struct store *st);

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
 * strings are borrowed for the call; tenant is the session's ("default"
 * for a tombstone written before tombstones said). */
typedef void (*store_tomb_cb)(bool found, const char *reason, int64_t ended_at_ms,
			      const char *state, const char *tenant, void *arg);
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

/* ---- API keys (store_keys.c) ---- */

/* A key as stored: never its secret, only the secret's SHA-256. */
struct store_key {
	char id[17];
	char tenant[64];
	char sha256[65];
	int64_t created; /* unix seconds */
};

/* A key lookup in flight, until its callback ran. */
struct store_key_op;

/* The key with this id: k NULL when there is none (or what Redis holds
 * for it is malformed), e set when Redis failed (unavailable). k is
 * borrowed for the call. Runs once, never inside store_key_get. */
typedef void (*store_key_cb)(const struct err *e, const struct store_key *k, void *arg);
struct store_key_op *store_key_get(struct store *st, const char *id, store_key_cb cb, void *arg);

/* op's callback will not run (op must not have completed). NULL-safe. */
void store_key_cancel(struct store_key_op *op);

/* Store a new key (hash and set, in one MULTI). */
void store_key_put(struct store *st, const struct store_key *k, store_done_cb cb, void *arg);

/* Every key (tenant NULL) or a tenant's, sorted by created then id; the
 * array is borrowed for the call. At most STORE_KEYS_LIST_MAX are read. */
#define STORE_KEYS_LIST_MAX 10000
typedef void (*store_keys_cb)(const struct err *e, const struct store_key *keys, size_t n,
			      void *arg);
void store_key_list(struct store *st, const char *tenant, store_keys_cb cb, void *arg);

/* Remove a key: existed says whether there was one. */
typedef void (*store_key_del_cb)(const struct err *e, bool existed, void *arg);
void store_key_del(struct store *st, const char *id, store_key_del_cb cb, void *arg);

#endif
