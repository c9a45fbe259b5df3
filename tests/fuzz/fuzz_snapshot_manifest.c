/* fuzz_snapshot_manifest.c: the manifest parser on any text (a manifest
 * read back from the store is hostile). Whatever the bytes: a refusal is
 * ERR_CORRUPT with a message; an acceptance holds entries that are within
 * the cap, each with a path tar_path_check takes, in the tar's order, a
 * mode in 0..0777, a file's sha256 64 hex digits, counts that add up. */
#include <stdlib.h>
#include <string.h>

#include "snapshot_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err *e = NULL;
	struct snapshot_manifest *m = snapshot_manifest_parse((const char *)data, size, 100, &e);
	if (m == NULL) {
		if (e == NULL || e->code != ERR_CORRUPT || e->message[0] == '\0')
			abort();
		err_free(e);
		return 0;
	}
	if (e != NULL || m->n_entries > 100 || !snapshot_uuid_valid(m->id) ||
	    strlen(m->sha256) != TAR_SHA256_HEX)
		abort();
	uint64_t files = 0, bytes = 0;
	for (size_t i = 0; i < m->n_entries; i++) {
		const struct snapshot_entry *en = &m->entries[i];
		if (tar_path_check(en->path, strlen(en->path), NULL) != 0 || en->mode > 0777 ||
		    tar_order_check(i ? m->entries[i - 1].path : NULL,
				    i ? m->entries[i - 1].dir : false, en->path) != NULL)
			abort();
		if (!en->dir) {
			if (strlen(en->sha256) != TAR_SHA256_HEX)
				abort();
			files++;
			bytes += en->size;
		}
	}
	if (files != m->files || bytes != m->content_bytes || bytes > m->size)
		abort();
	snapshot_manifest_free(m);
	return 0;
}
