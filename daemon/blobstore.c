/* blobstore.c: the --store URL, key checks and the dispatch to a backend
 * (blobstore.h). */
#include "blobstore_internal.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

static bool seg_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

/* Segments of [A-Za-z0-9._-], none empty, none starting with '.'; a
 * trailing '/' allowed when trailing_slash. */
static bool path_valid(const char *p, bool trailing_slash)
{
	size_t n = strlen(p);
	if (n > BLOB_KEY_MAX)
		return false;
	bool seg_start = true;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (c == '/') {
			if (seg_start)
				return false; /* empty segment: leading '/' or "//" */
			seg_start = true;
			continue;
		}
		if (!seg_char(c) || (seg_start && c == '.'))
			return false;
		seg_start = false;
	}
	return !seg_start || (trailing_slash && n > 0);
}

bool blobstore_key_valid(const char *key)
{
	return key != NULL && key[0] != '\0' && path_valid(key, false);
}

bool blobstore_prefix_valid(const char *prefix)
{
	return prefix != NULL && (prefix[0] == '\0' || path_valid(prefix, true));
}

void blob_url_clear(struct blob_url *u)
{
	free(u->path);
	free(u->bucket);
	free(u->prefix);
	*u = (struct blob_url){0};
}

/* An S3 bucket name: 3..63 of [a-z0-9.-], starting and ending with a
 * letter or digit (the AWS rule, which also keeps it safe in a path). */
static bool bucket_valid(const char *b, size_t n)
{
	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
			return false;
	}
	return b[0] != '.' && b[0] != '-' && b[n - 1] != '.' && b[n - 1] != '-';
}

int blob_url_parse(const char *url, struct blob_url *out, struct err **errp)
{
	*out = (struct blob_url){0};
	if (url == NULL || url[0] == '\0')
		return err_set(errp, ERR_BAD_REQUEST,
			       "store: empty URL (dir:PATH or s3://bucket/prefix)");
	if (strncmp(url, "dir:", 4) == 0) {
		const char *p = url + 4;
		if (p[0] != '/')
			return err_set(errp, ERR_BAD_REQUEST,
				       "store: dir:PATH needs an absolute path");
		if (strlen(p) > 1024)
			return err_set(errp, ERR_BAD_REQUEST, "store: the path is too long");
		out->kind = BLOB_DIR;
		out->path = xstrdup(p);
		size_t n = strlen(out->path);
		while (n > 1 && out->path[n - 1] == '/')
			out->path[--n] = '\0';
		return 0;
	}
	if (strncmp(url, "s3://", 5) == 0) {
		const char *b = url + 5;
		const char *slash = strchr(b, '/');
		size_t bn = slash ? (size_t)(slash - b) : strlen(b);
		if (!bucket_valid(b, bn))
			return err_set(
			    errp, ERR_BAD_REQUEST,
			    "store: bad bucket name in %s (3 to 63 of a-z, 0-9, '.', '-')", url);
		const char *pre = slash ? slash + 1 : "";
		size_t pn = strlen(pre);
		while (pn > 0 && pre[pn - 1] == '/')
			pn--;
		char *prefix = xmalloc(pn + 2);
		memcpy(prefix, pre, pn);
		prefix[pn] = '\0';
		if (pn > 0 && !blobstore_key_valid(prefix)) {
			free(prefix);
			return err_set(errp, ERR_BAD_REQUEST,
				       "store: bad prefix in %s (segments of A-Z a-z 0-9 . _ -)",
				       url);
		}
		if (pn > 0) {
			prefix[pn] = '/';
			prefix[pn + 1] = '\0';
		}
		out->kind = BLOB_S3;
		out->bucket = xstrndup(b, bn);
		out->prefix = prefix;
		return 0;
	}
	return err_set(errp, ERR_BAD_REQUEST,
		       "store: %s is neither dir:PATH nor s3://bucket/prefix", url);
}

struct blobstore *blobstore_new(struct event_base *base, const struct blobstore_options *o,
				struct err **errp)
{
	struct blob_url u;
	if (blob_url_parse(o->url, &u, errp) < 0)
		return NULL;
	struct blobstore *s = xmalloc(sizeof(*s));
	*s = (struct blobstore){.base = base};
	int rc = u.kind == BLOB_DIR ? blobstore_dir_open(s, &u, errp)
				    : blobstore_s3_open(s, &u, o, errp);
	blob_url_clear(&u);
	if (rc < 0) {
		free(s->describe);
		free(s);
		return NULL;
	}
	return s;
}

void blobstore_free(struct blobstore *s)
{
	if (s == NULL)
		return;
	s->be->free(s);
	free(s->describe);
	free(s);
}

int blobstore_reload(struct blobstore *s, struct err **errp)
{
	return s->be->reload ? s->be->reload(s, errp) : 0;
}

const char *blobstore_describe(const struct blobstore *s)
{
	return s->describe;
}

struct blob_op *blobstore_put(struct blobstore *s, const char *key, const struct blob_source *src,
			      blob_done_cb cb, void *arg, struct err **errp)
{
	if (!blobstore_key_valid(key)) {
		err_set(errp, ERR_BAD_REQUEST, "store: bad object key");
		return NULL;
	}
	if (src == NULL || (src->fd < 0 && src->read == NULL)) {
		err_set(errp, ERR_INTERNAL, "store: a put needs a source");
		return NULL;
	}
	return s->be->put(s, key, src, cb, arg);
}

struct blob_op *blobstore_get(struct blobstore *s, const char *key, const struct blob_sink *sink,
			      blob_done_cb cb, void *arg, struct err **errp)
{
	if (!blobstore_key_valid(key)) {
		err_set(errp, ERR_BAD_REQUEST, "store: bad object key");
		return NULL;
	}
	if (sink == NULL || (sink->fd < 0 && sink->write == NULL)) {
		err_set(errp, ERR_INTERNAL, "store: a get needs a sink");
		return NULL;
	}
	return s->be->get(s, key, sink, cb, arg);
}

struct blob_op *blobstore_list(struct blobstore *s, const char *prefix, const char *token,
			       size_t max_keys, blob_done_cb cb, void *arg, struct err **errp)
{
	if (!blobstore_prefix_valid(prefix ? prefix : "")) {
		err_set(errp, ERR_BAD_REQUEST, "store: bad list prefix");
		return NULL;
	}
	if (max_keys == 0 || max_keys > BLOB_LIST_MAX) {
		err_set(errp, ERR_BAD_REQUEST, "store: a list page is 1 to %d keys", BLOB_LIST_MAX);
		return NULL;
	}
	if (token && (strlen(token) == 0 || strlen(token) > 1024)) {
		err_set(errp, ERR_BAD_REQUEST, "store: bad list token");
		return NULL;
	}
	return s->be->list(s, prefix ? prefix : "", token, max_keys, cb, arg);
}

struct blob_op *blobstore_delete(struct blobstore *s, const char *key, blob_done_cb cb, void *arg,
				 struct err **errp)
{
	if (!blobstore_key_valid(key)) {
		err_set(errp, ERR_BAD_REQUEST, "store: bad object key");
		return NULL;
	}
	return s->be->del(s, key, cb, arg);
}

size_t blobstore_ops(const struct blobstore *s)
{
	return s->be->count(s);
}

void blob_resume(struct blob_op *op)
{
	if (op)
		op->s->be->resume(op);
}

void blob_cancel(struct blob_op *op)
{
	if (op)
		op->s->be->cancel(op);
}

int blobstore_check_config(const char *url, const char *endpoint, const char *region,
			   struct err **errp)
{
	if (url == NULL || url[0] == '\0')
		return 0;
	struct blob_url u;
	if (blob_url_parse(url, &u, errp) < 0)
		return -1;
	int rc = u.kind == BLOB_S3 ? blobstore_s3_check_endpoint(endpoint, region, errp) : 0;
	blob_url_clear(&u);
	return rc;
}
