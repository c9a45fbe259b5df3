/* ipc_dir.h: the directory holding every session's IPC directory
 * (<state-dir>/s/<session id>/ipc.sock), each bind-mounted read-only into its
 * container at /run/ci.
 *
 * Inside the container, /proc/self/mountinfo shows a bind mount's source path
 * relative to the root of its file system: on the host's disk that is the
 * whole state-dir path. So the directory is made a small tmpfs of its own,
 * and a sandbox sees only "/<its session id>". That only helps when the
 * engine sees the mount, i.e. when dockerd shares the daemon's mount
 * namespace (not when ci-daemon runs in a container of its own, beside a
 * Docker-in-Docker engine that shares the state directory through a volume):
 * the daemon checks, and keeps a plain directory otherwise. */
#ifndef CI_IPC_DIR_H
#define CI_IPC_DIR_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* Make dir (mode 0711); with want_tmpfs, mount a tmpfs on it when it is not
 * one already and dockerd (found through docker_socket) shares our mount
 * namespace. *tmpfs says whether dir is now a tmpfs mount. */
int ipc_dir_prepare(const char *dir, const char *docker_socket, bool want_tmpfs, bool *tmpfs,
		    struct err **errp);

/* Whether dockerd (found through docker_socket) shares our mount namespace,
 * so that a mount the daemon makes is what a bind mount of it shows. */
bool ipc_dir_engine_shares_mounts(const char *docker_socket);

/* Remove the session directories under dir that keep(name) does not claim:
 * what a daemon killed with SIGKILL left of its warm-pool sandboxes, or of
 * sessions whose containers are gone. Only names shaped like session ids are
 * touched. With remove false they are only counted. fn (may be NULL) gets
 * each name. Returns how many there were. */
size_t ipc_dir_sweep(const char *dir, bool (*keep)(const char *name, void *arg), void *arg,
		     bool remove, void (*fn)(const char *name, void *arg), void *fn_arg);

#endif
