/* kernel.h: the IPC link between the daemon and one session's sandbox.
 *
 * The daemon listens on a unix socket in the session's own directory, which
 * is bind-mounted read-only into the container; the sandbox's supervisor and
 * kernel connect to it (docs/protocol.md). This file owns that socket, the
 * two connections, frame parsing, and the peers' pidfds: each peer is taken
 * as a pidfd at accept and verified to be inside the session's container at
 * hello; through the kernel's, the daemon interrupts or kills the kernel
 * without the sandbox's cooperation. */
#ifndef CI_KERNEL_H
#define CI_KERNEL_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <yajl/yajl_tree.h>

#include "err.h"
struct exec_display_info;
struct kernel_pip;

/* What the link reports to its owner. Headers are borrowed: valid only during
 * the call. The owner may free the link from inside any of these. */
struct kernel_link_ops {
	void (*kernel_up)(void *arg);
	void (*kernel_down)(void *arg, const char *why);
	void (*supervisor_up)(void *arg);
	void (*supervisor_down)(void *arg, const char *why);
	/* The supervisor saw the kernel process end: exit code or signal (-1 when
	 * not applicable), and whether the memory cgroup OOM-killed it. */
	void (*kernel_exit)(void *arg, int code, int sig, bool oom);
	void (*exec_stream)(void *arg, uint64_t id, bool is_stderr, const char *data, size_t len,
			    bool tail, uint64_t dropped);
	void (*exec_display)(void *arg, uint64_t id, const struct exec_display_info *info,
			     const char *data, size_t len);
	void (*exec_done)(void *arg, uint64_t id, yajl_val header);
	/* The kernel asks for an install window during execution id
	 * (pip_open), or says pip ended (pip_close, close true). */
	void (*exec_pip)(void *arg, uint64_t id, bool close, const struct kernel_pip *pip);
	/* Any other frame from the supervisor (file replies). */
	void (*supervisor_frame)(void *arg, yajl_val header, const char *body, size_t len);
	/* The backlog toward the supervisor fell below KERNEL_SUPERVISOR_LOW. */
	void (*supervisor_drained)(void *arg);
};

#define KERNEL_SUPERVISOR_LOW (256 * 1024)

struct kernel_link;

/* Create dir (mode 0711), bind dir/ipc.sock owned by uid:gid mode 0600 and
 * listen. A connection that has not said hello after hello_timeout_ms is
 * closed. Caller owns the link (kernel_link_free). */
struct kernel_link *kernel_link_new(struct event_base *base, const char *dir, uid_t uid, gid_t gid,
				    int hello_timeout_ms, const struct kernel_link_ops *ops,
				    void *arg, struct err **errp);

/* The session's container (its full Docker id; copied). A peer is trusted at
 * hello only when its process is inside this container; until it is set,
 * every hello is refused. */
void kernel_link_set_container(struct kernel_link *link, const char *container_id);

/* Close both connections and the listener, unlink the socket, remove dir.
 * Safe to call from inside an ops callback: the memory is released on the
 * next loop turn. NULL is a no-op. */
void kernel_link_free(struct kernel_link *link);

/* Close the connections and the listener but leave the socket file and the
 * directory: the container keeps running for the next daemon, which binds a
 * new socket in the same directory (the container's bind mount holds on to
 * the directory itself, so it must never be removed and re-made). */
void kernel_link_close(struct kernel_link *link);

bool kernel_link_kernel_connected(const struct kernel_link *link);
bool kernel_link_supervisor_connected(const struct kernel_link *link);

/* Send an exec frame (code in the body); language NULL (Python) leaves the
 * frame's "language" out, else names it (a plain word: written as is). */
int kernel_link_send_exec(struct kernel_link *link, uint64_t id, const char *language,
			  const char *code, size_t len, size_t output_cap, size_t files_cap,
			  struct err **errp);

/* Send a frame (a JSON header, no body) to the kernel: the answer to a
 * pip_open. -1 when the kernel is not connected. */
int kernel_link_send_kernel(struct kernel_link *link, const char *header, size_t hlen,
			    struct err **errp);

/* Send a frame to the supervisor. */
int kernel_link_send_supervisor(struct kernel_link *link, const char *header, size_t hlen,
				const void *body, size_t blen, struct err **errp);

/* Bytes queued toward the supervisor and not yet written (for backpressure). */
size_t kernel_link_supervisor_backlog(const struct kernel_link *link);

/* Stop (or resume) reading the supervisor's frames: a download's client is
 * slower than the sandbox. */
void kernel_link_supervisor_pause_read(struct kernel_link *link, bool paused);

/* Interrupt execution id (Ctrl-C): an interrupt frame naming it, written
 * out now, then SIGINT. The kernel raises KeyboardInterrupt in the code it
 * runs; a SIGINT that finds no execution running looks for the frame, so
 * one sent the moment the execution was is not lost, and a late one (its
 * execution done) is dropped. -1 when the kernel is not connected. */
int kernel_link_interrupt(struct kernel_link *link, uint64_t id);

/* Signal the connected kernel process through its verified pidfd (never by
 * pid number); -1 when no kernel is connected or the signal failed. */
int kernel_link_signal_kernel(struct kernel_link *link, int sig);

/* Drop the kernel connection (after a protocol violation, or to force the
 * supervisor to start a new kernel once it is killed). */
void kernel_link_drop_kernel(struct kernel_link *link, const char *why);

#endif
