/* metrics_hist.h: pieces of the Prometheus text format (0.0.4): cumulative
 * histograms with fixed buckets, label values escaped, and the HELP/TYPE
 * heads. Pure (no event loop), unit-tested; /metrics (api_probes.c) writes
 * its page with these into one capped buffer. */
#ifndef CI_METRICS_HIST_H
#define CI_METRICS_HIST_H

#include <stddef.h>
#include <stdint.h>

struct buf;

#define METRICS_HIST_MAX_BUCKETS 24

/* A histogram: how many observations fell at or below each bound. Counts
 * are kept per bucket and summed when written (the format's buckets are
 * cumulative), so an observation costs one search and one increment. */
struct metrics_hist {
	const double *bounds; /* ascending upper bounds; +Inf is implied */
	size_t n;
	uint64_t counts[METRICS_HIST_MAX_BUCKETS + 1]; /* [n]: above the last bound */
	uint64_t count;
	double sum;
};

/* Latency buckets in seconds, 1 ms to 60 s (create, exec, HTTP). */
extern const double metrics_latency_bounds[];
extern const size_t metrics_latency_nbounds;

/* An empty histogram over bounds (n at most METRICS_HIST_MAX_BUCKETS; the
 * array must outlive h). */
void metrics_hist_init(struct metrics_hist *h, const double *bounds, size_t n);

/* Count v (seconds). A negative or NaN v counts as 0: a clock that went
 * back must not make the sum decrease, which a reader takes as a reset. */
void metrics_hist_observe(struct metrics_hist *h, double v);

/* Append name_bucket{labels,le="..."} for every bound and +Inf, then
 * name_sum and name_count. labels is "" or label pairs already escaped
 * (`pool="hit"`). -1 when b's cap is reached. */
int metrics_hist_write(const struct metrics_hist *h, struct buf *b, const char *name,
		       const char *labels);

/* Append s as the inside of a label value: backslash, double quote and line
 * feed escaped as the format says; other control bytes and invalid UTF-8
 * become U+FFFD, so no input can end a sample or a line. At most max bytes
 * of s are read. -1 when b's cap is reached. */
int metrics_label_escape(struct buf *b, const char *s, size_t max);

/* Append "# HELP name help\n# TYPE name type\n". */
int metrics_head(struct buf *b, const char *name, const char *type, const char *help);

/* Append formatted text. -1 when b's cap is reached. */
int metrics_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
