/* webhook.c: signed event deliveries with retries (webhook.h).
 *
 * Each event is a delivery of its own, on its own timer: tried at once,
 * then after about 1 s, 2 s, 4 s, 8 s, 16 s (exponential backoff with
 * jitter, so that many daemons that lost the receiver at once do not come
 * back in step), WEBHOOK_TRIES tries in all. Every try is signed afresh,
 * with its own timestamp: a receiver that refuses old timestamps (replays)
 * still takes a late retry. The queue holds at most WEBHOOK_QUEUE_MAX
 * deliveries (waiting or in flight); an event that does not fit is counted
 * as dropped. Nothing here blocks or waits for anyone. */
#include "webhook.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <time.h>

#include "httpc.h"
#include "log.h"
#include "session.h"
#include "xalloc.h"

#define WEBHOOK_TRIES 6
#define WEBHOOK_QUEUE_MAX 256
#define WEBHOOK_FIRST_DELAY_MS 1000
#define WEBHOOK_TIMEOUT_MS 10000
#define WEBHOOK_ANSWER_MAX 65536
#define WEBHOOK_SECRET_MAX 4096

void webhook_hmac_hex(const void *key, size_t key_len, const void *data, size_t len, char out[65])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	static const unsigned char empty[1];
	if (HMAC(EVP_sha256(), key_len ? key : empty, (int)key_len, len ? data : empty, len, mac,
		 &mac_len) == NULL ||
	    mac_len != 32)
		abort(); /* out of memory, or an OpenSSL without SHA-256 */
	static const char hex[] = "0123456789abcdef";
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[64] = '\0';
}

void webhook_sign(const char *secret, size_t secret_len, int64_t ts, const char *body, size_t len,
		  char out[WEBHOOK_SIGNATURE_MAX])
{
	/* One buffer, "<ts>.<body>", for the one-shot HMAC (the HMAC_CTX calls
	 * are deprecated in OpenSSL 3). */
	char prefix[32];
	int pn = snprintf(prefix, sizeof(prefix), "%lld.", (long long)ts);
	char *msg = xmalloc((size_t)pn + len + 1);
	memcpy(msg, prefix, (size_t)pn);
	if (len)
		memcpy(msg + pn, body, len);
	memcpy(out, "sha256=", 7);
	webhook_hmac_hex(secret, secret_len, msg, (size_t)pn + len, out + 7);
	free(msg);
}

struct delivery {
	TAILQ_ENTRY(delivery) link;
	struct webhook *w;
	char id[SESSION_ID_LEN + 1]; /* X-CI-Delivery: the same on every try */
	char *body;
	size_t len;
	int tries;
	struct event *timer;
	struct httpc_call *call;
};

struct webhook {
	struct event_base *base;
	struct httpc *h;
	char *url;
	char *secret;
	size_t secret_len;
	TAILQ_HEAD(, delivery) queue;
	size_t queued;
	uint64_t delivered, failed, dropped;
};

static void delivery_free(struct delivery *d)
{
	struct webhook *w = d->w;
	TAILQ_REMOVE(&w->queue, d, link);
	w->queued--;
	if (d->call)
		httpc_cancel(d->call);
	event_free(d->timer);
	free(d->body);
	free(d);
}

/* The wait before try n+1 (n tries made): 1 s, 2 s, 4 s ..., each between
 * three quarters and five quarters of that. */
static int64_t backoff_ms(int n)
{
	int64_t base = (int64_t)WEBHOOK_FIRST_DELAY_MS << (n - 1);
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)time(NULL);
	return base * 3 / 4 + (int64_t)(r % (uint32_t)(base / 2 + 1));
}

static void try_now(evutil_socket_t fd, short what, void *arg);

static void answered(const struct httpc_response *r, void *arg)
{
	struct delivery *d = arg;
	struct webhook *w = d->w;
	d->call = NULL;
	if (r->error == NULL && r->status >= 200 && r->status < 300) {
		w->delivered++;
		log_debug("webhook: delivery %s answered %ld after %d tries", d->id, r->status,
			  d->tries);
		delivery_free(d);
		return;
	}
	char why[200];
	if (r->error)
		snprintf(why, sizeof(why), "%.180s", r->error->message);
	else
		snprintf(why, sizeof(why), "status %ld", r->status);
	if (d->tries >= WEBHOOK_TRIES) {
		w->failed++;
		log_warn("webhook: delivery %s given up after %d tries (last: %s)", d->id, d->tries,
			 why);
		delivery_free(d);
		return;
	}
	int64_t ms = backoff_ms(d->tries);
	log_info("webhook: delivery %s try %d failed (%s); again in %lld ms", d->id, d->tries, why,
		 (long long)ms);
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(d->timer, &tv);
}

static void try_now(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct delivery *d = arg;
	struct webhook *w = d->w;
	d->tries++;
	int64_t ts = (int64_t)time(NULL);
	char sig[WEBHOOK_SIGNATURE_MAX];
	webhook_sign(w->secret, w->secret_len, ts, d->body, d->len, sig);
	char h_ts[48], h_sig[WEBHOOK_SIGNATURE_MAX + 32], h_id[64];
	snprintf(h_ts, sizeof(h_ts), "X-CI-Timestamp: %lld", (long long)ts);
	snprintf(h_sig, sizeof(h_sig), "X-CI-Signature: %s", sig);
	snprintf(h_id, sizeof(h_id), "X-CI-Delivery: %s", d->id);
	const char *headers[] = {"Content-Type: application/json", h_ts, h_sig, h_id};
	struct err *e = NULL;
	d->call = httpc_post(w->h, w->url, headers, sizeof(headers) / sizeof(headers[0]), d->body,
			     d->len, WEBHOOK_TIMEOUT_MS, WEBHOOK_ANSWER_MAX, answered, d, &e);
	if (d->call == NULL) {
		/* The URL was checked at start: this one will never go. */
		w->failed++;
		log_warn("webhook: delivery %s cannot start: %s", d->id, e ? e->message : "?");
		err_free(e);
		delivery_free(d);
	}
}

struct webhook *webhook_new(struct event_base *base, struct httpc *h, const char *url,
			    const char *secret, size_t secret_len, struct err **errp)
{
	if (url == NULL || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
		err_set(errp, ERR_BAD_REQUEST,
			"review-webhook-url: an http:// or https:// URL is needed");
		return NULL;
	}
	if (secret == NULL || secret_len == 0 || secret_len > WEBHOOK_SECRET_MAX) {
		err_set(errp, ERR_BAD_REQUEST,
			"review-webhook-secret-file: a secret of 1 to %d bytes is needed",
			WEBHOOK_SECRET_MAX);
		return NULL;
	}
	struct webhook *w = xcalloc(1, sizeof(*w));
	w->base = base;
	w->h = h;
	w->url = xstrdup(url);
	TAILQ_INIT(&w->queue);
	webhook_set_secret(w, secret, secret_len);
	return w;
}

void webhook_set_secret(struct webhook *w, const char *secret, size_t secret_len)
{
	if (w == NULL || secret == NULL || secret_len == 0 || secret_len > WEBHOOK_SECRET_MAX)
		return;
	if (w->secret) {
		explicit_bzero(w->secret, w->secret_len);
		free(w->secret);
	}
	w->secret = xmalloc(secret_len);
	memcpy(w->secret, secret, secret_len);
	w->secret_len = secret_len;
}

int webhook_read_secret(const char *path, char **secret, size_t *len, struct err **errp)
{
	*secret = NULL;
	*len = 0;
	FILE *f = path && *path ? fopen(path, "re") : NULL;
	if (f == NULL)
		return err_set(errp, ERR_BAD_REQUEST,
			       "review-webhook-secret-file %s: cannot be read", path ? path : "");
	char *buf = xmalloc(WEBHOOK_SECRET_MAX + 2);
	size_t n = fread(buf, 1, WEBHOOK_SECRET_MAX + 1, f);
	fclose(f);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n == 0 || n > WEBHOOK_SECRET_MAX || memchr(buf, '\0', n)) {
		explicit_bzero(buf, WEBHOOK_SECRET_MAX + 2);
		free(buf);
		return err_set(
		    errp, ERR_BAD_REQUEST,
		    "review-webhook-secret-file %s: must hold one secret of 1 to %d bytes", path,
		    WEBHOOK_SECRET_MAX);
	}
	buf[n] = '\0';
	*secret = buf;
	*len = n;
	return 0;
}

void webhook_free(struct webhook *w)
{
	if (w == NULL)
		return;
	while (!TAILQ_EMPTY(&w->queue))
		delivery_free(TAILQ_FIRST(&w->queue));
	if (w->secret) {
		explicit_bzero(w->secret, w->secret_len);
		free(w->secret);
	}
	free(w->url);
	free(w);
}

void webhook_send(struct webhook *w, const char *body, size_t len)
{
	if (w == NULL)
		return;
	if (w->queued >= WEBHOOK_QUEUE_MAX) {
		/* Logged at the 1st, 2nd, 4th, 8th ... drop: a receiver that is
		 * down for long must not flood the log. */
		uint64_t n = ++w->dropped;
		if ((n & (n - 1)) == 0)
			log_warn("webhook: queue full (%d deliveries); %llu events dropped so far",
				 WEBHOOK_QUEUE_MAX, (unsigned long long)n);
		return;
	}
	struct delivery *d = xcalloc(1, sizeof(*d));
	d->w = w;
	session_new_id(d->id);
	d->body = xmalloc(len + 1);
	memcpy(d->body, body, len);
	d->body[len] = '\0';
	d->len = len;
	d->timer = evtimer_new(w->base, try_now, d);
	TAILQ_INSERT_TAIL(&w->queue, d, link);
	w->queued++;
	/* From the loop, never inside the caller's call. */
	struct timeval now = {0, 0};
	evtimer_add(d->timer, &now);
}

void webhook_stats(const struct webhook *w, uint64_t *delivered, uint64_t *failed,
		   uint64_t *dropped)
{
	*delivered = w ? w->delivered : 0;
	*failed = w ? w->failed : 0;
	*dropped = w ? w->dropped : 0;
}
