/* store_nodes.h: the cluster's keys in Redis (cluster.h), on the store's
 * connection:
 *   P heartbeat:<node>   the node's heartbeat (JSON), PX node-lost-ms
 *   P nodes              sorted set: node → its last heartbeat (ms, its clock)
 *   P lost:<node>        set: the node's sessions another node tombstoned
 *                        node_lost, until the node reconciles them
 * and reads of P session:<id> (whose node owns it) and P tomb:<id>. */
#ifndef CI_STORE_NODES_H
#define CI_STORE_NODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct store;
struct store_nodes_op;

/* A heartbeat's answer, borrowed for the callback: the sessions of this
 * node that others tombstoned node_lost (their records, clocks and quota
 * reservations are gone already: the same script removed them), with
 * each one's tombstone (JSON, "" when it expired); and every node of P
 * nodes with its score and heartbeat (NULL when its key has expired). */
struct store_beat {
	const char *const *lost_ids, *const *lost_tombs;
	size_t n_lost;
	const char *const *names;
	const int64_t *scores;
	const char *const *hbs;
	const size_t *hb_lens;
	size_t n;
};
typedef void (*store_beat_cb)(const struct err *e, const struct store_beat *b, void *arg);

/* Write node's heartbeat hb (PX ttl_ms) and its score now_ms, take its lost
 * sessions, read the first max_nodes nodes: one script. */
struct store_nodes_op *store_nodes_beat(struct store *st, const char *node, const char *hb,
					size_t len, int64_t ttl_ms, int64_t now_ms,
					size_t max_nodes, store_beat_cb cb, void *arg);

/* Whose session id is: node and tenant from its record (NULL, NULL when
 * there is none, or it is not of its shape). Borrowed for the call. */
typedef void (*store_owner_cb)(const struct err *e, const char *node, const char *tenant,
			       void *arg);
struct store_nodes_op *store_session_owner(struct store *st, const char *id, store_owner_cb cb,
					   void *arg);

/* If node's heartbeat key is absent: tombstone session id (tenant's) as
 * node_lost with reason, unless it has a tombstone already, and add it to
 * P lost:<node>; one script. alive: the heartbeat is there (nothing was
 * written). Otherwise the tombstone that holds (this one or the earlier):
 * its reason and time, borrowed for the call. */
typedef void (*store_lost_cb)(const struct err *e, bool alive, const char *reason,
			      int64_t ended_at_ms, void *arg);
struct store_nodes_op *store_node_lost(struct store *st, const char *id, const char *node,
				       const char *tenant, const char *reason, store_lost_cb cb,
				       void *arg);

/* The records of tenant's sessions on the other live nodes (their
 * heartbeat key is there; self's are the manager's): at most max_records,
 * after looking at most max_scanned ids; cut says a limit was hit. The
 * records (JSON) are borrowed for the call. One script. */
typedef void (*store_list_cb)(const struct err *e, const char *const *records, const size_t *lens,
			      size_t n, bool cut, void *arg);
struct store_nodes_op *store_nodes_list(struct store *st, const char *self, const char *tenant,
					size_t max_records, size_t max_scanned, store_list_cb cb,
					void *arg);

/* Forget node, which must have no heartbeat: each of its sessions whose
 * record is left is tombstoned node_lost (reason; an earlier tombstone
 * stays) and its record, clock and quota reservation removed; then its
 * sets and its entry in P nodes go. One script. n: the sessions ended;
 * state: 0 done, 1 the node is live (nothing done), 2 no such node. */
typedef void (*store_forget_cb)(const struct err *e, int state, int64_t n, void *arg);
struct store_nodes_op *store_node_forget(struct store *st, const char *node, const char *reason,
					 store_forget_cb cb, void *arg);

/* op's callback will not run (op must not have completed). NULL-safe. */
void store_nodes_cancel(struct store_nodes_op *op);

#endif
