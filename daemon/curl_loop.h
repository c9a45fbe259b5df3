/* curl_loop.h: libcurl's multi interface on a libevent loop, shared by the
 * daemon's HTTP clients (docker.c to the engine's socket, httpc.c to the
 * daemon's own peers, blobstore_s3.c to an S3 store, forward.c to peer
 * nodes), so the wiring of sockets, the timer and the dispatch of finished
 * transfers is written once.
 *
 * The owner makes and configures its easy handles, adds them here, and is
 * told once per handle when its transfer finished: the handle has already
 * been taken out of the multi, so the owner may clean it up (or reuse it)
 * inside the callback. curl is included from curl_loop.c, docker.c,
 * httpc.c, blobstore_s3.c and forward.c only. */
#ifndef CI_CURL_LOOP_H
#define CI_CURL_LOOP_H

#include <curl/curl.h>
#include <event2/event.h>

struct curl_loop;

/* A transfer of easy ended with res (CURLE_OK: the peer answered). Runs
 * from the loop, never inside curl_loop_add. */
typedef void (*curl_loop_done_cb)(CURL *easy, CURLcode res, void *arg);

/* A multi handle driven by base; done(easy, res, arg) for every finished
 * transfer. Caller owns it (curl_loop_free). */
struct curl_loop *curl_loop_new(struct event_base *base, curl_loop_done_cb done, void *arg);

/* The owner takes its handles out first (curl_loop_remove). NULL-safe.
 * Safe from inside a done callback: the free then happens when the
 * dispatch returns. */
void curl_loop_free(struct curl_loop *l);

/* Start easy's transfer; -1 when curl refuses it. */
int curl_loop_add(struct curl_loop *l, CURL *easy);

/* Limit easy to http:// and https:// and follow no redirect: where a
 * request of ours goes is decided by whoever gave its URL, never by the
 * peer (httpc.c, forward.c, blobstore_s3.c). Returns curl's error, if any. */
CURLcode curl_loop_http_only(CURL *easy);

/* Stop easy's transfer (its done callback will not run). */
void curl_loop_remove(struct curl_loop *l, CURL *easy);

#endif
