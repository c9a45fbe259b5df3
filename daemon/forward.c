/* forward.c: a call for a session another node owns, proxied to that node
 * and its answer streamed back (forward.h), on curl multi (curl_loop.h).
 *
 * One transfer per call, with backpressure both ways and a cap on every
 * buffer:
 *
 *   caller's body --(http_req_stream_body)--> up (<= FWD_UP_CAP) --(read_cb)--> curl --> owner
 *   owner --> curl --(header_cb, write_cb)--> the caller's socket (<= FWD_DOWN_CAP queued)
 *
 * When up is full the caller's body is paused (http_req_pause_body), and
 * resumed once curl has taken half of it; when up is empty curl is paused
 * (CURL_READFUNC_PAUSE) until the next piece comes. When the caller's
 * socket has more than FWD_DOWN_CAP queued, curl is paused
 * (CURL_WRITEFUNC_PAUSE: it keeps that piece and stops reading the
 * owner), and resumed from the drain callback. So a 100 MB upload or
 * download goes through with a few hundred KiB held here.
 *
 * Each transfer ends exactly once, in fwd_finish: the owner's answer
 * complete (the reply ends), a failure before the answer began (503
 * unavailable naming the node and why, Retry-After: 1), a failure after it
 * began (the caller's connection is closed: a short body), the caller gone
 * (the transfer is taken out of curl at once), or the daemon stopping. It
 * never runs inside a curl callback of its own transfer (curl forbids
 * removing a handle there): what a callback finds is noted and acted on
 * when curl returns. curl is included here besides curl_loop.c, docker.c,
 * httpc.c and blobstore_s3.c: this is the one client that streams both
 * ways, which httpc's buffered POSTs do not. */
#include "forward.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "config.h"
#include "curl_loop.h"
#include "defer.h"
#include "digest.h"
#include "forward_headers.h"
#include "http_server.h"
#include "log.h"
#include "metrics_hist.h"
#include "xalloc.h"

#define FWD_SECRET_MIN 32
#define FWD_SECRET_MAX 4096
#define FWD_UP_CAP (256 * 1024)   /* the caller's body held for curl */
#define FWD_DOWN_CAP (256 * 1024) /* the answer queued to the caller before curl pauses */
#define FWD_DOWN_LOW (64 * 1024)  /* ... and resumes below */
#define FWD_HEAD_MAX (32 * 1024)  /* the owner's answer head, all lines */
#define FWD_HEAD_LINES 100
#define FWD_KEEP_MAX 24 /* answer headers passed on */
#define FWD_STALL_MARGIN_S 30

enum fwd_state { FWD_EARLY, FWD_RUNNING };

/* How a forward ended (ci_forward_calls_total{outcome}). */
enum fwd_outcome {
	FWD_ANSWERED,    /* the owner's answer, whole, whatever its status */
	FWD_UNAVAILABLE, /* 503 before any answer: unreachable, bad answer, stall, caps */
	FWD_BROKEN,      /* cut after the answer began */
	FWD_CALLER_GONE, /* the caller left (or its body was refused) first */
	FWD_OUTCOMES
};
static const char *const fwd_outcome_names[FWD_OUTCOMES] = {"answered", "unavailable", "broken",
							    "caller_gone"};

struct fwd_header {
	char *name, *value;
};

struct fwd {
	struct forwarder *f;
	enum fwd_state state;
	struct call *c;
	struct http_req *req;
	CURL *easy;
	bool in_multi;
	struct curl_slist *headers;
	char node[128];
	char base[256]; /* the owner's URL, for messages */
	char *url;
	struct err *early;   /* a failure before the start, answered from the loop */
	struct event *ev;    /* ... by this, or the end of a caller gone inside a curl callback */
	struct event *stall; /* no byte from the owner for stall_s while the caller keeps up */
	int64_t stall_s;
	/* The caller's body. */
	struct evbuffer *up;
	bool up_end, send_paused, body_paused, body_failed;
	/* The owner's answer. */
	int status;
	bool head_done, replied, recv_paused;
	size_t head_bytes;
	int head_lines;
	char content_type[256];
	struct fwd_header keep[FWD_KEEP_MAX];
	int n_keep;
	char why[256]; /* set by a callback that aborted the transfer */
	int in_curl;   /* curl callbacks of this transfer on the stack */
	bool gone;     /* the caller left */
	char errbuf[CURL_ERROR_SIZE];
	LIST_ENTRY(fwd) link;
};

struct forwarder {
	struct event_base *base;
	const struct config *cfg;
	struct curl_loop *loop;
	char *secret; /* NULL: this node forwards nothing */
	char secret_sha256[DIGEST_HEX_LEN + 1];
	size_t inflight;
	LIST_HEAD(, fwd) calls;
	uint64_t outcomes[FWD_OUTCOMES]; /* by enum fwd_outcome, for /metrics */
};

/* ---- the secret ---- */

/* The cluster secret from path: a regular file of FWD_SECRET_MIN to
 * FWD_SECRET_MAX bytes once whitespace is trimmed, one line, no control
 * bytes (it goes into a header). Readable by others: a warning, as for the
 * admin key file. Caller frees *out (after explicit_bzero). */
static int read_secret(const char *path, char **out, struct err **errp)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return err_set(errp, ERR_BAD_REQUEST, "cluster-secret-file %s: %s", path,
			       strerror(errno));
	struct stat sb = {0};
	char buf[FWD_SECRET_MAX + 2];
	ssize_t n = -1;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
		n = read(fd, buf, sizeof(buf) - 1);
	int saved = errno;
	close(fd);
	if (n < 0)
		return err_set(errp, ERR_BAD_REQUEST, "cluster-secret-file %s: %s", path,
			       S_ISREG(sb.st_mode) ? strerror(saved) : "not a regular file");
	if (n > FWD_SECRET_MAX) {
		explicit_bzero(buf, sizeof(buf));
		return err_set(errp, ERR_BAD_REQUEST,
			       "cluster-secret-file %s: larger than %d bytes", path,
			       FWD_SECRET_MAX);
	}
	if (sb.st_mode & 077)
		log_warn("cluster-secret-file %s can be read by its group or others (mode %03o); "
			 "chmod 600 it",
			 path, (unsigned)(sb.st_mode & 0777));
	size_t b = 0, e = (size_t)n;
	while (b < e && strchr(" \t\r\n", buf[b]) && buf[b])
		b++;
	while (e > b && strchr(" \t\r\n", buf[e - 1]) && buf[e - 1])
		e--;
	int rc = 0;
	for (size_t i = b; i < e && rc == 0; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			rc = err_set(errp, ERR_BAD_REQUEST,
				     "cluster-secret-file %s: holds a line break or a control byte",
				     path);
	if (rc == 0 && e - b < FWD_SECRET_MIN)
		rc = err_set(
		    errp, ERR_BAD_REQUEST,
		    "cluster-secret-file %s: the secret is %zu bytes; it must be at least %d "
		    "(e.g. head -c 48 /dev/urandom | base64)",
		    path, e - b, FWD_SECRET_MIN);
	if (rc == 0)
		*out = xstrndup(buf + b, e - b);
	explicit_bzero(buf, sizeof(buf));
	return rc;
}

static void set_secret(struct forwarder *f, char *secret)
{
	if (f->secret) {
		explicit_bzero(f->secret, strlen(f->secret));
		free(f->secret);
	}
	f->secret = secret;
	if (secret)
		digest_sha256_hex(secret, strlen(secret), f->secret_sha256);
	else
		memset(f->secret_sha256, 0, sizeof(f->secret_sha256));
}

/* The secret and the CA file of cfg: -1 (and f unchanged) when either is
 * unusable. */
static int load_peers(struct forwarder *f, const struct config *cfg, struct err **errp)
{
	char *secret = NULL;
	const char *path = cfg->cluster_secret_file;
	if (path && path[0] && read_secret(path, &secret, errp) < 0)
		return -1;
	const char *ca = cfg->peer_ca_file;
	if (ca && ca[0]) {
		/* curl reads it at each new connection; a file that cannot be read
		 * is said now, not as every forward's failure. */
		int fd = open(ca, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		struct stat sb = {0};
		bool ok = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
		int saved = errno;
		if (fd >= 0)
			close(fd);
		if (!ok) {
			if (secret) {
				explicit_bzero(secret, strlen(secret));
				free(secret);
			}
			return err_set(errp, ERR_BAD_REQUEST, "peer-ca-file %s: %s", ca,
				       fd < 0 ? strerror(saved) : "not a non-empty regular file");
		}
	}
	set_secret(f, secret);
	return 0;
}

/* ---- one transfer ---- */

static void fwd_free(struct fwd *fw)
{
	if (fw->easy)
		curl_easy_cleanup(fw->easy);
	curl_slist_free_all(fw->headers);
	if (fw->ev)
		event_free(fw->ev);
	if (fw->stall)
		event_free(fw->stall);
	if (fw->up)
		evbuffer_free(fw->up);
	for (int i = 0; i < fw->n_keep; i++) {
		free(fw->keep[i].name);
		free(fw->keep[i].value);
	}
	err_free(fw->early);
	free(fw->url);
	free(fw);
}

/* The end of fw, once: answer the caller (e NULL: the owner's answer is
 * complete; else why it failed), take the transfer out of curl and free
 * it. Never called inside one of fw's own curl callbacks. */
static void fwd_finish(struct fwd *fw, struct err *e)
{
	struct forwarder *f = fw->f;
	LIST_REMOVE(fw, link);
	f->inflight--;
	if (fw->in_multi) {
		curl_loop_remove(f->loop, fw->easy);
		fw->in_multi = false;
	}
	struct http_req *req = fw->req;
	struct call *c = fw->c;
	if (fw->state == FWD_RUNNING) {
		http_req_set_close_cb(req, NULL, NULL);
		http_req_set_drain_cb(req, 0, NULL, NULL);
	}
	enum fwd_outcome o = fw->body_failed || fw->gone ? FWD_CALLER_GONE
			     : e && !fw->replied         ? FWD_UNAVAILABLE
			     : e                         ? FWD_BROKEN
							 : FWD_ANSWERED;
	f->outcomes[o]++;
	if (fw->body_failed && !fw->replied) {
		/* The server answered the caller's bad body itself. */
		api_call_free(c);
	} else if (fw->gone) {
		http_req_reply_abort(req); /* nobody reads it: frees the request */
		api_call_free(c);
	} else if (e && !fw->replied) {
		api_reply(c, 0, NULL, e); /* 503 with Retry-After, logged once there */
	} else if (e) {
		log_warn("%s %s: forwarded to node %s: the answer broke off: %s",
			 http_req_method(req), http_req_path(req), fw->node, e->message);
		http_req_reply_abort(req);
		api_call_free(c);
	} else if (!fw->replied) {
		/* 204 or 304 (or an answer that ended at its head): no body. */
		for (int i = 0; i < fw->n_keep; i++)
			http_req_add_header(req, fw->keep[i].name, fw->keep[i].value);
		http_req_reply(req, fw->status, fw->content_type[0] ? fw->content_type : NULL, NULL,
			       0);
		api_call_free(c);
	} else {
		http_req_reply_end(req);
		api_call_free(c);
	}
	err_free(e);
	fwd_free(fw);
}

/* Take both directions' pauses to curl (it may call back from inside). */
static void fwd_apply_pause(struct fwd *fw)
{
	if (!fw->in_multi)
		return;
	int mask = (fw->recv_paused ? CURLPAUSE_RECV : 0) | (fw->send_paused ? CURLPAUSE_SEND : 0);
	curl_easy_pause(fw->easy, mask);
}

static void fwd_arm_stall(struct fwd *fw)
{
	struct timeval tv = {fw->stall_s, 0};
	evtimer_add(fw->stall, &tv);
}

static void stall_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct fwd *fw = arg;
	fwd_finish(fw, err_new(ERR_UNAVAILABLE,
			       "node %s sent nothing for %lld s (the forward's stall limit)",
			       fw->node, (long long)fw->stall_s));
}

/* The caller left while one of fw's curl callbacks was on the stack, or
 * an early failure is due: from the loop. */
static void later_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct fwd *fw = arg;
	struct err *e = fw->early;
	fw->early = NULL;
	fwd_finish(fw, e);
}

static void close_cb(struct http_req *req, void *arg)
{
	(void)req;
	struct fwd *fw = arg;
	fw->gone = true;
	if (fw->in_curl)
		defer_event(fw->ev);
	else
		fwd_finish(fw, NULL); /* the transfer is removed at once */
}

static void drain_cb(struct http_req *req, void *arg)
{
	(void)req;
	struct fwd *fw = arg;
	if (!fw->recv_paused)
		return;
	fw->recv_paused = false;
	fwd_arm_stall(fw);
	fwd_apply_pause(fw);
}

static void chunk_cb(struct http_req *req, const char *data, size_t len, enum http_body_state state,
		     void *arg)
{
	struct fwd *fw = arg;
	if (state == HTTP_BODY_FAILED) {
		fw->body_failed = true;
		if (fw->state == FWD_RUNNING)
			fwd_finish(fw, NULL);
		return;
	}
	if (fw->state != FWD_RUNNING)
		return; /* an early failure will answer; what comes is dropped */
	if (state == HTTP_BODY_END) {
		fw->up_end = true;
	} else {
		evbuffer_add(fw->up, data, len);
		if (evbuffer_get_length(fw->up) >= FWD_UP_CAP && !fw->body_paused) {
			fw->body_paused = true;
			http_req_pause_body(req);
		}
	}
	if (fw->send_paused) {
		fw->send_paused = false;
		if (!fw->recv_paused)
			fwd_arm_stall(fw);
		fwd_apply_pause(fw);
	}
}

static size_t read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	struct fwd *fw = arg;
	fw->in_curl++;
	size_t want = size * nitems, got = 0;
	if (evbuffer_get_length(fw->up) > 0) {
		int n = evbuffer_remove(fw->up, buf, want);
		got = n > 0 ? (size_t)n : 0;
		fwd_arm_stall(fw);
		if (fw->body_paused && evbuffer_get_length(fw->up) < FWD_UP_CAP / 2) {
			fw->body_paused = false;
			http_req_resume_body(fw->req); /* delivers from the loop */
		}
	} else if (!fw->up_end && !fw->gone) {
		/* Waiting for the caller, not the owner: the server's own body
		 * deadline watches the caller meanwhile. */
		fw->send_paused = true;
		evtimer_del(fw->stall);
		fw->in_curl--;
		return CURL_READFUNC_PAUSE;
	}
	fw->in_curl--;
	return got; /* 0 at the end of the body */
}

/* The owner's head is complete: start the caller's answer with it. */
static void start_reply(struct fwd *fw)
{
	fw->head_done = true;
	if (fw->status == 204 || fw->status == 304)
		return; /* answered whole at the end */
	for (int i = 0; i < fw->n_keep; i++)
		http_req_add_header(fw->req, fw->keep[i].name, fw->keep[i].value);
	curl_off_t cl = -1;
	if (curl_easy_getinfo(fw->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) != CURLE_OK)
		cl = -1;
	http_req_reply_start(fw->req, fw->status, fw->content_type[0] ? fw->content_type : NULL,
			     cl >= 0 ? (int64_t)cl : -1);
	fw->replied = true;
}

static void forget_head(struct fwd *fw)
{
	for (int i = 0; i < fw->n_keep; i++) {
		free(fw->keep[i].name);
		free(fw->keep[i].value);
	}
	fw->n_keep = 0;
	fw->content_type[0] = '\0';
}

/* One line of the owner's answer head. 0 aborts the transfer (fw->why). */
static size_t header_line(struct fwd *fw, const char *line, size_t len)
{
	fw->head_bytes += len;
	if (fw->head_bytes > FWD_HEAD_MAX || ++fw->head_lines > FWD_HEAD_LINES) {
		snprintf(fw->why, sizeof(fw->why),
			 "node %s: its answer's head is larger than %d bytes or %d lines", fw->node,
			 FWD_HEAD_MAX, FWD_HEAD_LINES);
		return 0;
	}
	if (fw->head_done)
		return len; /* trailers of a chunked answer: not passed on */
	if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		fw->status = forward_headers_status(line, len);
		forget_head(fw); /* a new answer after an interim one */
		if (fw->status < 0) {
			snprintf(fw->why, sizeof(fw->why), "node %s: its answer is not HTTP/1.x",
				 fw->node);
			return 0;
		}
		return len;
	}
	if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) {
		if (fw->status >= 100 && fw->status < 200) {
			fw->status = 0; /* 100 Continue: the real answer follows */
			return len;
		}
		if (fw->status < 200) {
			snprintf(fw->why, sizeof(fw->why), "node %s: its answer has no status line",
				 fw->node);
			return 0;
		}
		start_reply(fw);
		return len;
	}
	char name[64];
	const char *value;
	size_t vlen;
	if (forward_headers_split(line, len, name, sizeof(name), &value, &vlen) < 0) {
		/* A long name is not one we pass on; anything else malformed ends it. */
		if (memchr(line, ':', len) &&
		    (size_t)((const char *)memchr(line, ':', len) - line) >= sizeof(name))
			return len;
		snprintf(fw->why, sizeof(fw->why),
			 "node %s: its answer has a malformed header line", fw->node);
		return 0;
	}
	if (strcasecmp(name, "Content-Type") == 0) {
		if (vlen >= sizeof(fw->content_type)) {
			snprintf(fw->why, sizeof(fw->why), "node %s: its Content-Type is too long",
				 fw->node);
			return 0;
		}
		memcpy(fw->content_type, value, vlen);
		fw->content_type[vlen] = '\0';
	} else if (forward_headers_keep_response(name) && fw->n_keep < FWD_KEEP_MAX &&
		   vlen < 1024) {
		fw->keep[fw->n_keep].name = xstrdup(name);
		fw->keep[fw->n_keep].value = xstrndup(value, vlen);
		fw->n_keep++;
	}
	return len;
}

static size_t header_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	struct fwd *fw = arg;
	fw->in_curl++;
	fwd_arm_stall(fw);
	size_t r = header_line(fw, buf, size * nitems);
	fw->in_curl--;
	return r;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct fwd *fw = arg;
	size_t n = size * nmemb;
	if (fw->gone)
		return 0;
	if (!fw->replied)
		return n; /* a body on a 204: dropped */
	fw->in_curl++;
	if (http_req_output_backlog(fw->req) > FWD_DOWN_CAP) {
		/* curl keeps this piece and stops reading the owner. */
		fw->recv_paused = true;
		evtimer_del(fw->stall);
		fw->in_curl--;
		return CURL_WRITEFUNC_PAUSE;
	}
	http_req_reply_chunk(fw->req, ptr, n);
	fwd_arm_stall(fw);
	fw->in_curl--;
	return fw->gone ? 0 : n;
}

/* Why a transfer that curl ended with res failed, for the caller. */
static struct err *describe(struct fwd *fw, CURLcode res)
{
	if (fw->why[0])
		return err_new(ERR_UNAVAILABLE, "%s", fw->why);
	const char *detail = fw->errbuf[0] ? fw->errbuf : curl_easy_strerror(res);
	switch (res) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
		if (!fw->replied && fw->status == 0)
			return err_new(ERR_UNAVAILABLE, "node %s (%s) is unreachable: %s", fw->node,
				       fw->base, detail);
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
		return err_new(ERR_UNAVAILABLE, "node %s (%s): TLS failed: %s", fw->node, fw->base,
			       detail);
	case CURLE_OUT_OF_MEMORY:
		/* curl's own cap on one header line (CURL_MAX_HTTP_HEADER). */
		if (!fw->head_done)
			return err_new(ERR_UNAVAILABLE,
				       "node %s: its answer's head is larger than curl takes (a "
				       "header line over %d KiB)",
				       fw->node, CURL_MAX_HTTP_HEADER / 1024);
		break;
	default: break;
	}
	return err_new(ERR_UNAVAILABLE, "node %s broke off before answering: %s", fw->node, detail);
}

static void transfer_done(CURL *easy, CURLcode res, void *arg)
{
	(void)arg;
	struct fwd *fw = NULL;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&fw);
	fw->in_multi = false; /* curl_loop took it out */
	if (fw->gone) {
		fwd_finish(fw, NULL);
		return;
	}
	if (res == CURLE_OK && !fw->head_done)
		res = CURLE_GOT_NOTHING;
	fwd_finish(fw, res == CURLE_OK ? NULL : describe(fw, res));
}

static bool url_is_http(const char *url)
{
	return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

static int64_t stall_limit(const struct config *cfg)
{
	if (cfg->forward_stall_timeout_s > 0)
		return cfg->forward_stall_timeout_s;
	int64_t longest = cfg->max_exec_timeout_s > cfg->install_max_timeout_s
			      ? cfg->max_exec_timeout_s
			      : cfg->install_max_timeout_s;
	return longest + FWD_STALL_MARGIN_S;
}

static void add_header(struct fwd *fw, const char *name, const char *value)
{
	char line[HTTP_MAX_HEADER_BYTES + 128];
	/* "Name;" sends an empty header; "Name:" would remove curl's own. */
	if (value[0])
		snprintf(line, sizeof(line), "%s: %s", name, value);
	else
		snprintf(line, sizeof(line), "%s;", name);
	fw->headers = curl_slist_append(fw->headers, line);
}

/* The request's headers to the owner: the caller's but the dropped ones,
 * then ours. */
static void build_headers(struct fwd *fw)
{
	struct forwarder *f = fw->f;
	struct http_req *req = fw->req;
	const char *connection = http_req_header(req, "Connection");
	bool accept = false;
	for (int i = 0; i < http_req_header_count(req); i++) {
		const char *name, *value;
		http_req_header_at(req, i, &name, &value);
		if (forward_headers_drop_request(name, connection))
			continue;
		if (strcasecmp(name, "Accept") == 0)
			accept = true;
		add_header(fw, name, value);
	}
	char peer[80], xff[512];
	http_req_peer(req, peer, sizeof(peer));
	forward_headers_xff(http_req_header(req, "X-Forwarded-For"), peer, xff, sizeof(xff));
	add_header(fw, FORWARD_TOKEN_HEADER, f->secret);
	add_header(fw, FORWARD_BY_HEADER, f->cfg->node);
	add_header(fw, "X-Forwarded-For", xff);
	add_header(fw, "X-Request-Id", fw->c->request_id);
	if (fw->c->traceparent[0])
		add_header(fw, "traceparent", fw->c->traceparent);
	/* No 100-continue round trip, and none of curl's defaults the caller
	 * did not send. */
	fw->headers = curl_slist_append(fw->headers, "Expect:");
	if (!accept)
		fw->headers = curl_slist_append(fw->headers, "Accept:");
}

/* The easy handle for fw: -1 with *errp when curl refuses an option. */
static int setup_easy(struct fwd *fw, struct err **errp)
{
	const struct config *cfg = fw->f->cfg;
	struct http_req *req = fw->req;
	fw->easy = curl_easy_init();
	if (fw->easy == NULL)
		abort();
	CURL *e = fw->easy;
	build_headers(fw);
	const char *method = http_req_method(req);
	int64_t len = http_req_content_length(req);
	CURLcode rc = curl_easy_setopt(e, CURLOPT_URL, fw->url);
	if (rc != CURLE_OK)
		return err_set(errp, ERR_BAD_REQUEST, "the call's path cannot be forwarded (%s)",
			       curl_easy_strerror(rc));
	rc |= curl_loop_http_only(e);
	rc |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	rc |= curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* the owner checks the path */
	rc |= curl_easy_setopt(e, CURLOPT_PROXY, "");      /* no proxy variables reroute it */
	rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->forward_connect_timeout_ms);
	/* No whole-transfer deadline: an execution may take its full limit;
	 * the stall timer ends an owner that goes quiet. */
	rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 0L);
	rc |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	/* Connections to a peer are reused, but not once they have idled near
	 * the peer's own keep-alive limit (nodes share their configuration):
	 * a request sent as the peer closes could not be replayed, its body
	 * having been streamed and not kept. */
	long maxage = cfg->http_idle_timeout_s > 2 ? (long)cfg->http_idle_timeout_s - 2 : 1;
	rc |= curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, maxage);
	rc |= curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (cfg->peer_ca_file && cfg->peer_ca_file[0]) {
		rc |= curl_easy_setopt(e, CURLOPT_CAINFO, cfg->peer_ca_file);
#if LIBCURL_VERSION_NUM >= 0x075700 /* 7.87: a cached store would outlive a SIGHUP */
		rc |= curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 0L);
#endif
	}
	rc |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (strcmp(method, "HEAD") == 0)
		rc |= curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	if (len != 0) {
		rc |= curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		rc |= curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
		rc |= curl_easy_setopt(e, CURLOPT_READDATA, fw);
		rc |= curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
				       (curl_off_t)len); /* -1: chunked */
	}
	rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, fw->headers);
	rc |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	rc |= curl_easy_setopt(e, CURLOPT_HEADERDATA, fw);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, fw);
	rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, fw->errbuf);
	rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, fw);
	if (rc != CURLE_OK)
		return err_set(errp, ERR_INTERNAL, "forward: curl refused the transfer's options");
	return 0;
}

void forwarder_call(struct forwarder *f, struct call *c, const char *node, const char *base_url)
{
	struct fwd *fw = xcalloc(1, sizeof(*fw));
	fw->f = f;
	fw->c = c;
	fw->req = c->req;
	fw->state = FWD_EARLY;
	snprintf(fw->node, sizeof(fw->node), "%s", node ? node : "?");
	snprintf(fw->base, sizeof(fw->base), "%s", base_url ? base_url : "");
	fw->ev = evtimer_new(f->base, later_cb, fw);
	fw->stall = evtimer_new(f->base, stall_cb, fw);
	fw->stall_s = stall_limit(f->cfg);
	fw->up = evbuffer_new();
	LIST_INSERT_HEAD(&f->calls, fw, link);
	f->inflight++;
	struct err *e = NULL;
	if (http_req_client_gone(c->req)) {
		/* It left while the call waited (a key lookup): nothing to send
		 * for, and no close callback will say so any more. */
		fw->gone = true;
		defer_event(fw->ev);
		return;
	}
	if (f->secret == NULL)
		err_set(&e, ERR_UNAVAILABLE,
			"session is on node %s, but this node has no cluster secret "
			"(--cluster-secret-file) to forward with",
			fw->node);
	else if (f->inflight > (size_t)f->cfg->forward_max_inflight)
		err_set(&e, ERR_UNAVAILABLE,
			"session is on node %s, and this node forwards %lld calls at once already",
			fw->node, (long long)f->cfg->forward_max_inflight);
	else if (base_url == NULL || !url_is_http(base_url))
		err_set(&e, ERR_UNAVAILABLE,
			"session is on node %s, which has no http(s) URL to forward to", fw->node);
	if (e == NULL) {
		fw->url =
		    forward_headers_url(base_url, http_req_path(c->req), http_req_query(c->req));
		if (setup_easy(fw, &e) < 0)
			err_wrap(&e, "forward to node %s", fw->node);
	}
	if (e == NULL) {
		fw->state = FWD_RUNNING;
		http_req_set_close_cb(c->req, close_cb, fw);
		http_req_set_drain_cb(c->req, FWD_DOWN_LOW, drain_cb, fw);
		if (http_req_content_length(c->req) != 0)
			http_req_stream_body(c->req, chunk_cb, fw); /* delivers from the loop */
		if (curl_loop_add(f->loop, fw->easy) < 0) {
			err_set(&e, ERR_INTERNAL, "forward to node %s: curl refused the transfer",
				fw->node);
		} else {
			fw->in_multi = true;
			fwd_arm_stall(fw);
			return;
		}
	}
	/* Known now, answered from the loop. */
	fw->early = e;
	defer_event(fw->ev);
}

bool forwarder_from_peer(const struct forwarder *f, const struct http_req *req)
{
	if (f == NULL || f->secret == NULL)
		return false;
	const char *token = http_req_header(req, FORWARD_TOKEN_HEADER);
	if (token == NULL)
		return false;
	/* Hashes compared, so the time says nothing of the secret, its length
	 * included. */
	char sha[DIGEST_HEX_LEN + 1];
	digest_sha256_hex(token, strlen(token), sha);
	return digest_equal(sha, f->secret_sha256, DIGEST_HEX_LEN);
}

bool forwarder_forged(const struct forwarder *f, const struct http_req *req)
{
	return http_req_header(req, FORWARD_TOKEN_HEADER) != NULL && !forwarder_from_peer(f, req);
}

struct forwarder *forwarder_new(struct event_base *base, const struct config *cfg,
				struct err **errp)
{
	struct forwarder *f = xcalloc(1, sizeof(*f));
	f->base = base;
	f->cfg = cfg;
	LIST_INIT(&f->calls);
	if (load_peers(f, cfg, errp) < 0) {
		free(f);
		return NULL;
	}
	f->loop = curl_loop_new(base, transfer_done, f);
	if (f->secret)
		log_info("cluster secret from %s: calls for other nodes' sessions are forwarded "
			 "(at most %lld at once; peers' https checked against %s)",
			 cfg->cluster_secret_file, (long long)cfg->forward_max_inflight,
			 cfg->peer_ca_file[0] ? cfg->peer_ca_file : "the system's CA store");
	else
		log_info("no cluster secret (--cluster-secret-file): this node forwards no calls, "
			 "and takes none as a peer's");
	return f;
}

int forwarder_reload(struct forwarder *f, const struct config *cfg, struct err **errp)
{
	f->cfg = cfg;
	if (load_peers(f, cfg, errp) < 0)
		return -1;
	log_info("SIGHUP: cluster secret %s, peer CA %s", f->secret ? "re-read" : "none",
		 cfg->peer_ca_file[0] ? cfg->peer_ca_file : "the system's store");
	return 0;
}

void forwarder_free(struct forwarder *f)
{
	if (f == NULL)
		return;
	struct fwd *fw;
	while ((fw = LIST_FIRST(&f->calls)) != NULL) {
		/* A 503 when nothing was answered yet, else a short body: never a
		 * hang. */
		struct err *e =
		    fw->early ? fw->early : err_new(ERR_UNAVAILABLE, "the daemon is stopping");
		fw->early = NULL;
		fwd_finish(fw, e);
	}
	curl_loop_free(f->loop);
	set_secret(f, NULL);
	free(f);
}

int forwarder_metrics(const struct forwarder *f, struct buf *b)
{
	if (f == NULL)
		return 0;
	if (metrics_head(
		b, "ci_forward_calls_total", "counter",
		"Calls this node forwarded to a session's owner, by how they ended: "
		"answered (the owner's answer passed on whole, any status), unavailable "
		"(503 before any answer), broken (cut after the answer began), caller_gone.") < 0)
		return -1;
	for (int i = 0; i < FWD_OUTCOMES; i++)
		if (metrics_printf(b, "ci_forward_calls_total{outcome=\"%s\"} %" PRIu64 "\n",
				   fwd_outcome_names[i], f->outcomes[i]) < 0)
			return -1;
	if (metrics_head(b, "ci_forward_inflight", "gauge", "Forwards in flight now.") < 0)
		return -1;
	return metrics_printf(b, "ci_forward_inflight %zu\n", f->inflight);
}
