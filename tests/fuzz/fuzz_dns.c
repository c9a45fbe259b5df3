/* fuzz_dns.c: the egress resolver's DNS response parser on hostile bytes.
 * The response's own id is the one expected (so the fuzzer gets past that
 * check at once), the question is "a.test" (the seed corpus has valid
 * answers to it) and the type is A or AAAA by the low bit of the last byte. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "resolver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2 || size > 65535)
		return 0;
	uint16_t id = (uint16_t)(data[0] << 8 | data[1]);
	uint16_t qtype = (data[size - 1] & 1) ? RESOLVER_TYPE_AAAA : RESOLVER_TYPE_A;
	struct resolver_answer a;
	struct err *e = NULL;
	int rc = resolver_parse_response(data, size, id, "a.test", qtype, &a, &e);
	if ((rc < 0) != (e != NULL) || a.n > RESOLVER_MAX_ADDRS)
		abort();
	for (size_t i = 0; i < a.n; i++)
		if (a.addrs[i].ss_family != (qtype == RESOLVER_TYPE_A ? AF_INET : AF_INET6))
			abort();
	err_free(e);
	return 0;
}
