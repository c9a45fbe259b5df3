/* test_metrics.c: histograms, the text format's label escaping, the request
 * and tenant series (bounded), and the log's escaping in both formats (a
 * hostile value never ends a line or forges another). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "buf.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "metrics_hist.h"
#include "unit.h"

static const double small_bounds[] = {0.001, 0.01, 0.1, 1};

TEST(metrics_hist_buckets_are_le_and_cumulative)
{
	struct metrics_hist h;
	metrics_hist_init(&h, small_bounds, 4);
	metrics_hist_observe(&h, 0.001); /* on a bound: that bucket (le) */
	metrics_hist_observe(&h, 0.0005);
	metrics_hist_observe(&h, 0.05);
	metrics_hist_observe(&h, 1.0);
	metrics_hist_observe(&h, 5.0); /* above the last: only +Inf */
	metrics_hist_observe(&h, -3);  /* a clock that went back counts as 0 */
	CHECK(h.counts[0] == 3 && h.counts[1] == 0 && h.counts[2] == 1 && h.counts[3] == 1);
	CHECK(h.counts[4] == 1 && h.count == 6);
	CHECK(h.sum > 6.0514 && h.sum < 6.0516);
	struct buf b;
	buf_init(&b, 1 << 16);
	CHECK(metrics_hist_write(&h, &b, "x_seconds", "pool=\"hit\"") == 0);
	CHECK_STR(b.data, "x_seconds_bucket{pool=\"hit\",le=\"0.001\"} 3\n"
			  "x_seconds_bucket{pool=\"hit\",le=\"0.01\"} 3\n"
			  "x_seconds_bucket{pool=\"hit\",le=\"0.1\"} 4\n"
			  "x_seconds_bucket{pool=\"hit\",le=\"1\"} 5\n"
			  "x_seconds_bucket{pool=\"hit\",le=\"+Inf\"} 6\n"
			  "x_seconds_sum{pool=\"hit\"} 6.051500\n"
			  "x_seconds_count{pool=\"hit\"} 6\n");
	buf_release(&b);
	buf_init(&b, 1 << 16);
	struct metrics_hist empty;
	metrics_hist_init(&empty, small_bounds, 1);
	CHECK(metrics_hist_write(&empty, &b, "y", "") == 0);
	CHECK_STR(b.data, "y_bucket{le=\"0.001\"} 0\ny_bucket{le=\"+Inf\"} 0\ny_sum 0.000000\n"
			  "y_count 0\n");
	buf_release(&b);
}

TEST(metrics_latency_bounds_span_1ms_to_60s_ascending)
{
	CHECK(metrics_latency_nbounds <= METRICS_HIST_MAX_BUCKETS);
	CHECK(metrics_latency_bounds[0] == 0.001);
	CHECK(metrics_latency_bounds[metrics_latency_nbounds - 1] == 60);
	for (size_t i = 1; i < metrics_latency_nbounds; i++)
		CHECK(metrics_latency_bounds[i] > metrics_latency_bounds[i - 1]);
}

TEST(metrics_label_escape_keeps_one_sample_per_line)
{
	struct buf b;
	buf_init(&b, 4096);
	CHECK(metrics_label_escape(&b, "a\"b\\c\nd\re\x01\x7f\xff\xc3\xa9", 100) == 0);
	/* quote, backslash and LF escaped; CR, controls and the bad byte
	 * replaced; the valid é kept. */
	CHECK_STR(b.data, "a\\\"b\\\\c\\nd\xEF\xBF\xBD"
			  "e\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xc3\xa9");
	buf_release(&b);
	buf_init(&b, 4096);
	CHECK(metrics_label_escape(&b, "abcdef", 3) == 0); /* at most max bytes read */
	CHECK_STR(b.data, "abc");
	buf_release(&b);
	buf_init(&b, 4);
	CHECK(metrics_label_escape(&b, "abcdef", 100) < 0); /* the cap holds */
	buf_release(&b);
}

TEST(metrics_requests_by_route_method_status_are_bounded)
{
	struct metrics *mx = metrics_new();
	static const char route[] = "/v1/sessions/{id}/exec";
	metrics_count_request(mx, route, "POST", 200, 0.01);
	metrics_count_request(mx, route, "POST", 200, 0.02);
	metrics_count_request(mx, NULL, "BREW", 404, 0.001); /* no route, unknown method */
	metrics_count_request(mx, NULL, "GET", 0, 0.001);    /* the client left: 499 */
	metrics_count_request(mx, NULL, "GET", 9999, 0.001); /* not a status: 499 too */
	CHECK(mx->n_requests == 3);
	CHECK(mx->requests[0].count == 2);
	CHECK(mx->http_duration.count == 5);
	struct buf b;
	buf_init(&b, 1 << 20);
	CHECK(metrics_write(mx, &b) == 0);
	CHECK(strstr(b.data, "ci_http_requests_total{route=\"/v1/sessions/{id}/exec\",method="
			     "\"POST\",status=\"200\"} 2\n") != NULL);
	CHECK(strstr(b.data, "{route=\"other\",method=\"other\",status=\"404\"} 1\n") != NULL);
	CHECK(strstr(b.data, "{route=\"other\",method=\"GET\",status=\"499\"} 2\n") != NULL);
	CHECK(strstr(b.data, "# TYPE ci_exec_duration_seconds histogram\n") != NULL);
	buf_release(&b);
	/* Past the cap nothing new is made; the loss is counted. */
	static char routes[METRICS_REQUEST_SERIES_MAX + 10][8];
	for (size_t i = 0; i < METRICS_REQUEST_SERIES_MAX + 10; i++)
		metrics_count_request(mx, routes[i], "GET", 200, 0);
	CHECK(mx->n_requests == METRICS_REQUEST_SERIES_MAX);
	CHECK(mx->requests_dropped == 13);
	metrics_free(mx);
}

TEST(metrics_tenants_are_capped_and_the_rest_summed_as_other)
{
	struct metrics *mx = metrics_new();
	char name[32];
	for (int i = 0; i < METRICS_TENANTS_MAX + 5; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		metrics_count_exec(mx, name, 0.5);
		metrics_count_create(mx, name, METRICS_CREATE_POOL_MISS, 0.2);
	}
	metrics_count_exec(mx, "t0", 1.0); /* an existing one still has its own */
	metrics_count_tenant_session(mx, NULL);
	CHECK(mx->n_tenants == METRICS_TENANTS_MAX);
	CHECK(metrics_tenant(mx, "t0")->execs == 2 &&
	      metrics_tenant(mx, "t0")->exec_seconds == 1.5);
	/* "default" came after the cap: it is one of the others. */
	CHECK(mx->other.execs == 5 && mx->other.sessions_created == 6);
	CHECK(mx->exec_duration.count == METRICS_TENANTS_MAX + 6);
	CHECK(mx->create_duration[METRICS_CREATE_POOL_MISS].count == METRICS_TENANTS_MAX + 5);
	struct buf b;
	buf_init(&b, 8 << 20);
	CHECK(metrics_write(mx, &b) == 0);
	CHECK(strstr(b.data, "ci_tenant_execs_total{tenant=\"t0\"} 2\n") != NULL);
	CHECK(strstr(b.data, "ci_tenant_exec_seconds_total{tenant=\"t0\"} 1.500000\n") != NULL);
	CHECK(strstr(b.data, "ci_tenant_execs_total{tenant=\"_other\"} 5\n") != NULL);
	CHECK(strstr(b.data, "ci_tenant_sessions_created_total{tenant=\"_other\"} 6\n") != NULL);
	CHECK(strstr(b.data, "{tenant=\"t1004\"}") == NULL);
	buf_release(&b);
	metrics_free(mx);
	/* A name longer than any tenant's is never cut into another's. */
	mx = metrics_new();
	char long_name[METRICS_TENANT_NAME_MAX + 8];
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	CHECK(metrics_tenant(mx, long_name) == &mx->other);
	metrics_free(mx);
}

TEST(log_text_escape_writes_controls_as_hex)
{
	char out[128];
	log_text_escape(out, sizeof(out), "a\nb\r\x01\x7f\"c\\", false);
	CHECK_STR(out, "a\\x0ab\\x0d\\x01\\x7f\"c\\");
	log_text_escape(out, sizeof(out), "say \"hi\"\n", true);
	CHECK_STR(out, "\"say \\\"hi\\\"\\x0a\"");
	/* Cut when full, never past the end, never half an escape. */
	log_text_escape(out, 6, "ab\ncd", false);
	CHECK_STR(out, "ab");
}

/* Run fn with stderr going to a file, and return what it wrote (freed by
 * the caller). */
static char *capture_stderr(void (*fn)(void))
{
	fflush(stderr);
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	long n = ftell(tmp);
	char *text = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
	rewind(tmp);
	if (n > 0 && fread(text, 1, (size_t)n, tmp) != (size_t)n)
		text[0] = '\0';
	fclose(tmp);
	return text;
}

static const char hostile[] =
    "/x\r\n2026-01-01T00:00:00.000Z error forged\"}\n{\"msg\":\"forged\x01"
    "\xff\xfe\\";

static void write_hostile_lines(void)
{
	struct log_field f[] = {LOG_STR("path", hostile), LOG_NUM("status", 404),
				LOG_STR("absent", NULL), LOG_STR("request_id", "rid-1")};
	log_fields(LOG_LEVEL_INFO, "access", f, 4);
	log_write(LOG_LEVEL_WARN, "GET %s: failed", hostile);
	log_fields(LOG_LEVEL_DEBUG, "below the threshold", f, 1);
	log_raw_line("{\"audit\":1}");
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* The hostile lines as written in format f: three lines, whatever they
 * carry. */
static char *hostile_lines_in(enum log_format f)
{
	enum log_format saved = log_format;
	log_format = f;
	char *text = capture_stderr(write_hostile_lines);
	log_format = saved;
	CHECK(count_lines(text) == 3);
	return text;
}

TEST(log_json_lines_are_one_object_each_whatever_they_carry)
{
	char *text = hostile_lines_in(LOG_FORMAT_JSON);
	char *line = text;
	for (int i = 0; i < 3 && line && *line; i++) {
		char *nl = strchr(line, '\n');
		CHECK(nl != NULL);
		if (nl == NULL)
			break;
		struct err *e = NULL;
		yajl_val v = json_parse(line, (size_t)(nl - line), &e);
		CHECK(v != NULL && YAJL_IS_OBJECT(v));
		if (i == 0) {
			const char *ts = json_get_str(v, "ts");
			CHECK(ts && strlen(ts) == 24 && ts[10] == 'T' && ts[19] == '.' &&
			      ts[23] == 'Z');
			CHECK_STR(json_get_str(v, "level"), "info");
			CHECK_STR(json_get_str(v, "msg"), "access");
			CHECK_STR(json_get_str(v, "request_id"), "rid-1");
			int64_t st = 0;
			CHECK(json_get_int(v, "status", &st) && st == 404);
			CHECK(json_get(v, "absent") == NULL);
			/* The path comes back as sent, but the bad bytes replaced. */
			const char *p = json_get_str(v, "path");
			CHECK(p && strncmp(p, "/x\r\n2026", 8) == 0 && strstr(p, "\xEF\xBF\xBD"));
		} else if (i == 1) {
			CHECK_STR(json_get_str(v, "level"), "warn");
			CHECK(strstr(json_get_str(v, "msg"), "forged\"}\n{") != NULL);
		} else {
			CHECK(json_get(v, "audit") != NULL); /* as is */
		}
		json_free(v);
		err_free(e);
		line = nl + 1;
	}
	free(text);
}

TEST(log_text_lines_cannot_be_forged)
{
	char *text = hostile_lines_in(LOG_FORMAT_TEXT);
	/* Every line but the audit's starts with our stamp; none with the
	 * forged one. */
	char *second = strchr(text, '\n') + 1;
	CHECK(strncmp(text, "2026-01-01T00", 13) != 0 && text[23] == 'Z');
	CHECK(strncmp(second, "2026-01-01T00", 13) != 0 && second[23] == 'Z');
	CHECK(strstr(text, " info  access path=\"/x\\x0d\\x0a2026-01-01T00:00:00.000Z error "
			   "forged\\\"}\\x0a{\\\"msg\\\":\\\"forged\\x01") != NULL);
	CHECK(strstr(text, " status=404 request_id=rid-1\n") != NULL);
	CHECK(strstr(second, " warn  GET /x\\x0d\\x0a2026") != NULL);
	CHECK(strstr(text, "\n{\"audit\":1}\n") != NULL);
	free(text);
}
