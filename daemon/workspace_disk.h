/* workspace_disk.h: a session's /workspace on a disk budget of its own.
 *
 * By default (workspace-backend tmpfs) /workspace is a size-capped tmpfs,
 * and a tmpfs is charged to the container's memory cgroup: a session that
 * uploaded 480 MB of a 512 MB memory limit had its next 50 MB allocation
 * killed as out of memory. With workspace-backend loop each session gets
 * a file of disk_mb on the host's disk, allocated whole (fallocate: the
 * budget is reserved, not promised), formatted ext4 (no journal,
 * nothing reserved, its root owned by the session's uid), loop-mounted at
 * <state-dir>/w/<id> and bind-mounted as /workspace: a full disk is ENOSPC
 * inside the sandbox, and the memory limit counts memory only.
 *
 * Docker's own size option (--storage-opt size=) needs overlay2 on xfs with
 * pquota; on this engine it is refused (docs/operations.md). The loop route
 * needs root, /dev/loop-control, fallocate, mkfs.ext4 and an engine in the daemon's
 * mount namespace (else its bind source would be an empty directory of the
 * engine's, and the files would land on its disk with no cap):
 * workspace_disk_new checks all of it once, with a real image, and falls
 * back to tmpfs when any of it is missing, saying why.
 *
 * The helpers (fallocate, mkfs.ext4, mount, umount) run through proc_run, off
 * the loop, as one /bin/sh script each with the paths as arguments.
 *
 * For the snapshots (next issue): workspace_disk_path(wd, id, buf, size)
 * gives the host path of session id's mounted workspace (ms->wsvol != NULL
 * says it is mounted; it stays so until the teardown's workspace_vol_remove
 * after the container is gone), so a snapshot can read, and a restore
 * write, the files from the host without going through the sandbox; with
 * the tmpfs backend it returns -1 and the files are reachable only through
 * the runner (daemon/files.c). Reading it from the host, three rules:
 *  - its contents are the sandbox's: walk it with openat2(RESOLVE_BENEATH |
 *    RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) or O_NOFOLLOW at every
 *    step, never follow a link, and cap sizes and counts (a sandbox can
 *    make millions of inodes and files that change while read);
 *  - file I/O there can block (a loop device, up to disk_mb of dirty pages):
 *    do it in a helper or a thread, never on the loop;
 *  - files a restore writes are chown'ed to the session's uid (s->uid) and
 *    keep within disk_mb (ENOSPC is the budget speaking). */
#ifndef CI_WORKSPACE_DISK_H
#define CI_WORKSPACE_DISK_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct workspace_disk; /* the node's: backend and <state-dir>/w */
struct workspace_vol;  /* one session's image and mount */

/* The node's workspaces under state_dir; want is "tmpfs" or "loop" (config
 * checks it). With "loop", probes the route once (blocking: call before the
 * loop runs) and falls back to tmpfs with a log line when it does not work.
 * Fails only when state_dir/w cannot be made. Free with workspace_disk_free. */
struct workspace_disk *workspace_disk_new(struct event_base *base, const char *state_dir,
					  const char *want, const char *docker_socket,
					  struct err **errp);
/* Frees the node's object and every vol still known (their mounts stay:
 * the sessions outlive the daemon, to be adopted). NULL-safe. */
void workspace_disk_free(struct workspace_disk *wd);

/* True when sessions get a loop-mounted image (else a tmpfs). */
bool workspace_disk_is_loop(const struct workspace_disk *wd);
/* Admission of a new image of mb MiB: 0 when the file system under the
 * state directory has room for it beside the images being made and
 * headroom_mb left over (for the snapshot spool and store, and the host's
 * own writes), else -1 with an unavailable error that says so. Always 0
 * with the tmpfs backend (the workspace is memory then). The images are
 * allocated whole at their make (fallocate), so admitted is promised. */
int workspace_disk_admit(const struct workspace_disk *wd, int64_t mb, int64_t headroom_mb,
			 struct err **errp);

/* "loop" or "tmpfs": what the node actually uses. */
const char *workspace_disk_backend(const struct workspace_disk *wd);

/* The host path where session id's workspace is (to be) mounted, into buf.
 * -1 with the tmpfs backend or when buf is too small. */
int workspace_disk_path(const struct workspace_disk *wd, const char *id, char *buf, size_t size);

/* Called once, from the loop: e NULL when it worked (borrowed). */
typedef void (*workspace_disk_cb)(const struct err *e, void *arg);

/* Make session id's image of mb MiB, its root owned by uid, and mount it.
 * cb runs once, from the loop (unless cancelled). The vol is the wd's; the
 * caller keeps the pointer until it hands it to workspace_vol_remove or
 * workspace_vol_forget. Only with the loop backend. */
struct workspace_vol *workspace_vol_make(struct workspace_disk *wd, const char *id, int64_t mb,
					 int64_t uid, workspace_disk_cb cb, void *arg);
/* The caller of make goes away: cb will not run. What the make does is
 * still finished, and undone by workspace_vol_remove. NULL-safe. */
void workspace_vol_cancel_make(struct workspace_vol *v);
/* Session id's workspace as a previous daemon left it (a restart): a vol
 * when <state-dir>/w/<id> is a mount point, else NULL. */
struct workspace_vol *workspace_vol_adopt(struct workspace_disk *wd, const char *id);
/* Unmount and delete the image (after a make still running has ended);
 * cb (may be NULL) runs once, from the loop, e set when the unmount failed
 * (the sweep retries). The vol is freed; the caller forgets it. NULL-safe
 * with cb NULL. */
void workspace_vol_remove(struct workspace_vol *v, workspace_disk_cb cb, void *arg);
/* The daemon exits with the session alive: the mount stays for the next
 * daemon, the memory goes (now, or when a helper in flight ends). NULL-safe. */
void workspace_vol_forget(struct workspace_vol *v);

/* Workspaces in <state-dir>/w whose session keep() does not claim, and no
 * vol of this node: fn (may be NULL) is told each id, and with remove each
 * is unmounted and deleted, asynchronously: removed (may be NULL) runs once
 * per removal, from the loop. Returns how many were found. Only names
 * shaped like session ids are touched. */
size_t workspace_disk_sweep(struct workspace_disk *wd, bool (*keep)(const char *id, void *arg),
			    void *arg, bool remove, void (*fn)(const char *id, void *arg),
			    void *fn_arg, workspace_disk_cb removed, void *removed_arg);

#endif
