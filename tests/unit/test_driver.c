/* test_driver.c: the Docker driver's JSON (both ways), the session state
 * table and the warm pool's bookkeeping. */
#include <event2/event.h>
#include <stdlib.h>

#include "docker_json.h"
#include "json.h"
#include "pool.h"
#include "pool_demand.h"
#include "session.h"
#include "unit.h"

TEST(docker_json_reads_a_container_state_and_its_address)
{
	const char *body = "{\"Id\":\"abc\",\"State\":{\"Running\":false,\"OOMKilled\":true,"
			   "\"ExitCode\":137},\"NetworkSettings\":{\"Networks\":{\"ci-egress-1\":"
			   "{\"IPAddress\":\"172.18.0.5\"}}}}";
	struct docker_container_state st;
	CHECK(docker_json_container_state(body, strlen(body), "ci-egress-1", &st) == 0);
	CHECK(!st.running && st.oom_killed && st.exit_code == 137);
	CHECK_STR(st.ip, "172.18.0.5");
	CHECK(docker_json_container_state(body, strlen(body), "other", &st) == 0 && st.ip[0] == 0);
	CHECK(docker_json_container_state("{}", 2, NULL, &st) < 0);
	CHECK(docker_json_container_state("[1", 2, NULL, &st) < 0);
	/* A hostile address that would not fit is dropped, not cut. */
	char big[512];
	snprintf(big, sizeof(big),
		 "{\"State\":{\"Running\":true},\"NetworkSettings\":{\"Networks\":{\"n\":"
		 "{\"IPAddress\":\"%0100d\"}}}}",
		 1);
	CHECK(docker_json_container_state(big, strlen(big), "n", &st) == 0 && st.ip[0] == 0);
}

TEST(docker_json_lists_containers_and_skips_the_unnameable)
{
	const char *body =
	    "[{\"Id\":\"c1\",\"State\":\"running\",\"Labels\":{\"ci.session\":\"s1\"}},"
	    "{\"State\":\"exited\"},{\"Id\":\"c3\",\"Labels\":null}]";
	struct docker_json_list *l = docker_json_container_list(body, strlen(body));
	CHECK(l != NULL);
	size_t n = 0;
	const struct docker_container_summary *items = docker_json_list_items(l, &n);
	CHECK(n == 2);
	CHECK_STR(items[0].id, "c1");
	CHECK_STR(items[0].state, "running");
	CHECK_STR(items[0].session, "s1");
	CHECK_STR(items[1].id, "c3");
	CHECK(items[1].session == NULL && items[1].state == NULL);
	docker_json_list_free(l);
	CHECK(docker_json_container_list("{}", 2) == NULL);
	docker_json_list_free(NULL);
}

TEST(docker_json_network_info_and_created_ids)
{
	const char *body =
	    "{\"Internal\":true,\"IPAM\":{\"Config\":[{\"Gateway\":\"172.19.0.1\"}]},"
	    "\"Containers\":{\"a\":{},\"b\":{}}}";
	struct docker_network_info info;
	CHECK(docker_json_network_info(body, strlen(body), &info) == 0);
	CHECK(info.internal && info.n_containers == 2);
	CHECK_STR(info.gateway, "172.19.0.1");
	CHECK(docker_json_network_info("null", 4, &info) < 0);
	char id[DOCKER_ID_MAX + 1];
	CHECK(docker_json_created_id("{\"Id\":\"deadbeef\"}", 17, id, sizeof(id)) == 0);
	CHECK_STR(id, "deadbeef");
	CHECK(docker_json_created_id("{\"Id\":\"\"}", 9, id, sizeof(id)) < 0);
	CHECK(docker_json_created_id("{}", 2, id, sizeof(id)) < 0);
	char *msg = docker_json_error_message("{\"message\":\"No such image\"}", 27);
	CHECK_STR(msg, "No such image");
	free(msg);
	CHECK(docker_json_error_message("oops", 4) == NULL);
}

TEST(docker_json_reads_an_image_and_its_package_label)
{
	const char *body =
	    "{\"Id\":\"sha256:ab12\",\"Created\":\"2026-12-01T21:00:00Z\",\"Size\":575000000,"
	    "\"Config\":{\"Labels\":{\"ci.recipe\":\"d91167\",\"ci.image\":\"python\","
	    "\"ci.suite\":\"bookworm\",\"ci.python\":\"3.11.2\",\"other\":\"x\","
	    "\"ci.packages\":\"python3=3.11.2-1+b1,python3-numpy=1:1.24.2-6,"
	    "BAD=1,python3-x=,=1.0,python3-y=abc,noequals,python3-pandas=1.5.3+dfsg-2\"}}}";
	struct docker_json_image *im = docker_json_image_info(body, strlen(body));
	CHECK(im != NULL);
	const struct docker_image_info *info = docker_json_image_get(im);
	CHECK_STR(info->id, "sha256:ab12");
	CHECK_STR(info->created, "2026-12-01T21:00:00Z");
	CHECK(info->size == 575000000);
	CHECK_STR(info->recipe, "d91167");
	CHECK_STR(info->profile, "python");
	CHECK_STR(info->suite, "bookworm");
	CHECK_STR(info->python, "3.11.2");
	CHECK(info->debian == NULL && info->protocol == NULL);
	/* Only sane Debian names and versions: the rest is skipped. */
	CHECK(info->has_packages && info->n_packages == 3);
	CHECK_STR(info->packages[0].name, "python3");
	CHECK_STR(info->packages[0].version, "3.11.2-1+b1");
	CHECK_STR(info->packages[1].version, "1:1.24.2-6");
	CHECK_STR(info->packages[2].name, "python3-pandas");
	docker_json_image_free(im);

	/* An image without labels: no record (not an empty one). */
	im = docker_json_image_info("{\"Id\":\"sha256:cd\",\"Config\":{\"Labels\":null}}", 43);
	CHECK(im != NULL);
	info = docker_json_image_get(im);
	CHECK(!info->has_packages && info->n_packages == 0 && info->recipe == NULL);
	CHECK(info->size == -1 && info->created == NULL);
	docker_json_image_free(im);
	CHECK(docker_json_image_info("{}", 2) == NULL);
	CHECK(docker_json_image_info("[]", 2) == NULL);
	CHECK(docker_json_image_info("{\"Id\":3}", 8) == NULL);
	docker_json_image_free(NULL);

	/* The package cap holds against a label of many entries. */
	size_t n = DOCKER_IMAGE_MAX_PACKAGES + 50, cap = n * 16 + 128, o = 0;
	char *big = malloc(cap);
	o += (size_t)snprintf(big + o, cap - o,
			      "{\"Id\":\"x\",\"Config\":{\"Labels\":{\"ci.packages\":\"");
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(big + o, cap - o, "%spk%zu=1", i ? "," : "", i);
	o += (size_t)snprintf(big + o, cap - o, "\"}}}");
	im = docker_json_image_info(big, o);
	CHECK(im != NULL && docker_json_image_get(im)->n_packages == DOCKER_IMAGE_MAX_PACKAGES);
	docker_json_image_free(im);
	free(big);

	char ref[64];
	CHECK(docker_json_image_ref("ci/python:latest", ref, sizeof(ref)) == 0);
	CHECK_STR(ref, "ci/python:latest");
	CHECK(docker_json_image_ref("a b?c", ref, sizeof(ref)) == 0);
	CHECK_STR(ref, "a%20b%3Fc");
	CHECK(docker_json_image_ref("", ref, sizeof(ref)) < 0);
	CHECK(docker_json_image_ref("abcdef", ref, 4) < 0);
}

TEST(docker_json_filters_and_bodies)
{
	const char *const labels[] = {"ci.node=n 1", "ci.prefix=ci:"};
	char out[256];
	CHECK(docker_json_label_filter(labels, 2, out, sizeof(out)) == 0);
	CHECK_STR(out, "%7B%22label%22%3A%5B%22ci.node%3Dn%201%22%2C%22ci.prefix%3Dci%3A%22%5D%7D");
	CHECK(docker_json_label_filter(labels, 2, out, 10) < 0);
	struct docker_limits lim = {.memory = 1, .memory_swap = 2, .nano_cpus = 3, .pids_limit = 4};
	size_t len;
	char *b = docker_json_limits(&lim, &len);
	CHECK_STR(b, "{\"Memory\":1,\"MemorySwap\":2,\"NanoCpus\":3,\"PidsLimit\":4}");
	free(b);
	const struct docker_kv l[] = {{"ci.managed", "true"}};
	struct docker_network_config nc = {
	    .name = "n", .bridge_name = "br", .internal = true, .labels = l, .n_labels = 1};
	b = docker_json_network_config(&nc, &len);
	struct err *e = NULL;
	yajl_val v = json_parse(b, len, &e);
	CHECK(v && YAJL_IS_TRUE(json_get(v, "Internal")));
	CHECK_STR(json_get_str(json_get(v, "Options"), "com.docker.network.bridge.enable_icc"),
		  "false");
	CHECK_STR(json_get_str(json_get(v, "Labels"), "ci.managed"), "true");
	yajl_tree_free(v);
	free(b);
}

TEST(session_state_table)
{
	CHECK(session_state_allowed(SESSION_STARTING, SESSION_READY));
	CHECK(session_state_allowed(SESSION_READY, SESSION_BUSY));
	CHECK(session_state_allowed(SESSION_BUSY, SESSION_READY));
	CHECK(session_state_allowed(SESSION_BUSY, SESSION_EXPIRED));
	CHECK(session_state_allowed(SESSION_STARTING, SESSION_DEAD));
	CHECK(!session_state_allowed(SESSION_STARTING, SESSION_BUSY));
	CHECK(!session_state_allowed(SESSION_READY, SESSION_STARTING));
	CHECK(!session_state_allowed(SESSION_DEAD, SESSION_READY));
	CHECK(!session_state_allowed(SESSION_EXPIRED, SESSION_DEAD));
	CHECK(!session_state_allowed(SESSION_READY, SESSION_READY));
	CHECK(!session_state_allowed((enum session_state)9, SESSION_READY));
	struct session s = {.state = SESSION_DEAD};
	CHECK(!session_set_state(&s, SESSION_READY) && s.state == SESSION_DEAD);
	s.state = SESSION_READY;
	CHECK(session_set_state(&s, SESSION_BUSY) && s.state == SESSION_BUSY);
}

/* The pool against fake ops: what it asks to start, and what it hands out. */
struct fake {
	int started[2];
	bool may;
	int fail_next;
};

static bool fake_may(void *arg)
{
	return ((struct fake *)arg)->may;
}

static int fake_start(void *arg, bool networked)
{
	struct fake *f = arg;
	if (f->fail_next) {
		f->fail_next--;
		return -1;
	}
	f->started[networked]++;
	return 0;
}

TEST(pool_fills_one_at_a_time_and_hands_out_by_kind)
{
	struct event_base *base = event_base_new();
	static const struct pool_ops ops = {.may_start = fake_may, .start = fake_start};
	int64_t size = 2, nsize = 1, max = 0, mem = 512;
	struct fake f = {.may = true};
	struct pool_sizes sizes = {&size, &nsize, &max, &mem};
	struct pool *p = pool_new(base, &sizes, &ops, &f);
	pool_fill(p);
	pool_fill(p); /* one at a time: nothing more while one starts */
	CHECK(f.started[0] == 1 && f.started[1] == 0);
	int a, b, c;
	pool_started(p, &a, false); /* fills on: the second plain one */
	CHECK(f.started[0] == 2);
	pool_started(p, &b, false); /* then the networked one */
	CHECK(f.started[1] == 1);
	pool_started(p, &c, true);
	CHECK(pool_total(p) == 3);
	CHECK(pool_take(p, true) == &c);
	CHECK(pool_take(p, true) == NULL); /* a miss; a new start was asked */
	CHECK(f.started[1] == 2);
	CHECK(pool_take(p, false) == &a); /* oldest first */
	size_t ready;
	uint64_t hits, misses;
	pool_stats(p, &ready, &hits, &misses);
	CHECK(ready == 1 && hits == 2 && misses == 1);
	pool_start_failed(p, true);
	f.may = false;
	pool_fill(p);
	CHECK(f.started[0] == 2 && f.started[1] == 2);
	pool_free(p);
	event_base_free(base);
}

TEST(pool_forgets_an_ended_sandbox)
{
	struct event_base *base = event_base_new();
	static const struct pool_ops ops = {.may_start = fake_may, .start = fake_start};
	int64_t size = 1, nsize = 0, max = 0, mem = 512;
	struct fake f = {.may = true, .fail_next = 1};
	struct pool_sizes sizes = {&size, &nsize, &max, &mem};
	struct pool *p = pool_new(base, &sizes, &ops, &f);
	pool_fill(p); /* the start fails: retried later, nothing counted */
	CHECK(f.started[0] == 0 && pool_total(p) == 0);
	pool_fill(p);
	int a;
	struct pool_entry *e = pool_started(p, &a, false);
	CHECK(pool_total(p) == 1);
	pool_forget(p, e);
	CHECK(pool_total(p) == 0 && pool_take(p, false) == NULL);
	pool_free(p);
	event_base_free(base);
}

TEST(pool_surplus_after_the_size_is_lowered)
{
	static const struct pool_ops fake_ops = {.may_start = fake_may, .start = fake_start};
	struct fake f = {.may = true};
	int64_t size = 2, nsize = 1, max = 0, mem = 512;
	struct event_base *base = event_base_new();
	struct pool_sizes sizes = {&size, &nsize, &max, &mem};
	struct pool *p = pool_new(base, &sizes, &fake_ops, &f);
	int a, b, c, d;
	pool_fill(p);
	struct pool_entry *ea = pool_started(p, &a, false);
	struct pool_entry *eb = pool_started(p, &b, false);
	struct pool_entry *ec = pool_started(p, &c, true);
	CHECK(pool_surplus(p) == NULL); /* within the sizes */
	size = 1;
	nsize = 0;
	CHECK(pool_surplus(p) == &a); /* the oldest plain one first */
	pool_forget(p, ea);           /* what ending it does */
	CHECK(pool_surplus(p) == &c);
	pool_forget(p, ec);
	CHECK(pool_surplus(p) == NULL && pool_total(p) == 1);
	/* Raised again: nothing is surplus, and a fill starts what is missing. */
	size = 2;
	int before = f.started[0];
	pool_fill(p);
	CHECK(pool_surplus(p) == NULL && f.started[0] == before + 1);
	/* Lowered to 0 while one starts: the ready one goes (the starting one
	 * cannot be ended yet), then the starting one once it is ready. */
	size = 0;
	CHECK(pool_surplus(p) == &b);
	pool_forget(p, eb);
	CHECK(pool_surplus(p) == NULL);
	pool_started(p, &d, false);
	CHECK(pool_surplus(p) == &d);
	pool_free(p);
	event_base_free(base);
}

TEST(pool_demand_peak_in_a_sliding_window)
{
	static struct pool_demand d;
	pool_demand_init(&d);
	CHECK(pool_demand_peak(&d, 0) == 0);
	/* a burst of 50 across what would be two fixed buckets */
	for (int i = 0; i < 50; i++)
		pool_demand_note(&d, 1000000 + 9000 + i * 40);
	CHECK(pool_demand_peak(&d, 1000000 + 12000) == 50);
	/* a steady trickle later: one a second for a minute (10 in a window) */
	for (int i = 0; i < 60; i++)
		pool_demand_note(&d, 1100000 + i * 1000);
	CHECK(pool_demand_peak(&d, 1160000) == 50); /* the burst is remembered */
	/* five minutes after the burst it is forgotten: the trickle's 10 */
	CHECK(pool_demand_peak(&d, 1000000 + 9000 + 50 * 40 + POOL_DEMAND_HORIZON_MS) == 10);
	/* and after the trickle too: nothing */
	CHECK(pool_demand_peak(&d, 1160000 + POOL_DEMAND_HORIZON_MS) == 0);
	/* the ring keeps the newest POOL_DEMAND_MAX */
	for (int i = 0; i < POOL_DEMAND_MAX + 10; i++)
		pool_demand_note(&d, 5000000 + i);
	CHECK(pool_demand_peak(&d, 5000000 + POOL_DEMAND_MAX) == POOL_DEMAND_MAX);
}

TEST(pool_grows_with_demand_within_max_and_memory)
{
	static const struct pool_ops ops = {.may_start = fake_may, .start = fake_start};
	int64_t size = 2, nsize = 0, max = 8, mem = 512;
	struct fake f = {.may = true};
	struct event_base *base = event_base_new();
	struct pool_sizes sizes = {&size, &nsize, &max, &mem};
	struct pool *p = pool_new(base, &sizes, &ops, &f);
	CHECK(pool_target(p) == 2); /* no demand yet: the floor */
	for (int i = 0; i < 5; i++)
		pool_note_demand(p);
	CHECK(pool_target(p) == 5);
	pool_fill(p); /* growing: two starts at once */
	CHECK(f.started[0] == 2);
	for (int i = 0; i < 20; i++)
		pool_note_demand(p);
	CHECK(pool_target(p) == 8); /* pool-max */
	mem = 3 * POOL_SANDBOX_MB;
	CHECK(pool_target(p) == 3); /* the memory budget */
	mem = 0;
	CHECK(pool_target(p) == 2); /* never below pool-size */
	max = 0;
	mem = 512;
	CHECK(pool_target(p) == 2); /* pool-max 0: no growth */
	size = 0;
	max = 8;
	CHECK(pool_target(p) == 0); /* pool-size 0: no pool at all */
	pool_free(p);
	event_base_free(base);
}
