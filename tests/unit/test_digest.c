/* test_digest.c: SHA-256 vectors and the comparison. */
#include <string.h>

#include "digest.h"
#include "unit.h"

TEST(digest_sha256_vectors)
{
	char h[DIGEST_HEX_LEN + 1];
	digest_sha256_hex("", 0, h);
	CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	digest_sha256_hex("abc", 3, h);
	CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(digest_equal_and_random)
{
	CHECK(digest_equal("abcd", "abcd", 4));
	CHECK(!digest_equal("abcd", "abce", 4));
	unsigned char a[16] = {0}, b[16] = {0};
	digest_random(a, sizeof(a));
	digest_random(b, sizeof(b));
	CHECK(memcmp(a, b, sizeof(a)) != 0);
}
