/* proc.h: run a helper program (iptables) without blocking the loop.
 *
 * posix_spawn, then a pidfd watched by the event loop tells when it ended;
 * the callback gets its exit status. Its stdin is /dev/null; its stdout and
 * stderr are read on the loop (the first PROC_OUTPUT_MAX bytes kept) and
 * logged as one line when it ends: debug when it succeeded, warn when not. */
#ifndef CI_PROC_H
#define CI_PROC_H

#include <event2/event.h>

#define PROC_OUTPUT_MAX 2048

/* Exit status (0..255), or -1 when it could not run or died by a signal. */
typedef void (*proc_done_cb)(int status, void *arg);

/* Run argv[0] (searched in PATH); cb runs once, from the loop. */
void proc_run(struct event_base *base, char *const argv[], proc_done_cb cb, void *arg);

/* The daemon exits: forget the helpers still running (their callbacks will
 * not run; the helpers themselves finish on their own). */
void proc_free_all(void);

#endif
