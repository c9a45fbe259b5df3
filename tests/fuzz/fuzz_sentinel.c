/* fuzz_sentinel.c: what a sentinel says of the master (its address and port,
 * as two strings of any bytes) and the sentinel:// URL (store_sentinel.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The first byte splits the rest into a host and a port. */
	if (size > 0) {
		size_t cut = data[0] % size;
		const char *rest = (const char *)data + 1;
		char out[STORE_SENTINEL_ADDR_MAX];
		int port = 0;
		if (store_sentinel_check_addr(rest, cut, rest + cut, size - 1 - cut, out, &port) ==
		    0) {
			if (port < 1 || port > 65535 || strlen(out) >= sizeof(out))
				abort();
		}
	}
	char *url = malloc(size + 1);
	memcpy(url, data, size);
	url[size] = '\0';
	struct store_sentinel_url u;
	struct err *e = NULL;
	if (store_sentinel_parse_url(url, &u, &e) == 0) {
		if (u.n == 0 || u.n > STORE_SENTINELS_MAX || u.master == NULL)
			abort();
		store_sentinel_url_clear(&u);
	}
	err_free(e);
	free(url);
	return 0;
}
