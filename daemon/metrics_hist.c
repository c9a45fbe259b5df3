/* metrics_hist.c: histograms and the Prometheus text format's escaping. */
#include "metrics_hist.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "xalloc.h"

const double metrics_latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
					 0.5,   1,      2.5,   5,    10,    30,   60};
const size_t metrics_latency_nbounds =
    sizeof(metrics_latency_bounds) / sizeof(metrics_latency_bounds[0]);

void metrics_hist_init(struct metrics_hist *h, const double *bounds, size_t n)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->n = n > METRICS_HIST_MAX_BUCKETS ? METRICS_HIST_MAX_BUCKETS : n;
}

void metrics_hist_observe(struct metrics_hist *h, double v)
{
	if (!(v > 0)) /* negative and NaN too */
		v = 0;
	/* The first bound at or above v (le is "less or equal"). */
	size_t lo = 0, hi = h->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v <= h->bounds[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	h->counts[lo]++;
	h->count++;
	h->sum += v;
}

int metrics_printf(struct buf *b, const char *fmt, ...)
{
	char line[1024];
	va_list ap, again;
	va_start(ap, fmt);
	va_copy(again, ap);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	int rc = -1;
	if (n >= 0 && (size_t)n < sizeof(line)) {
		rc = buf_append(b, line, (size_t)n);
	} else if (n >= 0) { /* a long block of fixed series */
		char *big = xmalloc((size_t)n + 1);
		vsnprintf(big, (size_t)n + 1, fmt, again);
		rc = buf_append(b, big, (size_t)n);
		free(big);
	}
	va_end(again);
	return rc;
}

int metrics_head(struct buf *b, const char *name, const char *type, const char *help)
{
	return metrics_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int metrics_hist_write(const struct metrics_hist *h, struct buf *b, const char *name,
		       const char *labels)
{
	const char *sep = labels[0] ? "," : "";
	uint64_t cum = 0;
	for (size_t i = 0; i <= h->n; i++) {
		cum += h->counts[i];
		char le[32];
		if (i < h->n)
			snprintf(le, sizeof(le), "%g", h->bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		if (metrics_printf(b, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, labels, sep, le,
				   (unsigned long long)cum) < 0)
			return -1;
	}
	const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
	return metrics_printf(b, "%s_sum%s%s%s %.6f\n%s_count%s%s%s %llu\n", name, open, labels,
			      close, h->sum, name, open, labels, close,
			      (unsigned long long)h->count);
}

int metrics_label_escape(struct buf *b, const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strnlen(s, max), i = 0;
	while (i < len) {
		size_t good = json_utf8_valid_prefix(u + i, len - i);
		/* Copy the valid run up to its first byte that needs escaping. */
		size_t k = 0;
		while (k < good && u[i + k] >= 0x20 && u[i + k] != 0x7f && u[i + k] != '\\' &&
		       u[i + k] != '"')
			k++;
		if (k && buf_append(b, u + i, k) < 0)
			return -1;
		i += k;
		if (i >= len)
			break;
		int rc;
		if (k < good && u[i] == '\\')
			rc = buf_append(b, "\\\\", 2);
		else if (k < good && u[i] == '"')
			rc = buf_append(b, "\\\"", 2);
		else if (k < good && u[i] == '\n')
			rc = buf_append(b, "\\n", 2);
		else /* a control byte, or the first byte of an invalid sequence */
			rc = buf_append(b, "\xEF\xBF\xBD", 3);
		if (rc < 0)
			return -1;
		i++;
	}
	return 0;
}
