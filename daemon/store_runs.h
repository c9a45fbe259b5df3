/* store_runs.h: runs' records in Redis, so that any node answers
 * GET /v1/runs/{id}.
 *
 *   P run:<id>   hash: tenant, done ("0"/"1"), json (the run object),
 *                TTL --run-ttl-s */
#ifndef CI_STORE_RUNS_H
#define CI_STORE_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Write the record (fire and forget; the last write wins). */
void store_run_put(struct store *st, const char *tenant, const char *id, const char *json,
		   size_t len, bool done, int64_t ttl_s);

/* The record: tenant and json NULL when there is none (or it is broken);
 * borrowed for the callback. */
typedef void (*store_run_cb)(const struct err *e, const char *tenant, const char *json, size_t len,
			     bool done, void *arg);
void store_run_get(struct store *st, const char *id, store_run_cb cb, void *arg);

#endif
