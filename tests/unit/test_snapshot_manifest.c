/* test_snapshot_manifest.c: manifest.json built from a scanned tar, parsed
 * back (and refused when hostile), and the verifier holding a restored tar
 * to it: one changed byte, a missing, extra or reordered entry, another
 * size or sha256 of the tar. */
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "install.h"
#include "json.h"
#include "snapshot_manifest.h"
#include "tar_build.h"
#include "tar_scan.h"
#include "unit.h"

#define SNAP_ID "0f8fad5b-d9cb-469f-a165-70867728950e"
#define SESS_ID "7c9e6679-7425-40de-944b-e07fc1f90ae7"

/* Scan tar into a manifest; the caller frees the text. */
static char *build(const void *tar, size_t len, yajl_val vars, yajl_val skipped, size_t *out_len)
{
	static const char *const globs[] = {"*.csv", "out/**"};
	struct snapshot_head h = {.id = SNAP_ID,
				  .tenant = "t1",
				  .workspace = "ws-1",
				  .session = SESS_ID,
				  .created_at_ms = 1764619200123,
				  .paths = globs,
				  .n_paths = 2,
				  .variables = vars};
	struct snapshot_builder *b = snapshot_builder_new(&h);
	struct tar_scan *ts = tar_scan_new(0, 0, snapshot_builder_entry, b);
	AUTOERR struct err *e = NULL;
	CHECK(tar_scan_feed(ts, tar, len, &e) == 0);
	CHECK(tar_scan_finish(ts, &e) == 0);
	char sha[65];
	tar_scan_sha256(ts, sha);
	struct install_pkg pkgs[] = {{.name = "tinypkg", .version = "1.0"}};
	struct snapshot_tail t = {.size = tar_scan_bytes(ts),
				  .sha256 = sha,
				  .packages = pkgs,
				  .n_packages = 1,
				  .skipped = skipped};
	char *text = snapshot_builder_finish(b, &t, out_len, &e);
	if (text == NULL)
		fprintf(stderr, "  build: %s\n", e ? e->message : "?");
	tar_scan_free(ts);
	snapshot_builder_free(b);
	return text;
}

/* Verify tar against m, fed in pieces; 0, or -1 with *errp. */
static int verify(const struct snapshot_manifest *m, const void *tar, size_t len, size_t piece,
		  struct err **errp)
{
	struct snapshot_verify *v = snapshot_verify_new(m);
	struct tar_scan *ts = tar_scan_new(0, 0, snapshot_verify_entry, v);
	const unsigned char *p = tar;
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0; off += piece)
		rc = tar_scan_feed(ts, p + off, len - off < piece ? len - off : piece, errp);
	if (rc == 0)
		rc = tar_scan_finish(ts, errp);
	if (rc == 0)
		rc = snapshot_verify_finish(v, ts, errp);
	tar_scan_free(ts);
	snapshot_verify_free(v);
	return rc;
}

static int verify_fails(const struct snapshot_manifest *m, const struct tb *t, const char *what)
{
	AUTOERR struct err *e = NULL;
	if (verify(m, t->buf, t->len, 512, &e) == 0) {
		fprintf(stderr, "  verified, expected \"%s\"\n", what);
		return 0;
	}
	if (e->code != ERR_CORRUPT || strstr(e->message, what) == NULL) {
		fprintf(stderr, "  \"%s\", expected \"%s\"\n", e->message, what);
		return 0;
	}
	return 1;
}

static struct snapshot_manifest *manifest_of(const struct tb *t)
{
	size_t len = 0;
	char *text = build(t->buf, t->len, NULL, NULL, &len);
	AUTOERR struct err *e = NULL;
	struct snapshot_manifest *m = text ? snapshot_manifest_parse(text, len, 0, &e) : NULL;
	if (m == NULL)
		fprintf(stderr, "  parse: %s\n", e ? e->message : "no text");
	free(text);
	return m;
}

TEST(snapshot_manifest_round_trip_from_the_fixture)
{
	size_t len = 0;
	unsigned char *tar = tb_fixture("pax.tar", &len);
	if (tar == NULL) {
		CHECK(0);
		return;
	}
	static const char vars_json[] =
	    "{\"saved\":[\"x\",\"df\"],\"modules\":{\"np\":\"numpy\"},\"bytes\":99,"
	    "\"skipped\":[{\"name\":\"f\",\"reason\":\"function defined in the session\"}]}";
	static const char skipped_json[] = "[{\"path\":\"link\",\"reason\":\"symlink\"}]";
	AUTOERR struct err *e = NULL;
	AUTOJSON yajl_val vars = json_parse(vars_json, strlen(vars_json), &e);
	AUTOJSON yajl_val skipped = json_parse(skipped_json, strlen(skipped_json), &e);
	size_t tlen = 0;
	char *text = build(tar, len, vars, skipped, &tlen);
	CHECK(text != NULL && strlen(text) == tlen);
	if (text == NULL) {
		free(tar);
		return;
	}
	struct snapshot_manifest *m = snapshot_manifest_parse(text, tlen, 50000, &e);
	CHECK(m != NULL);
	if (m == NULL) {
		fprintf(stderr, "  %s\n%s\n", e->message, text);
		free(text);
		free(tar);
		return;
	}
	char sha[65];
	digest_sha256_hex(tar, len, sha);
	CHECK_STR(m->id, SNAP_ID);
	CHECK_STR(m->tenant, "t1");
	CHECK_STR(m->workspace, "ws-1");
	CHECK_STR(m->session, SESS_ID);
	CHECK_STR(m->created_at, "2025-12-01T20:00:00.123Z");
	CHECK(m->created_at_ms == 1764619200123);
	CHECK(m->size == len);
	CHECK_STR(m->sha256, sha);
	CHECK(m->files == 5 && m->content_bytes == 619 && m->n_entries == 8);
	CHECK_STR(m->entries[2].path, "out");
	CHECK(m->entries[2].dir && m->entries[2].mode == 0755 && m->entries[2].sha256[0] == '\0');
	CHECK_STR(m->entries[3].path, "out/a.csv");
	digest_sha256_hex("x,y\n1,2\n", 8, sha);
	CHECK(!m->entries[3].dir && m->entries[3].size == 8 && m->entries[3].mode == 0644);
	CHECK_STR(m->entries[3].sha256, sha);
	CHECK(json_arr_len(m->paths) == 2);
	CHECK_STR(json_arr_at(m->paths, 1)->u.string, "out/**");
	/* Only saved, modules and skipped of the kernel's answer are kept. */
	CHECK(json_get(m->variables, "bytes") == NULL);
	CHECK_STR(json_path_str(m->variables, "modules.np"), "numpy");
	CHECK(json_arr_len(json_get(m->variables, "saved")) == 2);
	CHECK_STR(json_get_str(json_arr_at(m->packages, 0), "version"), "1.0");
	CHECK_STR(json_get_str(json_arr_at(m->skipped, 0), "reason"), "symlink");

	/* The tar it came from verifies, in any pieces. */
	CHECK(verify(m, tar, len, 1, &e) == 0);
	CHECK(verify(m, tar, len, 4096, &e) == 0);
	if (e != NULL)
		fprintf(stderr, "  %s\n", e->message);

	/* One byte of out/a.csv changed: named by path. */
	unsigned char *bad = xmalloc(len);
	memcpy(bad, tar, len);
	unsigned char *hit = memmem(bad, len, "x,y\n1,2\n", 8);
	CHECK(hit != NULL);
	if (hit != NULL) {
		hit[2] = 'z';
		err_cleanup(&e);
		CHECK(verify(m, bad, len, 100, &e) == -1);
		CHECK(e && e->code == ERR_CORRUPT);
		CHECK_STR(e ? e->message : NULL,
			  "snapshot " SNAP_ID
			  " is corrupt: out/a.csv: sha256 does not match the manifest");
	}
	/* Zeros past tarfile's padding: the same entries, another size. */
	unsigned char *longer = xcalloc(1, len + 512);
	memcpy(longer, tar, len);
	err_cleanup(&e);
	CHECK(verify(m, longer, len + 512, 512, &e) == -1);
	CHECK(e && strstr(e->message, "the tar is 10752 bytes, the manifest says 10240"));
	free(longer);
	free(bad);
	snapshot_manifest_free(m);
	free(text);
	free(tar);
}

TEST(snapshot_verify_names_what_differs)
{
	struct tb t = {0};
	tb_dir(&t, "d");
	tb_file(&t, "d/a", "alpha", 0644);
	tb_file(&t, "d/b", "beta", 0644);
	tb_end(&t);
	struct snapshot_manifest *m = manifest_of(&t);
	CHECK(m != NULL);
	if (m == NULL) {
		tb_free(&t);
		return;
	}
	AUTOERR struct err *e = NULL;
	CHECK(verify(m, t.buf, t.len, 3, &e) == 0);

	struct tb x = {0};
	/* Missing: the tar ends before d/b. */
	tb_dir(&x, "d");
	tb_file(&x, "d/a", "alpha", 0644);
	tb_end(&x);
	CHECK(verify_fails(m, &x, "is corrupt: the tar ends before d/b (entry 3 of 3)"));
	tb_free(&x);
	/* Extra: d/c after the last. */
	tb_dir(&x, "d");
	tb_file(&x, "d/a", "alpha", 0644);
	tb_file(&x, "d/b", "beta", 0644);
	tb_file(&x, "d/c", "", 0644);
	tb_end(&x);
	CHECK(verify_fails(m, &x, "is corrupt: d/c: not in the manifest"));
	tb_free(&x);
	/* Another entry in b's place (the tar's own order is kept, so a swap
	 * shows as another name at an index). */
	tb_dir(&x, "d");
	tb_file(&x, "d/a", "alpha", 0644);
	tb_file(&x, "d/c", "beta", 0644);
	tb_end(&x);
	CHECK(verify_fails(m, &x, "entry 2 is d/c, the manifest has d/b"));
	tb_free(&x);
	/* Type, size, mode. */
	tb_dir(&x, "d");
	tb_dir(&x, "d/a");
	tb_end(&x);
	CHECK(verify_fails(m, &x, "d/a: a directory in the tar, a file in the manifest"));
	tb_free(&x);
	tb_dir(&x, "d");
	tb_file(&x, "d/a", "alphabet", 0644);
	tb_end(&x);
	CHECK(verify_fails(m, &x, "d/a: 8 bytes, the manifest has 5"));
	tb_free(&x);
	tb_dir(&x, "d");
	tb_file(&x, "d/a", "alpha", 0755);
	tb_end(&x);
	CHECK(verify_fails(m, &x, "d/a: mode 755, the manifest has 644"));
	tb_free(&x);
	/* The same entries, other header bytes (an mtime): the tar's sha256. */
	x.mtime = 1700000000;
	tb_dir(&x, "d");
	tb_file(&x, "d/a", "alpha", 0644);
	tb_file(&x, "d/b", "beta", 0644);
	tb_end(&x);
	CHECK(x.len == t.len);
	CHECK(verify_fails(m, &x, "the tar's sha256 does not match the manifest"));
	tb_free(&x);
	/* A tar the scanner refuses never reaches the verifier's last check;
	 * at a restore that is corruption too. */
	tb_dir(&x, "d");
	tb_file(&x, "d/a", "alpha", 0644);
	CHECK(verify(m, x.buf, x.len, 512, &e) == -1 && e && e->code == ERR_BAD_REQUEST);
	struct snapshot_verify *v = snapshot_verify_new(m);
	snapshot_verify_scan_error(v, &e);
	CHECK(e && e->code == ERR_CORRUPT &&
	      strcmp(e->message, "snapshot " SNAP_ID " is corrupt: tar: truncated (no end blocks), "
				 "at byte 1536") == 0);
	snapshot_verify_scan_error(v, &e); /* already corrupt: left */
	CHECK(e && strncmp(e->message, "snapshot " SNAP_ID " is corrupt: tar", 50) == 0);
	snapshot_verify_scan_error(v, NULL);
	err_cleanup(&e);
	snapshot_verify_scan_error(v, &e);
	CHECK(e == NULL);
	snapshot_verify_free(v);
	tb_free(&x);

	snapshot_manifest_free(m);
	tb_free(&t);
}

/* A valid manifest with one entry, which the parser tests then break. */
static const char good[] =
    "{\"format\":1,\"id\":\"" SNAP_ID "\",\"tenant\":\"t1\",\"workspace\":\"w\","
    "\"session\":null,\"created_at\":\"2026-12-01T20:00:00Z\",\"size\":2048,\"files\":1,"
    "\"sha256\":\""
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    "\","
    "\"content_bytes\":3,\"entries\":[{\"path\":\"a\",\"type\":\"file\",\"size\":3,\"mode\":420,"
    "\"sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\"}],"
    "\"paths\":null,\"variables\":null,\"packages\":[],\"skipped\":[]}";

/* good with the first `from` replaced by `to`; the parse must fail naming what. */
static void parse_refused(const char *from, const char *to, const char *what)
{
	char text[4096];
	const char *at = strstr(good, from);
	if (at == NULL) {
		fprintf(stderr, "  \"%s\" is not in the manifest\n", from);
		unit_failures_in_test++;
		return;
	}
	snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
	AUTOERR struct err *e = NULL;
	struct snapshot_manifest *m = snapshot_manifest_parse(text, strlen(text), 10, &e);
	if (m != NULL || e == NULL || e->code != ERR_CORRUPT || strstr(e->message, what) == NULL) {
		fprintf(stderr, "  %s -> %s: \"%s\", expected \"%s\"\n", from, to,
			e ? e->message : "parsed", what);
		unit_failures_in_test++;
	}
	snapshot_manifest_free(m);
}

TEST(snapshot_manifest_parse_checks_every_field)
{
	AUTOERR struct err *e = NULL;
	struct snapshot_manifest *m = snapshot_manifest_parse(good, strlen(good), 10, &e);
	CHECK(m != NULL && m->session == NULL && m->paths == NULL && m->variables == NULL);
	CHECK(m && m->created_at_ms == 1796155200000);
	snapshot_manifest_free(m);
	if (e)
		fprintf(stderr, "  %s\n", e->message);

	parse_refused("\"format\":1", "\"format\":2", "format: not 1");
	parse_refused("\"format\":1,", "", "format: not 1"); /* missing */
	parse_refused("\"id\":\"0f8f", "\"id\":\"0F8F", "snapshot manifest is corrupt: id: not");
	parse_refused("-469f-", "-469f", "id: not a lowercase UUID");
	parse_refused("\"tenant\":\"t1\"", "\"tenant\":1", "tenant: not");
	parse_refused("\"workspace\":\"w\"", "\"workspace\":\".w\"", "workspace: not");
	parse_refused("\"workspace\":\"w\"", "\"workspace\":\"a/b\"", "workspace: not");
	parse_refused("\"session\":null", "\"session\":\"x\"", "session: not");
	parse_refused("\"session\":null,", "", "session: not");
	parse_refused("20:00:00Z", "20:00:00", "created_at: not");
	parse_refused("2026-12-01", "2026-13-01", "created_at: not");
	parse_refused("\"size\":2048", "\"size\":\"2048\"", "size: not a byte count");
	parse_refused("\"size\":2048", "\"size\":-1", "size: not a byte count");
	parse_refused("\"size\":2048", "\"size\":2.5", "size: not a byte count");
	parse_refused("\"size\":2048", "\"size\":2", "size: 2, less than the files");
	parse_refused("\"files\":1", "\"files\":2", "files: 2, but the entries hold 1");
	parse_refused("\"content_bytes\":3", "\"content_bytes\":4", "content_bytes: 4, but");
	parse_refused("\"sha256\":\"e3", "\"sha256\":\"E3", "sha256: not 64 lowercase hex");
	parse_refused("b855\"", "b85\"", "sha256: not 64 lowercase hex");
	parse_refused("b855\"", "b85g\"", "sha256: not 64 lowercase hex");
	parse_refused("\"path\":\"a\"", "\"path\":\"../a\"", "entries[0].path: a '..' path");
	parse_refused("\"path\":\"a\"", "\"path\":\"/a\"", "entries[0].path: an absolute path");
	parse_refused("\"path\":\"a\"", "\"path\":\"\"", "entries[0].path: an empty path");
	parse_refused("\"path\":\"a\"", "\"path\":\"d/a\"", "entries[0].path: an entry before its");
	parse_refused("\"path\":\"a\"", "\"path\":[]", "entries[0].path: not a string");
	parse_refused("\"type\":\"file\"", "\"type\":\"link\"", "entries[0].type");
	parse_refused("\"mode\":420", "\"mode\":4096", "entries[0].mode");
	parse_refused("\"size\":3,", "\"size\":\"3\",", "entries[0].size");
	parse_refused("\"sha256\":\"ba78", "\"sha256\":\"xa78", "entries[0].sha256: not 64");
	parse_refused("\"type\":\"file\",\"size\":3", "\"type\":\"dir\",\"size\":3",
		      "entries[0]: a directory with a size");
	parse_refused("\"type\":\"file\",\"size\":3", "\"type\":\"dir\",\"size\":\"0\"",
		      "entries[0]: a directory with a size");
	parse_refused("\"entries\":[{", "\"entries\":7,\"x\":[{",
		      "snapshot " SNAP_ID " is corrupt: manifest: entries: not an array");
	parse_refused("\"entries\":[{", "\"entries\":[7,{", "entries[0]: not an object");
	parse_refused("\"paths\":null", "\"paths\":\"*\"", "paths: not an array");
	parse_refused("\"paths\":null", "\"paths\":[\"\"]", "paths[0]: not a glob");
	parse_refused("\"variables\":null", "\"variables\":{\"saved\":[1]}", "variables.saved[0]");
	parse_refused("\"variables\":null", "\"variables\":{\"saved\":[],\"modules\":[]}",
		      "variables.modules: not an object");
	parse_refused("\"packages\":[]", "\"packages\":[{\"name\":\"x\"}]", "packages[0]");
	parse_refused("\"skipped\":[]", "\"skipped\":[{\"path\":\"a\"}]", "skipped[0]");
	parse_refused("\"skipped\":[]", "\"skipped\":{}", "skipped: an object, not an array");
	parse_refused("{\"format\"", "[{\"format\"", "snapshot manifest is corrupt");
	parse_refused("\"skipped\":[]}", "\"skipped\":[]", "snapshot manifest is corrupt");

	/* Another tool's manifest may leave out paths, variables, packages and
	 * skipped, and give a directory "size":0. */
	static const char bare[] =
	    "{\"format\":1,\"id\":\"" SNAP_ID "\",\"tenant\":\"t1\",\"workspace\":\"w\","
	    "\"session\":null,\"created_at\":\"2026-12-01T20:00:00Z\",\"size\":1024,\"files\":0,"
	    "\"sha256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\","
	    "\"content_bytes\":0,\"entries\":[{\"path\":\"d\",\"type\":\"dir\",\"size\":0,"
	    "\"mode\":493}]}";
	m = snapshot_manifest_parse(bare, strlen(bare), 10, &e);
	CHECK(m != NULL && m->paths == NULL && m->variables == NULL && m->packages == NULL &&
	      m->skipped == NULL && m->n_entries == 1 && m->entries[0].dir);
	if (e)
		fprintf(stderr, "  %s\n", e->message);
	snapshot_manifest_free(m);

	/* Too many entries for the cap given. */
	m = snapshot_manifest_parse(good, strlen(good), 0, &e);
	CHECK(m != NULL);
	snapshot_manifest_free(m);
	struct tb t = {0};
	tb_file(&t, "a", "1", 0644);
	tb_file(&t, "b", "2", 0644);
	tb_end(&t);
	size_t len = 0;
	char *text = build(t.buf, t.len, NULL, NULL, &len);
	m = text ? snapshot_manifest_parse(text, len, 1, &e) : NULL;
	CHECK(m == NULL && e && e->code == ERR_CORRUPT &&
	      strstr(e->message, "entries: 2, more than the 1 allowed"));
	free(text);
	tb_free(&t);
	err_cleanup(&e);

	/* A text of many small values is refused before a tree is built. */
	size_t nb = 2 * (size_t)SNAPSHOT_TOKENS_MAX + 2;
	char *many = xmalloc(nb + 1);
	many[0] = '[';
	for (size_t i = 1; i < nb - 1; i += 2) {
		many[i] = '1';
		many[i + 1] = ',';
	}
	many[nb - 1] = '1';
	many[nb] = ']';
	m = snapshot_manifest_parse(many, nb + 1, 0, &e);
	CHECK(m == NULL && e && e->code == ERR_CORRUPT && strstr(e->message, "JSON tokens"));
	err_cleanup(&e);
	/* Commas inside strings are not tokens. */
	memset(many, ',', nb);
	many[0] = '"';
	many[nb - 1] = '"';
	m = snapshot_manifest_parse(many, nb, 0, &e);
	CHECK(m == NULL && e && strstr(e->message, "JSON tokens") == NULL);
	err_cleanup(&e);
	free(many);

	/* A text over the cap is refused before it is read. */
	m = snapshot_manifest_parse(good, (size_t)SNAPSHOT_MANIFEST_MAX + 1, 0, &e);
	CHECK(m == NULL && e && e->code == ERR_CORRUPT && strstr(e->message, "over 64 MiB"));
	err_cleanup(&e);
	m = snapshot_manifest_parse("", 0, 0, &e);
	CHECK(m == NULL && e && e->code == ERR_CORRUPT);
}

TEST(snapshot_builder_refuses_bad_parts)
{
	struct tb t = {0};
	tb_file(&t, "a", "1", 0644);
	tb_end(&t);
	/* What the sandbox said is kept where it fits: a bad item is left
	 * out, the rest written, and the result parses. */
	static const struct {
		const char *vars, *want;
	} odd_vars[] = {
	    {"[]", "\"variables\":null"},
	    {"{\"saved\":{},\"modules\":{},\"skipped\":[]}",
	     "\"variables\":{\"saved\":[],\"modules\":{},\"skipped\":[]}"},
	    {"{\"saved\":[\"\",\"a\",7],\"modules\":{},\"skipped\":[]}", "\"saved\":[\"a\"]"},
	    {"{\"saved\":[],\"modules\":{\"m\":1,\"\":\"x\",\"np\":\"numpy\"},\"skipped\":[]}",
	     "\"modules\":{\"np\":\"numpy\"}"},
	    {"{\"saved\":[],\"modules\":{},\"skipped\":[{\"name\":\"f\"},{\"name\":\"g\","
	     "\"reason\":\"r\"}]}",
	     "\"skipped\":[{\"name\":\"g\",\"reason\":\"r\"}]}"},
	    {"{\"saved\":[\"x\"]}", "{\"saved\":[\"x\"],\"modules\":{},\"skipped\":[]}"},
	};
	for (size_t i = 0; i < sizeof(odd_vars) / sizeof(odd_vars[0]); i++) {
		AUTOERR struct err *e = NULL;
		AUTOJSON yajl_val v = json_parse(odd_vars[i].vars, strlen(odd_vars[i].vars), &e);
		size_t len = 0;
		char *text = build(t.buf, t.len, v, NULL, &len);
		CHECK(text != NULL && strstr(text, odd_vars[i].want) != NULL);
		if (text && !strstr(text, odd_vars[i].want))
			fprintf(stderr, "  %s\n  has no %s\n", text, odd_vars[i].want);
		struct snapshot_manifest *m =
		    text ? snapshot_manifest_parse(text, len, 0, &e) : NULL;
		CHECK(m != NULL);
		snapshot_manifest_free(m);
		free(text);
	}
	/* Overlong names are cut at a character, not refused: a variable of
	 * 2000 two-byte letters, a skipped path of 5000 bytes. */
	{
		AUTOERR struct err *e = NULL;
		char *name = xmalloc(4001), *path = xmalloc(5001);
		for (int i = 0; i < 4000; i += 2)
			memcpy(name + i, "\xc3\xa9", 2);
		name[4000] = '\0';
		memset(path, 'p', 5000);
		path[5000] = '\0';
		char *vj = xasprintf("{\"saved\":[\"%s\"],\"modules\":{},\"skipped\":[]}", name);
		char *sj = xasprintf("[{\"path\":\"%s\",\"reason\":\"path too long\"}]", path);
		AUTOJSON yajl_val v = json_parse(vj, strlen(vj), &e);
		AUTOJSON yajl_val sk = json_parse(sj, strlen(sj), &e);
		size_t len = 0;
		char *text = build(t.buf, t.len, v, sk, &len);
		struct snapshot_manifest *m =
		    text ? snapshot_manifest_parse(text, len, 0, &e) : NULL;
		CHECK(m != NULL);
		const char *s0 =
		    m ? json_arr_at(json_get(m->variables, "saved"), 0)->u.string : NULL;
		CHECK(s0 && strlen(s0) == 1024 && strncmp(s0, name, 1024) == 0);
		const char *p0 = m ? json_get_str(json_arr_at(m->skipped, 0), "path") : NULL;
		CHECK(p0 && strlen(p0) == TAR_PATH_MAX);
		snapshot_manifest_free(m);
		free(text);
		/* Odd bytes: 1023 'a's then a two-byte letter: cut before it. */
		memset(name, 'a', 1023);
		memcpy(name + 1023, "\xc3\xa9", 3);
		struct install_pkg pk[] = {{.name = name, .version = "1"},
					   {.name = "", .version = "1"},
					   {.name = "ok", .version = "\xff"}};
		struct snapshot_head h = {
		    .id = SNAP_ID, .tenant = "t", .workspace = "w", .all_paths = true};
		struct snapshot_builder *b = snapshot_builder_new(&h);
		struct snapshot_tail tail = {
		    .size = 1024,
		    .sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		    .packages = pk,
		    .n_packages = 3};
		text = snapshot_builder_finish(b, &tail, &len, &e);
		m = text ? snapshot_manifest_parse(text, len, 0, &e) : NULL;
		CHECK(m != NULL && json_arr_len(m->packages) == 1);
		const char *n0 = m ? json_get_str(json_arr_at(m->packages, 0), "name") : NULL;
		CHECK(n0 && strlen(n0) == 1023);
		snapshot_manifest_free(m);
		snapshot_builder_free(b);
		free(text);
		free(vj);
		free(sj);
		free(name);
		free(path);
	}
	/* Bad head fields. */
	static const struct snapshot_head heads[] = {
	    {.id = "x", .tenant = "t", .workspace = "w", .all_paths = true},
	    {.id = SNAP_ID, .tenant = "", .workspace = "w", .all_paths = true},
	    {.id = SNAP_ID, .tenant = "t", .workspace = "..", .all_paths = true},
	    {.id = SNAP_ID, .tenant = "t", .workspace = "w", .session = "S", .all_paths = true},
	    {.id = SNAP_ID, .tenant = "t", .workspace = "w", .n_paths = 65},
	};
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		AUTOERR struct err *e = NULL;
		static const char *const many[65] = {"x"};
		struct snapshot_head h = heads[i];
		if (h.n_paths)
			h.paths = many;
		struct snapshot_builder *b = snapshot_builder_new(&h);
		struct snapshot_tail tail = {
		    .sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"};
		size_t len = 0;
		CHECK(snapshot_builder_finish(b, &tail, &len, &e) == NULL && e &&
		      e->code == ERR_BAD_REQUEST);
		snapshot_builder_free(b);
	}
	/* A bad tar sha256. */
	{
		AUTOERR struct err *e = NULL;
		struct snapshot_head h = {
		    .id = SNAP_ID, .tenant = "t", .workspace = "w", .all_paths = true};
		struct snapshot_builder *b = snapshot_builder_new(&h);
		struct snapshot_tail tail = {.size = 1024, .sha256 = "E3B0"};
		size_t len = 0;
		CHECK(snapshot_builder_finish(b, &tail, &len, &e) == NULL && e &&
		      strstr(e->message, "sha256"));
		snapshot_builder_free(b);
	}
	/* A null session and all paths: both written as null, and it parses. */
	{
		AUTOERR struct err *e = NULL;
		struct snapshot_head h = {
		    .id = SNAP_ID, .tenant = "t", .workspace = SESS_ID, .all_paths = true};
		struct snapshot_builder *b = snapshot_builder_new(&h);
		struct snapshot_tail tail = {
		    .size = 1024,
		    .sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"};
		size_t len = 0;
		char *text = snapshot_builder_finish(b, &tail, &len, &e);
		CHECK(text && strstr(text, "\"session\":null") && strstr(text, "\"paths\":null") &&
		      strstr(text, "\"variables\":null") && strstr(text, "\"entries\":[]"));
		struct snapshot_manifest *m =
		    text ? snapshot_manifest_parse(text, len, 0, &e) : NULL;
		CHECK(m != NULL && m->n_entries == 0 && m->files == 0);
		if (e)
			fprintf(stderr, "  %s\n", e->message);
		/* Twice is a bug of the caller. */
		CHECK(snapshot_builder_finish(b, &tail, &len, &e) == NULL);
		snapshot_manifest_free(m);
		free(text);
		snapshot_builder_free(b);
	}
	/* More entries than a manifest may hold tokens for: refused at the
	 * build, so nothing is stored that a restore would refuse. */
	{
		AUTOERR struct err *e = NULL;
		struct snapshot_head h = {
		    .id = SNAP_ID, .tenant = "t", .workspace = "w", .all_paths = true};
		struct snapshot_builder *b = snapshot_builder_new(&h);
		char name[16];
		int rc = 0;
		for (int i = 0; i < SNAPSHOT_TOKENS_MAX / 10 && rc == 0; i++) {
			snprintf(name, sizeof(name), "f%07d", i);
			struct tar_entry te = {.path = name, .sha256 = ""};
			rc = snapshot_builder_entry(&te, b, &e);
		}
		CHECK(rc == 0);
		struct snapshot_tail tail = {
		    .size = 1024,
		    .sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"};
		size_t len = 0;
		CHECK(snapshot_builder_finish(b, &tail, &len, &e) == NULL && e &&
		      e->code == ERR_PAYLOAD_TOO_LARGE && strstr(e->message, "JSON tokens"));
		snapshot_builder_free(b);
	}
	snapshot_builder_free(NULL);
	snapshot_manifest_free(NULL);
	snapshot_verify_free(NULL);
	tb_free(&t);
}

TEST(snapshot_uuid_and_err_corrupt)
{
	CHECK(snapshot_uuid_valid(SNAP_ID));
	CHECK(!snapshot_uuid_valid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
	CHECK(!snapshot_uuid_valid("0f8fad5b-d9cb-469f-a165-70867728950"));
	CHECK(!snapshot_uuid_valid("0f8fad5bxd9cb-469f-a165-70867728950e"));
	CHECK(!snapshot_uuid_valid(NULL));
	CHECK_STR(err_code_name(ERR_CORRUPT), "corrupt");
	CHECK(err_code_status(ERR_CORRUPT) == 422);
	enum err_code c = ERR_INTERNAL;
	CHECK(err_code_from_name("corrupt", &c) == 0 && c == ERR_CORRUPT);
}
