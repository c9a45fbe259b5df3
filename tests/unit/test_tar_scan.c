/* test_tar_scan.c: the snapshot tar scanner (daemon/tar_scan.c) on archives
 * that Python's tarfile and GNU tar wrote, fed in pieces of every size, and
 * on hand-made hostile ones: each refused type and path, a bad checksum, a
 * size that lies, a cut at every offset, pax records that lie, bytes after
 * the end, the caps. */
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "tar_build.h"
#include "tar_scan.h"
#include "unit.h"

struct seen {
	struct tar_entry e[64];
	char *paths[64];
	size_t n;
	int fail_at; /* the callback fails on this entry (1-based); 0 never */
};

static int seen_fn(const struct tar_entry *e, void *arg, struct err **errp)
{
	struct seen *s = arg;
	if (s->fail_at > 0 && (size_t)s->fail_at == s->n + 1)
		return err_set(errp, ERR_CORRUPT, "the callback refused %s", e->path);
	if (s->n < 64) {
		s->e[s->n] = *e;
		s->paths[s->n] = xstrdup(e->path);
		s->e[s->n].path = s->paths[s->n];
		s->n++;
	}
	return 0;
}

static void seen_free(struct seen *s)
{
	for (size_t i = 0; i < s->n && i < 64; i++)
		free(s->paths[i]);
	s->n = 0;
}

/* Feed buf in pieces of `piece` bytes, then finish. 0 or -1 with *errp. */
static int scan(const void *buf, size_t len, size_t piece, uint64_t max_bytes, uint64_t max_entries,
		struct seen *s, struct err **errp)
{
	struct tar_scan *ts = tar_scan_new(max_bytes, max_entries, seen_fn, s);
	const unsigned char *p = buf;
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0; off += piece)
		rc = tar_scan_feed(ts, p + off, len - off < piece ? len - off : piece, errp);
	if (rc == 0)
		rc = tar_scan_finish(ts, errp);
	tar_scan_free(ts);
	return rc;
}

/* Scan and expect failure with code and a message containing what. */
static int refused(const struct tb *t, enum err_code code, const char *what)
{
	struct seen s = {0};
	AUTOERR struct err *e = NULL;
	int rc = scan(t->buf, t->len, 1 << 20, 0, 0, &s, &e);
	seen_free(&s);
	if (rc == 0) {
		fprintf(stderr, "  accepted, expected \"%s\"\n", what);
		return 0;
	}
	if (e == NULL || e->code != code || strstr(e->message, what) == NULL) {
		fprintf(stderr, "  error \"%s\", expected \"%s\"\n", e ? e->message : "(none)",
			what);
		return 0;
	}
	return 1;
}

static int accepted(const struct tb *t)
{
	struct seen s = {0};
	AUTOERR struct err *e = NULL;
	int rc = scan(t->buf, t->len, 1 << 20, 0, 0, &s, &e);
	seen_free(&s);
	if (rc != 0)
		fprintf(stderr, "  refused: %s\n", e->message);
	return rc == 0;
}

#define LONG_DIR "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
#define LONG_FILE \
	LONG_DIR "/ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff.txt"

/* What make_fixtures.sh put in both archives, in order. */
static void check_fixture_entries(const struct seen *s)
{
	static const struct {
		const char *path;
		bool dir;
		const char *content; /* NULL: 600 'b's */
		unsigned mode;
	} want[] = {
	    {LONG_DIR, true, "", 0755},   {LONG_FILE, false, "long\n", 0644},
	    {"out", true, "", 0755},      {"out/a.csv", false, "x,y\n1,2\n", 0644},
	    {"out/sub", true, "", 0755},  {"out/sub/b.txt", false, NULL, 0600},
	    {"top.txt", false, "", 0644}, {"\xc3\xbcn\xc3\xaf.txt", false, "caf\xc3\xa9\n", 0644},
	};
	CHECK(s->n == sizeof(want) / sizeof(want[0]));
	char bs[600];
	memset(bs, 'b', sizeof(bs));
	for (size_t i = 0; i < s->n && i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_STR(s->e[i].path, want[i].path);
		CHECK(s->e[i].dir == want[i].dir);
		CHECK(s->e[i].mode == want[i].mode);
		if (want[i].dir) {
			CHECK(s->e[i].size == 0);
			CHECK_STR(s->e[i].sha256, "");
			continue;
		}
		const char *c = want[i].content ? want[i].content : bs;
		size_t n = want[i].content ? strlen(c) : sizeof(bs);
		char h[65];
		digest_sha256_hex(c, n, h);
		CHECK(s->e[i].size == n);
		CHECK_STR(s->e[i].sha256, h);
	}
}

static void check_fixture(const char *name)
{
	size_t len = 0;
	unsigned char *buf = tb_fixture(name, &len);
	CHECK(buf != NULL && len == 10240);
	if (buf == NULL)
		return;
	char whole[65];
	digest_sha256_hex(buf, len, whole);
	static const size_t pieces[] = {1, 7, 511, 512, 513, 4096, 1 << 20};
	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		struct seen s = {0};
		AUTOERR struct err *e = NULL;
		struct tar_scan *ts = tar_scan_new(len, 8, seen_fn, &s);
		int rc = 0;
		for (size_t off = 0; off < len && rc == 0; off += pieces[k])
			rc = tar_scan_feed(ts, buf + off,
					   len - off < pieces[k] ? len - off : pieces[k], &e);
		CHECK(rc == 0);
		CHECK(tar_scan_finish(ts, &e) == 0);
		if (e != NULL)
			fprintf(stderr, "  %s, pieces of %zu: %s\n", name, pieces[k], e->message);
		check_fixture_entries(&s);
		char h[65];
		tar_scan_sha256(ts, h);
		CHECK_STR(h, whole);
		CHECK(tar_scan_bytes(ts) == len);
		CHECK(tar_scan_entries(ts) == 8);
		CHECK(tar_scan_files(ts) == 5);
		CHECK(tar_scan_content_bytes(ts) == 5 + 8 + 600 + 0 + 6);
		tar_scan_free(ts);
		seen_free(&s);
	}
	free(buf);
}

TEST(tar_scan_reads_pythons_pax_tar_in_any_pieces)
{
	check_fixture("pax.tar");
}

TEST(tar_scan_reads_gnu_tars_posix_format)
{
	check_fixture("gnu.tar");
}

/* Every cut before the end blocks are whole is refused, as truncated;
 * a cut in tarfile's zero padding after them is a whole tar. */
TEST(tar_scan_refuses_a_tar_cut_at_any_offset)
{
	size_t len = 0;
	unsigned char *buf = tb_fixture("pax.tar", &len);
	if (buf == NULL) {
		CHECK(0);
		return;
	}
	/* The end blocks: the first zero block at a header position. */
	size_t end = 0;
	{
		struct seen s = {0};
		struct tar_scan *ts = tar_scan_new(0, 0, seen_fn, &s);
		for (end = 0; end < len; end += 512) {
			AUTOERR struct err *e = NULL;
			tar_scan_feed(ts, buf + end, 512, &e);
			if (s.n == 8)
				break;
		}
		tar_scan_free(ts);
		seen_free(&s);
	}
	/* The last entry is a 6-byte file: its data block, then the ends. */
	end += 512 + 1024;
	CHECK(end < len);
	/* Every cut before the end; in the padding after it, a sample (each
	 * cut is a whole scan, and valgrind runs this too). */
	size_t bad = 0, ok = 0, tried_ok = 0;
	for (size_t cut = 0; cut <= len; cut = cut < end ? cut + 1 : cut + 17) {
		if (cut >= end)
			tried_ok++;
		struct seen s = {0};
		AUTOERR struct err *e = NULL;
		int rc = scan(buf, cut, 1 << 20, 0, 0, &s, &e);
		if (cut < end) {
			if (rc == 0 || e == NULL || e->code != ERR_BAD_REQUEST ||
			    strstr(e->message, "truncated") == NULL) {
				fprintf(stderr, "  cut at %zu: %s\n", cut,
					e ? e->message : "accepted");
				bad++;
			}
			CHECK(s.n <= 8);
		} else if (rc == 0 && s.n == 8) {
			ok++;
		} else {
			bad++;
		}
		seen_free(&s);
	}
	CHECK(bad == 0);
	CHECK(ok == tried_ok && ok > 10);
	free(buf);
}

TEST(tar_scan_refuses_every_other_entry_type)
{
	static const struct {
		char type;
		const char *what;
	} types[] = {
	    {'1', "a hard link"},     {'2', "a symlink"},       {'3', "a character device"},
	    {'4', "a block device"},  {'6', "a FIFO"},          {'7', "a contiguous file"},
	    {'L', "a GNU long name"}, {'K', "a GNU long name"}, {'S', "a GNU sparse file"},
	    {'D', "a GNU dump"},      {'V', "multi-volume"},    {'A', "an unknown entry type"},
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct tb t = {0};
		tb_file(&t, "a", "1", 0644);
		tb_header(&t, "b", types[i].type, 0, 0777);
		tb_end(&t);
		CHECK(refused(&t, ERR_BAD_REQUEST, types[i].what));
		CHECK(refused(&t, ERR_BAD_REQUEST, "at byte 1024"));
		tb_free(&t);
	}
	/* A global header is skipped, whatever it says. */
	struct tb t = {0};
	tb_header(&t, "pax_global_header", 'g', 20, 0644);
	tb_data(&t, "20 comment=hello!!\n", 20);
	tb_file(&t, "a", "1", 0644);
	tb_end(&t);
	CHECK(accepted(&t));
	tb_free(&t);
}

static void path_refused(const char *name, char type, const char *what)
{
	struct tb t = {0};
	tb_header(&t, name, type, 0, 0644);
	tb_end(&t);
	if (!refused(&t, ERR_BAD_REQUEST, what)) {
		fprintf(stderr, "  (the path \"%s\")\n", name);
		unit_failures_in_test++;
	}
	tb_free(&t);
	/* The same through a pax path. */
	tb_pax(&t, "path", name, strlen(name));
	tb_header(&t, "x", type, 0, 0644);
	tb_end(&t);
	if (!refused(&t, ERR_BAD_REQUEST, what)) {
		fprintf(stderr, "  (the pax path \"%s\")\n", name);
		unit_failures_in_test++;
	}
	tb_free(&t);
}

TEST(tar_scan_refuses_bad_paths)
{
	path_refused("../etc", '0', "'..'");
	path_refused("a/../../b", '0', "'..'");
	path_refused("..", '5', "'..'");
	path_refused("/etc/passwd", '0', "absolute");
	path_refused("./a", '0', "'.'");
	path_refused(".", '5', "'.'");
	path_refused("a//b", '0', "empty path component");
	path_refused("a/", '0', "empty path component"); /* only a directory may end in '/' */
	path_refused("a//", '5', "empty path component");
	path_refused("\xff\xfe", '0', "not UTF-8");
	path_refused("\xc0\xaf", '0', "not UTF-8"); /* an overlong '/' */

	/* An empty name. */
	struct tb t = {0};
	tb_header(&t, "", '0', 0, 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "an empty path"));
	tb_free(&t);

	/* A NUL inside a pax path. */
	tb_pax(&t, "path", "a\0b", 3);
	tb_header(&t, "x", '0', 0, 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "NUL"));
	tb_free(&t);

	/* 4096 bytes is the most. */
	char *p = xmalloc(4098);
	memset(p, 'a', 4097);
	for (size_t i = 100; i < 4096; i += 100)
		p[i] = '/';
	p[4096] = '\0';
	/* Its directories first, then the file. */
	struct tb ok = {0};
	for (size_t i = 100; i < 4096; i += 100) {
		tb_pax(&ok, "path", p, i);
		tb_header(&ok, "x", '5', 0, 0755);
	}
	tb_pax(&ok, "path", p, 4096);
	tb_header(&ok, "x", '0', 0, 0644);
	tb_end(&ok);
	CHECK(accepted(&ok));
	tb_free(&ok);
	p[4096] = 'a';
	p[4097] = '\0';
	tb_pax(&t, "path", p, 4097);
	tb_header(&t, "x", '0', 0, 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "a path of 4097 bytes"));
	tb_free(&t);
	free(p);

	/* A directory's one trailing '/' is dropped; a ustar prefix is joined. */
	tb_dir(&t, "d/");
	size_t at = tb_header(&t, "f", '0', 0, 0644);
	memcpy(t.buf + at + 345, "d", 2);
	tb_sum(t.buf + at);
	tb_end(&t);
	struct seen s = {0};
	AUTOERR struct err *e = NULL;
	CHECK(scan(t.buf, t.len, 100, 0, 0, &s, &e) == 0);
	CHECK(s.n == 2 && strcmp(s.e[0].path, "d") == 0 && strcmp(s.e[1].path, "d/f") == 0);
	seen_free(&s);
	tb_free(&t);
}

TEST(tar_scan_checks_the_order)
{
	struct tb t = {0};
	tb_file(&t, "b", "1", 0644);
	tb_file(&t, "a", "1", 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "out of order (or twice) (a)"));
	tb_free(&t);

	tb_file(&t, "a", "1", 0644);
	tb_file(&t, "a", "2", 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "out of order (or twice) (a)"));
	tb_free(&t);

	tb_dir(&t, "d");
	tb_dir(&t, "d");
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "twice"));
	tb_free(&t);

	tb_file(&t, "d/f", "1", 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "before its directory (d/f)"));
	tb_free(&t);

	tb_dir(&t, "a");
	tb_file(&t, "b/f", "1", 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "before its directory"));
	tb_free(&t);

	tb_file(&t, "a", "1", 0644);
	tb_file(&t, "a/f", "1", 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "under a regular file"));
	tb_free(&t);

	/* Depth-first: a directory's contents before a name that sorts after
	 * it bytewise only because '-' < '/'. Back up two levels, then on. */
	tb_dir(&t, "a");
	tb_dir(&t, "a/b");
	tb_file(&t, "a/b/c", "1", 0644);
	tb_file(&t, "a/c", "1", 0644);
	tb_file(&t, "a-b", "1", 0644);
	tb_dir(&t, "b");
	tb_file(&t, "b/x", "1", 0644);
	tb_end(&t);
	CHECK(accepted(&t));
	tb_free(&t);

	CHECK(tar_path_before("a", "a/x"));
	CHECK(tar_path_before("a/x", "a-b"));
	CHECK(tar_path_before("a/zzz", "a0"));
	CHECK(!tar_path_before("a", "a"));
	CHECK(!tar_path_before("b", "a/b"));
	CHECK(tar_path_before("ab/c", "abc"));
}

TEST(tar_scan_checks_the_header_fields)
{
	/* A byte of the name changed after the checksum was written. */
	struct tb t = {0};
	size_t at = tb_header(&t, "a", '0', 0, 0644);
	t.buf[at] = 'b';
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "checksum does not match, at byte 0"));
	tb_free(&t);

	/* GNU tar's own format (magic "ustar  \0") and v7 (none). */
	at = tb_header(&t, "a", '0', 0, 0644);
	memcpy(t.buf + at + 257, "ustar  \0", 8);
	tb_sum(t.buf + at);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "not a POSIX (ustar) header"));
	tb_free(&t);
	at = tb_header(&t, "a", '0', 0, 0644);
	memset(t.buf + at + 257, 0, 8);
	tb_sum(t.buf + at);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "ustar"));
	tb_free(&t);

	/* A size field that is not a number; an empty one; a negative base-256. */
	static const char *sizes[] = {"0000000001x", "           ", "00000-00001"};
	for (size_t i = 0; i < 3; i++) {
		at = tb_header(&t, "a", '0', 0, 0644);
		memcpy(t.buf + at + 124, sizes[i], 11);
		tb_sum(t.buf + at);
		tb_end(&t);
		CHECK(refused(&t, ERR_BAD_REQUEST, "a bad size field"));
		tb_free(&t);
	}
	at = tb_header(&t, "a", '0', 0, 0644);
	memset(t.buf + at + 124, 0xff, 12);
	tb_sum(t.buf + at);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "a bad size field"));
	tb_free(&t);
	at = tb_header(&t, "a", '0', 0, 0644);
	memcpy(t.buf + at + 100, "07x7\0\0\0\0", 8);
	tb_sum(t.buf + at);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "a bad mode field"));
	tb_free(&t);

	/* A base-256 size is read; setuid, setgid and sticky are dropped. */
	at = tb_header(&t, "a", '0', 0, 07755);
	memset(t.buf + at + 124, 0, 12);
	t.buf[at + 124] = 0x80;
	t.buf[at + 135] = 3;
	tb_sum(t.buf + at);
	tb_data(&t, "abc", 3);
	tb_end(&t);
	struct seen s = {0};
	AUTOERR struct err *e = NULL;
	CHECK(scan(t.buf, t.len, 3, 0, 0, &s, &e) == 0);
	CHECK(s.n == 1 && s.e[0].size == 3 && s.e[0].mode == 0755);
	seen_free(&s);
	tb_free(&t);

	/* A directory with a size. */
	tb_header(&t, "d", '5', 1, 0755);
	tb_data(&t, "x", 1);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "a directory with a size"));
	tb_free(&t);
}

TEST(tar_scan_refuses_a_size_that_lies)
{
	/* Says 20000 bytes, has 10: the end blocks are taken as data, and the
	 * tar ends inside the file. */
	struct tb t = {0};
	tb_header(&t, "a", '0', 20000, 0644);
	tb_data(&t, "0123456789", 10);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "truncated in a"));
	tb_free(&t);

	/* Says 1 byte, has 1000: the rest is read as a header. */
	char k[1000];
	memset(k, 'k', sizeof(k));
	tb_header(&t, "a", '0', 1, 0644);
	tb_data(&t, k, sizeof(k));
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "checksum does not match, at byte 1024"));
	tb_free(&t);

	/* A pax size that lies the same way. */
	tb_pax(&t, "size", "99999", 5);
	tb_header(&t, "a", '0', 10, 0644);
	tb_data(&t, "0123456789", 10);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "truncated in a"));
	tb_free(&t);
}

TEST(tar_scan_checks_pax_records)
{
	static const struct {
		const char *rec;
		const char *what;
	} bad[] = {
	    {"30 path=a\n", "does not match"},  /* longer than the data */
	    {"8 path=a\n", "does not match"},   /* shorter: not ending at '\n' */
	    {"9 path=ab\n", "does not match"},  /* the '\n' is not where it says */
	    {"0 path=a\n", "does not match"},   /* zero */
	    {"path=a\n", "without a length"},   /* no length */
	    {"10path=a\n", "without a length"}, /* no space */
	    {"1234567 path=a\n", "too long"},   /* a 7-digit length */
	    {"6 =ab\n", "without a key"},       /* no key */
	    {"8 pathx\n", "without a key"},     /* no '=' */
	    {"11 size=1x\n", "a bad pax size"}, /* not decimal */
	    {"8 size=\n", "a bad pax size"},    /* empty */
	    {"27 size=123456789012345678\n x", "without a length"}, /* junk after */
	    {"21 GNU.sparse.size=9\n", "sparse"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tb t = {0};
		tb_pax_raw(&t, bad[i].rec, strlen(bad[i].rec));
		tb_header(&t, "a", '0', 0, 0644);
		tb_end(&t);
		if (!refused(&t, ERR_BAD_REQUEST, bad[i].what)) {
			fprintf(stderr, "  (the record \"%s\")\n", bad[i].rec);
			unit_failures_in_test++;
		}
		tb_free(&t);
	}
	/* Records we do not use are skipped, the last path wins, a value
	 * may hold '=' and spaces. */
	struct tb t = {0};
	const char *recs = "20 mtime=1700000000\n12 path=zzz\n14 path=a=b c\n";
	tb_pax_raw(&t, recs, strlen(recs));
	tb_header(&t, "ignored", '0', 0, 0644);
	tb_end(&t);
	struct seen s = {0};
	AUTOERR struct err *e = NULL;
	CHECK(scan(t.buf, t.len, 1, 0, 0, &s, &e) == 0);
	CHECK(s.n == 1 && strcmp(s.e[0].path, "a=b c") == 0);
	seen_free(&s);
	tb_free(&t);

	/* A pax header over 64 KiB; one with no entry after it; two in a row. */
	tb_header(&t, "x", 'x', TAR_PAX_MAX + 1, 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "over 64 KiB"));
	tb_free(&t);
	tb_pax(&t, "path", "a", 1);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "a pax header without an entry"));
	tb_free(&t);
	tb_pax(&t, "path", "a", 1);
	tb_pax(&t, "path", "b", 1);
	tb_header(&t, "a", '0', 0, 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "two pax headers in a row"));
	tb_free(&t);
}

TEST(tar_scan_checks_the_end)
{
	/* Only zeros: an empty workspace. */
	struct tb t = {0};
	tb_end(&t);
	struct seen s = {0};
	AUTOERR struct err *e = NULL;
	CHECK(scan(t.buf, t.len, 1000, 0, 0, &s, &e) == 0 && s.n == 0);
	tb_free(&t);

	/* A byte after the end blocks, anywhere in the padding or past it. */
	size_t offs[] = {2048, 5000, 10239, 20000};
	for (size_t i = 0; i < 4; i++) {
		tb_file(&t, "a", "1", 0644);
		tb_end(&t);
		tb_zeros(&t, 10240);
		t.buf[offs[i]] = 1;
		char want[64];
		snprintf(want, sizeof(want), "non-zero bytes after the end blocks, at byte %zu",
			 offs[i]);
		CHECK(refused(&t, ERR_BAD_REQUEST, want));
		tb_free(&t);
	}
	/* More zeros than tarfile writes are fine. */
	tb_file(&t, "a", "1", 0644);
	tb_end(&t);
	tb_zeros(&t, 30000);
	CHECK(accepted(&t));
	tb_free(&t);

	/* One zero block, then a header; one zero block, then the end. */
	tb_file(&t, "a", "1", 0644);
	tb_zeros(&t, 512);
	tb_file(&t, "b", "1", 0644);
	tb_end(&t);
	CHECK(refused(&t, ERR_BAD_REQUEST, "a lone zero block, at byte 1536"));
	tb_free(&t);
	tb_file(&t, "a", "1", 0644);
	tb_zeros(&t, 512);
	CHECK(refused(&t, ERR_BAD_REQUEST, "truncated (no end blocks)"));
	tb_free(&t);
}

TEST(tar_scan_enforces_the_caps)
{
	size_t len = 0;
	unsigned char *buf = tb_fixture("pax.tar", &len);
	if (buf == NULL) {
		CHECK(0);
		return;
	}
	struct seen s = {0};
	AUTOERR struct err *e = NULL;
	CHECK(scan(buf, len, 512, len - 1, 0, &s, &e) == -1);
	CHECK(e != NULL && e->code == ERR_PAYLOAD_TOO_LARGE);
	CHECK(e && strstr(e->message, "over the 10239-byte cap"));
	seen_free(&s);
	err_cleanup(&e);
	CHECK(scan(buf, len, 512, len, 7, &s, &e) == -1);
	CHECK(e != NULL && e->code == ERR_PAYLOAD_TOO_LARGE);
	CHECK(e && strstr(e->message, "more than 7 entries"));
	CHECK(s.n == 7);
	seen_free(&s);
	err_cleanup(&e);
	CHECK(scan(buf, len, 512, len, 8, &s, &e) == 0);
	seen_free(&s);
	free(buf);

	/* A file larger than the cap is refused at its header, before its data. */
	struct tb t = {0};
	tb_header(&t, "big", '0', 1 << 20, 0644);
	struct tar_scan *ts = tar_scan_new(100000, 0, NULL, NULL);
	CHECK(tar_scan_feed(ts, t.buf, t.len, &e) == -1);
	CHECK(e && e->code == ERR_PAYLOAD_TOO_LARGE && strstr(e->message, "big is 1048576 bytes"));
	err_cleanup(&e);
	/* Dead after an error. */
	CHECK(tar_scan_feed(ts, "", 1, &e) == -1 && e != NULL);
	err_cleanup(&e);
	CHECK(tar_scan_finish(ts, &e) == -1 && e != NULL);
	tar_scan_free(ts);
	tb_free(&t);
	tar_scan_free(NULL);
}

TEST(tar_scan_calls_back_when_a_file_ends_at_a_feed_boundary)
{
	struct tb t = {0};
	char k[512];
	memset(k, 'k', sizeof(k));
	tb_header(&t, "a", '0', sizeof(k), 0644); /* its data ends on a block */
	tb_data(&t, k, sizeof(k));
	tb_header(&t, "b", '0', 3, 0644);
	tb_data(&t, "xyz", 3);
	tb_end(&t);
	struct seen s = {0};
	AUTOERR struct err *e = NULL;
	struct tar_scan *ts = tar_scan_new(0, 0, seen_fn, &s);
	CHECK(tar_scan_feed(ts, t.buf, 1023, &e) == 0 && s.n == 0);
	CHECK(tar_scan_feed(ts, t.buf + 1023, 1, &e) == 0 && s.n == 1);
	/* b's data ends 3 bytes into its block: the callback comes then, not
	 * after the padding. */
	CHECK(tar_scan_feed(ts, t.buf + 1024, 512 + 3, &e) == 0 && s.n == 2);
	CHECK(tar_scan_feed(ts, t.buf + 1024 + 515, t.len - 1024 - 515, &e) == 0);
	CHECK(tar_scan_finish(ts, &e) == 0);
	char h[65];
	digest_sha256_hex("xyz", 3, h);
	CHECK(s.n == 2 && strcmp(s.e[1].sha256, h) == 0);
	digest_sha256_hex(k, sizeof(k), h);
	CHECK(s.n == 2 && strcmp(s.e[0].sha256, h) == 0);
	tar_scan_free(ts);
	seen_free(&s);
	tb_free(&t);
}

TEST(tar_scan_stops_when_the_callback_fails)
{
	struct tb t = {0};
	tb_file(&t, "a", "1", 0644);
	tb_file(&t, "b", "2", 0644);
	tb_file(&t, "c", "3", 0644);
	tb_end(&t);
	struct seen s = {.fail_at = 2};
	AUTOERR struct err *e = NULL;
	CHECK(scan(t.buf, t.len, 7, 0, 0, &s, &e) == -1);
	CHECK(e && e->code == ERR_CORRUPT);
	CHECK_STR(e ? e->message : NULL, "the callback refused b");
	CHECK(s.n == 1);
	seen_free(&s);
	tb_free(&t);
}

TEST(tar_path_check_rules)
{
	AUTOERR struct err *e = NULL;
	CHECK(tar_path_check("a/b.c", 5, &e) == 0);
	CHECK(tar_path_check(".ci/site/x", 10, &e) == 0);
	CHECK(tar_path_check("a..b/..c", 8, &e) == 0);
	CHECK(tar_path_check("a/\0b", 4, &e) == -1 && e && e->code == ERR_BAD_REQUEST);
	err_cleanup(&e);
	CHECK(tar_path_check("a/.", 3, &e) == -1);
	err_cleanup(&e);
	CHECK(tar_path_check("", 0, &e) == -1);
}
