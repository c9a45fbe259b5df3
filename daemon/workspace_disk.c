/* workspace_disk.c: per-session loop-mounted workspace images (see the
 * header for why), or the tmpfs fallback. */
#include "workspace_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc_dir.h"
#include "log.h"
#include "proc.h"
#include "session.h"
#include "xalloc.h"

extern char **environ;

/* $1 image, $2 mount point, $3 MiB, $4 uid. The image is allocated whole
 * (fallocate: unwritten extents, no data written, milliseconds for GiBs on
 * ext4 or xfs), so the budget is the session's on the host's disk: a sparse
 * image let one tenant's writes, within its own budget, take the blocks
 * another's had been promised (issue 28, item 3). Nothing may give those
 * blocks back while the session lives: mkfs without discard, the mount
 * without discard (a discard on the loop device punches holes in the
 * image) and with noinit_itable (ext4's lazy zeroing of its inode tables
 * is a write-zeroes request, which the loop driver turns into a punched
 * hole: 4 of a 64 MiB image's blocks went back; the tables read as zeros
 * anyway, the image being allocated unwritten). No journal: a workspace does not outlive a host
 * crash (the restart sweeps it), and a journal would cost 8-32 MiB of every budget. Nothing
 * reserved for root (-m 0): the budget is the sandbox's. nosuid,nodev,noexec: what Docker gives the
 * tmpfs it replaces (noexec is no boundary: security.md). mount -o loop sets autoclear, so the
 * unmount frees the loop device. lost+found goes: the sandbox cannot remove it and would see it in
 * every listing. */
static const char make_sh[] =
    "set -e\n"
    "umask 077\n"
    "rm -f \"$1\"\n"
    "fallocate -l \"$3\"M \"$1\"\n"
    "mkfs.ext4 -F -q -m 0 -O ^has_journal -E nodiscard,root_owner=\"$4:$4\" "
    "\"$1\"\n"
    "mkdir -p \"$2\"\n"
    "mount -t ext4 -o loop,nosuid,nodev,noexec,noinit_itable \"$1\" \"$2\"\n"
    "rmdir \"$2/lost+found\"\n"
    "chmod 0700 \"$2\"\n";

/* $1 image, $2 mount point; idempotent (a half-made or half-removed one
 * goes too). A failing unmount of a mounted one leaves both for the sweep
 * to retry. Two programs in the common case: it runs in every teardown. */
static const char remove_sh[] =
    "if ! umount \"$2\" 2>/dev/null && mountpoint -q \"$2\"; then exit 1; fi\n"
    "rm -f -d -- \"$1\" \"$2\"\n";

struct workspace_vol {
	struct workspace_disk *wd;
	char id[SESSION_ID_LEN + 8];
	int64_t mb, uid;
	bool busy;          /* a helper runs for it */
	bool making;        /* its make runs: v->mb is in wd->making_mb */
	bool remove_wanted; /* remove once the helper in flight ends */
	bool forgotten;     /* nobody holds it: free when the helper ends */
	workspace_disk_cb cb, rcb;
	void *arg, *rarg;
	LIST_ENTRY(workspace_vol) link;
};

struct workspace_disk {
	struct event_base *base;
	char *dir; /* <state-dir>/w */
	bool loop;
	/* MiB of images admitted whose fallocate may not have run yet: not in
	 * statvfs's count of free blocks, so counted here. */
	int64_t making_mb;
	LIST_HEAD(, workspace_vol) vols;
};

static void vol_paths(const struct workspace_disk *wd, const char *id, char *img, char *mnt)
{
	snprintf(img, PATH_MAX, "%s/%s.img", wd->dir, id);
	snprintf(mnt, PATH_MAX, "%s/%s", wd->dir, id);
}

static void vol_free(struct workspace_vol *v)
{
	LIST_REMOVE(v, link);
	free(v);
}

static struct workspace_vol *vol_new(struct workspace_disk *wd, const char *id)
{
	struct workspace_vol *v = xcalloc(1, sizeof(*v));
	v->wd = wd;
	snprintf(v->id, sizeof(v->id), "%s", id);
	LIST_INSERT_HEAD(&wd->vols, v, link);
	return v;
}

static void vol_run(struct workspace_vol *v, const char *script, proc_done_cb done)
{
	char img[PATH_MAX], mnt[PATH_MAX], mb[24], uid[24];
	vol_paths(v->wd, v->id, img, mnt);
	snprintf(mb, sizeof(mb), "%lld", (long long)v->mb);
	snprintf(uid, sizeof(uid), "%lld", (long long)v->uid);
	char *argv[] = {"/bin/sh", "-c", (char *)script, "workspace", img, mnt, mb, uid, NULL};
	v->busy = true;
	proc_run(v->wd->base, argv, done, v);
}

static void vol_removed(int status, void *arg)
{
	struct workspace_vol *v = arg;
	v->busy = false;
	struct err *e = NULL;
	if (status != 0) {
		e = err_new(ERR_INTERNAL, "workspace %s/%s: unmount failed (exit %d)", v->wd->dir,
			    v->id, status);
		log_warn("%s; the sweep will retry", e->message);
	}
	workspace_disk_cb cb = v->rcb;
	void *rarg = v->rarg;
	vol_free(v);
	if (cb)
		cb(e, rarg);
	err_free(e);
}

static void vol_made(int status, void *arg)
{
	struct workspace_vol *v = arg;
	v->busy = false;
	v->making = false;
	v->wd->making_mb -= v->mb;
	if (v->forgotten) {
		vol_free(v);
		return;
	}
	if (v->remove_wanted) {
		vol_run(v, remove_sh, vol_removed);
		return;
	}
	struct err *e = NULL;
	if (status != 0)
		e = err_new(ERR_UNAVAILABLE,
			    "workspace: making the %lld MiB disk image failed (exit %d; the "
			    "daemon's log has the helper's words)",
			    (long long)v->mb, status);
	workspace_disk_cb cb = v->cb;
	v->cb = NULL;
	if (cb)
		cb(e, v->arg);
	err_free(e);
}

struct workspace_vol *workspace_vol_make(struct workspace_disk *wd, const char *id, int64_t mb,
					 int64_t uid, workspace_disk_cb cb, void *arg)
{
	struct workspace_vol *v = vol_new(wd, id);
	v->mb = mb;
	v->uid = uid;
	v->cb = cb;
	v->arg = arg;
	v->making = true;
	wd->making_mb += mb;
	vol_run(v, make_sh, vol_made); /* proc_run calls back from the loop */
	return v;
}

void workspace_vol_cancel_make(struct workspace_vol *v)
{
	if (v)
		v->cb = NULL;
}

static bool is_mount_point(const char *path)
{
	struct stat self, parent;
	char up[PATH_MAX];
	snprintf(up, sizeof(up), "%s/..", path);
	return stat(path, &self) == 0 && S_ISDIR(self.st_mode) && stat(up, &parent) == 0 &&
	       self.st_dev != parent.st_dev;
}

struct workspace_vol *workspace_vol_adopt(struct workspace_disk *wd, const char *id)
{
	char img[PATH_MAX], mnt[PATH_MAX];
	vol_paths(wd, id, img, mnt);
	if (!is_mount_point(mnt))
		return NULL;
	return vol_new(wd, id);
}

void workspace_vol_remove(struct workspace_vol *v, workspace_disk_cb cb, void *arg)
{
	if (v == NULL)
		return;
	v->cb = NULL;
	v->rcb = cb;
	v->rarg = arg;
	v->remove_wanted = true;
	if (!v->busy)
		vol_run(v, remove_sh, vol_removed);
}

void workspace_vol_forget(struct workspace_vol *v)
{
	if (v == NULL)
		return;
	if (v->busy) {
		v->forgotten = true;
		v->cb = NULL;
		v->rcb = NULL;
		return;
	}
	vol_free(v);
}

static bool vol_known(const struct workspace_disk *wd, const char *id)
{
	const struct workspace_vol *v;
	LIST_FOREACH (v, &wd->vols, link)
		if (strcmp(v->id, id) == 0)
			return true;
	return false;
}

size_t workspace_disk_sweep(struct workspace_disk *wd, bool (*keep)(const char *id, void *arg),
			    void *arg, bool remove, void (*fn)(const char *id, void *arg),
			    void *fn_arg, workspace_disk_cb removed, void *removed_arg)
{
	if (wd == NULL)
		return 0;
	DIR *d = opendir(wd->dir);
	if (d == NULL)
		return 0;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char id[SESSION_ID_LEN + 8];
		size_t len = strlen(de->d_name);
		bool img = len > 4 && strcmp(de->d_name + len - 4, ".img") == 0;
		snprintf(id, sizeof(id), "%.*s", (int)(img ? len - 4 : len), de->d_name);
		if (!session_id_valid(id) || vol_known(wd, id) || keep(id, arg))
			continue;
		if (img) {
			/* Both an image and its mount point: counted once, by the directory. */
			char mnt[PATH_MAX];
			struct stat st;
			snprintf(mnt, sizeof(mnt), "%s/%s", wd->dir, id);
			if (stat(mnt, &st) == 0)
				continue;
		}
		n++;
		if (fn)
			fn(id, fn_arg);
		if (remove) {
			log_info("gc: removing the workspace image of session %s", id);
			struct workspace_vol *v = vol_new(wd, id);
			v->remove_wanted = true;
			v->rcb = removed;
			v->rarg = removed_arg;
			vol_run(v, remove_sh, vol_removed);
		}
	}
	closedir(d);
	return n;
}

/* ---- the node ---- */

/* Run the script to its end, blocking: only for the probe at start-up,
 * before the loop runs. Its output goes to /dev/null; the probe's log line
 * says which step to look at. */
static int run_sync(const char *script, const char *img, const char *mnt, const char *mb,
		    const char *uid)
{
	char *argv[] = {"/bin/sh",   "-c",       (char *)script, "workspace", (char *)img,
			(char *)mnt, (char *)mb, (char *)uid,    NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -1;
	int ws = 0;
	while (waitpid(pid, &ws, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* Can this node loop-mount images that the engine will see? NULL when it
 * can, else why not (static text). */
static const char *loop_probe(const char *dir, const char *docker_socket)
{
	if (geteuid() != 0)
		return "the daemon does not run as root (mount needs it)";
	if (access("/dev/loop-control", R_OK | W_OK) != 0)
		return "no /dev/loop-control (the loop module is missing or /dev is not the "
		       "host's)";
	if (!ipc_dir_engine_shares_mounts(docker_socket))
		return "the engine does not share this daemon's mount namespace (it would not see "
		       "the mount, and the files would go to its disk uncapped)";
	char img[PATH_MAX], mnt[PATH_MAX];
	if (snprintf(img, sizeof(img), "%s/probe-%d.img", dir, (int)getpid()) >= (int)sizeof(img) ||
	    snprintf(mnt, sizeof(mnt), "%s/probe-%d", dir, (int)getpid()) >= (int)sizeof(mnt))
		return "the state directory's path is too long";
	int made = run_sync(make_sh, img, mnt, "8", "0");
	bool mounted = is_mount_point(mnt);
	int removed = run_sync(remove_sh, img, mnt, "", "");
	if (made != 0 || !mounted)
		return "a probe image could not be made and mounted (fallocate, mkfs.ext4, mount "
		       "-o "
		       "loop)";
	if (removed != 0)
		return "a probe image could not be unmounted";
	return NULL;
}

struct workspace_disk *workspace_disk_new(struct event_base *base, const char *state_dir,
					  const char *want, const char *docker_socket,
					  struct err **errp)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/w", state_dir);
	/* Root's only: the images hold the sandboxes' files. */
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		err_set(errp, ERR_INTERNAL, "%s: %s", dir, strerror(errno));
		return NULL;
	}
	chmod(dir, 0700);
	struct workspace_disk *wd = xcalloc(1, sizeof(*wd));
	wd->base = base;
	wd->dir = xstrdup(dir);
	LIST_INIT(&wd->vols);
	if (strcmp(want, "loop") == 0) {
		const char *why = loop_probe(dir, docker_socket);
		wd->loop = why == NULL;
		if (why)
			log_warn(
			    "workspace: loop backend unavailable: %s; /workspace stays a tmpfs, "
			    "charged to the session's memory limit",
			    why);
	}
	if (wd->loop)
		log_info("workspace: each session's /workspace is an ext4 image of disk_mb, "
			 "loop-mounted under %s",
			 dir);
	else
		log_info("workspace: /workspace is a tmpfs of disk_mb (charged to memory)");
	return wd;
}

int workspace_disk_admit(const struct workspace_disk *wd, int64_t mb, int64_t headroom_mb,
			 struct err **errp)
{
	if (!workspace_disk_is_loop(wd))
		return 0;
	struct statvfs sv;
	if (statvfs(wd->dir, &sv) < 0)
		return err_set(errp, ERR_UNAVAILABLE, "workspace: statvfs %s: %s", wd->dir,
			       strerror(errno));
	int64_t free_mb = (int64_t)(((unsigned long long)sv.f_bavail * sv.f_frsize) >> 20);
	/* What the images hold of their budget but not (or no longer) on the
	 * disk is promised too: a hole in an image (whatever punched it) is
	 * free space that its session will take back. */
	int64_t holes = 0;
	const struct workspace_vol *v;
	LIST_FOREACH (v, &wd->vols, link) {
		char img[PATH_MAX], mnt[PATH_MAX];
		struct stat st;
		vol_paths(wd, v->id, img, mnt);
		if (v->making || stat(img, &st) < 0)
			continue;
		int64_t gap = (int64_t)st.st_size - (int64_t)st.st_blocks * 512;
		if (gap > 0)
			holes += gap;
	}
	int64_t holes_mb = (holes + (1 << 20) - 1) >> 20;
	int64_t room = free_mb - wd->making_mb - holes_mb - headroom_mb;
	if (mb <= room)
		return 0;
	return err_set(
	    errp, ERR_UNAVAILABLE,
	    "this node's disk has no room for a %lld MiB workspace: %lld MiB free under "
	    "the state directory, %lld MiB of it promised to workspaces (being made, or not "
	    "yet allocated), and %lld MiB kept for snapshots (workspace-disk-headroom-mb); "
	    "ask for a smaller limits.disk_mb, retry once sessions have ended, or create the "
	    "session elsewhere",
	    (long long)mb, (long long)free_mb, (long long)(wd->making_mb + holes_mb),
	    (long long)headroom_mb);
}

void workspace_disk_free(struct workspace_disk *wd)
{
	if (wd == NULL)
		return;
	while (!LIST_EMPTY(&wd->vols))
		vol_free(LIST_FIRST(&wd->vols));
	free(wd->dir);
	free(wd);
}

bool workspace_disk_is_loop(const struct workspace_disk *wd)
{
	return wd && wd->loop;
}

const char *workspace_disk_backend(const struct workspace_disk *wd)
{
	return workspace_disk_is_loop(wd) ? "loop" : "tmpfs";
}

int workspace_disk_path(const struct workspace_disk *wd, const char *id, char *buf, size_t size)
{
	if (!workspace_disk_is_loop(wd))
		return -1;
	int n = snprintf(buf, size, "%s/%s", wd->dir, id);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}
