/* digest.c: SHA-256 through OpenSSL's EVP, CRYPTO_memcmp, getrandom. */
#include "digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

void digest_sha256_hex(const void *data, size_t len, char out[DIGEST_HEX_LEN + 1])
{
	unsigned char md[32];
	unsigned int n = 0;
	if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != sizeof(md))
		abort(); /* only fails without memory */
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < sizeof(md); i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[DIGEST_HEX_LEN] = '\0';
}

bool digest_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

void digest_random(void *buf, size_t n)
{
	unsigned char *p = buf;
	while (n > 0) {
		ssize_t got = getrandom(p, n, 0);
		if (got <= 0)
			abort(); /* the kernel's CSPRNG does not fail once booted */
		p += got;
		n -= (size_t)got;
	}
}
