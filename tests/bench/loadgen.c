/* loadgen: a small closed-loop HTTP/1.1 load generator for the exec
 * throughput benchmark (tests/bench, issue 6).
 *
 * One keep-alive connection per session; each connection sends
 *   POST /v1/sessions/<id>/exec  {"code":"1"}
 * back to back (the next request leaves as soon as the previous answer is
 * read) for DURATION seconds, on one libevent loop in one thread. It counts
 * the answers that arrived inside the window by status, keeps every latency,
 * and prints one JSON object on stdout:
 *   {"duration_s":…,"connections":…,"ok":…,"non_200":…,"errors":…,
 *    "execs_per_s":…,"p50_ms":…,"p99_ms":…,"max_ms":…,"cpu_s":…,"cpu_pct":…}
 * cpu_pct is this process's own CPU time over the window: well under 100 %
 * means the client was not the bottleneck.
 *
 * Only loopback: the host is always 127.0.0.1.
 *
 *   loadgen --port PORT [--duration S] [--code PYTHON] [--api-key KEY] ID...
 *   loadgen --port PORT [--duration S] [--api-key KEY] --get PATH --conns N
 *
 * --api-key sends "Authorization: Bearer KEY" on every request; --get sends
 * GET PATH on N connections instead of executions (the auth-check rate of
 * the keys benchmark: GET /v1/sessions costs the daemon little else).
 *
 * Build: cc -O2 -Wall -Wextra -Werror tests/bench/loadgen.c -o build/bench/loadgen \
 *        $(pkg-config --cflags --libs libevent)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

enum body_mode { BODY_LENGTH, BODY_CHUNK_SIZE, BODY_CHUNK_DATA, BODY_CHUNK_TRAILER };

struct conn {
	struct bufferevent *bev;
	const char *id;
	char *request;
	size_t request_len;
	bool in_headers;
	int status;
	enum body_mode mode;
	size_t left;
	double sent_at;
	int reconnects;
};

static struct event_base *base;
static struct sockaddr_in addr;
static double t_start, t_end;
static bool stopping;
static uint64_t n_ok, n_non200, n_errors;
static double *lat;
static size_t n_lat, cap_lat;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void record(double ms)
{
	if (n_lat == cap_lat) {
		cap_lat = cap_lat ? cap_lat * 2 : 65536;
		double *p = realloc(lat, cap_lat * sizeof *lat);
		if (p == NULL) {
			fprintf(stderr, "loadgen: out of memory\n");
			exit(2);
		}
		lat = p;
	}
	lat[n_lat++] = ms;
}

static void conn_open(struct conn *c);

static void send_request(struct conn *c)
{
	if (stopping)
		return;
	c->in_headers = true;
	c->status = 0;
	c->sent_at = now_s();
	bufferevent_write(c->bev, c->request, c->request_len);
}

static void answer_done(struct conn *c)
{
	double done = now_s();
	if (done <= t_end) {
		if (c->status == 200) {
			n_ok++;
			record((done - c->sent_at) * 1000.0);
		} else {
			n_non200++;
		}
	}
	send_request(c);
}

/* Parse the status line and the framing headers of a complete header block. */
static int parse_headers(struct conn *c, char *h)
{
	if (strncmp(h, "HTTP/1.", 7) != 0 || strlen(h) < 12)
		return -1;
	c->status = atoi(h + 9);
	c->mode = BODY_LENGTH;
	c->left = 0;
	bool have_length = false;
	for (char *line = strstr(h, "\r\n"); line; line = strstr(line, "\r\n")) {
		line += 2;
		if (strncasecmp(line, "Content-Length:", 15) == 0) {
			c->left = (size_t)strtoull(line + 15, NULL, 10);
			have_length = true;
		} else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 &&
			   strcasestr(line, "chunked") != NULL) {
			c->mode = BODY_CHUNK_SIZE;
		}
	}
	if (c->mode == BODY_LENGTH && !have_length)
		return -1; /* a body that ends with the connection: not keep-alive */
	return 0;
}

/* 1 = the answer is complete, 0 = need more bytes, -1 = malformed. */
static int read_answer(struct conn *c, struct evbuffer *in)
{
	if (c->in_headers) {
		struct evbuffer_ptr p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (p.pos < 0)
			return evbuffer_get_length(in) > 65536 ? -1 : 0;
		size_t n = (size_t)p.pos + 4;
		char *h = malloc(n + 1);
		if (h == NULL)
			return -1;
		evbuffer_remove(in, h, n);
		h[n] = '\0';
		int rc = parse_headers(c, h);
		free(h);
		if (rc < 0)
			return -1;
		c->in_headers = false;
	}
	for (;;) {
		switch (c->mode) {
		case BODY_LENGTH: {
			size_t have = evbuffer_get_length(in);
			size_t take = have < c->left ? have : c->left;
			evbuffer_drain(in, take);
			c->left -= take;
			return c->left == 0 ? 1 : 0;
		}
		case BODY_CHUNK_SIZE: {
			size_t len;
			char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF_STRICT);
			if (line == NULL)
				return 0;
			c->left = (size_t)strtoull(line, NULL, 16);
			free(line);
			c->mode = c->left == 0 ? BODY_CHUNK_TRAILER : BODY_CHUNK_DATA;
			break;
		}
		case BODY_CHUNK_DATA: {
			size_t have = evbuffer_get_length(in);
			if (have < c->left + 2)
				return 0;
			evbuffer_drain(in, c->left + 2);
			c->mode = BODY_CHUNK_SIZE;
			break;
		}
		case BODY_CHUNK_TRAILER: {
			size_t len;
			char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF_STRICT);
			if (line == NULL)
				return 0;
			free(line);
			if (len == 0)
				return 1;
			break;
		}
		}
	}
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	for (;;) {
		int rc = read_answer(c, in);
		if (rc == 0)
			return;
		if (rc < 0) {
			n_errors++;
			bufferevent_free(c->bev);
			c->bev = NULL;
			conn_open(c);
			return;
		}
		answer_done(c);
		if (stopping || evbuffer_get_length(in) == 0)
			return;
	}
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		int one = 1;
		setsockopt(bufferevent_getfd(c->bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		send_request(c);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		n_errors++;
		bufferevent_free(c->bev);
		c->bev = NULL;
		conn_open(c);
	}
}

static void conn_open(struct conn *c)
{
	if (stopping || c->reconnects++ > 1000)
		return;
	c->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		n_errors++;
		return;
	}
	bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&addr, sizeof addr) < 0) {
		n_errors++;
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	stopping = true;
	event_base_loopbreak(base);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double p)
{
	if (n_lat == 0)
		return 0;
	size_t i = (size_t)(p / 100.0 * (double)(n_lat - 1) + 0.5);
	return lat[i < n_lat ? i : n_lat - 1];
}

/* JSON string escaping for the code argument (quotes, backslashes, controls). */
static void json_escape(const char *s, char *out, size_t cap)
{
	size_t o = 0;
	for (; *s && o + 7 < cap; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20) {
			o += (size_t)snprintf(out + o, cap - o, "\\u%04x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = '\0';
}

static void usage(void)
{
	fprintf(stderr, "usage: loadgen --port PORT [--duration S] [--code PYTHON] [--api-key KEY] "
			"SESSION_ID...\n"
			"       loadgen --port PORT [--duration S] [--api-key KEY] --get PATH --conns "
			"N\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int port = 0;
	double duration = 10;
	const char *code = "1", *api_key = NULL, *get = NULL;
	int conns_n = 0;
	int first_id = argc;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--duration") && i + 1 < argc)
			duration = atof(argv[++i]);
		else if (!strcmp(argv[i], "--code") && i + 1 < argc)
			code = argv[++i];
		else if (!strcmp(argv[i], "--api-key") && i + 1 < argc)
			api_key = argv[++i];
		else if (!strcmp(argv[i], "--get") && i + 1 < argc)
			get = argv[++i];
		else if (!strcmp(argv[i], "--conns") && i + 1 < argc)
			conns_n = atoi(argv[++i]);
		else if (argv[i][0] == '-')
			usage();
		else {
			first_id = i;
			break;
		}
	}
	int n = get ? conns_n : argc - first_id;
	if (get && (get[0] != '/' || strpbrk(get, " \r\n") || argc != first_id))
		usage();
	if (api_key && strpbrk(api_key, "\r\n"))
		usage();
	if (port <= 0 || port > 65535 || n <= 0 || duration <= 0 || duration > 600)
		usage();

	memset(&addr, 0, sizeof addr);
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	char esc[4096], body[4200];
	json_escape(code, esc, sizeof esc);
	int body_len = snprintf(body, sizeof body, "{\"code\":\"%s\"}", esc);

	base = event_base_new();
	if (base == NULL)
		return 1;
	struct conn *conns = calloc((size_t)n, sizeof *conns);
	if (conns == NULL)
		return 1;
	for (int i = 0; i < n; i++) {
		struct conn *c = &conns[i];
		char auth[512] = "";
		if (api_key)
			snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", api_key);
		int len;
		if (get) {
			c->id = get;
			len = asprintf(&c->request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n",
				       get, port, auth);
		} else {
			c->id = argv[first_id + i];
			len = asprintf(&c->request,
				       "POST /v1/sessions/%s/exec HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
				       "%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				       c->id, port, auth, body_len, body);
		}
		if (len < 0)
			return 1;
		c->request_len = (size_t)len;
	}

	double cpu0 = cpu_s();
	t_start = now_s();
	t_end = t_start + duration;
	for (int i = 0; i < n; i++)
		conn_open(&conns[i]);
	struct timeval tv = {(time_t)duration, (suseconds_t)((duration - (double)(time_t)duration) * 1e6)};
	struct event *deadline = evtimer_new(base, on_deadline, NULL);
	evtimer_add(deadline, &tv);
	event_base_dispatch(base);
	double elapsed = now_s() - t_start;
	double cpu = cpu_s() - cpu0;

	qsort(lat, n_lat, sizeof *lat, cmp_double);
	printf("{\"duration_s\":%.3f,\"connections\":%d,\"ok\":%llu,\"non_200\":%llu,"
	       "\"errors\":%llu,\"execs_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
	       "\"max_ms\":%.3f,\"cpu_s\":%.3f,\"cpu_pct\":%.1f}\n",
	       elapsed, n, (unsigned long long)n_ok, (unsigned long long)n_non200,
	       (unsigned long long)n_errors, (double)n_ok / duration, pct(50), pct(99),
	       n_lat ? lat[n_lat - 1] : 0.0, cpu, 100.0 * cpu / elapsed);

	for (int i = 0; i < n; i++) {
		if (conns[i].bev)
			bufferevent_free(conns[i].bev);
		free(conns[i].request);
	}
	free(conns);
	free(lat);
	event_free(deadline);
	event_base_free(base);
	return n_ok > 0 ? 0 : 1;
}
