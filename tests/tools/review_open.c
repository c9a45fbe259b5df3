/* review-open: a test tool (build/tools/review-open). Opens one review case
 * through reviews_open, as the run engine will, against a real Redis and,
 * with --webhook-url, a real webhook receiver; prints the case's id, waits
 * (bounded by --wait-s) until the webhook delivery has ended one way or
 * the other, and prints the webhook's counts as JSON:
 *   {"review":ID,"delivered":N,"failed":N,"dropped":N}
 * The case JSON is read from stdin.
 *
 *   review-open --redis URL --prefix P --tenant T --run RUN_ID
 *               [--webhook-url URL --secret-file F] [--ttl-s N] [--wait-s N] */
#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpc.h"
#include "log.h"
#include "reviews.h"
#include "store.h"
#include "webhook.h"
#include "xalloc.h"

struct tool {
	struct event_base *base;
	struct store *st;
	struct reviews *rv;
	struct webhook *wh;
	const char *tenant, *run;
	char *case_json;
	size_t case_len;
	char id[64];
	bool opened, failed;
	struct event *tick;
	int ticks_left;
};

static void opened(const struct err *e, const char *review_id, void *arg)
{
	struct tool *t = arg;
	if (e) {
		fprintf(stderr, "review-open: %s\n", e->message);
		t->failed = true;
		event_base_loopexit(t->base, NULL);
		return;
	}
	snprintf(t->id, sizeof(t->id), "%s", review_id);
	t->opened = true;
	printf("%s\n", review_id);
	fflush(stdout);
	if (t->wh == NULL)
		event_base_loopexit(t->base, NULL);
}

static void connected(void *arg)
{
	struct tool *t = arg;
	static bool once;
	if (once)
		return;
	once = true;
	reviews_open(t->rv, t->tenant, t->run, t->case_json, t->case_len, opened, t);
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tool *t = arg;
	uint64_t d, f, x;
	webhook_stats(t->wh, &d, &f, &x);
	if ((t->opened && t->wh && d + f + x >= 1) || --t->ticks_left <= 0) {
		event_base_loopexit(t->base, NULL);
		return;
	}
	struct timeval tv = {0, 50000};
	evtimer_add(t->tick, &tv);
}

static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = xmalloc(cap);
	size_t got;
	while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap)
			buf = xrealloc(buf, cap *= 2);
	}
	*len = n;
	buf[n < cap ? n : cap - 1] = '\0';
	return buf;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"redis", required_argument, NULL, 'r'},
	    {"prefix", required_argument, NULL, 'p'},
	    {"tenant", required_argument, NULL, 't'},
	    {"run", required_argument, NULL, 'u'},
	    {"webhook-url", required_argument, NULL, 'w'},
	    {"secret-file", required_argument, NULL, 's'},
	    {"ttl-s", required_argument, NULL, 'T'},
	    {"wait-s", required_argument, NULL, 'W'},
	    {NULL, 0, NULL, 0},
	};
	const char *redis = "redis://127.0.0.1:6379", *prefix = "", *url = NULL,
		   *secret_file = NULL;
	struct tool t = {.tenant = "default"};
	long ttl = 600, wait_s = 30;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': redis = optarg; break;
		case 'p': prefix = optarg; break;
		case 't': t.tenant = optarg; break;
		case 'u': t.run = optarg; break;
		case 'w': url = optarg; break;
		case 's': secret_file = optarg; break;
		case 'T': ttl = strtol(optarg, NULL, 10); break;
		case 'W': wait_s = strtol(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	if (t.run == NULL) {
		fprintf(stderr, "review-open: --run is required\n");
		return 2;
	}
	log_threshold = LOG_LEVEL_INFO;
	t.case_json = read_all(stdin, &t.case_len);
	t.base = event_base_new();
	struct err *e = NULL;
	struct httpc *h = NULL;
	t.st = store_new(t.base, redis, prefix, "review-open", 60, &e);
	if (t.st == NULL)
		goto fail;
	if (url) {
		char *secret = NULL;
		size_t len = 0;
		if (webhook_read_secret(secret_file, &secret, &len, &e) < 0)
			goto fail;
		h = httpc_new(t.base);
		t.wh = webhook_new(t.base, h, url, secret, len, &e);
		free(secret);
		if (t.wh == NULL)
			goto fail;
	}
	t.rv = reviews_new(t.base, t.st, t.wh, ttl);
	store_set_connect_cb(t.st, connected, &t);
	t.tick = evtimer_new(t.base, tick, &t);
	t.ticks_left = (int)(wait_s * 20);
	struct timeval tv = {0, 50000};
	evtimer_add(t.tick, &tv);
	event_base_dispatch(t.base);
	uint64_t d, f, x;
	webhook_stats(t.wh, &d, &f, &x);
	if (t.opened)
		printf("{\"review\":\"%s\",\"delivered\":%llu,\"failed\":%llu,\"dropped\":%llu}\n",
		       t.id, (unsigned long long)d, (unsigned long long)f, (unsigned long long)x);
	event_free(t.tick);
	reviews_free(t.rv);
	webhook_free(t.wh);
	httpc_free(h);
	store_free(t.st);
	event_base_free(t.base);
	free(t.case_json);
	return t.opened && !t.failed ? 0 : 1;
fail:
	fprintf(stderr, "review-open: %s\n", e->message);
	err_free(e);
	return 1;
}
