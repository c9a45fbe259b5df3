/* fuzz_tar_scan.c: the snapshot tar scanner on any bytes, fed whole and in
 * pieces whose sizes come from the input. Whatever the bytes: both feeds
 * give the same answer, entries, bytes and sha256; every entry's path
 * passes tar_path_check and follows the one before it; the caps hold. And
 * a tar the scanner takes must make a manifest that parses, and verifies
 * against the very same bytes (what the builder writes, the parser and
 * the verifier accept). */
#include <stdlib.h>
#include <string.h>

#include "snapshot_manifest.h"
#include "tar_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENTRIES 64

struct fz {
	struct snapshot_builder *b;
	char prev[TAR_PATH_MAX + 1];
	bool prev_dir, any;
	uint64_t n;
};

static int fz_entry(const struct tar_entry *e, void *arg, struct err **errp)
{
	struct fz *f = arg;
	if (tar_path_check(e->path, strlen(e->path), NULL) != 0 ||
	    tar_order_check(f->any ? f->prev : NULL, f->prev_dir, e->path) != NULL)
		abort();
	if (e->mode > 0777 || (e->dir && (e->size != 0 || e->sha256[0] != '\0')) ||
	    (!e->dir && strlen(e->sha256) != TAR_SHA256_HEX))
		abort();
	strcpy(f->prev, e->path);
	f->prev_dir = e->dir;
	f->any = true;
	f->n++;
	return f->b != NULL ? snapshot_builder_entry(e, f->b, errp) : 0;
}

static int run(const uint8_t *data, size_t size, size_t piece, uint64_t cap, struct fz *f,
	       char sha[65], struct err **errp)
{
	struct tar_scan *ts = tar_scan_new(cap, MAX_ENTRIES, fz_entry, f);
	int rc = 0;
	for (size_t off = 0; off < size && rc == 0; off += piece)
		rc = tar_scan_feed(ts, data + off, size - off < piece ? size - off : piece, errp);
	if (rc == 0)
		rc = tar_scan_finish(ts, errp);
	if (tar_scan_entries(ts) > MAX_ENTRIES || tar_scan_files(ts) > tar_scan_entries(ts) ||
	    tar_scan_entries(ts) != f->n)
		abort();
	tar_scan_sha256(ts, sha);
	if (rc == 0 && tar_scan_bytes(ts) != size)
		abort();
	tar_scan_free(ts);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	/* The first byte: the piece size, and whether to cap the bytes at
	 * half of them. */
	size_t piece = (size_t)(data[0] & 0x7f) % 37 + 1;
	bool capped = data[0] & 0x80;
	data++;
	size--;
	uint64_t cap = capped ? size / 2 + 1 : 0;

	static const char id[] = "0f8fad5b-d9cb-469f-a165-70867728950e";
	struct snapshot_head h = {.id = id, .tenant = "t", .workspace = "w", .all_paths = true};
	struct fz whole = {.b = snapshot_builder_new(&h)}, bits = {0};
	struct err *e1 = NULL, *e2 = NULL;
	char sha1[65], sha2[65];
	int rc1 = run(data, size, size > 0 ? size : 1, cap, &whole, sha1, &e1);
	int rc2 = run(data, size, piece, cap, &bits, sha2, &e2);
	if (rc1 != rc2 || (rc1 != 0 && (e1 == NULL || e2 == NULL)))
		abort();
	if (rc1 == 0 && (strcmp(sha1, sha2) != 0 || whole.n != bits.n))
		abort();
	/* Uncapped, the answer cannot depend on how the bytes were cut (a
	 * capped whole feed is refused at once, before any header). */
	if (rc1 != 0 && !capped && (whole.n != bits.n || strcmp(e1->message, e2->message) != 0))
		abort();

	if (rc1 == 0) {
		struct snapshot_tail t = {.size = size, .sha256 = sha1};
		size_t len = 0;
		char *text = snapshot_builder_finish(whole.b, &t, &len, &e1);
		if (text == NULL)
			abort();
		struct snapshot_manifest *m = snapshot_manifest_parse(text, len, MAX_ENTRIES, &e1);
		if (m == NULL || m->n_entries != whole.n)
			abort();
		struct snapshot_verify *v = snapshot_verify_new(m);
		struct tar_scan *ts = tar_scan_new(m->size, m->n_entries, snapshot_verify_entry, v);
		if (tar_scan_feed(ts, data, size, &e1) != 0 || tar_scan_finish(ts, &e1) != 0 ||
		    snapshot_verify_finish(v, ts, &e1) != 0)
			abort();
		tar_scan_free(ts);
		snapshot_verify_free(v);
		snapshot_manifest_free(m);
		free(text);
	}
	snapshot_builder_free(whole.b);
	err_free(e1);
	err_free(e2);
	return 0;
}
