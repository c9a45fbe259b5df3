/* ipc_dir.c: the sessions' IPC directories on the host. */
#include "ipc_dir.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "session.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

static bool is_tmpfs_mount(const char *dir)
{
	struct statfs fs;
	struct stat self, parent;
	char up[PATH_MAX];
	snprintf(up, sizeof(up), "%s/..", dir);
	return statfs(dir, &fs) == 0 && fs.f_type == TMPFS_MAGIC && stat(dir, &self) == 0 &&
	       stat(up, &parent) == 0 && self.st_dev != parent.st_dev;
}

/* The engine's pid, from its socket's peer credentials (0 when it lives in
 * another pid namespace, or does not answer). A connect to a unix socket
 * completes at once; this runs once, before the loop starts. */
static pid_t docker_pid(const char *socket_path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(socket_path) >= sizeof(sun.sun_path))
		return 0;
	strcpy(sun.sun_path, socket_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct ucred cred = {0};
	socklen_t len = sizeof(cred);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		cred.pid = 0;
	close(fd);
	return cred.pid;
}

static bool same_mount_ns(pid_t pid)
{
	char path[64], mine[64] = "", theirs[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	ssize_t a = readlink("/proc/self/ns/mnt", mine, sizeof(mine) - 1);
	ssize_t b = readlink(path, theirs, sizeof(theirs) - 1);
	return a > 0 && b > 0 && strcmp(mine, theirs) == 0;
}

bool ipc_dir_engine_shares_mounts(const char *docker_socket)
{
	pid_t engine = docker_pid(docker_socket);
	return engine > 0 && same_mount_ns(engine);
}

int ipc_dir_prepare(const char *dir, const char *docker_socket, bool want_tmpfs, bool *tmpfs,
		    struct err **errp)
{
	*tmpfs = false;
	if (mkdir(dir, 0711) < 0 && errno != EEXIST)
		return err_set(errp, ERR_INTERNAL, "%s: %s", dir, strerror(errno));
	if (is_tmpfs_mount(dir)) {
		*tmpfs = true; /* a previous daemon's: its sessions' directories are in it */
		return 0;
	}
	chmod(dir, 0711);
	if (!want_tmpfs)
		return 0;
	if (!ipc_dir_engine_shares_mounts(docker_socket)) {
		log_info("ipc: %s stays a plain directory: the engine does not share this daemon's "
			 "mount namespace (sandboxes see its path in /proc/self/mountinfo)",
			 dir);
		return 0;
	}
	/* Sockets and directories only: a small size, no devices, no programs. */
	if (mount("ci-ipc", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0711,size=4m") <
	    0) {
		log_info("ipc: cannot mount a tmpfs on %s (%s); sandboxes see its path in "
			 "/proc/self/mountinfo",
			 dir, strerror(errno));
		return 0;
	}
	*tmpfs = true;
	return 0;
}

size_t ipc_dir_sweep(const char *dir, bool (*keep)(const char *name, void *arg), void *arg,
		     bool remove, void (*fn)(const char *name, void *arg), void *fn_arg)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (!session_id_valid(de->d_name) || keep(de->d_name, arg))
			continue;
		n++;
		if (fn)
			fn(de->d_name, fn_arg);
		if (!remove)
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s/ipc.sock", dir, de->d_name);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (rmdir(path) < 0 && errno != ENOENT)
			log_warn("gc: cannot remove %s: %s", path, strerror(errno));
	}
	closedir(d);
	return n;
}
