/* blobstore_s3.c: the s3://bucket/prefix store (blobstore.h), over
 * libcurl's multi interface on the loop (curl_loop.c).
 *
 * Addressing is path-style (ENDPOINT/BUCKET/KEY), which every
 * S3-compatible service takes and which needs no DNS name per bucket.
 * Requests are signed by libcurl (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3"
 * with the keys in CURLOPT_USERPWD): no signing code here. curl sends an
 * upload whose body it reads through a callback as UNSIGNED-PAYLOAD and
 * hashes in-memory POST bodies itself. Query strings are written already
 * in SigV4's canonical form (names sorted, values escaped, "uploads="),
 * since older libcurl signs the query as it is given.
 *
 * A put reads its source into a part buffer (part_size, 8 MiB by default:
 * the most this holds of an object), 1 MiB per loop turn. A source that
 * ends within the first part goes up as one PUT; otherwise it is a
 * multipart upload: CreateMultipartUpload, an UploadPart per part, then
 * CompleteMultipartUpload, and AbortMultipartUpload when anything fails or
 * the put is cancelled, so an object appears whole or not at all. The
 * part stays in memory until the service took it, which is what lets a
 * part be sent again.
 *
 * Each request has a deadline (timeout_ms); a connection failure, a
 * deadline, a 5xx or a 429 is retried up to `retries` times with an
 * exponential backoff (250 ms doubling, at most 8 s). A get is retried
 * only before its sink got a byte. Answers kept in memory (the list XML,
 * an error) are capped at S3_ANSWER_MAX. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <unistd.h>

#include "blobstore_internal.h"
#include "curl_loop.h"
#include "defer.h"
#include "xalloc.h"

#define S3_ANSWER_MAX (2 * 1024 * 1024)
#define S3_FILL_CHUNK (1024 * 1024)
#define S3_MAX_PARTS 10000
#define S3_CRED_MAX 4096

enum s3_kind { SK_PUT, SK_GET, SK_LIST, SK_DEL };
enum s3_step {
	SS_FILL,
	SS_PUT_ONE,
	SS_CREATE,
	SS_PART,
	SS_COMPLETE,
	SS_ABORT,
	SS_GET,
	SS_LIST,
	SS_DEL
};

struct s3_store {
	struct blobstore *s;
	char *endpoint, *bucket, *prefix, *region, *cred_file;
	char *userpwd; /* "ACCESS:SECRET" */
	char *sigv4;   /* "aws:amz:REGION:s3" */
	int64_t timeout_ms;
	int retries;
	size_t part_size;
	struct curl_loop *loop;
	LIST_HEAD(, s3_op) ops;
};

struct s3_op {
	struct blob_op base;
	struct s3_store *ss;
	enum s3_kind kind;
	enum s3_step step;
	char *key; /* with the store's prefix */
	/* put */
	int io_fd;
	blob_read_fn read;
	blob_write_fn write;
	void *io_arg;
	char *part;
	size_t part_len, sent;
	bool eof;
	int part_no;
	char *upload_id;
	char **etags;
	/* get */
	uint64_t max_bytes;
	bool sink_started;
	/* list */
	char *list_prefix; /* relative, as the caller gave it */
	char *token;
	size_t max_keys;
	struct blob_s3_list list;
	/* the request in flight */
	CURL *easy;
	struct curl_slist *headers;
	char *post; /* an in-memory POST body */
	char *answer;
	size_t answer_len;
	bool answer_over;
	char *etag;
	long status;
	int attempt;
	struct event *timer;   /* backoff, the first request, an early failure */
	struct event *fill_ev; /* a put's next turn of reading its source */
	uint64_t bytes;
	bool parked; /* its source said BLOB_READ_AGAIN: waits for blob_resume */
	struct err *err;
	blob_done_cb cb;
	void *arg;
	LIST_ENTRY(s3_op) link;
};

static void send_step(struct s3_op *op);
static void fill_turn(evutil_socket_t fd, short what, void *arg);

/* ---- pure helpers (unit-tested) ---- */

static void xml_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r;) {
		if (*r == '&') {
			static const struct {
				const char *ent;
				char c;
			} ents[] = {{"&amp;", '&'},
				    {"&lt;", '<'},
				    {"&gt;", '>'},
				    {"&quot;", '"'},
				    {"&apos;", '\''}};
			bool done = false;
			for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
				size_t n = strlen(ents[i].ent);
				if (strncmp(r, ents[i].ent, n) == 0) {
					*w++ = ents[i].c;
					r += n;
					done = true;
					break;
				}
			}
			if (!done && r[1] == '#') {
				/* &#NN; / &#xNN;: kept only for ASCII (a key outside it is
				 * invalid anyway) */
				char *end;
				long v =
				    r[2] == 'x' ? strtol(r + 3, &end, 16) : strtol(r + 2, &end, 10);
				if (*end == ';' && v > 0 && v < 128) {
					*w++ = (char)v;
					r = end + 1;
					done = true;
				}
			}
			if (!done)
				*w++ = *r++;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
}

/* The first <name>value</name> in [p, end), or NULL; *next after it. */
static char *xml_find(const char *p, const char *end, const char *name, const char **next)
{
	char open[64], close[64];
	snprintf(open, sizeof(open), "<%s>", name);
	snprintf(close, sizeof(close), "</%s>", name);
	size_t on = strlen(open), cn = strlen(close);
	const char *a = memmem(p, (size_t)(end - p), open, on);
	if (a == NULL)
		return NULL;
	a += on;
	const char *b = memmem(a, (size_t)(end - a), close, cn);
	if (b == NULL || (size_t)(b - a) > 64 * 1024)
		return NULL;
	if (next)
		*next = b + cn;
	char *v = xstrndup(a, (size_t)(b - a));
	xml_unescape(v);
	return v;
}

char *blob_s3_xml_value(const char *body, size_t len, const char *name)
{
	return xml_find(body, body + len, name, NULL);
}

void blob_s3_list_clear(struct blob_s3_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free((char *)l->entries[i].key);
	free(l->entries);
	free(l->next_token);
	*l = (struct blob_s3_list){0};
}

int blob_s3_parse_list(const char *body, size_t len, const char *prefix, size_t max,
		       struct blob_s3_list *out, struct err **errp)
{
	*out = (struct blob_s3_list){0};
	const char *end = body + len;
	if (memmem(body, len, "<ListBucketResult", 17) == NULL)
		return err_set(errp, ERR_UNAVAILABLE,
			       "store: the list answer is not a ListBucketResult");
	size_t pn = strlen(prefix);
	const char *p = body;
	for (;;) {
		const char *next;
		char *contents = xml_find(p, end, "Contents", &next);
		if (contents == NULL)
			break;
		p = next;
		size_t cl = strlen(contents);
		char *key = xml_find(contents, contents + cl, "Key", NULL);
		char *size = xml_find(contents, contents + cl, "Size", NULL);
		free(contents);
		char *endp = NULL;
		unsigned long long sz = size ? strtoull(size, &endp, 10) : 0;
		bool ok = key && size && size[0] >= '0' && size[0] <= '9' && *endp == '\0' &&
			  strncmp(key, prefix, pn) == 0 && blobstore_key_valid(key + pn);
		if (ok && out->n < max) {
			if (out->n == 0)
				out->entries = xmalloc(max * sizeof(*out->entries));
			out->entries[out->n].key = xstrdup(key + pn);
			out->entries[out->n].size = sz;
			out->n++;
		}
		free(key);
		free(size);
	}
	char *trunc = blob_s3_xml_value(body, len, "IsTruncated");
	if (trunc && strcmp(trunc, "true") == 0) {
		char *tok = blob_s3_xml_value(body, len, "NextContinuationToken");
		if (tok == NULL || tok[0] == '\0' || strlen(tok) > 1024) {
			free(tok);
			free(trunc);
			blob_s3_list_clear(out);
			return err_set(errp, ERR_UNAVAILABLE,
				       "store: a truncated list answer without a usable token");
		}
		out->next_token = tok;
	}
	free(trunc);
	return 0;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

int blob_s3_parse_credentials(const char *text, char **access, char **secret, struct err **errp)
{
	*access = *secret = NULL;
	char *copy = xstrdup(text);
	char *lines[2] = {NULL, NULL};
	size_t n_plain = 0;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *l = trim(line);
		if (l[0] == '\0' || l[0] == '#' || l[0] == '[')
			continue;
		char *eq = strchr(l, '=');
		if (eq) {
			*eq = '\0';
			char *k = trim(l), *v = trim(eq + 1);
			if (strcasecmp(k, "aws_access_key_id") == 0) {
				free(*access);
				*access = xstrdup(v);
			} else if (strcasecmp(k, "aws_secret_access_key") == 0) {
				free(*secret);
				*secret = xstrdup(v);
			}
		} else if (n_plain < 2) {
			lines[n_plain++] = l;
		}
	}
	if (*access == NULL && *secret == NULL && n_plain == 2) {
		*access = xstrdup(lines[0]);
		*secret = xstrdup(lines[1]);
	}
	free(copy);
	bool ok = *access && *secret && (*access)[0] && (*secret)[0] && !strchr(*access, ':');
	for (const char *c = ok ? *access : ""; *c; c++)
		ok = ok && (unsigned char)*c > ' ' && (unsigned char)*c < 127;
	for (const char *c = ok ? *secret : ""; *c; c++)
		ok = ok && (unsigned char)*c > ' ' && (unsigned char)*c < 127;
	if (!ok) {
		free(*access);
		free(*secret);
		*access = *secret = NULL;
		return err_set(errp, ERR_BAD_REQUEST,
			       "store: credentials: want two lines (access key, secret) or "
			       "aws_access_key_id= and aws_secret_access_key=");
	}
	return 0;
}

/* ---- credentials ---- */

static int load_credentials(struct s3_store *ss, struct err **errp)
{
	char *access = NULL, *secret = NULL;
	if (ss->cred_file && ss->cred_file[0]) {
		int fd = open(ss->cred_file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return err_set(errp, ERR_INTERNAL, "store: credentials file %s: %s",
				       ss->cred_file, strerror(errno));
		char buf[S3_CRED_MAX + 1];
		ssize_t n = read(fd, buf, S3_CRED_MAX + 1);
		close(fd);
		if (n < 0 || n > S3_CRED_MAX)
			return err_set(errp, ERR_INTERNAL,
				       "store: credentials file %s: unreadable or over %d bytes",
				       ss->cred_file, S3_CRED_MAX);
		buf[n] = '\0';
		if (blob_s3_parse_credentials(buf, &access, &secret, errp) < 0) {
			err_wrap(errp, "%s", ss->cred_file);
			return -1;
		}
	} else {
		const char *a = getenv("AWS_ACCESS_KEY_ID"), *s = getenv("AWS_SECRET_ACCESS_KEY");
		if (a == NULL || s == NULL || !a[0] || !s[0] || strchr(a, ':'))
			return err_set(errp, ERR_BAD_REQUEST,
				       "store: no credentials: set --store-credentials-file or "
				       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
		access = xstrdup(a);
		secret = xstrdup(s);
	}
	free(ss->userpwd);
	ss->userpwd = xasprintf("%s:%s", access, secret);
	explicit_bzero(secret, strlen(secret));
	free(access);
	free(secret);
	return 0;
}

/* ---- ops ---- */

static void request_clear(struct s3_op *op)
{
	if (op->easy) {
		curl_loop_remove(op->ss->loop, op->easy);
		curl_easy_cleanup(op->easy);
		op->easy = NULL;
	}
	curl_slist_free_all(op->headers);
	op->headers = NULL;
	free(op->post);
	op->post = NULL;
	free(op->answer);
	op->answer = NULL;
	op->answer_len = 0;
	op->answer_over = false;
	free(op->etag);
	op->etag = NULL;
	op->status = 0;
}

static void op_free(struct s3_op *op)
{
	LIST_REMOVE(op, link);
	request_clear(op);
	if (op->timer)
		event_free(op->timer);
	if (op->fill_ev)
		event_free(op->fill_ev);
	if (op->io_fd >= 0)
		close(op->io_fd);
	free(op->key);
	free(op->part);
	free(op->upload_id);
	for (int i = 0; i < op->part_no && op->etags; i++)
		free(op->etags[i]);
	free(op->etags);
	free(op->list_prefix);
	free(op->token);
	blob_s3_list_clear(&op->list);
	err_free(op->err);
	free(op);
}

static void finish(struct s3_op *op)
{
	struct blob_result r = {.error = op->err,
				.bytes = op->bytes,
				.entries = op->list.entries,
				.n_entries = op->list.n,
				.next_token = op->list.next_token};
	op->cb(&r, op->arg);
	op_free(op);
}

/* op failed with its err set: abort a multipart upload first. */
static void fail(struct s3_op *op)
{
	if (op->kind == SK_PUT && op->upload_id && op->step != SS_ABORT) {
		op->step = SS_ABORT;
		op->attempt = 0;
		send_step(op);
		return;
	}
	finish(op);
}

static void early_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	fail(arg);
}

/* Fail op from the loop (never inside the call that made it). */
static void fail_soon(struct s3_op *op, struct err *e)
{
	err_give(&op->err, e);
	if (op->timer)
		event_free(op->timer);
	op->timer = evtimer_new(op->ss->s->base, early_cb, op);
	defer_event(op->timer);
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct s3_op *op = userdata;
	size_t n = size * nmemb;
	if (op->status == 0)
		curl_easy_getinfo(op->easy, CURLINFO_RESPONSE_CODE, &op->status);
	if (op->step == SS_GET && op->status / 100 == 2) {
		if (op->max_bytes && op->bytes + n > op->max_bytes) {
			err_give(&op->err, err_new(ERR_PAYLOAD_TOO_LARGE,
						   "store: object %s is over the cap of %llu bytes",
						   op->key, (unsigned long long)op->max_bytes));
			return 0;
		}
		op->sink_started = true;
		int rc;
		if (op->io_fd >= 0) {
			rc = 0;
			for (size_t off = 0; off < n;) {
				ssize_t w = write(op->io_fd, ptr + off, n - off);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0) {
					rc = -1;
					break;
				}
				off += (size_t)w;
			}
		} else {
			rc = op->write(op->io_arg, ptr, n);
		}
		if (rc < 0) {
			err_give(&op->err,
				 err_new(ERR_INTERNAL, "store: get %s: its sink failed", op->key));
			return 0;
		}
		op->bytes += n;
		return n;
	}
	if (n > S3_ANSWER_MAX - op->answer_len) {
		op->answer_over = true;
		return 0;
	}
	op->answer = xrealloc(op->answer, op->answer_len + n + 1);
	memcpy(op->answer + op->answer_len, ptr, n);
	op->answer_len += n;
	op->answer[op->answer_len] = '\0';
	return n;
}

static size_t header_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct s3_op *op = userdata;
	size_t n = size * nmemb;
	if (n > 6 && strncasecmp(ptr, "etag:", 5) == 0 && n < 512) {
		free(op->etag);
		char *v = xstrndup(ptr + 5, n - 5);
		char *t = trim(v);
		op->etag = xstrdup(t);
		free(v);
	}
	return n;
}

static size_t read_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct s3_op *op = userdata;
	size_t want = size * nitems, left = op->part_len - op->sent;
	size_t n = want < left ? want : left;
	memcpy(buf, op->part + op->sent, n);
	op->sent += n;
	return n;
}

static char *esc(CURL *e, const char *s)
{
	char *c = curl_easy_escape(e, s, 0);
	if (c == NULL)
		abort();
	char *r = xstrdup(c);
	curl_free(c);
	return r;
}

/* Start the request of op->step. */
static void send_step(struct s3_op *op)
{
	struct s3_store *ss = op->ss;
	request_clear(op);
	CURL *e = op->easy = curl_easy_init();
	if (e == NULL)
		abort();
	char *url = NULL;
	const char *base_obj = NULL;
	char *obj = xasprintf("%s/%s/%s", ss->endpoint, ss->bucket, op->key ? op->key : "");
	base_obj = obj;
	CURLcode rc = CURLE_OK;
	switch (op->step) {
	case SS_PUT_ONE:
	case SS_PART:
		if (op->step == SS_PART) {
			char *id = esc(e, op->upload_id);
			url = xasprintf("%s?partNumber=%d&uploadId=%s", base_obj, op->part_no + 1,
					id);
			free(id);
		} else {
			url = xstrdup(base_obj);
			op->headers = curl_slist_append(op->headers,
							"Content-Type: application/octet-stream");
		}
		op->sent = 0;
		rc |= curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		rc |= curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
		rc |= curl_easy_setopt(e, CURLOPT_READDATA, op);
		rc |= curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)op->part_len);
		break;
	case SS_CREATE:
		url = xasprintf("%s?uploads=", base_obj);
		op->post = xstrdup("");
		/* The object's type is given here, not by the XML of Complete. */
		op->headers =
		    curl_slist_append(op->headers, "Content-Type: application/octet-stream");
		break;
	case SS_COMPLETE: {
		char *id = esc(e, op->upload_id);
		url = xasprintf("%s?uploadId=%s", base_obj, id);
		free(id);
		op->headers = curl_slist_append(op->headers, "Content-Type: application/xml");
		size_t cap = 128 + (size_t)op->part_no * 600;
		char *x = xmalloc(cap);
		size_t len = (size_t)snprintf(x, cap, "<CompleteMultipartUpload>");
		for (int i = 0; i < op->part_no; i++)
			len += (size_t)snprintf(
			    x + len, cap - len,
			    "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i + 1,
			    op->etags[i]);
		snprintf(x + len, cap - len, "</CompleteMultipartUpload>");
		op->post = x;
		break;
	}
	case SS_ABORT: {
		char *id = esc(e, op->upload_id);
		url = xasprintf("%s?uploadId=%s", base_obj, id);
		free(id);
		rc |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
		break;
	}
	case SS_GET: url = xstrdup(base_obj); break;
	case SS_DEL:
		url = xstrdup(base_obj);
		rc |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
		break;
	case SS_LIST: {
		/* Sorted names: SigV4's canonical query. */
		char *full = xasprintf("%s%s", ss->prefix, op->list_prefix);
		char *p = esc(e, full);
		free(full);
		char *t = op->token ? esc(e, op->token) : NULL;
		url = xasprintf("%s/%s?%s%s%slist-type=2&max-keys=%zu&prefix=%s", ss->endpoint,
				ss->bucket, t ? "continuation-token=" : "", t ? t : "",
				t ? "&" : "", op->max_keys, p);
		free(p);
		free(t);
		break;
	}
	case SS_FILL: abort();
	}
	free(obj);
	if (op->post) {
		rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, op->post);
		rc |=
		    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(op->post));
	}
	op->headers = curl_slist_append(op->headers, "Expect:");
	op->headers = curl_slist_append(op->headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	rc |= curl_easy_setopt(e, CURLOPT_URL, url);
	free(url);
	rc |= curl_loop_http_only(e);
	rc |= curl_easy_setopt(e, CURLOPT_PROXY, "");
	rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	if (op->step == SS_GET) {
		/* A get is one request however large the object: its deadline
		 * is on progress (under 1 KiB/s for the timeout), not on the
		 * whole transfer, or a big snapshot could never be read. */
		long secs = (long)(ss->timeout_ms / 1000);
		rc |= curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
		rc |= curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, secs > 0 ? secs : 1L);
	} else {
		rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ss->timeout_ms);
	}
	rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	rc |= curl_easy_setopt(e, CURLOPT_AWS_SIGV4, ss->sigv4);
	rc |= curl_easy_setopt(e, CURLOPT_USERPWD, ss->userpwd);
	rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, op->headers);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, op);
	rc |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	rc |= curl_easy_setopt(e, CURLOPT_HEADERDATA, op);
	rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, op);
	if (rc != CURLE_OK || curl_loop_add(ss->loop, e) < 0) {
		curl_easy_cleanup(e);
		op->easy = NULL;
		fail_soon(op, err_new(ERR_INTERNAL, "store: curl refused the request"));
	}
}

static const char *step_name(enum s3_step st)
{
	switch (st) {
	case SS_PUT_ONE: return "put";
	case SS_CREATE: return "put (create multipart upload)";
	case SS_PART: return "put (upload part)";
	case SS_COMPLETE: return "put (complete multipart upload)";
	case SS_ABORT: return "put (abort multipart upload)";
	case SS_GET: return "get";
	case SS_LIST: return "list";
	case SS_DEL: return "delete";
	case SS_FILL: break;
	}
	return "put";
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	send_step(arg);
}

/* The error the service said, or the status. */
static struct err *answer_err(struct s3_op *op, int tries)
{
	char *code = op->answer ? blob_s3_xml_value(op->answer, op->answer_len, "Code") : NULL;
	char *msg = op->answer ? blob_s3_xml_value(op->answer, op->answer_len, "Message") : NULL;
	enum err_code ec = op->status == 404   ? ERR_NOT_FOUND
			   : op->status == 403 ? ERR_FORBIDDEN
					       : ERR_UNAVAILABLE;
	char after[48] = "";
	if (tries > 1)
		snprintf(after, sizeof(after), " (after %d attempts)", tries);
	struct err *e = err_new(ec, "store: %s %s: HTTP %ld%s%s%s%s%s", step_name(op->step),
				op->key ? op->key : "", op->status, code ? " " : "",
				code ? code : "", msg ? ": " : "", msg ? msg : "", after);
	free(code);
	free(msg);
	return e;
}

static void after_put_part(struct s3_op *op);

/* An ETag goes back into the XML of CompleteMultipartUpload: printable,
 * nothing that could close or open markup there. */
static bool etag_valid(const char *t)
{
	if (t[0] == '\0')
		return false;
	for (; *t; t++)
		if ((unsigned char)*t < 0x20 || (unsigned char)*t > 0x7e || *t == '<' ||
		    *t == '>' || *t == '&')
			return false;
	return true;
}

static void transfer_done(CURL *easy, CURLcode res, void *arg)
{
	(void)arg;
	struct s3_op *op = NULL;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&op);
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &op->status);
	/* curl_loop has taken the handle out of the multi already. */
	curl_easy_cleanup(op->easy);
	op->easy = NULL;
	struct s3_store *ss = op->ss;
	if (op->err) { /* a cap or a sink ended it */
		fail(op);
		return;
	}
	if (op->answer_over) { /* not worth a retry: it would be as large again */
		err_give(&op->err,
			 err_new(ERR_UNAVAILABLE,
				 "store: %s %s: the answer is larger than the cap of %d bytes",
				 step_name(op->step), op->key ? op->key : "", S3_ANSWER_MAX));
		fail(op);
		return;
	}
	bool transient = res != CURLE_OK || op->status >= 500 || op->status == 429;
	if (transient && op->attempt < ss->retries && !(op->step == SS_GET && op->sink_started)) {
		int64_t ms = 250LL << (op->attempt < 5 ? op->attempt : 5);
		op->attempt++;
		struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
		if (op->timer)
			event_free(op->timer);
		op->timer = evtimer_new(ss->s->base, retry_cb, op);
		evtimer_add(op->timer, &tv);
		return;
	}
	if (res != CURLE_OK) {
		const char *why = res == CURLE_COULDNT_CONNECT ? "unreachable (connection refused)"
				  : res == CURLE_OPERATION_TIMEDOUT
				      ? "no answer within the deadline"
				      : curl_easy_strerror(res);
		char after[48] = "";
		if (op->attempt > 0)
			snprintf(after, sizeof(after), " (after %d attempts)", op->attempt + 1);
		err_give(&op->err,
			 err_new(ERR_UNAVAILABLE, "store: %s %s: %s%s", step_name(op->step),
				 op->key ? op->key : "", why, after));
		fail(op);
		return;
	}
	int tries = op->attempt + 1;
	op->attempt = 0;
	long st = op->status;
	switch (op->step) {
	case SS_PUT_ONE:
		if (st != 200)
			break;
		op->bytes = op->part_len;
		finish(op);
		return;
	case SS_CREATE:
		if (st != 200)
			break;
		op->upload_id =
		    op->answer ? blob_s3_xml_value(op->answer, op->answer_len, "UploadId") : NULL;
		if (op->upload_id == NULL || op->upload_id[0] == '\0' ||
		    strlen(op->upload_id) > 1024) {
			free(op->upload_id);
			op->upload_id = NULL;
			err_give(&op->err,
				 err_new(ERR_UNAVAILABLE,
					 "store: put %s: no UploadId in the answer", op->key));
			fail(op);
			return;
		}
		op->step = SS_PART;
		send_step(op);
		return;
	case SS_PART:
		if (st != 200)
			break;
		if (op->etag == NULL || !etag_valid(op->etag)) {
			err_give(&op->err, err_new(ERR_UNAVAILABLE,
						   "store: put %s: no usable ETag for part %d",
						   op->key, op->part_no + 1));
			fail(op);
			return;
		}
		after_put_part(op);
		return;
	case SS_COMPLETE:
		/* A 200 may still carry an <Error> (S3 says so late). */
		if (st != 200 || (op->answer && strstr(op->answer, "<Error>")))
			break;
		finish(op);
		return;
	case SS_ABORT:
		finish(op); /* its own outcome does not matter: op->err says why */
		return;
	case SS_GET:
		if (st != 200)
			break;
		finish(op);
		return;
	case SS_DEL:
		if (st != 204 && st != 200 && st != 404)
			break;
		finish(op);
		return;
	case SS_LIST: {
		if (st != 200)
			break;
		if (op->answer_len == 0 ||
		    blob_s3_parse_list(op->answer, op->answer_len, ss->prefix, op->max_keys,
				       &op->list, &op->err) < 0) {
			if (op->err == NULL)
				err_give(&op->err,
					 err_new(ERR_UNAVAILABLE, "store: list: an empty answer"));
		}
		finish(op);
		return;
	}
	case SS_FILL: break;
	}
	err_give(&op->err, answer_err(op, tries));
	fail(op);
}

/* Part part_no went up: keep its ETag, then the next part or the end. */
static void after_put_part(struct s3_op *op)
{
	op->etags = xrealloc(op->etags, (size_t)(op->part_no + 1) * sizeof(*op->etags));
	op->etags[op->part_no++] = op->etag;
	op->etag = NULL;
	op->bytes += op->part_len;
	op->part_len = 0;
	if (op->eof) {
		op->step = SS_COMPLETE;
		send_step(op);
		return;
	}
	op->step = SS_FILL;
	defer_event(op->fill_ev);
}

/* One turn of reading the source into the part buffer. */
static void fill_turn(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct s3_op *op = arg;
	struct s3_store *ss = op->ss;
	size_t room = ss->part_size - op->part_len;
	size_t want = room < S3_FILL_CHUNK ? room : S3_FILL_CHUNK;
	ssize_t n;
	if (op->io_fd >= 0) {
		do
			n = read(op->io_fd, op->part + op->part_len, want);
		while (n < 0 && errno == EINTR);
	} else {
		n = op->read(op->io_arg, op->part + op->part_len, want);
		if (n == BLOB_READ_AGAIN) {
			op->parked = true;
			return;
		}
	}
	if (n < 0 || (size_t)n > want) {
		err_give(&op->err,
			 err_new(ERR_INTERNAL, "store: put %s: its source failed", op->key));
		fail(op);
		return;
	}
	op->part_len += (size_t)n;
	if (n == 0)
		op->eof = true;
	if (!op->eof && op->part_len < ss->part_size) {
		defer_event(op->fill_ev);
		return;
	}
	if (op->upload_id == NULL && op->part_no == 0 && op->eof) {
		op->step = SS_PUT_ONE;
	} else if (op->upload_id == NULL) {
		op->step = SS_CREATE;
	} else if (op->part_len == 0) { /* the source ended on a part boundary */
		op->step = SS_COMPLETE;
	} else if (op->part_no >= S3_MAX_PARTS) {
		err_give(&op->err, err_new(ERR_PAYLOAD_TOO_LARGE, "store: put %s: over %d parts",
					   op->key, S3_MAX_PARTS));
		fail(op);
		return;
	} else {
		op->step = SS_PART;
	}
	send_step(op);
}

static struct s3_op *op_new(struct blobstore *s, enum s3_kind kind, const char *key,
			    blob_done_cb cb, void *arg)
{
	struct s3_store *ss = s->impl;
	struct s3_op *op = xmalloc(sizeof(*op));
	*op = (struct s3_op){.base = {.s = s},
			     .ss = ss,
			     .kind = kind,
			     .key = key ? xasprintf("%s%s", ss->prefix, key) : NULL,
			     .io_fd = -1,
			     .cb = cb,
			     .arg = arg};
	LIST_INSERT_HEAD(&ss->ops, op, link);
	return op;
}

static bool take_fd(struct s3_op *op, int fd)
{
	op->io_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (op->io_fd < 0) {
		fail_soon(op, err_new(ERR_INTERNAL, "store: bad fd: %s", strerror(errno)));
		return false;
	}
	return true;
}

static struct blob_op *s3_put(struct blobstore *s, const char *key, const struct blob_source *src,
			      blob_done_cb cb, void *arg)
{
	struct s3_op *op = op_new(s, SK_PUT, key, cb, arg);
	op->step = SS_FILL;
	op->read = src->read;
	op->io_arg = src->arg;
	if (src->read == NULL && !take_fd(op, src->fd))
		return &op->base;
	op->part = xmalloc(op->ss->part_size);
	op->fill_ev = evtimer_new(s->base, fill_turn, op);
	defer_event(op->fill_ev);
	return &op->base;
}

static void start_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	send_step(arg);
}

/* Send op's first request from the loop. */
static void start_soon(struct s3_op *op)
{
	if (op->timer)
		event_free(op->timer);
	op->timer = evtimer_new(op->ss->s->base, start_cb, op);
	defer_event(op->timer);
}

static struct blob_op *s3_get(struct blobstore *s, const char *key, const struct blob_sink *sink,
			      blob_done_cb cb, void *arg)
{
	struct s3_op *op = op_new(s, SK_GET, key, cb, arg);
	op->step = SS_GET;
	op->write = sink->write;
	op->io_arg = sink->arg;
	op->max_bytes = sink->max_bytes;
	if (sink->write == NULL && !take_fd(op, sink->fd))
		return &op->base;
	start_soon(op);
	return &op->base;
}

static struct blob_op *s3_list(struct blobstore *s, const char *prefix, const char *token,
			       size_t max_keys, blob_done_cb cb, void *arg)
{
	struct s3_op *op = op_new(s, SK_LIST, NULL, cb, arg);
	op->step = SS_LIST;
	op->list_prefix = xstrdup(prefix);
	op->token = token ? xstrdup(token) : NULL;
	op->max_keys = max_keys;
	start_soon(op);
	return &op->base;
}

static struct blob_op *s3_del(struct blobstore *s, const char *key, blob_done_cb cb, void *arg)
{
	struct s3_op *op = op_new(s, SK_DEL, key, cb, arg);
	op->step = SS_DEL;
	start_soon(op);
	return &op->base;
}

/* A cancelled multipart upload is aborted by a request of its own, which
 * nobody waits for: it is owned by the store and freed when it ends. */
static void orphan_done(const struct blob_result *r, void *arg)
{
	(void)r;
	(void)arg;
}

static void s3_resume(struct blob_op *bop)
{
	struct s3_op *op = (struct s3_op *)bop;
	if (op->parked) {
		op->parked = false;
		defer_event(op->fill_ev);
	}
}

static void s3_cancel(struct blob_op *bop)
{
	struct s3_op *op = (struct s3_op *)bop;
	if (op->kind == SK_PUT && op->upload_id && op->step != SS_ABORT) {
		request_clear(op);
		if (op->timer)
			event_del(op->timer);
		if (op->fill_ev)
			event_del(op->fill_ev);
		op->parked = false;
		op->cb = orphan_done;
		op->step = SS_ABORT;
		op->attempt = op->ss->retries; /* one try */
		send_step(op);
		return;
	}
	if (op->kind == SK_PUT && op->step == SS_ABORT) {
		op->cb = orphan_done;
		return;
	}
	op_free(op);
}

static void s3_free(struct blobstore *s)
{
	struct s3_store *ss = s->impl;
	struct s3_op *op;
	while ((op = LIST_FIRST(&ss->ops)) != NULL)
		op_free(op);
	curl_loop_free(ss->loop);
	free(ss->endpoint);
	free(ss->bucket);
	free(ss->prefix);
	free(ss->region);
	free(ss->cred_file);
	if (ss->userpwd)
		explicit_bzero(ss->userpwd, strlen(ss->userpwd));
	free(ss->userpwd);
	free(ss->sigv4);
	free(ss);
}

static int s3_reload(struct blobstore *s, struct err **errp)
{
	return load_credentials(s->impl, errp);
}

static size_t s3_count(const struct blobstore *s)
{
	const struct s3_store *ds = s->impl;
	size_t n = 0;
	for (const struct s3_op *op = LIST_FIRST(&ds->ops); op; op = LIST_NEXT(op, link))
		n++;
	return n;
}

static const struct blob_backend s3_backend = {
    .put = s3_put,
    .get = s3_get,
    .list = s3_list,
    .del = s3_del,
    .cancel = s3_cancel,
    .resume = s3_resume,
    .free = s3_free,
    .count = s3_count,
    .reload = s3_reload,
};

static bool region_valid(const char *r)
{
	size_t n = strlen(r);
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)r[i]) || isdigit((unsigned char)r[i]) || r[i] == '-'))
			return false;
	return true;
}

int blobstore_s3_check_endpoint(const char *ep, const char *region, struct err **errp)
{
	if (ep == NULL || ep[0] == '\0')
		return err_set(errp, ERR_BAD_REQUEST,
			       "store: an s3:// store needs --store-endpoint (http://HOST:PORT)");
	if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)
		return err_set(errp, ERR_BAD_REQUEST,
			       "store: --store-endpoint must be an http:// or https:// URL");
	if (strlen(ep) > 512 || strchr(ep + 8, '?') || strchr(ep, '#') || strchr(ep, '@'))
		return err_set(errp, ERR_BAD_REQUEST,
			       "store: --store-endpoint is scheme://host[:port][/path] only");
	if (region && region[0] && !region_valid(region))
		return err_set(errp, ERR_BAD_REQUEST, "store: bad region %s (a-z, 0-9, '-')",
			       region);
	return 0;
}

int blobstore_s3_open(struct blobstore *s, const struct blob_url *u,
		      const struct blobstore_options *o, struct err **errp)
{
	const char *ep = o->endpoint;
	const char *region = o->region && o->region[0] ? o->region : "us-east-1";
	if (blobstore_s3_check_endpoint(ep, region, errp) < 0)
		return -1;
	size_t part = o->part_size ? o->part_size : 8 * 1024 * 1024;
	if (part < 5 * 1024 * 1024 || part > 512 * 1024 * 1024)
		return err_set(errp, ERR_BAD_REQUEST, "store: the part size is 5 MiB to 512 MiB");
	struct s3_store *ss = xmalloc(sizeof(*ss));
	*ss = (struct s3_store){.s = s,
				.endpoint = xstrdup(ep),
				.bucket = xstrdup(u->bucket),
				.prefix = xstrdup(u->prefix),
				.region = xstrdup(region),
				.cred_file =
				    o->credentials_file ? xstrdup(o->credentials_file) : NULL,
				.sigv4 = xasprintf("aws:amz:%s:s3", region),
				.timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 60000,
				.retries = o->retries > 0 ? o->retries : 4,
				.part_size = part};
	size_t n = strlen(ss->endpoint);
	while (n > 0 && ss->endpoint[n - 1] == '/')
		ss->endpoint[--n] = '\0';
	LIST_INIT(&ss->ops);
	s->impl = ss;
	s->be = &s3_backend;
	if (load_credentials(ss, errp) < 0) {
		ss->loop = NULL;
		free(ss->endpoint);
		free(ss->bucket);
		free(ss->prefix);
		free(ss->region);
		free(ss->cred_file);
		free(ss->sigv4);
		free(ss);
		s->impl = NULL;
		return -1;
	}
	ss->loop = curl_loop_new(s->base, transfer_done, ss);
	s->describe = xasprintf("s3://%s/%s", ss->bucket, ss->prefix);
	return 0;
}
