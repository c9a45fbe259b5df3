/* The webhook's signature: HMAC-SHA256 against RFC 4231's vectors, and the
 * header value over "<timestamp>.<body>" against Python's hmac module. */
#include "unit.h"

#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "httpc.h"
#include "webhook.h"

TEST(webhook_hmac_rfc4231)
{
	char out[65];
	/* Test case 2: a short key. */
	webhook_hmac_hex("Jefe", 4, "what do ya want for nothing?", 28, out);
	CHECK_STR(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	/* Test case 1: 20 bytes of 0x0b, "Hi There". */
	unsigned char k1[20];
	memset(k1, 0x0b, sizeof(k1));
	webhook_hmac_hex(k1, sizeof(k1), "Hi There", 8, out);
	CHECK_STR(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	/* Test case 6: a key longer than the block (131 bytes of 0xaa). */
	unsigned char k6[131];
	memset(k6, 0xaa, sizeof(k6));
	const char *d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
	webhook_hmac_hex(k6, sizeof(k6), d6, strlen(d6), out);
	CHECK_STR(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(webhook_sign_covers_timestamp_and_body)
{
	char sig[WEBHOOK_SIGNATURE_MAX];
	const char *body = "what do ya want for nothing?";
	/* python3 -c "import hmac,hashlib; print(hmac.new(b'Jefe',
	 *   b'1700000000.what do ya want for nothing?', hashlib.sha256).hexdigest())" */
	webhook_sign("Jefe", 4, 1700000000, body, strlen(body), sig);
	CHECK_STR(sig, "sha256=1cdd0650c8be1cb0974b1788d458b1e781206cfef59b85faafc582d2e182c57e");
	CHECK(strlen(sig) == 71 && strlen(sig) < WEBHOOK_SIGNATURE_MAX);
	/* An empty body is signed too. */
	webhook_sign("Jefe", 4, 1700000000, "", 0, sig);
	CHECK_STR(sig, "sha256=80201faaa9258f8cfe66f88ad9fc60a52f73dd0e34d0aa77e8903d388732fc5e");
	/* Another timestamp, another signature: a replayed body with a new
	 * timestamp does not verify. */
	char other[WEBHOOK_SIGNATURE_MAX];
	webhook_sign("Jefe", 4, 1700000001, body, strlen(body), other);
	CHECK(strcmp(sig, other) != 0);
}

TEST(webhook_new_refuses_bad_urls_and_secrets)
{
	struct err *e = NULL;
	CHECK(webhook_new(NULL, NULL, "ftp://x.test/", "s", 1, &e) == NULL && e);
	err_free(e);
	e = NULL;
	CHECK(webhook_new(NULL, NULL, "http://127.0.0.1:9/", "", 0, &e) == NULL && e);
	err_free(e);
	e = NULL;
	char *secret = NULL;
	size_t len = 0;
	CHECK(webhook_read_secret("/nonexistent/secret", &secret, &len, &e) < 0 && e);
	err_free(e);
}

TEST(webhook_queue_is_capped_and_free_cancels)
{
	/* Nothing is sent before the loop runs: 300 events fill the queue of
	 * 256 and the rest is counted as dropped, at once, never blocking;
	 * freeing with all of them waiting frees everything (valgrind). */
	struct event_base *base = event_base_new();
	struct httpc *h = httpc_new(base);
	struct err *e = NULL;
	struct webhook *w = webhook_new(base, h, "http://127.0.0.1:9/hook", "k", 1, &e);
	CHECK(w != NULL && e == NULL);
	for (int i = 0; i < 300; i++)
		webhook_send(w, "{}", 2);
	uint64_t d = 1, f = 1, x = 0;
	webhook_stats(w, &d, &f, &x);
	CHECK(d == 0 && f == 0 && x == 44);
	webhook_free(w);
	httpc_free(h);
	event_base_free(base);
	webhook_stats(NULL, &d, &f, &x);
	CHECK(d == 0 && f == 0 && x == 0);
}

TEST(webhook_secret_file)
{
	char path[] = "/tmp/ci-webhook-secret-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "s3cret\n", 7) == 7);
	close(fd);
	char *secret = NULL;
	size_t len = 0;
	struct err *e = NULL;
	CHECK(webhook_read_secret(path, &secret, &len, &e) == 0);
	CHECK(len == 6 && secret && memcmp(secret, "s3cret", 6) == 0);
	free(secret);
	/* Empty (a newline alone) is refused. */
	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(write(fd, "\n", 1) == 1);
	close(fd);
	CHECK(webhook_read_secret(path, &secret, &len, &e) < 0 && e && secret == NULL);
	err_free(e);
	unlink(path);
}
