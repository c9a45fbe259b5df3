/* test_codec.c: base64, percent-encoding and number parsing (lib/codec.c). */
#include <stdlib.h>

#include "buf.h"
#include "codec.h"
#include "unit.h"
#include "xalloc.h"

TEST(base64_vectors)
{
	const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (int i = 0; i < 7; i++) {
		char *b = codec_base64_encode((const unsigned char *)in[i], strlen(in[i]));
		CHECK_STR(b, out[i]);
		free(b);
	}
}

/* Decodes in with a cap of max; the text, or NULL when it was refused. */
static char *codec_try_decode(const char *in, size_t max)
{
	struct buf b;
	buf_init(&b, max);
	if (codec_base64_decode(in, &b) < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

TEST(base64_decode_reads_both_alphabets_and_loose_padding)
{
	static const char *const cases[][2] = {
	    {"", ""},
	    {"Zm9vYmFy", "foobar"},
	    {"Zm9vYg==", "foob"},
	    {"Zm9vYg", "foob"},           /* padding optional */
	    {"Zm9v\nYmFy\r\n", "foobar"}, /* whitespace ignored */
	    {" Z m 8 = ", "fo"},
	    {"-_8", "\xfb\xff"},  /* URL-safe alphabet */
	    {"+/8=", "\xfb\xff"}, /* standard alphabet */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		AUTOFREE char *got = codec_try_decode(cases[i][0], 1024);
		CHECK_STR(got, cases[i][1]);
	}
}

TEST(base64_decode_refuses_malformed_input)
{
	const char *bad[] = {
	    "Z",          /* six bits cannot end a byte sequence */
	    "Zm9vY",      /* 6 leftover bits */
	    "Zg==Zg==",   /* data after padding */
	    "Zg===",      /* three pad characters */
	    "Zm9v!",      /* not base64 */
	    "Zm\x80v",    /* high byte */
	    "Zm9v\x01YQ", /* control character */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(codec_try_decode(bad[i], 1024) == NULL);
}

TEST(base64_decode_stops_at_the_cap)
{
	CHECK(codec_try_decode("Zm9vYmFy", 5) == NULL);
	AUTOFREE char *ok = codec_try_decode("Zm9vYmFy", 6);
	CHECK_STR(ok, "foobar");
}

TEST(base64_round_trips_every_byte)
{
	unsigned char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	for (size_t n = 0; n <= sizeof(all); n += 37) {
		AUTOFREE char *enc = codec_base64_encode(all, n);
		struct buf b;
		buf_init(&b, 1024);
		CHECK(codec_base64_decode(enc, &b) == 0);
		CHECK(b.len == n && (n == 0 || memcmp(b.data, all, n) == 0));
		buf_release(&b);
	}
}

TEST(url_escape_keeps_unreserved_and_optionally_slashes)
{
	AUTOFREE char *a = codec_url_escape("a b?c#d%e/f~g-h_i.j", 0);
	CHECK_STR(a, "a%20b%3Fc%23d%25e%2Ff~g-h_i.j");
	AUTOFREE char *b = codec_url_escape("dir/a b.txt", 1);
	CHECK_STR(b, "dir/a%20b.txt");
	AUTOFREE char *c = codec_url_escape("\xc3\xa9\x01", 0);
	CHECK_STR(c, "%C3%A9%01");
	AUTOFREE char *d = codec_url_escape("", 1);
	CHECK_STR(d, "");
}

TEST(parse_long_takes_whole_numbers_in_range_only)
{
	long v = 0;
	CHECK(codec_parse_long("42", 1, 100, &v) == 0 && v == 42);
	CHECK(codec_parse_long("-5", -10, 10, &v) == 0 && v == -5);
	v = 7;
	const char *bad[] = {"", "x", "4x", "4 ", "0", "101", "1.5", "99999999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(codec_parse_long(bad[i], 1, 100, &v) == -1);
	CHECK(v == 7); /* untouched on failure */
}

TEST(parse_double_takes_finite_numbers_in_range_only)
{
	double d = 0;
	CHECK(codec_parse_double("0.5", 1e-3, 10, &d) == 0 && d == 0.5);
	CHECK(codec_parse_double("1e-3", 1e-3, 10, &d) == 0 && d == 1e-3);
	d = 7;
	const char *bad[] = {"", "x", "1.5s", "0", "11", "inf", "nan", "1e999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(codec_parse_double(bad[i], 1e-3, 10, &d) == -1);
	CHECK(d == 7);
}
