/*
 * output.c: tables, times and pass-through JSON for ci-ctl.
 */
#include "output.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "wcwidth.h"
#include "xalloc.h"

struct table {
	size_t ncols;
	size_t nrows; /* including the header row, if any */
	size_t cap;
	char **cells;   /* nrows * ncols */
	int has_header; /* row 0 is the header: sorting leaves it first */
};

struct table *table_new(size_t ncols, const char *const *headers)
{
	struct table *t = xcalloc(1, sizeof(*t));

	t->ncols = ncols;
	if (headers != NULL) {
		table_add(t, headers);
		t->has_header = 1;
	}
	return t;
}

void table_free(struct table *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

char *output_clean(const char *s)
{
	char *out = xstrdup(s), *p;

	for (p = out; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
			*p = '?';
	return out;
}

void table_add(struct table *t, const char *const *cells)
{
	size_t i;

	if (t->nrows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cells = xrealloc(t->cells, t->cap * t->ncols * sizeof(char *));
	}
	for (i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i] = output_clean(cells[i] != NULL ? cells[i] : "-");
	t->nrows++;
}

/* Display width in terminal columns, locale-independent (lib/wcwidth.c):
 * a wide CJK glyph takes two, a combining mark none. */
static size_t table_width(const char *s)
{
	return wcwidth_utf8(s);
}

void table_print(const struct table *t, FILE *out)
{
	size_t *width = xcalloc(t->ncols, sizeof(size_t));
	size_t r, col;

	for (r = 0; r < t->nrows; r++)
		for (col = 0; col < t->ncols; col++) {
			size_t w = table_width(t->cells[r * t->ncols + col]);

			if (w > width[col])
				width[col] = w;
		}
	for (r = 0; r < t->nrows; r++) {
		for (col = 0; col < t->ncols; col++) {
			const char *cell = t->cells[r * t->ncols + col];

			fputs(cell, out);
			if (col + 1 < t->ncols)
				fprintf(out, "%*s", (int)(width[col] - table_width(cell) + 2), "");
		}
		fputc('\n', out);
	}
	free(width);
}

/* qsort has no context argument: the column being sorted on. */
static size_t table_sort_col;

static int table_row_cmp(const void *a, const void *b)
{
	char *const *ra = a, *const *rb = b;

	return strcmp(ra[table_sort_col], rb[table_sort_col]);
}

void table_sort(struct table *t, size_t col)
{
	size_t first = t->has_header ? 1 : 0;
	char **rows;
	size_t r;

	if (col >= t->ncols || t->nrows <= first + 1)
		return;
	/* Rows are runs of ncols cells; sort whole runs through a copy. */
	rows = xcalloc(t->nrows - first, t->ncols * sizeof(char *));
	memcpy(rows, t->cells + first * t->ncols, (t->nrows - first) * t->ncols * sizeof(char *));
	table_sort_col = col;
	qsort(rows, t->nrows - first, t->ncols * sizeof(char *), table_row_cmp);
	for (r = 0; r < t->nrows - first; r++)
		memcpy(t->cells + (first + r) * t->ncols, rows + r * t->ncols,
		       t->ncols * sizeof(char *));
	free(rows);
}

static int output_digits(const char **p, int n, int *out)
{
	int v = 0;

	while (n-- > 0) {
		if (**p < '0' || **p > '9')
			return -1;
		v = v * 10 + (**p - '0');
		(*p)++;
	}
	*out = v;
	return 0;
}

int output_parse_time(const char *s, time_t *out)
{
	struct tm tm;
	int year, mon, day, hour, min, sec, oh, om, sign;
	time_t t;

	if (s == NULL || output_digits(&s, 4, &year) < 0 || *s++ != '-' ||
	    output_digits(&s, 2, &mon) < 0 || *s++ != '-' || output_digits(&s, 2, &day) < 0 ||
	    (*s != 'T' && *s != 't' && *s != ' '))
		return -1;
	s++;
	if (output_digits(&s, 2, &hour) < 0 || *s++ != ':' || output_digits(&s, 2, &min) < 0 ||
	    *s++ != ':' || output_digits(&s, 2, &sec) < 0)
		return -1;
	if (*s == '.') /* fractions of a second do not matter for display */
		for (s++; *s >= '0' && *s <= '9'; s++)
			;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -1;
	if (*s == 'Z' || *s == 'z') {
		s++;
	} else if (*s == '+' || *s == '-') {
		sign = *s++ == '-' ? -1 : 1;
		if (output_digits(&s, 2, &oh) < 0 || *s++ != ':' || output_digits(&s, 2, &om) < 0)
			return -1;
		/* local = UTC + offset, so UTC = local - offset */
		t -= sign * (oh * 3600 + om * 60);
	} else {
		return -1;
	}
	if (*s != '\0')
		return -1;
	*out = t;
	return 0;
}

char *output_age(time_t t, time_t now, char *buf, size_t len)
{
	long long d = (long long)now - (long long)t;
	long long a = d < 0 ? -d : d;
	const char *unit;
	long long n;

	if (a < 1) {
		snprintf(buf, len, "now");
		return buf;
	}
	if (a < 60)
		n = a, unit = "s";
	else if (a < 3600)
		n = a / 60, unit = "m";
	else if (a < 86400)
		n = a / 3600, unit = "h";
	else
		n = a / 86400, unit = "d";
	if (d > 0)
		snprintf(buf, len, "%lld%s ago", n, unit);
	else
		snprintf(buf, len, "in %lld%s", n, unit);
	return buf;
}

char *output_age_exact(time_t t, time_t now, char *buf, size_t len)
{
	static const struct {
		long long secs;
		const char *unit;
	} units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
	long long d = (long long)now - (long long)t;
	long long a = d < 0 ? -d : d;
	char span[64];
	size_t i;

	if (a < 1) {
		snprintf(buf, len, "now");
		return buf;
	}
	for (i = 0; a < units[i].secs; i++)
		;
	if (i + 1 < sizeof(units) / sizeof(units[0]) && a % units[i].secs / units[i + 1].secs > 0)
		snprintf(span, sizeof(span), "%lld%s %lld%s", a / units[i].secs, units[i].unit,
			 a % units[i].secs / units[i + 1].secs, units[i + 1].unit);
	else
		snprintf(span, sizeof(span), "%lld%s", a / units[i].secs, units[i].unit);
	if (d > 0)
		snprintf(buf, len, "%s ago", span);
	else
		snprintf(buf, len, "in %s", span);
	return buf;
}

static char *output_when_with(const char *rfc3339, char *buf, size_t len,
			      char *(*age)(time_t, time_t, char *, size_t))
{
	time_t t;

	if (rfc3339 == NULL)
		snprintf(buf, len, "-");
	else if (output_parse_time(rfc3339, &t) == 0)
		age(t, time(NULL), buf, len);
	else
		snprintf(buf, len, "%s", rfc3339);
	return buf;
}

char *output_when(const char *rfc3339, char *buf, size_t len)
{
	return output_when_with(rfc3339, buf, len, output_age);
}

char *output_when_exact(const char *rfc3339, char *buf, size_t len)
{
	return output_when_with(rfc3339, buf, len, output_age_exact);
}

void output_json_doc(const char *body, size_t len)
{
	if (len == 0)
		return;
	fwrite(body, 1, len, stdout);
	if (body[len - 1] != '\n')
		fputc('\n', stdout);
}

void output_note(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

char *output_json_text(yajl_val v)
{
	AUTOGEN yajl_gen g = NULL;
	const char *doc;

	if (v == NULL)
		return xstrdup("");
	switch (v->type) {
	case yajl_t_string: return xstrdup(v->u.string);
	case yajl_t_number: return xstrdup(v->u.number.r);
	case yajl_t_true: return xstrdup("true");
	case yajl_t_false: return xstrdup("false");
	case yajl_t_null: return xstrdup("null");
	default: break;
	}
	g = json_gen_new();
	jg_value(g, v);
	doc = jg_text(g, NULL);
	return xstrdup(doc);
}
