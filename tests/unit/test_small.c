/* test_small.c: frames, capped buffers, exec results, percent-decoding,
 * Redis URLs and the container spec. */
#include <stdlib.h>

#include "api_requests.h"
#include "capbuf.h"
#include "container_spec.h"
#include "docker_json.h"
#include "exec_result.h"
#include "frame.h"
#include "http_server.h"
#include "json.h"
#include "store.h"
#include "unit.h"

TEST(frame_prefix_roundtrip_and_bounds)
{
	unsigned char p[FRAME_PREFIX];
	uint32_t h, b;
	struct err *e = NULL;
	frame_write_prefix(p, 17, 5);
	CHECK(frame_parse_prefix(p, &h, &b, &e) == 0 && h == 17 && b == 5);
	frame_write_prefix(p, 1, 0);
	CHECK(frame_parse_prefix(p, &h, &b, &e) < 0);
	err_free(e);
	e = NULL;
	frame_write_prefix(p, FRAME_MAX_HEADER + 1, 0);
	CHECK(frame_parse_prefix(p, &h, &b, &e) < 0);
	err_free(e);
	e = NULL;
	frame_write_prefix(p, 2, FRAME_MAX_BODY + 1);
	CHECK(frame_parse_prefix(p, &h, &b, &e) < 0);
	err_free(e);
	memset(p, 0xff, sizeof(p));
	e = NULL;
	CHECK(frame_parse_prefix(p, &h, &b, &e) < 0);
	err_free(e);
}

TEST(capbuf_keeps_head_and_tail)
{
	struct capbuf cb;
	capbuf_init(&cb, 10);
	CHECK(capbuf_append(&cb, "hello", 5) == 5);
	CHECK(capbuf_append(&cb, "world!!", 7) == 5);
	CHECK(cb.truncated && cb.dropped == 2);
	capbuf_set_tail(&cb, "0123456789", 10, 100);
	size_t len;
	char *out = capbuf_render(&cb, &len);
	CHECK(strncmp(out, "helloworld\n[... 107 bytes truncated ...]\n56789", len) == 0);
	free(out);
	capbuf_release(&cb);
	capbuf_init(&cb, 10);
	capbuf_append(&cb, "abc", 3);
	out = capbuf_render(&cb, &len);
	CHECK_STR(out, "abc");
	CHECK(!cb.truncated);
	free(out);
	capbuf_release(&cb);
}

/* a display frame of a runner before bundles: no group, not a result */
static const struct exec_display_info png = {"image/png", -1, false};

TEST(exec_result_assembles_and_serialises)
{
	struct exec_result *r = exec_result_new(1024);
	exec_result_on_stream(r, false, "out\n", 4, false, 0);
	exec_result_on_stream(r, true, "err\n", 4, false, 0);
	exec_result_on_display(r, &png, "\x89PNG", 4);
	const char *done =
	    "{\"t\":\"done\",\"id\":1,\"status\":\"error\",\"result\":null,"
	    "\"error\":{\"ename\":\"ZeroDivisionError\",\"evalue\":\"division by zero\","
	    "\"traceback\":[\"Traceback\",5,\"ZeroDivisionError: division by zero\"]},"
	    "\"files\":[{\"path\":\"a.txt\",\"size\":3,\"change\":\"created\"},"
	    "{\"path\":\"b\",\"size\":1,\"change\":\"exploded\"}]}";
	struct err *e = NULL;
	yajl_val v = json_parse(done, strlen(done), &e);
	CHECK(exec_result_on_done(r, v, &e) == 0);
	yajl_tree_free(v);
	CHECK(r->status == EXEC_ERROR && r->n_traceback == 2 && r->n_files == 1);
	AUTOGEN yajl_gen g = json_gen_new();
	exec_result_to_json(r, g);
	size_t len;
	const char *t = jg_text(g, &len);
	CHECK(strstr(t, "\"status\":\"error\"") && strstr(t, "\"stdout\":\"out\\n\""));
	CHECK(strstr(t, "\"ename\":\"ZeroDivisionError\""));
	CHECK(strstr(t, "{\"mime\":\"image/png\",\"data\":\"iVBORw==\",\"group\":0,"
			"\"result\":false}"));
	CHECK(strstr(t, "\"kernel\":\"preserved\""));
	CHECK(strstr(t, "\"result\":null"));
	CHECK(strstr(t, "\"files_fallback\":null"));
	exec_result_free(r);
}

TEST(exec_result_files_fallback_only_the_runners_names)
{
	const char *cases[][2] = {
	    {"{\"status\":\"ok\",\"files_fallback\":\"overflow\"}",
	     "\"files_fallback\":\"overflow\""},
	    {"{\"status\":\"ok\",\"files_fallback\":\"unwatched\"}",
	     "\"files_fallback\":\"unwatched\""},
	    {"{\"status\":\"ok\",\"files_fallback\":\"<script>\"}", "\"files_fallback\":null"},
	    {"{\"status\":\"ok\",\"files_fallback\":7}", "\"files_fallback\":null"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct exec_result *r = exec_result_new(16);
		struct err *e = NULL;
		yajl_val v = json_parse(cases[i][0], strlen(cases[i][0]), &e);
		CHECK(v && exec_result_on_done(r, v, &e) == 0);
		yajl_tree_free(v);
		AUTOGEN yajl_gen g = json_gen_new();
		exec_result_to_json(r, g);
		size_t len;
		CHECK(strstr(jg_text(g, &len), cases[i][1]));
		exec_result_free(r);
	}
}

TEST(exec_result_rejects_bad_status_and_caps_display)
{
	struct exec_result *r = exec_result_new(16);
	struct err *e = NULL;
	yajl_val v = json_parse("{\"status\":\"great\"}", 18, &e);
	CHECK(exec_result_on_done(r, v, &e) < 0);
	yajl_tree_free(v);
	err_free(e);
	for (int i = 0; i < EXEC_MAX_DISPLAY; i++)
		CHECK(exec_result_on_display(r, &png, "x", 1));
	CHECK(!exec_result_on_display(r, &png, "x", 1));
	exec_result_free(r);
}

/* The entries' data is bounded apart from their count: a kernel that sends
 * 1 MiB entries stops being kept at EXEC_MAX_DISPLAY_BYTES. */
TEST(exec_result_caps_display_bytes)
{
	struct exec_result *r = exec_result_new(16);
	size_t mib = 1u << 20, kept = 0;
	char *big = calloc(1, mib);
	while (exec_result_on_display(r, &png, big, mib))
		kept++;
	CHECK(kept == EXEC_MAX_DISPLAY_BYTES / mib);
	CHECK(r->n_display == kept);
	free(big);
	exec_result_free(r);
}

/* A bundle's entries share the group the kernel gave; the last expression's
 * rich MIME types are marked result; an entry without a group is its own. */
TEST(exec_result_display_bundles)
{
	struct exec_result *r = exec_result_new(16);
	const struct exec_display_info plain = {"text/plain", 4, false};
	const struct exec_display_info html = {"text/html", 4, true};
	CHECK(exec_result_on_display(r, &plain, "df", 2));
	CHECK(exec_result_on_display(r, &html, "<t>", 3));
	CHECK(exec_result_on_display(r, &png, "x", 1));
	CHECK(r->display[0].group == 4 && r->display[1].group == 4 && r->display[2].group == 2);
	CHECK(!r->display[0].result && r->display[1].result && !r->display[2].result);
	struct exec_result *d = exec_result_dup(r);
	CHECK(d->display[1].group == 4 && d->display[1].result);
	AUTOGEN yajl_gen g = json_gen_new();
	exec_result_to_json(d, g);
	size_t len;
	const char *t = jg_text(g, &len);
	CHECK(strstr(t, "{\"mime\":\"text/html\",\"data\":\"PHQ+\",\"group\":4,"
			"\"result\":true}"));
	exec_result_free(d);
	exec_result_free(r);
}

TEST(percent_decode)
{
	char *s = http_percent_decode("a%2Fb%2e%2E", 11);
	CHECK_STR(s, "a/b..");
	free(s);
	CHECK(http_percent_decode("a%00b", 5) == NULL);
	CHECK(http_percent_decode("a%zz", 4) == NULL);
	CHECK(http_percent_decode("a%2", 3) == NULL);
	CHECK(http_percent_decode("%", 1) == NULL);
}

TEST(redis_urls)
{
	char *host, *path;
	int port, db;
	struct err *e = NULL;
	CHECK(store_parse_url("redis://127.0.0.1:6380/2", &host, &port, &path, &db, &e) == 0);
	CHECK_STR(host, "127.0.0.1");
	CHECK(port == 6380 && db == 2 && path == NULL);
	free(host);
	CHECK(store_parse_url("redis://localhost", &host, &port, &path, &db, &e) == 0);
	CHECK(port == 6379 && db == 0);
	free(host);
	CHECK(store_parse_url("unix:///run/redis.sock", &host, &port, &path, &db, &e) == 0);
	CHECK_STR(path, "/run/redis.sock");
	free(path);
	CHECK(store_parse_url("http://x", &host, &port, &path, &db, &e) < 0);
	err_free(e);
	e = NULL;
	CHECK(store_parse_url("redis://h:0", &host, &port, &path, &db, &e) < 0);
	err_free(e);
}

TEST(container_spec_is_hardened)
{
	struct config cfg;
	config_defaults(&cfg);
	struct err *e = NULL;
	const char *doc =
	    "{\"limits\":{\"memory_mb\":256,\"cpus\":0.5,\"pids\":64,\"disk_mb\":100},"
	    "\"env\":{\"A\":\"b\"}}";
	yajl_val body = json_parse(doc, strlen(doc), &e);
	struct session_request r;
	CHECK(api_parse_session_request(body, &r, &e) == 0);
	struct session *s = session_from_request(&r, &cfg, "default", &e);
	session_request_release(&r);
	yajl_tree_free(body);
	CHECK(s != NULL);
	strcpy(s->id, "abcdef00-0000-4000-8000-000000000000");
	s->node = strdup("node1");
	s->uid = 200123;
	size_t len;
	struct container_spec_args args = {.image_tag = "ci/python:latest",
					   .ipc_dir = "/var/lib/ci/s/x",
					   .seccomp = "{\"defaultAction\":\"SCMP_ACT_ERRNO\"}"};
	struct container_spec cs;
	container_spec_build(&cs, s, &cfg, &args);
	char *spec = docker_json_container_config(&cs.docker, &len);
	container_spec_release(&cs);
	yajl_val v = json_parse(spec, len, &e);
	CHECK(v != NULL);
	yajl_val hc = json_get(v, "HostConfig");
	CHECK_STR(json_get_str(hc, "NetworkMode"), "none");
	CHECK(YAJL_IS_TRUE(json_get(hc, "ReadonlyRootfs")));
	CHECK(YAJL_IS_TRUE(json_get(hc, "Init")));
	int64_t mem = 0, swap = 0, pids = 0, nano = 0;
	CHECK(json_get_int(hc, "Memory", &mem) && mem == 256LL << 20);
	CHECK(json_get_int(hc, "MemorySwap", &swap) && swap == mem);
	CHECK(json_get_int(hc, "PidsLimit", &pids) && pids == 64);
	CHECK(json_get_int(hc, "NanoCpus", &nano) && nano == 500000000);
	CHECK_STR(json_get(hc, "CapDrop")->u.array.values[0]->u.string, "ALL");
	CHECK_STR(json_get(hc, "SecurityOpt")->u.array.values[0]->u.string, "no-new-privileges");
	CHECK_STR(json_get(hc, "SecurityOpt")->u.array.values[1]->u.string,
		  "seccomp={\"defaultAction\":\"SCMP_ACT_ERRNO\"}");
	CHECK_STR(json_get(hc, "Binds")->u.array.values[0]->u.string, "/var/lib/ci/s/x:/run/ci:ro");
	CHECK(strstr(json_get_str(json_get(hc, "Tmpfs"), "/workspace"), "size=100m"));
	CHECK(strstr(json_get_str(json_get(hc, "Tmpfs"), "/workspace"), "nosuid,nodev"));
	CHECK(strstr(json_get_str(json_get(hc, "Tmpfs"), "/workspace"), "uid=200123,gid=200123"));
	CHECK_STR(json_get_str(v, "Hostname"), "sandbox");
	CHECK_STR(json_get_str(json_get(v, "Labels"), "ci.session"), s->id);
	CHECK_STR(json_get_str(json_get(v, "Labels"), "ci.node"), "node1");
	CHECK_STR(json_get_str(json_get(v, "Labels"), "ci.prefix"), "ci:");
	CHECK_STR(json_get_str(v, "User"), "200123:200123");
	yajl_val env = json_get(v, "Env");
	CHECK(env && env->u.array.len == 5);
	CHECK_STR(env->u.array.values[0]->u.string, "A=b");
	yajl_tree_free(v);
	free(spec);
	session_free(s);
	config_free(&cfg);
}

/* With a loop-mounted workspace, /workspace is a read-write bind of the
 * session's image and not a tmpfs (which the memory cgroup would charge);
 * /tmp stays a capped tmpfs. */
TEST(container_spec_binds_the_workspace_image)
{
	struct config cfg;
	config_defaults(&cfg);
	struct err *e = NULL;
	struct session *s = session_from_request(NULL, &cfg, "default", &e);
	CHECK(s != NULL);
	strcpy(s->id, "abcdef00-0000-4000-8000-000000000000");
	s->node = strdup("node1");
	s->uid = 200123;
	struct container_spec_args args = {.image_tag = "ci/python:latest",
					   .ipc_dir = "/var/lib/ci/s/x",
					   .workspace_dir = "/var/lib/ci/w/x"};
	struct container_spec cs;
	container_spec_build(&cs, s, &cfg, &args);
	size_t len;
	char *spec = docker_json_container_config(&cs.docker, &len);
	container_spec_release(&cs);
	yajl_val v = json_parse(spec, len, &e);
	CHECK(v != NULL);
	yajl_val hc = json_get(v, "HostConfig");
	yajl_val binds = json_get(hc, "Binds");
	CHECK(binds && binds->u.array.len == 2);
	CHECK_STR(binds->u.array.values[0]->u.string, "/var/lib/ci/s/x:/run/ci:ro");
	CHECK_STR(binds->u.array.values[1]->u.string, "/var/lib/ci/w/x:/workspace:rw");
	CHECK(json_get_str(json_get(hc, "Tmpfs"), "/workspace") == NULL);
	CHECK(strstr(json_get_str(json_get(hc, "Tmpfs"), "/tmp"), "size=512m"));
	yajl_tree_free(v);
	free(spec);
	session_free(s);
	config_free(&cfg);
}

TEST(container_names_are_opaque_and_fresh)
{
	char a[CONTAINER_NAME_SIZE], b[CONTAINER_NAME_SIZE];
	container_spec_new_name(a, sizeof(a));
	container_spec_new_name(b, sizeof(b));
	CHECK(strlen(a) == 19 && strncmp(a, "ci-", 3) == 0);
	CHECK(strspn(a + 3, "0123456789abcdef") == 16);
	CHECK(strcmp(a, b) != 0);
}

TEST(capbuf_says_when_the_tail_died_with_the_producer)
{
	struct capbuf cb;
	capbuf_init(&cb, 10);
	capbuf_append(&cb, "12345", 5); /* the producer's live half is full */
	capbuf_producer_died(&cb);
	size_t len;
	char *out = capbuf_render(&cb, &len);
	CHECK(cb.truncated);
	CHECK(strstr(out, "12345\n[... output past this point was lost") == out);
	free(out);
	capbuf_release(&cb);
	capbuf_init(&cb, 10);
	capbuf_append(&cb, "123", 3); /* short output: nothing was held back */
	capbuf_producer_died(&cb);
	CHECK(!cb.truncated);
	capbuf_release(&cb);
}
