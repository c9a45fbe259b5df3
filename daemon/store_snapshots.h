/* store_snapshots.h: the index of the snapshots, per tenant, in Redis.
 * The objects themselves are in the blobstore (snapshot.h); Redis says
 * which there are, their state and their workspace, for every node.
 *
 * Keys (docs/operations.md):
 *   P snap:<tenant>:<id>        string: the record (the API's JSON of it)
 *   P snaps:<tenant>            sorted set: id -> created_ms
 *   P snapws:<tenant>:<name>    sorted set: id -> created_ms, one workspace
 *   P snapwss:<tenant>          sorted set: workspace name -> latest created_ms
 *   P snaptenants               set: tenants that have snapshots (retention)
 * Every call is one Lua script, so the sets never disagree with the
 * records whichever daemon writes. What Redis answers is checked: an answer
 * of another shape is "unavailable", and the records are JSON the caller
 * parses as outside input. */
#ifndef CI_STORE_SNAPSHOTS_H
#define CI_STORE_SNAPSHOTS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* A record is at most this long (its skipped list and variables are capped). */
#define STORE_SNAPSHOT_RECORD_MAX (256u << 10)

/* Every call answers a list (cb may be NULL: nobody listens) of JSON texts (borrowed for the call):
 * records, or for workspaces {"name","snapshots","bytes","latest":record}. */
typedef void (*store_snapshots_cb)(const struct err *e, const char *const *json, const size_t *len,
				   size_t n, void *arg);

/* Write (or replace) tenant's record id of workspace ws, created at
 * created_ms. n is 0. */
void store_snapshot_put(struct store *st, const char *tenant, const char *id, const char *ws,
			int64_t created_ms, const char *json, size_t len, store_snapshots_cb cb,
			void *arg);
/* One record: n is 0 when tenant has none with this id. */
void store_snapshot_get(struct store *st, const char *tenant, const char *id, store_snapshots_cb cb,
			void *arg);
/* tenant's records, newest first, at most limit; ws NULL = every workspace. */
void store_snapshots_list(struct store *st, const char *tenant, const char *ws, size_t limit,
			  store_snapshots_cb cb, void *arg);
/* Remove a record: n is 1 with the record removed, 0 when there was none. */
void store_snapshot_delete(struct store *st, const char *tenant, const char *id,
			   store_snapshots_cb cb, void *arg);
/* tenant's workspaces, most recently snapshotted first, at most limit. */
void store_snapshot_workspaces(struct store *st, const char *tenant, size_t limit,
			       store_snapshots_cb cb, void *arg);
/* Retention: tenant's records beyond the newest keep of each workspace, or
 * created before cutoff_ms; at most limit. Nothing is removed. */
void store_snapshots_expired(struct store *st, const char *tenant, int64_t keep, int64_t cutoff_ms,
			     size_t limit, store_snapshots_cb cb, void *arg);
/* The tenants that have snapshots (at most limit, any order): the texts
 * are the names, not JSON. */
void store_snapshot_tenants(struct store *st, size_t limit, store_snapshots_cb cb, void *arg);

#endif
