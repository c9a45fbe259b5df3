/*
 * wcwidth.h: how many terminal columns UTF-8 text takes, without the C
 * library's locale: ci-ctl runs under LANG=C in cron and containers too, and
 * its tables must line up there the same (a file named 数据.csv is 8
 * columns wide, not 6 or 10).
 */
#ifndef CI_WCWIDTH_H
#define CI_WCWIDTH_H

#include <stddef.h>
#include <stdint.h>

/* Columns of one code point: 0 for combining marks and zero-width ones, 2
 * for East Asian wide and fullwidth ones (CJK, Hangul, kana, most emoji),
 * else 1.  Control characters count 1 (output_clean shows them as '?'). */
int wcwidth_cp(uint32_t cp);

/* Columns of a NUL-terminated UTF-8 string; a byte that does not start a
 * valid sequence counts as one column (it prints as one replacement). */
size_t wcwidth_utf8(const char *s);

#endif
