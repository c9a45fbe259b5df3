/* webhook.h: events sent to an operator's URL (--review-webhook-url), signed
 * and retried.
 *
 * Each delivery is a POST of a JSON body with
 *   X-CI-Timestamp: <unix seconds>
 *   X-CI-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">
 * keyed by the secret in --review-webhook-secret-file, so a receiver can
 * check both who sent it and that it is fresh. A delivery that fails (no
 * answer, or a status other than 2xx) is retried with exponential backoff
 * and jitter, up to a bounded number of tries; the queue is capped and
 * what does not fit is counted as dropped, never blocking anyone. */
#ifndef CI_WEBHOOK_H
#define CI_WEBHOOK_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct httpc;
struct webhook;

/* HMAC-SHA256 of data under key, as 64 lowercase hex digits; pure. */
void webhook_hmac_hex(const void *key, size_t key_len, const void *data, size_t len, char out[65]);

/* The signature header's value for body at timestamp ts; pure. out must
 * hold WEBHOOK_SIGNATURE_MAX bytes. */
#define WEBHOOK_SIGNATURE_MAX 72
void webhook_sign(const char *secret, size_t secret_len, int64_t ts, const char *body, size_t len,
		  char out[WEBHOOK_SIGNATURE_MAX]);

/* Deliveries to url, signed with secret (borrowed: copied). */
struct webhook *webhook_new(struct event_base *base, struct httpc *h, const char *url,
			    const char *secret, size_t secret_len, struct err **errp);
void webhook_free(struct webhook *w);

/* SIGHUP: sign what goes next with this secret (copied); a secret of 0
 * or more than 4096 bytes is ignored. */
void webhook_set_secret(struct webhook *w, const char *secret, size_t secret_len);

/* Read --review-webhook-secret-file (at start and on SIGHUP, never while
 * serving): its content without a trailing newline, 1 to 4096 bytes, no
 * NUL. *secret is malloc'd (the caller zeroes and frees it). */
int webhook_read_secret(const char *path, char **secret, size_t *len, struct err **errp);

/* Queue one event (body copied); fire and forget. */
void webhook_send(struct webhook *w, const char *body, size_t len);

/* Delivered, given up on, dropped (queue full); for /metrics. */
void webhook_stats(const struct webhook *w, uint64_t *delivered, uint64_t *failed,
		   uint64_t *dropped);

#endif
