/* test_blobstore.c: the object stores' pure parts (keys, the --store URL,
 * the ListObjectsV2 XML and the credentials file, hostile inputs
 * included) and the dir store on a temporary directory, run on a loop
 * (daemon/blobstore*.c). */
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blobstore_internal.h"
#include "unit.h"
#include "xalloc.h"

TEST(blobstore_keys)
{
	const char *good[] = {"a", "t/abc/snap-1.tar", "A.b_c-d/e", "x/y/z/0"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(blobstore_key_valid(good[i]));
	const char *bad[] = {"",       "/a",    "a/",  "a//b", "..",       "../a",
			     "a/../b", "a/./b", ".a",  "a/.b", "a b",      "a\\b",
			     "a\nb",   "a%2e",  "a?b", "a:b",  "\xc3\xa9", "a*"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!blobstore_key_valid(bad[i]));
	CHECK(!blobstore_key_valid(NULL));
	char long_key[BLOB_KEY_MAX + 2];
	memset(long_key, 'k', sizeof(long_key));
	long_key[BLOB_KEY_MAX] = '\0';
	CHECK(blobstore_key_valid(long_key));
	long_key[BLOB_KEY_MAX] = 'k';
	long_key[BLOB_KEY_MAX + 1] = '\0';
	CHECK(!blobstore_key_valid(long_key));
	CHECK(blobstore_prefix_valid(""));
	CHECK(blobstore_prefix_valid("t/"));
	CHECK(blobstore_prefix_valid("t/ab"));
	CHECK(!blobstore_prefix_valid("/"));
	CHECK(!blobstore_prefix_valid("../"));
	CHECK(!blobstore_prefix_valid("t//"));
}

TEST(blobstore_url_parse)
{
	struct blob_url u;
	struct err *e = NULL;
	CHECK(blob_url_parse("dir:/var/lib/ci/store//", &u, &e) == 0);
	CHECK(u.kind == BLOB_DIR);
	CHECK_STR(u.path, "/var/lib/ci/store");
	blob_url_clear(&u);
	CHECK(blob_url_parse("s3://my-bucket", &u, &e) == 0);
	CHECK(u.kind == BLOB_S3);
	CHECK_STR(u.bucket, "my-bucket");
	CHECK_STR(u.prefix, "");
	blob_url_clear(&u);
	CHECK(blob_url_parse("s3://b.c1/ci/snaps/", &u, &e) == 0);
	CHECK_STR(u.bucket, "b.c1");
	CHECK_STR(u.prefix, "ci/snaps/");
	blob_url_clear(&u);
	CHECK(e == NULL);
	const char *bad[] = {"",
			     "dir:",
			     "dir:relative/path",
			     "s3://",
			     "s3://ab",
			     "s3://UPPER",
			     "s3://-bucket",
			     "s3://bucket-",
			     "s3://bu_cket",
			     "s3://bucket/../x",
			     "s3://bucket/a//b",
			     "s3://bucket/.hidden",
			     "s3://bucket/a b",
			     "http://bucket",
			     "file:///etc"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(blob_url_parse(bad[i], &u, &e) < 0);
		CHECK(e && e->code == ERR_BAD_REQUEST);
		err_free(e);
		e = NULL;
	}
	CHECK(blobstore_check_config("", "", "", &e) == 0);
	CHECK(blobstore_check_config("s3://bucket/p", "", "", &e) < 0);
	CHECK(e && strstr(e->message, "--store-endpoint"));
	err_free(e);
	e = NULL;
	CHECK(blobstore_check_config("s3://bucket/p", "ftp://x", "", &e) < 0);
	err_free(e);
	e = NULL;
	CHECK(blobstore_check_config("s3://bucket/p", "http://user@127.0.0.1:1", "", &e) < 0);
	err_free(e);
	e = NULL;
	CHECK(blobstore_check_config("s3://bucket/p", "http://127.0.0.1:9000", "EU WEST", &e) < 0);
	err_free(e);
	e = NULL;
	CHECK(blobstore_check_config("s3://bucket/p", "http://127.0.0.1:9000", "eu-west-1", &e) ==
	      0);
}

static const char list_page[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>snap</Name><Prefix>ci/</Prefix><KeyCount>3</KeyCount>"
    "<Contents><Key>ci/t/a.tar</Key><Size>10</Size><ETag>&quot;x&quot;</ETag></Contents>"
    "<Contents><Key>ci/t/b&amp;c</Key><Size>11</Size></Contents>"
    "<Contents><Key>ci/t/b.tar</Key><Size>12</Size></Contents>"
    "<IsTruncated>true</IsTruncated>"
    "<NextContinuationToken>tok&#x2b;/=</NextContinuationToken></ListBucketResult>";

TEST(blobstore_s3_list_parse)
{
	struct blob_s3_list l;
	struct err *e = NULL;
	CHECK(blob_s3_parse_list(list_page, strlen(list_page), "ci/", 10, &l, &e) == 0);
	/* "t/b&c" is not a valid key: skipped, not passed on */
	CHECK(l.n == 2);
	if (l.n == 2) {
		CHECK_STR(l.entries[0].key, "t/a.tar");
		CHECK(l.entries[0].size == 10);
		CHECK_STR(l.entries[1].key, "t/b.tar");
		CHECK(l.entries[1].size == 12);
	}
	CHECK_STR(l.next_token, "tok+/=");
	blob_s3_list_clear(&l);
	/* the cap on entries holds whatever the answer says */
	CHECK(blob_s3_parse_list(list_page, strlen(list_page), "ci/", 1, &l, &e) == 0);
	CHECK(l.n == 1);
	blob_s3_list_clear(&l);
	/* keys outside the store's prefix are not ours */
	CHECK(blob_s3_parse_list(list_page, strlen(list_page), "other/", 10, &l, &e) == 0);
	CHECK(l.n == 0);
	blob_s3_list_clear(&l);
	CHECK(e == NULL);
}

TEST(blobstore_s3_list_hostile)
{
	const char *bad[] = {
	    "",
	    "<Error><Code>AccessDenied</Code></Error>",
	    "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
	    "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>"
	    "</NextContinuationToken></ListBucketResult>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct blob_s3_list l;
		struct err *e = NULL;
		CHECK(blob_s3_parse_list(bad[i], strlen(bad[i]), "", 10, &l, &e) < 0);
		CHECK(e != NULL);
		err_free(e);
		CHECK(l.n == 0 && l.entries == NULL);
	}
	/* odd entries are skipped, not trusted */
	const char *odd[] = {
	    "<ListBucketResult><Contents><Key>../etc/passwd</Key><Size>1</Size></Contents>"
	    "<Contents><Key>/abs</Key><Size>1</Size></Contents>"
	    "<Contents><Key>a</Key><Size>-1</Size></Contents>"
	    "<Contents><Key>b</Key><Size>1x</Size></Contents>"
	    "<Contents><Key>c</Key></Contents>"
	    "<Contents><Key>d<Size>1</Size></Contents>"
	    "<Contents><Key>e</Key><Size>",
	    "<ListBucketResult><Contents><Key>&#0;x</Key><Size>1</Size></Contents>"
	    "<Contents><Key>&#x2f;etc</Key><Size>1</Size></Contents>"
	    "<Contents><Key>&#99999999999999999999;</Key><Size>1</Size></Contents>"
	    "<Contents><Key>&amp</Key><Size>1</Size></Contents><Contents>",
	};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		struct blob_s3_list l;
		struct err *e = NULL;
		CHECK(blob_s3_parse_list(odd[i], strlen(odd[i]), "", 10, &l, &e) == 0);
		CHECK(l.n == 0);
		blob_s3_list_clear(&l);
	}
	/* a long run of unclosed tags ends, and is bounded */
	size_t n = 1 << 20;
	char *big = xmalloc(n + 1);
	strcpy(big, "<ListBucketResult>");
	for (size_t off = strlen(big); off + 10 < n; off += 10)
		memcpy(big + off, "<Contents>", 10);
	big[n - 10] = '\0';
	struct blob_s3_list l;
	struct err *e = NULL;
	CHECK(blob_s3_parse_list(big, strlen(big), "", 1000, &l, &e) == 0);
	CHECK(l.n == 0);
	blob_s3_list_clear(&l);
	free(big);
	/* a value longer than the cap is not taken */
	char *v = blob_s3_xml_value("<UploadId>abc</UploadId>", 24, "UploadId");
	CHECK_STR(v, "abc");
	free(v);
	CHECK(blob_s3_xml_value("<UploadId>abc", 13, "UploadId") == NULL);
}

TEST(blobstore_credentials_parse)
{
	char *a, *s;
	struct err *e = NULL;
	CHECK(blob_s3_parse_credentials("AKID\nSECRET\n", &a, &s, &e) == 0);
	CHECK_STR(a, "AKID");
	CHECK_STR(s, "SECRET");
	free(a);
	free(s);
	CHECK(blob_s3_parse_credentials("[default]\naws_access_key_id = K1\n# c\n"
					"aws_secret_access_key=S/1+x\n",
					&a, &s, &e) == 0);
	CHECK_STR(a, "K1");
	CHECK_STR(s, "S/1+x");
	free(a);
	free(s);
	CHECK(e == NULL);
	const char *bad[] = {"",         "ONLYONE\n",
			     "A:B\nS\n", "aws_access_key_id=K\n",
			     "A\nS P\n", "aws_access_key_id=\naws_secret_access_key=S\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(blob_s3_parse_credentials(bad[i], &a, &s, &e) < 0);
		CHECK(a == NULL && s == NULL && e != NULL);
		err_free(e);
		e = NULL;
	}
}

/* ---- the dir store, on a loop ---- */

struct probe {
	struct event_base *base;
	int runs;
	int inside;
	int ran_inside;
	enum err_code code;
	bool failed;
	uint64_t bytes;
	size_t n;
	char keys[8][64];
	char token[64];
	char *got;
	size_t got_len;
	const char *src;
	size_t src_len, src_off;
	int again_every, calls, agains;
	struct event *resume;
	struct blob_op *op, *parked_op;
};

static void probe_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct probe *p = arg;
	blob_resume(p->op);
}

static void probe_done(const struct blob_result *r, void *arg)
{
	struct probe *p = arg;
	p->runs++;
	p->ran_inside += p->inside;
	p->failed = r->error != NULL;
	p->code = r->error ? r->error->code : ERR_INTERNAL;
	p->bytes = r->bytes;
	p->n = r->n_entries;
	for (size_t i = 0; i < r->n_entries && i < 8; i++)
		snprintf(p->keys[i], sizeof(p->keys[i]), "%s", r->entries[i].key);
	snprintf(p->token, sizeof(p->token), "%s", r->next_token ? r->next_token : "");
	event_base_loopbreak(p->base);
}

static ssize_t probe_read(void *arg, void *buf, size_t cap)
{
	struct probe *p = arg;
	if (p->again_every && ++p->calls % p->again_every == 0) {
		p->agains++;
		if (p->parked_op) /* the test cancels it instead of resuming */
			event_base_loopbreak(p->base);
		else {
			struct timeval soon = {0, 1000};
			evtimer_add(p->resume, &soon);
		}
		return BLOB_READ_AGAIN;
	}
	size_t n = p->src_len - p->src_off;
	n = n < cap ? n : cap;
	n = n < 1000 ? n : 1000; /* small pieces: many turns */
	memcpy(buf, p->src + p->src_off, n);
	p->src_off += n;
	return (ssize_t)n;
}

static int probe_write(void *arg, const void *buf, size_t len)
{
	struct probe *p = arg;
	p->got = xrealloc(p->got, p->got_len + len + 1);
	memcpy(p->got + p->got_len, buf, len);
	p->got_len += len;
	return 0;
}

static void run(struct probe *p)
{
	p->inside = 0;
	event_base_dispatch(p->base);
}

TEST(blobstore_dir_ops)
{
	char tmpl[] = "/tmp/ci-blob-XXXXXX";
	CHECK(mkdtemp(tmpl) != NULL);
	char *url = xasprintf("dir:%s/store", tmpl);
	struct event_base *base = event_base_new();
	struct blobstore_options o = {.url = url};
	struct err *e = NULL;
	struct blobstore *bs = blobstore_new(base, &o, &e);
	CHECK(bs != NULL);
	struct probe p = {.base = base, .src = "hello, store", .src_len = 12};
	struct blob_source src = {.fd = -1, .read = probe_read, .arg = &p};

	p.inside = 1;
	CHECK(blobstore_put(bs, "t/a", &src, probe_done, &p, &e) != NULL);
	CHECK(p.runs == 0);
	run(&p);
	CHECK(p.runs == 1 && p.ran_inside == 0 && !p.failed && p.bytes == 12);

	p.src_off = 0;
	CHECK(blobstore_put(bs, "t/b", &src, probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(!p.failed);

	struct blob_sink sink = {.fd = -1, .write = probe_write, .arg = &p};
	p.inside = 1;
	CHECK(blobstore_get(bs, "t/a", &sink, probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(!p.failed && p.got_len == 12 && memcmp(p.got, "hello, store", 12) == 0);
	CHECK(p.ran_inside == 0);

	CHECK(blobstore_list(bs, "t/", NULL, 1, probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(!p.failed && p.n == 1);
	CHECK_STR(p.keys[0], "t/a");
	CHECK_STR(p.token, "t/a");
	char tok[64];
	snprintf(tok, sizeof(tok), "%s", p.token);
	CHECK(blobstore_list(bs, "t/", tok, 1, probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(!p.failed && p.n == 1);
	CHECK_STR(p.keys[0], "t/b");
	CHECK_STR(p.token, "");

	CHECK(blobstore_delete(bs, "t/a", probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(!p.failed);
	CHECK(blobstore_get(bs, "t/a", &sink, probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(p.failed && p.code == ERR_NOT_FOUND);

	/* refused at the call, no callback */
	int runs = p.runs;
	CHECK(blobstore_put(bs, "../x", &src, probe_done, &p, &e) == NULL);
	CHECK(e && e->code == ERR_BAD_REQUEST);
	err_free(e);
	e = NULL;
	CHECK(blobstore_list(bs, "t/", NULL, 0, probe_done, &p, &e) == NULL);
	err_free(e);
	e = NULL;
	CHECK(p.runs == runs);

	/* a cancelled put: no callback, no object, no temporary file */
	p.src_off = 0;
	struct blob_op *op = blobstore_put(bs, "t/c", &src, probe_done, &p, &e);
	blob_cancel(op);
	/* a later op's callback comes after the cancelled one was cleaned */
	CHECK(blobstore_list(bs, "", NULL, 10, probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(p.runs == runs + 1 && p.n == 1);
	CHECK_STR(p.keys[0], "t/b");
	/* a source with nothing yet (BLOB_READ_AGAIN) is waited for, then
	 * pulled again after blob_resume */
	p.src_off = 0;
	p.again_every = 2;
	p.resume = evtimer_new(base, probe_resume, &p);
	p.op = blobstore_put(bs, "t/again", &src, probe_done, &p, &e);
	run(&p);
	CHECK(!p.failed && p.bytes == 12 && p.agains > 0);
	p.got_len = 0;
	CHECK(blobstore_get(bs, "t/again", &sink, probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(!p.failed && p.got_len == 12 && memcmp(p.got, "hello, store", 12) == 0);
	/* cancelled while it waits for its source: no callback, no object */
	runs = p.runs;
	p.src_off = 0;
	p.calls = 0;
	p.parked_op = p.op = blobstore_put(bs, "t/parked", &src, probe_done, &p, &e);
	run(&p); /* until the source said AGAIN */
	blob_cancel(p.op);
	p.parked_op = NULL;
	p.again_every = 0;
	CHECK(blobstore_list(bs, "t/p", NULL, 10, probe_done, &p, &e) != NULL);
	run(&p);
	CHECK(p.runs == runs + 1 && p.n == 0);
	runs = p.runs;
	event_free(p.resume);

	/* the store freed with an op in flight: no callback, no leak */
	p.src_off = 0;
	CHECK(blobstore_put(bs, "t/d", &src, probe_done, &p, &e) != NULL);
	blobstore_free(bs);
	CHECK(p.runs == runs);
	char *tmpdir = xasprintf("%s/store/.tmp", tmpl);
	char *cmd = xasprintf("test -z \"$(ls -A %s)\" && rm -rf %s", tmpdir, tmpl);
	CHECK(system(cmd) == 0);
	free(cmd);
	free(tmpdir);
	free(p.got);
	free(url);
	event_base_free(base);
}

TEST(blobstore_s3_credentials_reload)
{
	char path[] = "/tmp/ci-blob-cred-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "AK\nSK\n", 6) == 6);
	close(fd);
	struct event_base *base = event_base_new();
	struct blobstore_options o = {
	    .url = "s3://bucket/p", .endpoint = "http://127.0.0.1:1", .credentials_file = path};
	struct err *e = NULL;
	struct blobstore *bs = blobstore_new(base, &o, &e);
	CHECK(bs != NULL && e == NULL);
	CHECK_STR(blobstore_describe(bs), "s3://bucket/p/");
	/* a file that no longer parses: the reload says so (the old keys stay) */
	FILE *f = fopen(path, "w");
	fputs("only-one-line\n", f);
	fclose(f);
	CHECK(blobstore_reload(bs, &e) < 0);
	CHECK(e && strstr(e->message, path));
	err_free(e);
	e = NULL;
	f = fopen(path, "w");
	fputs("aws_access_key_id=A2\naws_secret_access_key=S2\n", f);
	fclose(f);
	CHECK(blobstore_reload(bs, &e) == 0);
	blobstore_free(bs);
	/* no file and no environment: refused at open */
	unlink(path);
	CHECK(blobstore_new(base, &o, &e) == NULL);
	CHECK(e && strstr(e->message, "credentials file"));
	err_free(e);
	event_base_free(base);
}
