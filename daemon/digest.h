/* digest.h: SHA-256 (OpenSSL) and a constant-time comparison, for API keys
 * (stored hashed, compared without leaking where they differ) and the
 * audit's code hashes. Pure, unit-tested. */
#ifndef CI_DIGEST_H
#define CI_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

#define DIGEST_HEX_LEN 64

/* The SHA-256 of data, as 64 lowercase hex digits and a NUL, into out. */
void digest_sha256_hex(const void *data, size_t len, char out[DIGEST_HEX_LEN + 1]);

/* Whether a and b (n bytes each) are equal, in time that depends on n only. */
bool digest_equal(const void *a, const void *b, size_t n);

/* n random bytes from the kernel's CSPRNG into buf (aborts if it fails). */
void digest_random(void *buf, size_t n);

#endif
