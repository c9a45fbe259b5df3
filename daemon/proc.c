/* proc.c: asynchronous child processes through pidfds. */
#include "proc.h"

#include <errno.h>
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
};

static void proc_release(struct proc *p)
{
	LIST_REMOVE(p, link);
	if (p->ev)
		event_free(p->ev);
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

static void proc_finish(struct proc *p)
{
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
	/* A helper gets stdin, stdout and stderr and nothing else: libevent does
	 * not mark every socket it makes close-on-exec (bufferevent_socket_connect
	 * does not), and a helper must never hold a sandbox's connection. */
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	int rc = posix_spawnp(&p->pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc == 0)
		p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (rc != 0 || p->pidfd < 0) {
		log_warn("cannot run %s: %s", argv[0], strerror(rc ? rc : errno));
		defer_call(base, failed_cb, p);
		return;
	}
	p->ev = event_new(base, p->pidfd, EV_READ, exited_cb, p);
	event_add(p->ev, NULL);
}
