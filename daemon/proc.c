/* proc.c: asynchronous child processes through pidfds. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/queue.h>
#include <spawn.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "defer.h"
#include "log.h"
#include "xalloc.h"

extern char **environ;

/* Helpers still running, for proc_free_all at exit. */
static LIST_HEAD(, proc) live = LIST_HEAD_INITIALIZER(live);

struct proc {
	LIST_ENTRY(proc) link; /* live, until it finished */
	pid_t pid;
	int pidfd;
	struct event *ev;
	proc_done_cb cb;
	void *arg;
	int status;
	/* The helper's stdout and stderr, read on the loop and logged as one
	 * line when it ends: the daemon's log stays lines of its own (stamped,
	 * one JSON object each with --log-format json). Capped; the rest is
	 * read and dropped, so a chatty helper never blocks on a full pipe. */
	int out_fd;
	struct event *out_ev;
	char name[32];
	char out[PROC_OUTPUT_MAX + 1];
	size_t out_len;
	bool out_cut;
};

static void proc_release(struct proc *p)
{
	LIST_REMOVE(p, link);
	if (p->out_ev)
		event_free(p->out_ev);
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->ev)
		event_free(p->ev);
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

/* Read what the helper wrote so far (all of it once it has exited); true
 * at the end of its output. */
static bool proc_drain_output(struct proc *p)
{
	char chunk[4096];
	ssize_t n;
	while (p->out_fd >= 0 && (n = read(p->out_fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0)
			return errno != EAGAIN && errno != EINTR;
		size_t keep = (size_t)n;
		if (keep > PROC_OUTPUT_MAX - p->out_len) {
			keep = PROC_OUTPUT_MAX - p->out_len;
			p->out_cut = true;
		}
		memcpy(p->out + p->out_len, chunk, keep);
		p->out_len += keep;
	}
	return true;
}

static void output_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct proc *p = arg;
	if (proc_drain_output(p))
		event_del(p->out_ev); /* closed: the exit's event will come */
}

static void proc_finish(struct proc *p)
{
	proc_drain_output(p);
	while (p->out_len && (p->out[p->out_len - 1] == '\n' || p->out[p->out_len - 1] == '\r'))
		p->out_len--;
	p->out[p->out_len] = '\0';
	/* Its own words: a failing helper's are worth seeing (log.c escapes
	 * the newlines between its lines). */
	if (p->out_len)
		log_at(p->status == 0 ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARN, "%s said: %s%s", p->name,
		       p->out, p->out_cut ? " [cut]" : "");
	p->cb(p->status, p->arg);
	proc_release(p);
}

void proc_free_all(void)
{
	while (!LIST_EMPTY(&live))
		proc_release(LIST_FIRST(&live));
}

static void exited_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct proc *p = arg;
	int wstatus = 0;
	if (waitpid(p->pid, &wstatus, 0) == p->pid && WIFEXITED(wstatus))
		p->status = WEXITSTATUS(wstatus);
	proc_finish(p);
}

static void failed_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	proc_finish(arg);
}

void proc_run(struct event_base *base, char *const argv[], proc_done_cb cb, void *arg)
{
	struct proc *p = xcalloc(1, sizeof(*p));
	LIST_INSERT_HEAD(&live, p, link);
	p->cb = cb;
	p->arg = arg;
	p->status = -1;
	p->pidfd = -1;
	p->out_fd = -1;
	snprintf(p->name, sizeof(p->name), "%s", argv[0]);
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
		log_warn("cannot run %s: pipe: %s", argv[0], strerror(errno));
		defer_call(base, failed_cb, p);
		return;
	}
	p->out_fd = pipefd[0];
	/* A helper gets stdin, stdout and stderr and nothing else: libevent does
	 * not mark every socket it makes close-on-exec (bufferevent_socket_connect
	 * does not), and a helper must never hold a sandbox's connection. */
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	/* dup2 clears close-on-exec on the copies; the pipe's own ends close. */
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	int rc = posix_spawnp(&p->pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (rc == 0)
		p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (rc != 0 || p->pidfd < 0) {
		log_warn("cannot run %s: %s", argv[0], strerror(rc ? rc : errno));
		defer_call(base, failed_cb, p);
		return;
	}
	p->ev = event_new(base, p->pidfd, EV_READ, exited_cb, p);
	event_add(p->ev, NULL);
	p->out_ev = event_new(base, p->out_fd, EV_READ | EV_PERSIST, output_cb, p);
	event_add(p->out_ev, NULL);
}
