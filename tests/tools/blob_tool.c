/* blob_tool.c: the object stores (daemon/blobstore.h) driven on their
 * own, for tests/integration/test_blobstore.py and the measurements (not
 * installed, not part of the daemon).
 *
 *   blob-tool --store URL [--store-endpoint URL] [--store-region R]
 *             [--store-credentials-file F] [--part-size BYTES] [--retries N]
 *             [--timeout-ms N] [--via-callback] [--page N] [--max-bytes N]
 *             put FILE KEY | get KEY FILE | ls [PREFIX] | rm KEY
 *
 * FILE "-" is stdin or stdout. --again (implies --via-callback): the
 * source answers BLOB_READ_AGAIN every other call and resumes the put
 * from a timer, as a stream that is not ready would. --via-callback streams through the read and
 * write callbacks instead of handing the store the fd, and prints
 * "read N" to stderr at every 8 MiB it fed (a test waits on it to kill the
 * store mid-upload). --cancel-after BYTES (implies --via-callback)
 * cancels the put once it fed that much, prints "cancelled after N" and
 * waits until the store holds no op. ls prints "KEY SIZE" lines, following the pages of
 * --page keys each. On success put and get print "bytes N"; on failure
 * "blob-tool: MESSAGE" goes to stderr and the exit status is 1 (2 for a
 * missing object, 3 for bad arguments). It prints "vmhwm_kb N", its peak
 * RSS, to stderr when an op ends. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blobstore.h"
#include "xalloc.h"

struct tool {
	struct event_base *base;
	struct blobstore *bs;
	struct blob_op *op;
	bool again; /* --again: the source says BLOB_READ_AGAIN every other call */
	unsigned calls;
	struct event *resume;
	uint64_t cancel_after; /* --cancel-after: cancel the put once it fed this much */
	struct event *cancel_ev, *poll_ev;
	int fd;
	uint64_t fed, next_note;
	const char *prefix;
	size_t page;
	char *token;
	int rc;
};

static ssize_t src_read(void *arg, void *buf, size_t cap)
{
	struct tool *t = arg;
	if (t->again && ++t->calls % 2 == 0) {
		struct timeval soon = {0, 100};
		evtimer_add(t->resume, &soon);
		return BLOB_READ_AGAIN;
	}
	ssize_t n;
	do
		n = read(t->fd, buf, cap);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		t->fed += (uint64_t)n;
		/* not from inside the callback: blob_cancel's rule */
		if (t->cancel_after && t->fed >= t->cancel_after &&
		    !evtimer_pending(t->cancel_ev, NULL))
			event_active(t->cancel_ev, EV_TIMEOUT, 0);
		while (t->fed >= t->next_note) {
			fprintf(stderr, "read %llu\n", (unsigned long long)t->next_note);
			t->next_note += 8u << 20;
		}
	}
	return n;
}

static int sink_write(void *arg, const void *buf, size_t len)
{
	struct tool *t = arg;
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(t->fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Print this process's peak RSS (VmHWM of /proc/self/status): the test
 * checks that a 100 MB object never was in memory. */
static void print_hwm(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmHWM:", 6) == 0)
			fprintf(stderr, "vmhwm_kb %lld\n", atoll(line + 6));
	if (f)
		fclose(f);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tool *t = arg;
	blob_resume(t->op);
}

/* After a cancel: wait until the store holds no op (the S3 abort went
 * out), then end. */
static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tool *t = arg;
	if (blobstore_ops(t->bs) == 0) {
		print_hwm();
		event_base_loopbreak(t->base);
		return;
	}
	struct timeval tick = {0, 10000};
	evtimer_add(t->poll_ev, &tick);
}

static void cancel_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tool *t = arg;
	if (t->op == NULL)
		return;
	blob_cancel(t->op);
	t->op = NULL;
	printf("cancelled after %llu\n", (unsigned long long)t->fed);
	poll_cb(-1, EV_TIMEOUT, t);
}

static void report(struct tool *t, const struct blob_result *r)
{
	print_hwm();
	if (r->error) {
		fprintf(stderr, "blob-tool: %s\n", r->error->message);
		t->rc = r->error->code == ERR_NOT_FOUND ? 2 : 1;
	}
	event_base_loopbreak(t->base);
}

static void bytes_done(const struct blob_result *r, void *arg)
{
	struct tool *t = arg;
	if (!r->error)
		printf("bytes %llu\n", (unsigned long long)r->bytes);
	report(t, r);
}

static void list_done(const struct blob_result *r, void *arg);

static int list_next(struct tool *t)
{
	struct err *e = NULL;
	if (blobstore_list(t->bs, t->prefix, t->token, t->page, list_done, t, &e) == NULL) {
		fprintf(stderr, "blob-tool: %s\n", e->message);
		err_free(e);
		return -1;
	}
	return 0;
}

static void list_done(const struct blob_result *r, void *arg)
{
	struct tool *t = arg;
	if (r->error) {
		report(t, r);
		return;
	}
	for (size_t i = 0; i < r->n_entries; i++)
		printf("%s %llu\n", r->entries[i].key, (unsigned long long)r->entries[i].size);
	free(t->token);
	t->token = r->next_token ? xstrdup(r->next_token) : NULL;
	if (t->token == NULL || list_next(t) < 0) {
		if (t->token)
			t->rc = 1;
		event_base_loopbreak(t->base);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: blob-tool --store URL [options] put FILE KEY | get KEY FILE | ls "
			"[PREFIX] | rm KEY\n");
	exit(3);
}

int main(int argc, char **argv)
{
	struct blobstore_options o = {0};
	bool via_cb = false;
	long long max_bytes = 0;
	struct tool t = {.fd = -1, .page = 1000, .next_note = 8u << 20};
	enum {
		O_ENDPOINT = 256,
		O_REGION,
		O_CRED,
		O_PART,
		O_RETRIES,
		O_TIMEOUT,
		O_VIA,
		O_PAGE,
		O_MAX,
		O_AGAIN,
		O_CANCEL
	};
	static const struct option longopts[] = {
	    {"store", required_argument, NULL, 's'},
	    {"store-endpoint", required_argument, NULL, O_ENDPOINT},
	    {"store-region", required_argument, NULL, O_REGION},
	    {"store-credentials-file", required_argument, NULL, O_CRED},
	    {"part-size", required_argument, NULL, O_PART},
	    {"retries", required_argument, NULL, O_RETRIES},
	    {"timeout-ms", required_argument, NULL, O_TIMEOUT},
	    {"via-callback", no_argument, NULL, O_VIA},
	    {"page", required_argument, NULL, O_PAGE},
	    {"max-bytes", required_argument, NULL, O_MAX},
	    {"again", no_argument, NULL, O_AGAIN},
	    {"cancel-after", required_argument, NULL, O_CANCEL},
	    {NULL, 0, NULL, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (c) {
		case 's': o.url = optarg; break;
		case O_ENDPOINT: o.endpoint = optarg; break;
		case O_REGION: o.region = optarg; break;
		case O_CRED: o.credentials_file = optarg; break;
		case O_PART: o.part_size = (size_t)strtoull(optarg, NULL, 10); break;
		case O_RETRIES: o.retries = atoi(optarg); break;
		case O_TIMEOUT: o.timeout_ms = atoll(optarg); break;
		case O_VIA: via_cb = true; break;
		case O_PAGE: t.page = (size_t)strtoull(optarg, NULL, 10); break;
		case O_MAX: max_bytes = atoll(optarg); break;
		case O_AGAIN: t.again = via_cb = true; break;
		case O_CANCEL:
			t.cancel_after = strtoull(optarg, NULL, 10);
			via_cb = true;
			break;
		default: usage();
		}
	}
	if (o.url == NULL || optind >= argc)
		usage();
	const char *cmd = argv[optind];
	int nargs = argc - optind - 1;
	char **args = argv + optind + 1;
	t.base = event_base_new();
	struct err *e = NULL;
	t.bs = blobstore_new(t.base, &o, &e);
	if (t.bs == NULL) {
		fprintf(stderr, "blob-tool: %s\n", e->message);
		err_free(e);
		event_base_free(t.base);
		return 3;
	}
	struct blob_op *op = NULL;
	if (strcmp(cmd, "put") == 0 && nargs == 2) {
		t.fd = strcmp(args[0], "-") == 0 ? dup(0) : open(args[0], O_RDONLY | O_CLOEXEC);
		if (t.fd < 0) {
			perror(args[0]);
			return 3;
		}
		struct blob_source src = {
		    .fd = via_cb ? -1 : t.fd, .read = via_cb ? src_read : NULL, .arg = &t};
		t.resume = evtimer_new(t.base, resume_cb, &t);
		t.cancel_ev = evtimer_new(t.base, cancel_cb, &t);
		t.poll_ev = evtimer_new(t.base, poll_cb, &t);
		op = t.op = blobstore_put(t.bs, args[1], &src, bytes_done, &t, &e);
	} else if (strcmp(cmd, "get") == 0 && nargs == 2) {
		t.fd = strcmp(args[1], "-") == 0
			   ? dup(1)
			   : open(args[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
		if (t.fd < 0) {
			perror(args[1]);
			return 3;
		}
		struct blob_sink sink = {.fd = via_cb ? -1 : t.fd,
					 .write = via_cb ? sink_write : NULL,
					 .arg = &t,
					 .max_bytes = (uint64_t)max_bytes};
		op = blobstore_get(t.bs, args[0], &sink, bytes_done, &t, &e);
	} else if (strcmp(cmd, "ls") == 0 && nargs <= 1) {
		t.prefix = nargs ? args[0] : "";
		if (list_next(&t) < 0)
			t.rc = 3;
		else
			event_base_dispatch(t.base);
		goto out;
	} else if (strcmp(cmd, "rm") == 0 && nargs == 1) {
		op = blobstore_delete(t.bs, args[0], bytes_done, &t, &e);
	} else {
		usage();
	}
	if (op == NULL) {
		fprintf(stderr, "blob-tool: %s\n", e->message);
		err_free(e);
		t.rc = 3;
	} else {
		event_base_dispatch(t.base);
	}
out:
	fflush(stdout);
	blobstore_free(t.bs);
	if (t.fd >= 0)
		close(t.fd);
	free(t.token);
	if (t.resume)
		event_free(t.resume);
	if (t.cancel_ev)
		event_free(t.cancel_ev);
	if (t.poll_ev)
		event_free(t.poll_ev);
	event_base_free(t.base);
	return t.rc;
}
