/* stateless.c: the stateless tier, python3 run once in bubblewrap.
 *
 * One call: the code goes into a memfd (fd 3 of the sandbox; a memfd needs
 * no writing on the loop, whatever its size), the done header comes back on
 * a pipe (fd 4), stdout and stderr on pipes of their own, all read on the
 * loop. The child is made with clone3(CLONE_PIDFD), not posix_spawn (proc.c),
 * because between fork and exec it must drop to an unprivileged host uid
 * and set rlimits, which posix_spawn cannot do; like proc.c, the pidfd is
 * what the loop watches for the exit.
 *
 * Who runs as whom. The daemon is root; bwrap is not setuid (Debian 12's is
 * not), so the child first becomes a host uid of its own (one per running
 * slot: the uids just below --sandbox-uid-base, so RLIMIT_NPROC, which the
 * kernel counts per real uid, is a budget per run and never root's), then
 * bwrap makes a user namespace in which that uid is 1000, and the other
 * namespaces (mount, pid, net with only a down loopback, ipc, uts, cgroup).
 * Inside, no capability, no_new_privs, no further user namespaces
 * (--disable-userns) and the filter of stateless_seccomp.c. The daemon
 * SIGKILLs the process group at the deadline; the sandbox's pid namespace
 * (its init is bwrap's, killed with its parent by --die-with-parent) takes
 * every descendant with it.
 *
 * Memory and processes are capped by rlimits (RLIMIT_AS, RLIMIT_NPROC), not a
 * cgroup: docs/security.md says why (a writable cgroup v2 with the memory and
 * pids controllers is not something the daemon can count on; on this
 * project's hosts the controllers sit in v1 hierarchies). RLIMIT_AS is per
 * process, so the whole run's memory is bounded by a watchdog: a timer on
 * the loop that walks each run's process tree in /proc (bwrap's children,
 * every thread's, so a child forked from a thread is not missed) and sums
 * their proportional set sizes (smaps_rollup's Pss: pages shared after a
 * fork are counted once); above --stateless-memory-mb the run is killed.
 * Its work per tick is bounded (STATELESS_WATCH_PIDS processes a run, and
 * RLIMIT_NPROC keeps a run below that). */
#include "stateless.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "stateless_seccomp.h"
#include "xalloc.h"

/* The embedded runner (build/gen/stateless_runner.c, from
 * daemon/stateless_runner.py). */
extern const char stateless_runner_source[];

#define STATELESS_DONE_MAX (2u << 20) /* the runner keeps it under 1 MiB */
#define STATELESS_MAX_SLOTS 64
/* Processes (threads) per run's uid: bwrap, the sandbox's init and 14 more.
 * Each may map up to --stateless-memory-mb; the watchdog bounds the sum. */
#define STATELESS_NPROC 16
#define STATELESS_NOFILE 128
#define STATELESS_FSIZE (32ull << 20) /* one file's size */
#define STATELESS_WORKSPACE_BYTES "67108864"
#define STATELESS_TMP_BYTES "33554432"
#define STATELESS_SHM_BYTES "16777216"
#define STATELESS_DRAIN_MAX (4u << 20)   /* read per pipe after the exit */
#define STATELESS_READ_TURN (256u << 10) /* read per pipe and loop turn */
#define STATELESS_KILL_GRACE_S 2         /* after the init's kill, for bwrap's exit */
#define STATELESS_WATCH_MS 50            /* the memory watchdog's period */
/* Processes the watchdog reads per run and tick: more than RLIMIT_NPROC lets
 * a run have (zombies on their way out included). */
#define STATELESS_WATCH_PIDS 64

enum stateless_probe { PROBE_PENDING, PROBE_OK, PROBE_FAILED };

struct stateless_stream {
	int fd;
	struct event *ev;
	bool is_stderr;
	size_t half;     /* the cap's halves: head kept live, tail ring */
	size_t head_len; /* bytes that went to the head */
	char *ring;      /* the last `half` bytes past the head */
	size_t ring_pos; /* next write position in ring */
	uint64_t beyond; /* bytes past the head, in all */
};

struct stateless_call {
	LIST_ENTRY(stateless_call) link;
	struct stateless *t;
	int slot;
	pid_t pid;
	int pidfd;
	struct event *exit_ev, *timer_ev;
	/* bwrap's --info-fd: the host pid of its child (python, the sandbox's
	 * init), as a pidfd. Killing it first ends the pid namespace, whose
	 * init's exit waits for every process in it, before bwrap exits: when
	 * the exit's event comes, the slot's uid has nothing left running. */
	int info_fd, child_pidfd;
	struct event *info_ev;
	char info[512];
	size_t info_len;
	bool grace; /* the timer now bounds the wait for bwrap's own exit */
	struct stateless_stream out, err;
	int done_fd;
	struct event *done_ev;
	char *done_buf;
	size_t done_len;
	bool done_over;
	struct exec_result *r;
	int64_t start_ms, timeout_s;
	bool timed_out, cancelled, probe;
	bool mem_killed;     /* over the memory bound: the watchdog killed it */
	int64_t mem_peak_kb; /* the most the watchdog saw (kB of Pss, summed) */
	char tenant[64];     /* whose run (the per-tenant cap) */
	stateless_done_cb cb;
	void *arg;
};

struct stateless {
	struct event_base *base;
	char *bwrap, *python;
	int64_t timeout_s, memory_mb, max_running, output_cap, uid_top;
	uint64_t slots; /* bit i: slot i taken */
	int last_slot;
	size_t running;
	LIST_HEAD(, stateless_call) calls;
	struct event *watch_ev; /* the memory watchdog, armed while calls run */
	uint64_t mem_kills;
	enum stateless_probe probe;
	struct sock_filter *bpf;
	size_t bpf_len;
	char **argv; /* bwrap's, the same for every run (stateless_argv) */
	size_t argc;
};

/* ----------------------------------------------------------------- output */

static void stream_init(struct stateless_stream *s, int fd, bool is_stderr, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->is_stderr = is_stderr;
	s->half = cap / 2;
	s->ring = xmalloc(s->half ? s->half : 1);
}

static void stream_release(struct stateless_stream *s)
{
	if (s->ev)
		event_free(s->ev);
	if (s->fd >= 0)
		close(s->fd);
	free(s->ring);
	s->ev = NULL;
	s->fd = -1;
	s->ring = NULL;
}

/* The first half of the cap goes to the result as it comes, like the
 * kernel's live stream; past it, a ring keeps the last half for the end. */
static void stream_take(struct stateless_call *c, struct stateless_stream *s, const char *d,
			size_t n)
{
	if (s->head_len < s->half) {
		size_t k = s->half - s->head_len < n ? s->half - s->head_len : n;
		exec_result_on_stream(c->r, s->is_stderr, d, k, false, 0);
		s->head_len += k;
		d += k;
		n -= k;
	}
	if (n == 0 || s->half == 0) {
		s->beyond += n;
		return;
	}
	s->beyond += n;
	if (n > s->half) {
		d += n - s->half;
		n = s->half;
	}
	while (n > 0) {
		size_t k = s->half - s->ring_pos < n ? s->half - s->ring_pos : n;
		memcpy(s->ring + s->ring_pos, d, k);
		s->ring_pos = (s->ring_pos + k) % s->half;
		d += k;
		n -= k;
	}
}

static void stream_finish(struct stateless_call *c, struct stateless_stream *s)
{
	if (s->beyond == 0)
		return;
	size_t keep = s->beyond < s->half ? (size_t)s->beyond : s->half;
	char *tail = xmalloc(keep ? keep : 1);
	/* The ring's oldest byte is at ring_pos once it has wrapped. */
	size_t start = (s->ring_pos + s->half - keep) % (s->half ? s->half : 1);
	for (size_t i = 0; i < keep; i++)
		tail[i] = s->ring[(start + i) % s->half];
	exec_result_on_stream(c->r, s->is_stderr, tail, keep, true, s->beyond - keep);
	free(tail);
}

/* Read what is there, up to budget bytes; true at EOF or a hard error.
 * On the loop the budget is a turn's (a writer on another core could keep
 * the pipe from ever being empty; EV_PERSIST brings us back); after the
 * exit, a drain's (a lingering writer must not keep the loop here). */
static bool stream_read(struct stateless_call *c, struct stateless_stream *s, size_t budget)
{
	char chunk[16384];
	size_t got = 0;
	while (s->fd >= 0 && got < budget) {
		ssize_t n = read(s->fd, chunk, sizeof(chunk));
		if (n == 0)
			return true;
		if (n < 0)
			return errno != EAGAIN && errno != EINTR;
		got += (size_t)n;
		stream_take(c, s, chunk, (size_t)n);
	}
	return s->fd < 0;
}

static void stream_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct stateless_call *c = arg;
	struct stateless_stream *s = fd == c->out.fd ? &c->out : &c->err;
	if (stream_read(c, s, STATELESS_READ_TURN))
		event_del(s->ev); /* closed: the exit's event will come */
}

static bool done_read(struct stateless_call *c, size_t budget)
{
	char chunk[16384];
	size_t got = 0;
	while (c->done_fd >= 0 && got < budget) {
		ssize_t n = read(c->done_fd, chunk, sizeof(chunk));
		if (n == 0)
			return true;
		if (n < 0)
			return errno != EAGAIN && errno != EINTR;
		got += (size_t)n;
		if (c->done_over || c->done_len + (size_t)n > STATELESS_DONE_MAX) {
			c->done_over = true; /* read on, keep nothing: the writer never blocks */
			continue;
		}
		c->done_buf = xrealloc(c->done_buf, c->done_len + (size_t)n + 1);
		memcpy(c->done_buf + c->done_len, chunk, (size_t)n);
		c->done_len += (size_t)n;
		c->done_buf[c->done_len] = '\0';
	}
	return c->done_fd < 0;
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct stateless_call *c = arg;
	if (done_read(c, STATELESS_READ_TURN))
		event_del(c->done_ev);
}

/* ------------------------------------------------------------------ calls */

/* The parent pid of pid from /proc (procfs: no disk, no wait), or -1. */
static pid_t proc_parent(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold anything, so from the
	 * last ')'. */
	char *p = strrchr(buf, ')');
	int ppid;
	char st;
	if (p == NULL || sscanf(p + 1, " %c %d", &st, &ppid) != 2)
		return -1;
	return (pid_t)ppid;
}

static void call_kill(struct stateless_call *c)
{
	if (c->pid <= 0)
		return;
	if (c->child_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, c->child_pidfd, SIGKILL, NULL, 0);
	/* The group first (bwrap and anything of its session that is ours),
	 * while the leader is not reaped yet so the pgid cannot be reused; the
	 * pidfd for the leader itself. */
	kill(-c->pid, SIGKILL);
	if (c->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
}

static void call_free(struct stateless_call *c)
{
	if (c == NULL)
		return;
	LIST_REMOVE(c, link);
	struct stateless *t = c->t;
	if (c->slot >= 0)
		t->slots &= ~(1ull << c->slot);
	if (!c->probe)
		t->running--;
	if (c->exit_ev)
		event_free(c->exit_ev);
	if (c->timer_ev)
		event_free(c->timer_ev);
	if (c->done_ev)
		event_free(c->done_ev);
	if (c->done_fd >= 0)
		close(c->done_fd);
	if (c->info_ev)
		event_free(c->info_ev);
	if (c->info_fd >= 0)
		close(c->info_fd);
	if (c->child_pidfd >= 0)
		close(c->child_pidfd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	stream_release(&c->out);
	stream_release(&c->err);
	free(c->done_buf);
	exec_result_free(c->r);
	free(c);
}

static void call_result(struct stateless_call *c, int wstatus, double cpu_s)
{
	struct exec_result *r = c->r;
	r->duration_ms = clock_mono_ms() - c->start_ms;
	stream_finish(c, &c->out);
	stream_finish(c, &c->err);
	char reason[192];
	if (c->mem_killed) {
		snprintf(reason, sizeof(reason),
			 "the stateless sandbox's processes used %lld MiB, over the run's %lld MiB "
			 "(--stateless-memory-mb); it was killed",
			 (long long)(c->mem_peak_kb >> 10), (long long)c->t->memory_mb);
		exec_result_fail(r, EXEC_KILLED, false, reason);
		return;
	}
	if (c->timed_out) {
		snprintf(reason, sizeof(reason),
			 "timed out at the %llds deadline; the stateless sandbox was killed",
			 (long long)c->timeout_s);
		exec_result_fail(r, EXEC_TIMEOUT, false, reason);
		return;
	}
	if (c->done_len > 0 && !c->done_over) {
		struct err *e = NULL;
		yajl_val done = json_parse(c->done_buf, c->done_len, &e);
		int rc = done ? exec_result_on_done(r, done, &e) : -1;
		json_free(done);
		if (rc == 0) {
			/* The code can write fd 4 itself: the header is as untrusted
			 * as the rest (exec_result_on_done caps it), and the tier
			 * keeps no files, whatever it claims. */
			for (size_t i = 0; i < r->n_files; i++) {
				free(r->files[i].path);
				free(r->files[i].change);
			}
			free(r->files);
			r->files = NULL;
			r->n_files = 0;
			r->files_truncated = false;
			return;
		}
		snprintf(reason, sizeof(reason), "the stateless runner sent a bad result: %s",
			 e ? e->message : "?");
		err_free(e);
		exec_result_fail(r, EXEC_KILLED, false, reason);
		return;
	}
	/* No result: bwrap passes the child's end on as its exit status
	 * (128 + the signal when it was killed). */
	int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
	/* RLIMIT_CPU counts a process's threads together, so threaded code can
	 * reach it before the wall deadline; python, the namespace's init,
	 * ignores SIGXCPU and ends at the hard limit's SIGKILL. The CPU time
	 * used (bwrap's rusage holds its waited-for child's) tells which. */
	if ((code == 128 + SIGXCPU || code == 128 + SIGKILL) && cpu_s >= (double)c->timeout_s) {
		snprintf(
		    reason, sizeof(reason),
		    "the stateless sandbox reached its CPU time limit (%.1fs of CPU for a %llds "
		    "limit)",
		    cpu_s, (long long)c->timeout_s);
		exec_result_fail(r, EXEC_TIMEOUT, false, reason);
	} else if (code > 128) {
		snprintf(reason, sizeof(reason),
			 "the stateless sandbox was killed by signal %d (%s)", code - 128,
			 strsignal(code - 128));
		exec_result_fail(r, EXEC_KILLED, false, reason);
	} else {
		snprintf(reason, sizeof(reason),
			 "the stateless sandbox exited with code %d without a result", code);
		exec_result_fail(r, EXEC_KILLED, false, reason);
	}
}

static void probe_done(struct stateless *t, const struct exec_result *r);

static void exit_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct stateless_call *c = arg;
	/* Kill the group before reaping the leader: what is left of it (the
	 * sandbox's init if bwrap died first) goes now, not with the kernel's
	 * pid namespace teardown later. */
	call_kill(c);
	int wstatus = 0;
	struct rusage ru = {0};
	if (wait4(c->pid, &wstatus, 0, &ru) != c->pid)
		wstatus = 0;
	double cpu_s = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	c->pid = -1;
	if (c->cancelled) {
		call_free(c);
		return;
	}
	stream_read(c, &c->out, STATELESS_DRAIN_MAX);
	stream_read(c, &c->err, STATELESS_DRAIN_MAX);
	done_read(c, STATELESS_DRAIN_MAX);
	call_result(c, wstatus, cpu_s);
	if (c->probe)
		probe_done(c->t, c->r);
	else
		c->cb(c->r, NULL, c->arg);
	call_free(c);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct stateless_call *c = arg;
	c->timed_out = true;
	if (c->child_pidfd >= 0 && !c->grace) {
		/* The sandbox's init first, so that bwrap exits after its pid
		 * namespace is gone; bwrap itself if it has not within a grace. */
		syscall(SYS_pidfd_send_signal, c->child_pidfd, SIGKILL, NULL, 0);
		c->grace = true;
		struct timeval tv = {.tv_sec = STATELESS_KILL_GRACE_S};
		evtimer_add(c->timer_ev, &tv);
		return;
	}
	call_kill(c); /* the exit's event finishes the call */
}

/* {"child-pid": N, ...} from bwrap once the sandbox is set up. */
static void info_take(struct stateless_call *c)
{
	struct err *e = NULL;
	yajl_val v = json_parse(c->info, c->info_len, &e);
	err_free(e);
	int64_t pid = 0;
	if (v && json_get_int(v, "child-pid", &pid) && pid > 1 && pid <= INT32_MAX) {
		int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
		/* Held, the pidfd pins the process; check that it is bwrap's
		 * child, not a newcomer that took a pid freed in between. */
		if (fd >= 0 && proc_parent((pid_t)pid) == c->pid)
			c->child_pidfd = fd;
		else if (fd >= 0)
			close(fd);
	}
	json_free(v);
}

static void info_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct stateless_call *c = arg;
	for (;;) {
		ssize_t n =
		    read(c->info_fd, c->info + c->info_len, sizeof(c->info) - 1 - c->info_len);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n > 0) {
			c->info_len += (size_t)n;
			if (c->info_len < sizeof(c->info) - 1)
				continue;
		}
		break; /* EOF, an error, or more than bwrap ever writes */
	}
	c->info[c->info_len] = '\0';
	info_take(c);
	event_del(c->info_ev);
	close(c->info_fd);
	c->info_fd = -1;
}

/* --------------------------------------------------------------- watchdog */

/* Up to size-1 bytes of a procfs file, NUL-terminated; its length, or -1. */
static ssize_t proc_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* The Pss of pid in kB (smaps_rollup: its private pages, and its share of
 * those it shares), 0 when it is gone. */
static int64_t proc_pss_kb(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if (proc_read(path, buf, sizeof(buf)) <= 0)
		return 0;
	const char *p = strstr(buf, "\nPss:");
	return p ? strtoll(p + 5, NULL, 10) : 0;
}

/* Append the children of every thread of pid to q (up to max). */
static void proc_children(pid_t pid, pid_t *q, size_t *n, size_t max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (d == NULL)
		return;
	struct dirent *de;
	/* A process has at most STATELESS_NPROC threads: the loop is bounded. */
	while ((de = readdir(d)) != NULL && *n < max) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char cpath[96], buf[1024];
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%.16s/children", (int)pid,
			 de->d_name);
		if (proc_read(cpath, buf, sizeof(buf)) <= 0)
			continue;
		char *p = buf, *end;
		for (;;) {
			long v = strtol(p, &end, 10);
			if (end == p || *n >= max)
				break;
			if (v > 0)
				q[(*n)++] = (pid_t)v;
			p = end;
		}
	}
	closedir(d);
}

/* The run's memory: the Pss of bwrap and of every process below it, in kB.
 * A process moving between parents while it is read may be counted twice
 * or missed for one tick: the next one sees it. */
static int64_t call_pss_kb(const struct stateless_call *c)
{
	pid_t q[STATELESS_WATCH_PIDS];
	size_t n = 0, head = 0;
	q[n++] = c->pid;
	int64_t kb = 0;
	while (head < n) {
		pid_t p = q[head++];
		kb += proc_pss_kb(p);
		proc_children(p, q, &n, STATELESS_WATCH_PIDS);
	}
	return kb;
}

static void watch_arm(struct stateless *t)
{
	if (!evtimer_pending(t->watch_ev, NULL)) {
		struct timeval tv = {.tv_usec = STATELESS_WATCH_MS * 1000};
		evtimer_add(t->watch_ev, &tv);
	}
}

static void watch_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct stateless *t = arg;
	int64_t bound_kb = t->memory_mb << 10;
	struct stateless_call *c;
	LIST_FOREACH (c, &t->calls, link) {
		if (c->pid <= 0 || c->mem_killed || c->cancelled)
			continue;
		int64_t kb = call_pss_kb(c);
		if (kb > c->mem_peak_kb)
			c->mem_peak_kb = kb;
		if (kb > bound_kb) {
			/* Killed, not freed: the exit's event finishes the call. */
			c->mem_killed = true;
			t->mem_kills++;
			log_warn("stateless tier: a run used %lld MiB, over its %lld MiB; killed",
				 (long long)(kb >> 10), (long long)t->memory_mb);
			call_kill(c);
		}
	}
	if (!LIST_EMPTY(&t->calls))
		watch_arm(t);
}

/* ------------------------------------------------------------------ spawn */

/* The kernel's struct clone_args (linux/sched.h, not included: its CLONE_*
 * would collide with glibc's sched.h). */
struct stateless_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};
#define STATELESS_CLONE_PIDFD 0x00001000ull

struct spawn_plan {
	const char *path;
	char **argv;
	char **envp;
	int fds[7]; /* become 0..6 in the child */
	uid_t uid;
	struct rlimit lim[RLIM_NLIMITS];
	bool set[RLIM_NLIMITS];
	pid_t parent;
};

/* The child between clone and exec: raw syscalls only (it is a copy of a
 * process that may have had other threads, and runs under ASan in tests). */
static __attribute__((noreturn)) void spawn_child(const struct spawn_plan *p)
{
	uint64_t none = 0;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
	syscall(SYS_setsid);
	syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (syscall(SYS_getppid) != p->parent)
		syscall(SYS_exit_group, 127);
	/* Out of the way of 0..6 first, then into place (dup3 clears CLOEXEC). */
	int high[7];
	for (int i = 0; i < 7; i++) {
		high[i] = (int)syscall(SYS_fcntl, p->fds[i], F_DUPFD_CLOEXEC, 16);
		if (high[i] < 0)
			syscall(SYS_exit_group, 127);
	}
	for (int i = 0; i < 7; i++)
		if (syscall(SYS_dup3, high[i], i, 0) < 0)
			syscall(SYS_exit_group, 127);
	syscall(SYS_close_range, 7, ~0u, 0);
	for (int i = 0; i < RLIM_NLIMITS; i++)
		if (p->set[i] && syscall(SYS_prlimit64, 0, i, &p->lim[i], NULL) < 0)
			syscall(SYS_exit_group, 127);
	if (syscall(SYS_setgroups, 0, NULL) < 0 ||
	    syscall(SYS_setresgid, p->uid, p->uid, p->uid) < 0 ||
	    syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0)
		syscall(SYS_exit_group, 127);
	syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	syscall(SYS_chdir, "/");
	syscall(SYS_execve, p->path, p->argv, p->envp);
	syscall(SYS_exit_group, 127);
	__builtin_unreachable();
}

static int memfd_with(const char *name, const void *data, size_t len, struct err **errp)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return err_set(errp, ERR_INTERNAL, "memfd_create: %s", strerror(errno));
	const char *d = data;
	while (len > 0) {
		ssize_t n = write(fd, d, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return err_set(errp, ERR_INTERNAL, "memfd write: %s", strerror(errno));
		}
		d += n;
		len -= (size_t)n;
	}
	/* Sealed: the sandbox reads it, never changes it. */
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static void set_lim(struct spawn_plan *p, int which, rlim_t soft, rlim_t hard)
{
	p->lim[which].rlim_cur = soft;
	p->lim[which].rlim_max = hard;
	p->set[which] = true;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static struct stateless_call *call_start(struct stateless *t, const char *code, size_t len,
					 int64_t timeout_s, int slot, struct err **errp)
{
	int code_fd = -1, bpf_fd = -1, null_fd = -1, out[2] = {-1, -1}, errp2[2] = {-1, -1},
	    done[2] = {-1, -1}, info[2] = {-1, -1};
	struct stateless_call *c = NULL;
	if ((code_fd = memfd_with("ci-stateless-code", code, len, errp)) < 0 ||
	    (bpf_fd = memfd_with("ci-stateless-seccomp", t->bpf, t->bpf_len * sizeof(*t->bpf),
				 errp)) < 0)
		goto fail;
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0 || pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(errp2, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(done, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(info, O_CLOEXEC | O_NONBLOCK) < 0) {
		err_set(errp, ERR_INTERNAL, "pipe: %s", strerror(errno));
		goto fail;
	}
	/* The child's ends block: python writes them as files. */
	fcntl(out[1], F_SETFL, 0);
	fcntl(errp2[1], F_SETFL, 0);
	fcntl(done[1], F_SETFL, 0);

	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct spawn_plan plan = {.path = t->bwrap, .argv = t->argv, .envp = envp};
	plan.fds[0] = null_fd;
	plan.fds[1] = out[1];
	plan.fds[2] = errp2[1];
	plan.fds[3] = code_fd;
	plan.fds[4] = done[1];
	plan.fds[5] = bpf_fd;
	plan.fds[6] = info[1];
	plan.uid = (uid_t)(t->uid_top - slot);
	plan.parent = getpid();
	rlim_t mem_b = (rlim_t)t->memory_mb << 20;
	set_lim(&plan, RLIMIT_AS, mem_b, mem_b);
	set_lim(&plan, RLIMIT_DATA, mem_b, mem_b);
	set_lim(&plan, RLIMIT_CPU, (rlim_t)timeout_s + 1, (rlim_t)timeout_s + 2);
	set_lim(&plan, RLIMIT_NPROC, STATELESS_NPROC, STATELESS_NPROC);
	set_lim(&plan, RLIMIT_FSIZE, STATELESS_FSIZE, STATELESS_FSIZE);
	set_lim(&plan, RLIMIT_NOFILE, STATELESS_NOFILE, STATELESS_NOFILE);
	set_lim(&plan, RLIMIT_CORE, 0, 0);
	set_lim(&plan, RLIMIT_MEMLOCK, 0, 0);
	set_lim(&plan, RLIMIT_MSGQUEUE, 0, 0);

	int pidfd = -1;
	struct stateless_clone_args ca = {.flags = STATELESS_CLONE_PIDFD,
					  .pidfd = (uint64_t)(uintptr_t)&pidfd,
					  .exit_signal = SIGCHLD};
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0)
		spawn_child(&plan);
	if (pid < 0) {
		err_set(errp, ERR_INTERNAL, "clone3: %s", strerror(errno));
		goto fail;
	}
	close_fd(&out[1]);
	close_fd(&errp2[1]);
	close_fd(&done[1]);
	close_fd(&info[1]);
	close_fd(&code_fd);
	close_fd(&bpf_fd);
	close_fd(&null_fd);

	c = xcalloc(1, sizeof(*c));
	c->t = t;
	c->slot = slot;
	c->pid = (pid_t)pid;
	c->pidfd = pidfd;
	c->timeout_s = timeout_s;
	c->start_ms = clock_mono_ms();
	c->r = exec_result_new((size_t)t->output_cap);
	stream_init(&c->out, out[0], false, (size_t)t->output_cap);
	stream_init(&c->err, errp2[0], true, (size_t)t->output_cap);
	c->done_fd = done[0];
	c->info_fd = info[0];
	c->child_pidfd = -1;
	c->out.ev = event_new(t->base, c->out.fd, EV_READ | EV_PERSIST, stream_cb, c);
	c->err.ev = event_new(t->base, c->err.fd, EV_READ | EV_PERSIST, stream_cb, c);
	c->done_ev = event_new(t->base, c->done_fd, EV_READ | EV_PERSIST, done_cb, c);
	c->exit_ev = event_new(t->base, c->pidfd, EV_READ, exit_cb, c);
	c->info_ev = event_new(t->base, c->info_fd, EV_READ | EV_PERSIST, info_cb, c);
	event_add(c->info_ev, NULL);
	c->timer_ev = evtimer_new(t->base, timer_cb, c);
	event_add(c->out.ev, NULL);
	event_add(c->err.ev, NULL);
	event_add(c->done_ev, NULL);
	event_add(c->exit_ev, NULL);
	struct timeval tv = {.tv_sec = (time_t)timeout_s};
	evtimer_add(c->timer_ev, &tv);
	t->slots |= 1ull << slot;
	LIST_INSERT_HEAD(&t->calls, c, link);
	watch_arm(t);
	return c;

fail:
	close_fd(&code_fd);
	close_fd(&bpf_fd);
	close_fd(&null_fd);
	for (int i = 0; i < 2; i++) {
		close_fd(&out[i]);
		close_fd(&errp2[i]);
		close_fd(&done[i]);
		close_fd(&info[i]);
	}
	return NULL;
}

static void argv_add(struct stateless *t, const char *a)
{
	t->argv = xrealloc(t->argv, (t->argc + 2) * sizeof(*t->argv));
	t->argv[t->argc++] = (char *)a;
	t->argv[t->argc] = NULL;
}

/* The procfs entries the container runtimes mask (Docker's MaskedPaths):
 * kernel timers and keys, all over the host. Only those that exist: bwrap
 * cannot bind over what is not there. */
static const char *const stateless_proc_masks[] = {
    "/proc/kcore",       "/proc/keys",          "/proc/timer_list",   "/proc/timer_stats",
    "/proc/sched_debug", "/proc/latency_stats", "/proc/sysrq-trigger"};

static void stateless_argv(struct stateless *t)
{
	static const char *const head[] = {
	    "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
	    "--new-session",
	    /* python is the namespace's init: bwrap's own reaper would be a
	     * process of the sandbox holding every capability of its user
	     * namespace (--cap-drop is for the command only). */
	    "--as-pid-1", "--cap-drop", "ALL", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
	    "--setenv", "HOME", "/workspace", "--setenv", "LANG", "C.UTF-8", "--setenv", "TMPDIR",
	    "/tmp", "--uid", "1000", "--gid", "1000", "--hostname", "stateless", "--ro-bind",
	    "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
	    "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--size",
	    STATELESS_TMP_BYTES, "--tmpfs", "/tmp", "--size", STATELESS_WORKSPACE_BYTES, "--tmpfs",
	    "/workspace", "--size", STATELESS_SHM_BYTES, "--tmpfs", "/dev/shm"};
	static const char *const tail[] = {
	    /* bwrap's own root and /dev are tmpfs without a size: read-only, or
	     * one run could fill the host's memory through them. */
	    "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/workspace",
	    "--seccomp",    "5",    "--info-fd",    "6", "--"};
	argv_add(t, t->bwrap);
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		argv_add(t, head[i]);
	for (size_t i = 0; i < sizeof(stateless_proc_masks) / sizeof(stateless_proc_masks[0]); i++)
		if (access(stateless_proc_masks[i], F_OK) == 0) {
			argv_add(t, "--ro-bind");
			argv_add(t, "/dev/null");
			argv_add(t, stateless_proc_masks[i]);
		}
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		argv_add(t, tail[i]);
	static const char *const py[] = {"-I", "-S", "-B", "-c"};
	argv_add(t, t->python);
	for (size_t i = 0; i < sizeof(py) / sizeof(py[0]); i++)
		argv_add(t, py[i]);
	argv_add(t, stateless_runner_source);
}

/* ------------------------------------------------------------------- tier */

static void probe_done(struct stateless *t, const struct exec_result *r)
{
	if (r->status == EXEC_OK && r->result && strcmp(r->result, "2") == 0) {
		t->probe = PROBE_OK;
		log_info("stateless tier: available (%s, %s)", t->bwrap, t->python);
		return;
	}
	t->probe = PROBE_FAILED;
	size_t len;
	char *errtext = capbuf_render(&r->err, &len);
	log_warn("stateless tier: unavailable: the check run ended %s%s%s: %.300s",
		 exec_status_name(r->status), r->reason ? ": " : "", r->reason ? r->reason : "",
		 errtext);
	free(errtext);
}

struct stateless *stateless_new(struct event_base *base, const struct config *cfg,
				struct err **errp)
{
	if (cfg->stateless_max_running > STATELESS_MAX_SLOTS - 1) {
		err_set(errp, ERR_BAD_REQUEST, "stateless-max-running: at most %d",
			STATELESS_MAX_SLOTS - 1);
		return NULL;
	}
	if (cfg->sandbox_uid_base - cfg->stateless_max_running - 1 < 1000) {
		err_set(errp, ERR_BAD_REQUEST,
			"stateless tier: sandbox-uid-base leaves no room for its uids below it");
		return NULL;
	}
	struct stateless *t = xcalloc(1, sizeof(*t));
	t->base = base;
	t->bwrap = xstrdup(cfg->stateless_bwrap);
	t->python = xstrdup(cfg->stateless_python);
	t->timeout_s = cfg->stateless_timeout_s;
	t->memory_mb = cfg->stateless_memory_mb;
	t->max_running = cfg->stateless_max_running;
	t->output_cap = cfg->output_cap_bytes;
	t->uid_top = cfg->sandbox_uid_base - 1;
	t->last_slot = (int)t->max_running - 1; /* the first run takes slot 0 */
	LIST_INIT(&t->calls);
	t->watch_ev = evtimer_new(base, watch_cb, t);
	t->bpf = stateless_seccomp_program(&t->bpf_len);
	stateless_argv(t);
	t->probe = PROBE_PENDING;
	/* The check: bwrap present and executable, then one trivial run, on
	 * the loop (the probe's slot is the one past max_running). */
	struct err *e = NULL;
	if (access(t->bwrap, X_OK) < 0 || access(t->python, X_OK) < 0) {
		t->probe = PROBE_FAILED;
		log_warn("stateless tier: unavailable: %s or %s is not an executable (%s)",
			 t->bwrap, t->python, strerror(errno));
	} else {
		struct stateless_call *c = call_start(t, "1+1", 3, 10, (int)t->max_running, &e);
		if (c == NULL) {
			t->probe = PROBE_FAILED;
			log_warn("stateless tier: unavailable: %s", e->message);
			err_free(e);
		} else {
			c->probe = true;
		}
	}
	return t;
}

void stateless_free(struct stateless *t)
{
	if (t == NULL)
		return;
	while (!LIST_EMPTY(&t->calls)) {
		struct stateless_call *c = LIST_FIRST(&t->calls);
		call_kill(c);
		/* Killed, so it ends at once; WNOHANG all the same (at exit, a
		 * zombie left behind is the init's to reap). */
		if (c->pid > 0)
			waitpid(c->pid, NULL, WNOHANG);
		call_free(c);
	}
	if (t->watch_ev)
		event_free(t->watch_ev);
	free(t->bwrap);
	free(t->python);
	free(t->bpf);
	free(t->argv);
	free(t);
}

bool stateless_available(const struct stateless *t)
{
	return t && t->probe == PROBE_OK;
}

struct stateless_call *stateless_run(struct stateless *t, const char *tenant, int64_t tenant_cap,
				     const char *code, size_t len, int64_t timeout_s,
				     stateless_done_cb cb, void *arg, struct err **errp)
{
	if (t->probe == PROBE_FAILED) {
		err_set(errp, ERR_UNAVAILABLE, "the stateless tier is unavailable (see the log)");
		return NULL;
	}
	if ((int64_t)t->running >= t->max_running) {
		err_set(errp, ERR_UNAVAILABLE, "the stateless tier is busy");
		return NULL;
	}
	if (tenant_cap > 0) {
		/* A cancelled call still holds its slot's uid until reaped: it
		 * counts. */
		int64_t mine = 0;
		struct stateless_call *o;
		LIST_FOREACH (o, &t->calls, link)
			mine += !o->probe && strcmp(o->tenant, tenant) == 0;
		if (mine >= tenant_cap) {
			err_set(errp, ERR_QUOTA_EXCEEDED,
				"tenant %s has %lld runs in the stateless tier on this node, its "
				"stateless_runs quota",
				tenant, (long long)mine);
			return NULL;
		}
	}
	/* Round-robin from the last one taken: a slot's uid just released may
	 * still have processes on their way out (a killed fork bomb's), and
	 * RLIMIT_NPROC counts them against the next run under that uid. */
	int slot = -1;
	for (int64_t i = 1; i <= t->max_running && slot < 0; i++) {
		int s = (int)((t->last_slot + i) % t->max_running);
		if (!(t->slots & (1ull << s)))
			slot = s;
	}
	if (slot < 0) { /* a cancelled call still holds it */
		err_set(errp, ERR_UNAVAILABLE, "the stateless tier is busy");
		return NULL;
	}
	if (timeout_s <= 0 || timeout_s > t->timeout_s)
		timeout_s = t->timeout_s;
	struct stateless_call *c = call_start(t, code, len, timeout_s, slot, errp);
	if (c == NULL) {
		err_wrap(errp, "stateless tier");
		return NULL;
	}
	t->last_slot = slot;
	snprintf(c->tenant, sizeof(c->tenant), "%s", tenant);
	log_debug("stateless tier: a run of tenant %s started (slot %d, host uid %lld)", tenant,
		  slot, (long long)(t->uid_top - slot));
	c->cb = cb;
	c->arg = arg;
	t->running++;
	return c;
}

void stateless_cancel(struct stateless_call *c)
{
	if (c == NULL)
		return;
	/* Killed now; the exit's event reaps it and frees the call (its slot,
	 * whose uid may still have processes, stays taken until then). */
	c->cancelled = true;
	call_kill(c);
}

size_t stateless_running(const struct stateless *t)
{
	return t ? t->running : 0;
}

uint64_t stateless_memory_kills(const struct stateless *t)
{
	return t ? t->mem_kills : 0;
}
