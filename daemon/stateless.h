/* stateless.h: the weak, stable tier (docs/workflow.md): stdlib-only
 * Python run once in a process sandbox that does not need the Docker
 * engine. bubblewrap gives new namespaces (no network at all), a read-only
 * system, an empty temporary /workspace and /tmp; rlimits cap CPU time,
 * memory, processes, file size and descriptors, and a watchdog the memory of
 * the whole run (its processes together); a seccomp filter refuses
 * what the sandbox profile refuses. The child is watched through a pidfd
 * and killed at its deadline; output is read through pipes on the loop,
 * capped like any execution's. The result has the usual shape
 * (exec_result), nothing persists. */
#ifndef CI_STATELESS_H
#define CI_STATELESS_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "exec_result.h"

struct stateless;
struct stateless_call;

/* The tier, from cfg (the bwrap binary, limits). Caller frees. */
struct stateless *stateless_new(struct event_base *base, const struct config *cfg,
				struct err **errp);
/* Calls in flight are killed, without their callbacks. NULL-safe. */
void stateless_free(struct stateless *t);

/* Whether the tier can run (bwrap found and working). */
bool stateless_available(const struct stateless *t);

/* r borrowed for the callback; NULL with e when nothing ran. */
typedef void (*stateless_done_cb)(const struct exec_result *r, const struct err *e, void *arg);

/* Run tenant's code (len bytes) once, timeout_s 0 for the tier's default.
 * tenant_cap: the most runs of tenant at once (0: no cap of its own); at it,
 * quota_exceeded. */
struct stateless_call *stateless_run(struct stateless *t, const char *tenant, int64_t tenant_cap,
				     const char *code, size_t len, int64_t timeout_s,
				     stateless_done_cb cb, void *arg, struct err **errp);
/* Kill it; its callback will not run. NULL-safe. */
void stateless_cancel(struct stateless_call *c);

/* Runs in flight. */
size_t stateless_running(const struct stateless *t);
/* Runs the memory watchdog has killed. */
uint64_t stateless_memory_kills(const struct stateless *t);

#endif
