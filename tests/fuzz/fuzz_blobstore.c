/* fuzz_blobstore.c: what an S3 service answers (a ListObjectsV2 page, the
 * UploadId of CreateMultipartUpload, an error's Code), from any bytes:
 * parsed without crashing or leaking, and every key that comes out is a
 * valid key (blobstore.h), at most the cap of them, with a bounded token. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blobstore_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct blob_s3_list l;
	struct err *e = NULL;
	const char *body = (const char *)data;
	if (blob_s3_parse_list(body, size, "p/", 5, &l, &e) < 0) {
		if (e == NULL || l.n != 0)
			abort();
		err_free(e);
	} else {
		if (l.n > 5 || (l.next_token && strlen(l.next_token) > 1024))
			abort();
		for (size_t i = 0; i < l.n; i++)
			if (!blobstore_key_valid(l.entries[i].key))
				abort();
		blob_s3_list_clear(&l);
	}
	free(blob_s3_xml_value(body, size, "UploadId"));
	free(blob_s3_xml_value(body, size, "Code"));
	return 0;
}
