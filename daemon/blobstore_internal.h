/* blobstore_internal.h: what blobstore.c (the URL, the keys, the dispatch)
 * shares with its two backends, blobstore_dir.c and blobstore_s3.c, and
 * with the unit tests. */
#ifndef CI_BLOBSTORE_INTERNAL_H
#define CI_BLOBSTORE_INTERNAL_H

#include "blobstore.h"

enum blob_kind { BLOB_DIR, BLOB_S3 };

/* A parsed --store URL. Strings owned (blob_url_clear). */
struct blob_url {
	enum blob_kind kind;
	char *path;   /* dir: the directory */
	char *bucket; /* s3 */
	char *prefix; /* s3: "" or "a/b/" (always ends in '/' when not empty) */
};

int blob_url_parse(const char *url, struct blob_url *out, struct err **errp);
void blob_url_clear(struct blob_url *u);

/* Every backend op starts with this, so blob_cancel finds its backend. */
struct blob_op {
	struct blobstore *s;
};

struct blob_backend {
	struct blob_op *(*put)(struct blobstore *s, const char *key, const struct blob_source *src,
			       blob_done_cb cb, void *arg);
	struct blob_op *(*get)(struct blobstore *s, const char *key, const struct blob_sink *sink,
			       blob_done_cb cb, void *arg);
	struct blob_op *(*list)(struct blobstore *s, const char *prefix, const char *token,
				size_t max_keys, blob_done_cb cb, void *arg);
	struct blob_op *(*del)(struct blobstore *s, const char *key, blob_done_cb cb, void *arg);
	void (*cancel)(struct blob_op *op);
	void (*resume)(struct blob_op *op);
	void (*free)(struct blobstore *s);
	size_t (*count)(const struct blobstore *s);
	int (*reload)(struct blobstore *s, struct err **errp);
};

struct blobstore {
	const struct blob_backend *be;
	struct event_base *base;
	char *describe;
	void *impl;
};

/* Each backend fills s->be and s->impl, or returns -1. */
int blobstore_dir_open(struct blobstore *s, const struct blob_url *u, struct err **errp);
int blobstore_s3_open(struct blobstore *s, const struct blob_url *u,
		      const struct blobstore_options *o, struct err **errp);

int blobstore_s3_check_endpoint(const char *ep, const char *region, struct err **errp);

/* The S3 pieces the tests reach: a ListObjectsV2 answer (body, len) into
 * keys (with the store's prefix stripped; a key outside it or invalid is
 * skipped), at most max entries. Caller frees with blob_s3_list_clear. */
struct blob_s3_list {
	struct blob_entry *entries;
	size_t n;
	char *next_token; /* NULL: the last page */
};
int blob_s3_parse_list(const char *body, size_t len, const char *prefix, size_t max,
		       struct blob_s3_list *out, struct err **errp);
void blob_s3_list_clear(struct blob_s3_list *l);

/* The credentials file: "ACCESS\nSECRET\n" or key=value lines
 * (aws_access_key_id / aws_secret_access_key, as in ~/.aws/credentials). */
int blob_s3_parse_credentials(const char *text, char **access, char **secret, struct err **errp);

/* Value of tag <name> in an S3 XML answer, unescaped, capped; NULL when
 * absent. Caller frees. */
char *blob_s3_xml_value(const char *body, size_t len, const char *name);

#endif
