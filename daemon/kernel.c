/* kernel.c: per-session unix socket, connections and frames (docs/protocol.md). */
#include "kernel.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "defer.h"
#include "fdbudget.h"
#include "frame.h"
#include "json.h"
#include "kernel_frame.h"
#include "listen_guard.h"
#include "log.h"
#include "xalloc.h"

/* Debian 12's headers predate it (Linux 6.5). */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

enum conn_role { ROLE_PENDING, ROLE_SUPERVISOR, ROLE_KERNEL };

/* Connections that have not said hello yet; a sandbox that opens more is
 * refused rather than allowed to pile up descriptors in the daemon. */
#define MAX_PENDING 4

struct kernel_conn {
	struct kernel_link *link;
	struct bufferevent *bev;
	enum conn_role role;
	/* The host pid the peer had when it connected (SO_PEERCRED): for log
	 * lines only. A number can be reused by any process once its owner is
	 * gone, so nothing is ever signalled by it. */
	pid_t pid;
	/* The process that connected, taken at accept (SO_PEERPIDFD) and
	 * verified at hello to be inside the session's container; every signal
	 * the daemon sends goes through it. */
	int pidfd;
	struct event *hello_timer; /* armed while the connection is pending */
	bool closed;
};

struct kernel_link {
	struct event_base *base;
	char *dir;
	char *sock_path;
	uid_t uid;
	char *container_id; /* the session's container (full id); NULL until known */
	int hello_timeout_ms;
	struct evconnlistener *listener;
	struct kernel_conn *supervisor;
	struct kernel_conn *kernel;
	struct kernel_conn *pending[MAX_PENDING];
	const struct kernel_link_ops *ops;
	void *arg;
	int depth;  /* ops callbacks on the stack */
	bool dying; /* freed by the owner while a callback ran */
	bool keep_files;
};

static void conn_destroy(struct kernel_conn *c)
{
	fdbudget_give(&fdbudget_daemon, FDBUDGET_IPC, 2); /* charged at accept */
	if (c->pidfd >= 0)
		close(c->pidfd);
	if (c->hello_timer)
		event_free(c->hello_timer);
	bufferevent_free(c->bev);
	free(c);
}

static void conn_destroy_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_destroy(arg);
}

/* Detach a connection from its link at once; free it now, or on the next
 * loop turn when one of our callbacks (and so maybe its read loop) is on the
 * stack. */
static void conn_close(struct kernel_conn *c)
{
	if (c == NULL || c->closed)
		return;
	struct kernel_link *link = c->link;
	c->closed = true;
	if (c->hello_timer)
		evtimer_del(c->hello_timer);
	if (link->supervisor == c)
		link->supervisor = NULL;
	if (link->kernel == c)
		link->kernel = NULL;
	for (int i = 0; i < MAX_PENDING; i++)
		if (link->pending[i] == c)
			link->pending[i] = NULL;
	if (link->depth > 0) {
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
		bufferevent_setcb(c->bev, NULL, NULL, NULL, NULL);
		defer_call(link->base, conn_destroy_deferred, c);
		return;
	}
	conn_destroy(c);
}

static void link_release(struct kernel_link *link)
{
	conn_close(link->supervisor);
	conn_close(link->kernel);
	for (int i = 0; i < MAX_PENDING; i++)
		conn_close(link->pending[i]);
	listen_guard_unwatch(link->listener);
	if (link->listener)
		evconnlistener_free(link->listener);
	fdbudget_give(&fdbudget_daemon, FDBUDGET_IPC, 1);
	if (!link->keep_files) {
		unlink(link->sock_path);
		rmdir(link->dir);
	}
	free(link->sock_path);
	free(link->dir);
	free(link->container_id);
	free(link);
}

static void link_release_deferred(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	link_release(arg);
}

void kernel_link_free(struct kernel_link *link)
{
	if (link == NULL || link->dying)
		return;
	link->dying = true;
	if (link->depth > 0) {
		/* A callback of ours is on the stack: stop talking now, free later. */
		listen_guard_unwatch(link->listener);
		if (link->listener)
			evconnlistener_disable(link->listener);
		defer_call(link->base, link_release_deferred, link);
		return;
	}
	link_release(link);
}

/* Each op call is bracketed so the owner can free the link inside it. */
#define LINK_CALL(link, op, ...)                                     \
	do {                                                         \
		if ((link)->ops->op && !(link)->dying) {             \
			(link)->depth++;                             \
			(link)->ops->op((link)->arg, ##__VA_ARGS__); \
			(link)->depth--;                             \
		}                                                    \
	} while (0)

static int pidfd_signal(int pidfd, int sig)
{
	if (pidfd < 0) {
		errno = EBADF;
		return -1;
	}
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

static void conn_lost(struct kernel_conn *c, const char *why)
{
	struct kernel_link *link = c->link;
	enum conn_role role = c->role;
	/* A kernel we cannot talk to is of no use and may be hostile: make sure
	 * it is gone, so the supervisor starts a fresh one. Only through the
	 * verified pidfd: a kernel role is never given without one. */
	if (role == ROLE_KERNEL)
		pidfd_signal(c->pidfd, SIGKILL);
	conn_close(c);
	if (role == ROLE_KERNEL)
		LINK_CALL(link, kernel_down, why);
	else if (role == ROLE_SUPERVISOR)
		LINK_CALL(link, supervisor_down, why);
}

static bool pidfd_exited(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	return pidfd >= 0 && poll(&p, 1, 0) == 1;
}

/* Read a small /proc file whole into buf (NUL-terminated); -1 when it cannot
 * be read or does not fit. procfs reads are served from memory, so doing
 * them on the loop (once per hello) does not block it. */
static ssize_t proc_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < size - 1) {
		ssize_t r = read(fd, buf + n, size - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	bool more = n == size - 1;
	close(fd);
	if (more)
		return -1; /* a cgroup file this long is not one of ours: refuse */
	buf[n] = '\0';
	return (ssize_t)n;
}

/* The pid (in our pid namespace) of the process a pidfd refers to: the
 * "Pid:" line of its fdinfo, -1 once it has been reaped, 0 when the line
 * cannot be read. */
static pid_t pidfd_pid(int pidfd)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	if (proc_read(path, buf, sizeof(buf)) < 0)
		return 0;
	const char *p = strstr(buf, "\nPid:");
	if (p == NULL)
		return 0;
	char *end = NULL;
	long v = strtol(p + 5, &end, 10);
	if (end == p + 5 || v < -1 || v > (1L << 30))
		return 0;
	return (pid_t)v;
}

/* Whether one path of /proc/<pid>/cgroup puts the process in container id:
 * a component that is the full id (the cgroupfs driver's /docker/<id>, or
 * <cgroup-parent>/<id>) or the systemd driver's docker-<id>.scope. */
static bool cgroup_path_has(const char *path, size_t len, const char *id)
{
	size_t idlen = strlen(id);
	const char *p = path, *end = path + len;
	while (p < end) {
		while (p < end && *p == '/')
			p++;
		const char *q = p;
		while (q < end && *q != '/')
			q++;
		size_t n = (size_t)(q - p);
		if (n == idlen && memcmp(p, id, idlen) == 0)
			return true;
		if (n == idlen + 13 && memcmp(p, "docker-", 7) == 0 &&
		    memcmp(p + 7, id, idlen) == 0 && memcmp(p + 7 + idlen, ".scope", 6) == 0)
			return true;
		p = q;
	}
	return false;
}

/* 1 when /proc/<pid>/cgroup places the process inside container id, 0 when
 * it does not, -1 when the file cannot be read. On cgroup v1 each line is
 * "N:controllers:/path", on v2 "0::/path"; one line naming the container is
 * enough, since moving a process into another cgroup takes root on the host
 * (the sandbox's cgroupfs is read-only and it has no capabilities). */
static int proc_in_container(pid_t pid, const char *id)
{
	char path[64];
	static char buf[65536]; /* one hello at a time: the loop is single-threaded */
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	ssize_t n = proc_read(path, buf, sizeof(buf));
	if (n < 0)
		return -1;
	for (char *line = buf; *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char *c1 = memchr(line, ':', len);
		char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
		if (c2 && cgroup_path_has(c2 + 1, len - (size_t)(c2 + 1 - line), id))
			return 1;
		line += len + (nl != NULL);
	}
	return 0;
}

/* May this peer speak for the session? The process behind the connection's
 * pidfd must be alive and inside the session's container. The pid number
 * read from the pidfd is used for one /proc read only, and the pidfd is
 * checked for liveness after that read: while the process lives its number
 * cannot be given to another, so the /proc data described this process.
 * Once trusted, the peer is only ever signalled through this pidfd, which
 * keeps naming the same process: after it is reaped a signal fails (ESRCH)
 * and never reaches whoever gets the number next.
 * A peer that fails is refused with one log line.
 *
 * Under gVisor (runtime "gvisor", runsc) the process that connect()s on the
 * host is not the sandboxed Python process but runsc's gofer, which connects
 * on the sandbox's behalf (--fsgofer-host-uds); runsc runs its gofer and
 * sandbox processes in the container's cgroup, so the check accepts it as a
 * process of that container. Signals can therefore never leave the session,
 * but the deadline's SIGINT/SIGKILL reach the gofer rather than the code
 * (see docs/security.md; not tried here, runsc is not installed). */
static int conn_verify(struct kernel_conn *c, const char *role)
{
	struct kernel_link *link = c->link;
	if (link->container_id == NULL) {
		/* The runner retries every 100 ms. */
		log_warn("ipc %s: refused a %s hello from pid %d: the session's container is not "
			 "known yet",
			 link->dir, role, (int)c->pid);
		return -1;
	}
	pid_t pid = pidfd_pid(c->pidfd);
	if (pid <= 0) {
		log_warn("ipc %s: refused a %s hello from pid %d: %s", link->dir, role, (int)c->pid,
			 pid < 0 ? "the process that connected has exited"
				 : "cannot identify the process that connected");
		return -1;
	}
	int in = proc_in_container(pid, link->container_id);
	if (in != 1) {
		log_warn("ipc %s: refused a %s hello from pid %d (connected as pid %d): %s",
			 link->dir, role, (int)pid, (int)c->pid,
			 in == 0 ? "the process is outside the session's container"
				 : "cannot read its cgroup");
		return -1;
	}
	/* Signal 0 fails once the process is reaped; a zombie (which still
	 * holds its number) polls readable. */
	if (pidfd_signal(c->pidfd, 0) != 0 || pidfd_exited(c->pidfd)) {
		log_warn("ipc %s: refused a %s hello from pid %d: the process exited while it was "
			 "checked",
			 link->dir, role, (int)pid);
		return -1;
	}
	return 0;
}

/* role: "kernel" or "supervisor" (kernel_frame_decode checked). */
static int conn_hello(struct kernel_conn *c, const char *role)
{
	struct kernel_link *link = c->link;
	for (int i = 0; i < MAX_PENDING; i++)
		if (link->pending[i] == c)
			link->pending[i] = NULL;
	/* Before anything else: an unverified peer must not even make us drop
	 * the current kernel. */
	if (conn_verify(c, role) < 0)
		return -1;
	evtimer_del(c->hello_timer);
	if (strcmp(role, "kernel") == 0) {
		/* The old kernel's EOF may still be in flight while its successor
		 * says hello: a pidfd that polls readable means it has exited. */
		if (link->kernel != NULL && pidfd_exited(link->kernel->pidfd))
			conn_lost(link->kernel, "kernel exited");
		if (link->kernel != NULL) {
			log_warn("ipc %s: a second kernel connected; refused", link->dir);
			return -1;
		}
		c->role = ROLE_KERNEL;
		link->kernel = c;
		LINK_CALL(link, kernel_up);
		return 0;
	}
	if (link->supervisor != NULL) {
		log_warn("ipc %s: a second supervisor connected; refused", link->dir);
		return -1;
	}
	c->role = ROLE_SUPERVISOR;
	link->supervisor = c;
	LINK_CALL(link, supervisor_up);
	return 0;
}

static int conn_frame(struct kernel_conn *c, const char *hdr, size_t hlen, const char *body,
		      size_t blen)
{
	struct kernel_link *link = c->link;
	struct err *e = NULL;
	struct kernel_frame f;
	enum kernel_frame_from from = c->role == ROLE_PENDING  ? KERNEL_FRAME_FROM_PENDING
				      : c->role == ROLE_KERNEL ? KERNEL_FRAME_FROM_KERNEL
							       : KERNEL_FRAME_FROM_SUPERVISOR;
	if (kernel_frame_decode(from, hdr, hlen, &f, &e) < 0) {
		log_warn("ipc %s: bad frame header: %s", link->dir, e->message);
		err_free(e);
		return -1;
	}
	int rc = 0;
	switch (f.kind) {
	case KERNEL_FRAME_HELLO: rc = conn_hello(c, f.role); break;
	case KERNEL_FRAME_STREAM:
		LINK_CALL(link, exec_stream, f.id, f.is_stderr, body, blen, f.tail, f.dropped);
		break;
	case KERNEL_FRAME_DISPLAY:
		LINK_CALL(link, exec_display, f.id, &f.display, body, blen);
		break;
	case KERNEL_FRAME_DONE: LINK_CALL(link, exec_done, f.id, f.header); break;
	case KERNEL_FRAME_PIP_OPEN: LINK_CALL(link, exec_pip, f.id, false, &f.pip); break;
	case KERNEL_FRAME_PIP_CLOSE: LINK_CALL(link, exec_pip, f.id, true, &f.pip); break;
	case KERNEL_FRAME_IGNORED: break;
	case KERNEL_FRAME_KERNEL_EXIT: LINK_CALL(link, kernel_exit, f.code, f.sig, f.oom); break;
	case KERNEL_FRAME_SUPERVISOR:
		LINK_CALL(link, supervisor_frame, f.header, body, blen);
		break;
	}
	kernel_frame_clear(&f);
	return rc;
}

static void conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct kernel_conn *c = arg;
	struct kernel_link *link = c->link;
	struct evbuffer *in = bufferevent_get_input(bev);
	link->depth++;
	while (!link->dying) {
		unsigned char prefix[FRAME_PREFIX];
		if (evbuffer_copyout(in, prefix, FRAME_PREFIX) < FRAME_PREFIX)
			break;
		uint32_t hlen, blen;
		struct err *e = NULL;
		if (frame_parse_prefix(prefix, &hlen, &blen, &e) < 0) {
			log_warn("ipc %s: %s; closing", link->dir, e->message);
			err_free(e);
			link->depth--;
			conn_lost(c, "protocol error");
			return;
		}
		size_t total = FRAME_PREFIX + (size_t)hlen + blen;
		if (evbuffer_get_length(in) < total)
			break;
		/* One contiguous view of the frame, then drop it from the buffer. */
		const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)total);
		int rc = conn_frame(c, p + FRAME_PREFIX, hlen, p + FRAME_PREFIX + hlen, blen);
		if (link->dying || c->closed)
			break;
		evbuffer_drain(in, total);
		if (rc < 0) {
			link->depth--;
			conn_lost(c, "protocol error");
			return;
		}
	}
	link->depth--;
}

static void conn_write_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	struct kernel_conn *c = arg;
	if (c->role == ROLE_SUPERVISOR)
		LINK_CALL(c->link, supervisor_drained);
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	struct kernel_conn *c = arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		conn_lost(c, what & BEV_EVENT_EOF ? "connection closed" : "connection error");
}

/* A connection that has not said hello within the deadline is closed: a
 * sandbox must not hold pending slots (or a connection whose process has
 * long gone) open for later. */
static void conn_hello_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct kernel_conn *c = arg;
	struct kernel_link *link = c->link;
	log_warn("ipc %s: closed a connection from pid %d that did not say hello within %d ms",
		 link->dir, (int)c->pid, link->hello_timeout_ms);
	link->depth++; /* this timer is the connection's own: free it next turn */
	conn_close(c);
	link->depth--;
}

/* The process behind a new connection, as a pidfd. SO_PEERPIDFD names the
 * very process that called connect(), whatever its pid number means now.
 * Kernels before 6.5 lack it: then the number from SO_PEERCRED is opened,
 * which may already name another process; the check at hello goes through
 * this pidfd's own pid and liveness, so such a process is refused unless it
 * is inside the session's container too. */
static int peer_pidfd(int fd, pid_t pid)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0)
		return pidfd;
	if (errno != ENOPROTOOPT)
		return -1;
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	(void)l;
	(void)sa;
	(void)len;
	struct kernel_link *link = arg;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || cred.uid != link->uid) {
		/* Only the sandbox user may speak for a sandbox. */
		log_warn("ipc %s: refused a peer with uid %d", link->dir, (int)cred.uid);
		close(fd);
		return;
	}
	int slot = -1;
	for (int i = 0; i < MAX_PENDING; i++)
		if (link->pending[i] == NULL)
			slot = i;
	if (slot < 0) {
		close(fd);
		return;
	}
	int pidfd = peer_pidfd(fd, cred.pid);
	if (pidfd < 0) {
		log_warn("ipc %s: refused a peer (pid %d): no pidfd: %s", link->dir, (int)cred.pid,
			 strerror(errno));
		close(fd);
		return;
	}
	/* Counted, never refused (fdbudget.h): connections and pidfd. */
	fdbudget_charge(&fdbudget_daemon, FDBUDGET_IPC, 2);
	struct kernel_conn *c = xcalloc(1, sizeof(*c));
	c->link = link;
	c->pid = cred.pid;
	c->pidfd = pidfd;
	c->bev = bufferevent_socket_new(link->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL)
		abort();
	c->hello_timer = evtimer_new(link->base, conn_hello_timeout_cb, c);
	if (c->hello_timer == NULL)
		abort();
	struct timeval tv = {link->hello_timeout_ms / 1000, (link->hello_timeout_ms % 1000) * 1000};
	evtimer_add(c->hello_timer, &tv);
	/* Stop reading past one maximal frame; frames are consumed whole. */
	bufferevent_setwatermark(c->bev, EV_READ, 0,
				 FRAME_PREFIX + FRAME_MAX_HEADER + FRAME_MAX_BODY + 65536);
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_WRITE, KERNEL_SUPERVISOR_LOW, 0);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	link->pending[slot] = c;
}

struct kernel_link *kernel_link_new(struct event_base *base, const char *dir, uid_t uid, gid_t gid,
				    int hello_timeout_ms, const struct kernel_link_ops *ops,
				    void *arg, struct err **errp)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int n = snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/ipc.sock", dir);
	if (n < 0 || (size_t)n >= sizeof(sun.sun_path)) {
		err_set(errp, ERR_INTERNAL, "socket path %s/ipc.sock is too long", dir);
		return NULL;
	}
	if (mkdir(dir, 0711) < 0 && errno != EEXIST) {
		err_set(errp, ERR_INTERNAL, "mkdir %s: %s", dir, strerror(errno));
		return NULL;
	}
	chmod(dir, 0711);
	unlink(sun.sun_path); /* a stale socket from a previous daemon */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err_set(errp, ERR_INTERNAL, "socket: %s", strerror(errno));
		return NULL;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    chown(sun.sun_path, uid, gid) < 0 || chmod(sun.sun_path, 0600) < 0 ||
	    listen(fd, 8) < 0) {
		err_set(errp, ERR_INTERNAL, "listen on %s: %s", sun.sun_path, strerror(errno));
		close(fd);
		unlink(sun.sun_path);
		rmdir(dir);
		return NULL;
	}
	struct kernel_link *link = xcalloc(1, sizeof(*link));
	link->base = base;
	link->dir = xstrdup(dir);
	link->sock_path = xstrdup(sun.sun_path);
	link->uid = uid;
	link->hello_timeout_ms = hello_timeout_ms > 0 ? hello_timeout_ms : 1;
	link->ops = ops;
	link->arg = arg;
	link->listener = evconnlistener_new(base, accept_cb, link,
					    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (link->listener == NULL)
		abort();
	fdbudget_charge(&fdbudget_daemon, FDBUDGET_IPC, 1);
	listen_guard_watch(link->listener, "ipc", NULL, NULL); /* EMFILE: back off */
	return link;
}

void kernel_link_close(struct kernel_link *link)
{
	if (link == NULL)
		return;
	link->keep_files = true;
	kernel_link_free(link);
}

void kernel_link_set_container(struct kernel_link *link, const char *container_id)
{
	free(link->container_id);
	link->container_id = container_id ? xstrdup(container_id) : NULL;
}

bool kernel_link_kernel_connected(const struct kernel_link *link)
{
	return link->kernel != NULL;
}

bool kernel_link_supervisor_connected(const struct kernel_link *link)
{
	return link->supervisor != NULL;
}

static int conn_send(struct kernel_conn *c, const char *hdr, size_t hlen, const void *body,
		     size_t blen)
{
	unsigned char prefix[FRAME_PREFIX];
	frame_write_prefix(prefix, (uint32_t)hlen, (uint32_t)blen);
	struct evbuffer *out = bufferevent_get_output(c->bev);
	evbuffer_add(out, prefix, FRAME_PREFIX);
	evbuffer_add(out, hdr, hlen);
	if (blen)
		evbuffer_add(out, body, blen);
	return 0;
}

int kernel_link_send_exec(struct kernel_link *link, uint64_t id, const char *language,
			  const char *code, size_t len, size_t output_cap, size_t files_cap,
			  struct err **errp)
{
	if (link->kernel == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "the kernel is not connected");
	if (len > FRAME_MAX_BODY)
		return err_set(errp, ERR_PAYLOAD_TOO_LARGE, "code is larger than %u bytes",
			       FRAME_MAX_BODY);
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr),
			 "{\"t\":\"exec\",\"id\":%llu,\"stdout_cap\":%zu,\"stderr_cap\":%zu,"
			 "\"files_cap\":%zu%s%.16s%s}",
			 (unsigned long long)id, output_cap, output_cap, files_cap,
			 language ? ",\"language\":\"" : "", language ? language : "",
			 language ? "\"" : "");
	return conn_send(link->kernel, hdr, (size_t)n, code, len);
}

int kernel_link_send_kernel(struct kernel_link *link, const char *header, size_t hlen,
			    struct err **errp)
{
	if (link->kernel == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "the kernel is not connected");
	if (hlen < 2 || hlen > FRAME_MAX_HEADER)
		return err_set(errp, ERR_INTERNAL, "a kernel frame header of %zu bytes", hlen);
	return conn_send(link->kernel, header, hlen, NULL, 0);
}

int kernel_link_send_supervisor(struct kernel_link *link, const char *header, size_t hlen,
				const void *body, size_t blen, struct err **errp)
{
	if (link->supervisor == NULL)
		return err_set(errp, ERR_UNAVAILABLE, "the sandbox supervisor is not connected");
	if (hlen > FRAME_MAX_HEADER || blen > FRAME_MAX_BODY)
		return err_set(errp, ERR_INTERNAL, "frame too large");
	return conn_send(link->supervisor, header, hlen, body, blen);
}

size_t kernel_link_supervisor_backlog(const struct kernel_link *link)
{
	if (link->supervisor == NULL)
		return 0;
	return evbuffer_get_length(bufferevent_get_output(link->supervisor->bev));
}

void kernel_link_supervisor_pause_read(struct kernel_link *link, bool paused)
{
	if (link->supervisor == NULL)
		return;
	if (paused)
		bufferevent_disable(link->supervisor->bev, EV_READ);
	else
		bufferevent_enable(link->supervisor->bev, EV_READ);
}

int kernel_link_interrupt(struct kernel_link *link, uint64_t id)
{
	if (link->kernel == NULL)
		return -1;
	char hdr[64];
	int n =
	    snprintf(hdr, sizeof(hdr), "{\"t\":\"interrupt\",\"id\":%llu}", (unsigned long long)id);
	if (conn_send(link->kernel, hdr, (size_t)n, NULL, 0) < 0)
		return -1;
	/* On the socket before the signal: the kernel looks for it there. */
	struct bufferevent *bev = link->kernel->bev;
	evbuffer_write(bufferevent_get_output(bev), bufferevent_getfd(bev));
	return pidfd_signal(link->kernel->pidfd, SIGINT);
}

int kernel_link_signal_kernel(struct kernel_link *link, int sig)
{
	if (link->kernel == NULL)
		return -1;
	return pidfd_signal(link->kernel->pidfd, sig);
}

void kernel_link_drop_kernel(struct kernel_link *link, const char *why)
{
	if (link->kernel)
		conn_lost(link->kernel, why);
}
