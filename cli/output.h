/*
 * output.h: what ci-ctl prints for people: aligned tables, relative times,
 * and server JSON passed through for scripts.
 */
#ifndef CLI_OUTPUT_H
#define CLI_OUTPUT_H

#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include <yajl/yajl_tree.h>

/* A table of text cells printed with aligned columns. */
struct table;

/* headers: ncols strings, copied, or NULL for a table without a header
 * row.  Free with table_free(). */
struct table *table_new(size_t ncols, const char *const *headers);
void table_free(struct table *t);
/*
 * A copy of s with control characters shown as '?'.  File names and
 * metadata come from sandboxed code and tenants: printed raw, an escape
 * sequence in one could rewrite the operator's terminal.  Caller frees.
 */
char *output_clean(const char *s);

/* Adds a row of ncols cells (copied and cleaned; NULL prints as "-"). */
void table_add(struct table *t, const char *const *cells);
/* Sorts the rows (not the header) by column col, byte order (stable
 * for ids and paths; qsort, so equal cells may swap). */
void table_sort(struct table *t, size_t col);
/* Columns are padded to their widest cell (in terminal columns: wide CJK
 * glyphs count two, lib/wcwidth.h); the last one is not padded. */
void table_print(const struct table *t, FILE *out);

/* Parses RFC 3339 ("2024-05-01T12:00:00.123Z", "...+02:00"); -1 if not. */
int output_parse_time(const char *s, time_t *out);

/* "5s ago", "3m ago", "in 7m", "2d ago"... into buf; returns buf. */
char *output_age(time_t t, time_t now, char *buf, size_t len);

/* The same with two units, for a clock someone watches: "in 9m 58s",
 * "1h 5m ago", "42s ago" (a zero second unit is left out). */
char *output_age_exact(time_t t, time_t now, char *buf, size_t len);

/* A timestamp from the API shown relative to now, or as given when it does
 * not parse, or "-" when NULL; returns buf. */
char *output_when(const char *rfc3339, char *buf, size_t len);
/* The same with output_age_exact. */
char *output_when_exact(const char *rfc3339, char *buf, size_t len);

/* Text of a value for display: strings as they are, numbers as the server
 * wrote them, true/false/null, "" for NULL; objects and arrays re-encoded as
 * JSON.  Caller frees. */
char *output_json_text(yajl_val v);

/* Prints a server document as is, one per line, for --json. */
void output_json_doc(const char *body, size_t len);

/* Flushes stdout before writing to stderr, so that interleaved output
 * keeps its order on a terminal. */
void output_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
