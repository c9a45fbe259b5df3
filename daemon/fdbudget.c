/* fdbudget.c: counting the daemon's descriptors (see fdbudget.h for why). */
#include "fdbudget.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct fdbudget fdbudget_daemon;

void fdbudget_init(struct fdbudget *b, int64_t limit, int64_t reserve)
{
	*b = (struct fdbudget){.limit = limit, .reserve = reserve};
}

void fdbudget_set_limit(struct fdbudget *b, int64_t limit)
{
	b->limit = limit;
}

int64_t fdbudget_counted(const struct fdbudget *b)
{
	int64_t n = 0;
	for (int k = 0; k < FDBUDGET_KINDS; k++)
		n += b->used[k];
	return n;
}

int64_t fdbudget_in_use(const struct fdbudget *b)
{
	return fdbudget_counted(b) + b->other;
}

int64_t fdbudget_margin(const struct fdbudget *b)
{
	/* A sixteenth of what outside input may use: 60 of a 1024 table. */
	int64_t m = (b->limit - b->reserve) / 16;
	return m < 16 ? 16 : m > 1024 ? 1024 : m;
}

/* What outside input may still get before the reserve: the reserve grows to
 * cover what was measured uncounted, plus what that may have grown by. */
static int64_t fdbudget_free(const struct fdbudget *b)
{
	int64_t reserve = b->reserve;
	if (b->other + FDBUDGET_SLACK > reserve)
		reserve = b->other + FDBUDGET_SLACK;
	return b->limit - fdbudget_counted(b) - reserve;
}

int64_t fdbudget_room(const struct fdbudget *b, enum fdbudget_kind kind)
{
	if (b->limit <= 0)
		return INT64_MAX;
	int64_t room = fdbudget_free(b);
	if (kind != FDBUDGET_HTTP)
		room -= fdbudget_margin(b);
	return room;
}

bool fdbudget_take(struct fdbudget *b, enum fdbudget_kind kind, int64_t n)
{
	if (kind != FDBUDGET_IPC && fdbudget_room(b, kind) < n) {
		b->refused[kind]++;
		return false;
	}
	b->used[kind] += n;
	return true;
}

void fdbudget_charge(struct fdbudget *b, enum fdbudget_kind kind, int64_t n)
{
	b->used[kind] += n;
}

void fdbudget_give(struct fdbudget *b, enum fdbudget_kind kind, int64_t n)
{
	b->used[kind] -= n;
	if (b->used[kind] < 0)
		b->used[kind] = 0; /* a bug elsewhere; never let it grow the budget */
}

bool fdbudget_session_fits(struct fdbudget *b)
{
	/* Sessions and tunnels share the same level: a session is worth little
	 * once its tunnels would be refused. */
	if (fdbudget_room(b, FDBUDGET_IPC) >= FDBUDGET_SESSION_ROOM)
		return true;
	b->refused[FDBUDGET_KINDS]++;
	return false;
}

void fdbudget_observe(struct fdbudget *b, int64_t open_now)
{
	if (open_now < 0)
		return;
	/* Counters may run ahead of what is open (a tunnel's upstream is
	 * counted from the accept on): never below zero. */
	int64_t other = open_now - fdbudget_counted(b);
	b->other = other < 0 ? 0 : other;
}

void fdbudget_exhausted(struct fdbudget *b)
{
	if (b->limit > 0)
		fdbudget_observe(b, b->limit);
}

int64_t fdbudget_count_open(void)
{
	/* getdents64 on a plain buffer: no allocation, one descriptor. */
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	char buf[16384];
	int64_t n = 0;
	for (;;) {
		long got = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
		if (got < 0) {
			close(dfd);
			return -1;
		}
		if (got == 0)
			break;
		for (long off = 0; off < got;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			if (d->d_name[0] != '.')
				n++;
			off += d->d_reclen;
		}
	}
	close(dfd);
	return n - 1; /* dfd itself */
}
