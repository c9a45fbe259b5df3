/* test_audit.c: the audit entry's JSON and the UTF-8 cut of the code head. */
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "json.h"
#include "store.h"
#include "store_audit.h"
#include "unit.h"
#include "xalloc.h"

TEST(audit_utf8_cut_boundaries)
{
	/* Short text is kept whole. */
	CHECK(audit_utf8_cut("abc", 3, 4096) == 3);
	CHECK(audit_utf8_cut("", 0, 4096) == 0);
	/* ASCII is cut at max. */
	CHECK(audit_utf8_cut("abcdef", 6, 4) == 4);
	/* "ab€" = 61 62 e2 82 ac: a cut inside the euro sign backs up to it. */
	const char *euro = "ab\xe2\x82\xac"
			   "cd";
	CHECK(audit_utf8_cut(euro, 7, 2) == 2);
	CHECK(audit_utf8_cut(euro, 7, 3) == 2);
	CHECK(audit_utf8_cut(euro, 7, 4) == 2);
	CHECK(audit_utf8_cut(euro, 7, 5) == 5);
	/* A 4-byte character (U+1F600) at every offset. */
	const char *smile = "x\xf0\x9f\x98\x80y";
	for (size_t max = 1; max <= 4; max++)
		CHECK(audit_utf8_cut(smile, 6, max) == 1);
	CHECK(audit_utf8_cut(smile, 6, 5) == 5);
	/* At the very start: nothing is left rather than half a character. */
	CHECK(audit_utf8_cut("\xe2\x82\xac", 3, 2) == 0);
	CHECK(audit_utf8_cut("\xe2\x82\xac", 3, 1) == 0);
	/* Not UTF-8 (a run of continuation bytes): cut as bytes. */
	CHECK(audit_utf8_cut("\x80\x80\x80\x80\x80\x80", 6, 5) == 5);
	/* The 4 KiB head of a long text never ends inside a character. */
	char big[10000];
	for (size_t i = 0; i < sizeof(big); i += 3)
		memcpy(big + i, "\xe2\x82\xac", i + 3 <= sizeof(big) ? 3 : sizeof(big) - i);
	size_t n = audit_utf8_cut(big, sizeof(big), AUDIT_CODE_HEAD_MAX);
	CHECK(n == 4095 && n % 3 == 0);
	CHECK(json_utf8_valid(big, n));
}

TEST(audit_entry_json_fields)
{
	const char *code = "print(1)";
	struct audit_entry e = {
	    .time_ms = 1764597600123,
	    .action = "exec",
	    .tenant = "acme",
	    .key_id = "k1",
	    .session = "s1",
	    .request_id = "r1",
	    .traceparent = "",
	    .code_sha256 = "ab",
	    .code_head = code,
	    .code_head_len = strlen(code),
	    .outcome = "ok",
	    .size = -1,
	    .duration_ms = 12,
	    .node = "n1",
	};
	size_t len;
	AUTOFREE char *text = audit_entry_json(&e, &len);
	CHECK(len == strlen(text));
	AUTOJSON yajl_val v = json_parse(text, len, NULL);
	CHECK(v != NULL && YAJL_IS_OBJECT(v));
	CHECK_STR(json_get_str(v, "type"), "audit");
	CHECK_STR(json_get_str(v, "time"), "2025-12-01T14:00:00.123Z");
	CHECK_STR(json_get_str(v, "action"), "exec");
	CHECK_STR(json_get_str(v, "tenant"), "acme");
	CHECK_STR(json_get_str(v, "key_id"), "k1");
	CHECK_STR(json_get_str(v, "session"), "s1");
	CHECK_STR(json_get_str(v, "request_id"), "r1");
	CHECK_STR(json_get_str(v, "code_sha256"), "ab");
	CHECK_STR(json_get_str(v, "code_head"), "print(1)");
	CHECK_STR(json_get_str(v, "outcome"), "ok");
	CHECK_STR(json_get_str(v, "node"), "n1");
	int64_t d = 0;
	CHECK(json_get_int(v, "duration_ms", &d) && d == 12);
	/* Empty and absent members are left out. */
	CHECK(json_get(v, "traceparent") == NULL);
	CHECK(json_get(v, "size") == NULL);
	CHECK(json_get(v, "path") == NULL);
	CHECK(json_get(v, "target") == NULL);
}

TEST(audit_entry_json_file_and_admin)
{
	struct audit_entry e = {.action = "file_write",
				.tenant = NULL,
				.key_id = NULL,
				.path = "dir/a b.txt",
				.size = 0,
				.outcome = NULL,
				.duration_ms = -1,
				.target = NULL};
	AUTOFREE char *text = audit_entry_json(&e, NULL);
	AUTOJSON yajl_val v = json_parse(text, strlen(text), NULL);
	CHECK(v != NULL);
	CHECK_STR(json_get_str(v, "tenant"), "");
	CHECK_STR(json_get_str(v, "key_id"), "");
	CHECK_STR(json_get_str(v, "path"), "dir/a b.txt");
	CHECK_STR(json_get_str(v, "outcome"), "ok");
	int64_t size = -1;
	CHECK(json_get_int(v, "size", &size) && size == 0);
	CHECK(json_get(v, "duration_ms") == NULL);
	CHECK(json_get(v, "code_head") == NULL);
	CHECK(json_get_str(v, "time") != NULL); /* 0 = now */

	struct audit_entry k = {
	    .action = "admin_key_revoke", .target = "key-9", .size = -1, .duration_ms = 0};
	AUTOFREE char *kt = audit_entry_json(&k, NULL);
	AUTOJSON yajl_val kv = json_parse(kt, strlen(kt), NULL);
	CHECK_STR(json_get_str(kv, "target"), "key-9");
}

TEST(audit_entry_json_hostile_code_is_one_line)
{
	/* Newlines, quotes, backslashes, control characters, an escape
	 * sequence, a NUL and invalid UTF-8: still one line of valid JSON. */
	static const char code[] = "a\nb\r\"q\"\\ \x01\x07\x1b[31m\x00z\xff\xfe\xc3";
	size_t clen = sizeof(code) - 1;
	struct audit_entry e = {.action = "exec",
				.code_sha256 = "x",
				.code_head = code,
				.code_head_len = clen,
				.size = -1,
				.duration_ms = -1,
				.request_id = "r\n\"x"};
	size_t len;
	AUTOFREE char *text = audit_entry_json(&e, &len);
	for (size_t i = 0; i < len; i++)
		CHECK((unsigned char)text[i] >= 0x20);
	CHECK(json_utf8_valid(text, len));
	AUTOJSON yajl_val v = json_parse(text, len, NULL);
	CHECK(v != NULL);
	const char *head = json_get_str(v, "code_head");
	CHECK(head != NULL && strncmp(head, "a\nb\r\"q\"\\ \x01\x07\x1b[31m", 14) == 0);
	CHECK_STR(json_get_str(v, "request_id"), "r\n\"x");
}

/* The queue is capped: a burst beyond it is dropped and counted, never
 * queued without bound; what is queued goes to the store (here one that
 * never connected, which drops it too, counted). */
TEST(audit_queue_cap_counts_drops)
{
	struct event_base *base = event_base_new();
	struct store *st = store_new(base, "redis://127.0.0.1:1", "t:", "n", 60, NULL);
	CHECK(st != NULL);
	struct audit *a = audit_new(base, st, "n", 100);
	/* The log lines of the burst go nowhere. */
	fflush(stderr);
	int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, 2);
	for (int i = 0; i < 300; i++)
		audit_record(a,
			     &(struct audit_entry){.action = "exec", .size = -1, .duration_ms = 1});
	CHECK(audit_dropped(a) == 300 - 256);
	audit_free(a); /* hands the 256 queued to the store, which is not connected */
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(devnull);
	CHECK(store_audit_dropped(st) == 256);
	store_free(st);
	event_base_free(base);
}
