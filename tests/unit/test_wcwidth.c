/* test_wcwidth.c: display width for ci-ctl's tables (lib/wcwidth.c). */
#include "unit.h"
#include "wcwidth.h"

TEST(wcwidth_cjk_counts_two_columns_ascii_one)
{
	CHECK(wcwidth_utf8("data.csv") == 8);
	CHECK(wcwidth_utf8("数据.csv") == 8); /* 2 + 2 + 4 */
	CHECK(wcwidth_utf8("データ") == 6);   /* katakana */
	CHECK(wcwidth_utf8("한국어") == 6);   /* Hangul syllables */
	CHECK(wcwidth_utf8("ＡＢ") == 4);     /* fullwidth Latin */
	CHECK(wcwidth_utf8("🐍") == 2);
	CHECK(wcwidth_utf8("") == 0);
}

TEST(wcwidth_accents_and_combining_marks)
{
	CHECK(wcwidth_utf8("café") == 4);         /* precomposed é */
	CHECK(wcwidth_utf8("cafe\xcc\x81") == 4); /* e + U+0301 combining acute */
	CHECK(wcwidth_utf8("a\xe2\x80\x8b"
			   "b") == 2); /* zero-width space */
	CHECK(wcwidth_cp(0x4E00) == 2 && wcwidth_cp(0x9FFF) == 2 && wcwidth_cp(0x41) == 1);
	CHECK(wcwidth_cp(0x0301) == 0 && wcwidth_cp(0x20000) == 2);
}

TEST(wcwidth_invalid_bytes_count_one_each)
{
	CHECK(wcwidth_utf8("\xff") == 1);
	CHECK(wcwidth_utf8("a\xe6\x95") == 3);        /* cut short: two stray bytes */
	CHECK(wcwidth_utf8("\xc0\xaf") == 2);         /* overlong '/' */
	CHECK(wcwidth_utf8("\xed\xa0\x80") == 3);     /* a surrogate */
	CHECK(wcwidth_utf8("\xf4\x90\x80\x80") == 4); /* past U+10FFFF */
}
