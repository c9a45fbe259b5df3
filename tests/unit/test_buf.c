/* test_buf.c: capped buffers (lib/buf.c). */
#include <stdio.h>
#include <stdlib.h>

#include "buf.h"
#include "err.h"
#include "unit.h"
#include "xalloc.h"

TEST(buf_appends_up_to_its_cap_and_not_past_it)
{
	struct buf b;
	buf_init(&b, 10);
	CHECK(b.data == NULL && b.len == 0 && b.max == 10);
	CHECK(buf_append(&b, "hello", 5) == 0);
	CHECK(buf_append(&b, "world", 5) == 0);
	CHECK(b.len == 10);
	CHECK_STR(b.data, "helloworld"); /* NUL-terminated */
	/* One byte more fails and changes nothing. */
	CHECK(buf_append(&b, "!", 1) == -1);
	CHECK(b.len == 10);
	CHECK_STR(b.data, "helloworld");
	CHECK(buf_append(&b, "", 0) == 0);
	/* A huge n cannot wrap around the check. */
	CHECK(buf_append(&b, "x", (size_t)-1) == -1);
	buf_release(&b);
	CHECK(b.data == NULL && b.len == 0 && b.max == 10);

	buf_init(&b, 4);
	CHECK(buf_append(&b, "12345", 5) == -1);
	CHECK(b.data == NULL && b.len == 0);
	buf_release(&b);
}

TEST(buf_grows_past_its_first_allocation)
{
	struct buf b;
	buf_init(&b, 1 << 20);
	char chunk[1000];
	memset(chunk, 'a', sizeof(chunk));
	for (int i = 0; i < 100; i++)
		CHECK(buf_append(&b, chunk, sizeof(chunk)) == 0);
	CHECK(b.len == 100000);
	CHECK(b.cap > b.len && b.data[b.len] == '\0');
	CHECK(b.data[0] == 'a' && b.data[99999] == 'a');
	buf_release(&b);
}

TEST(buf_consume_drops_the_front)
{
	struct buf b;
	buf_init(&b, 100);
	buf_consume(&b, 3); /* empty and unallocated: nothing to do */
	CHECK(b.len == 0);
	buf_append(&b, "line one\nline two", 17);
	buf_consume(&b, 9);
	CHECK(b.len == 8);
	CHECK_STR(b.data, "line two");
	buf_consume(&b, 100);
	CHECK(b.len == 0);
	CHECK_STR(b.data, "");
	buf_release(&b);
}

TEST(buf_steal_hands_over_a_c_string)
{
	struct buf b;
	size_t len = 99;
	buf_init(&b, 8);
	char *s = buf_steal(&b, &len); /* empty: "" rather than NULL */
	CHECK_STR(s, "");
	CHECK(len == 0);
	free(s);
	buf_append(&b, "abc", 3);
	s = buf_steal(&b, &len);
	CHECK_STR(s, "abc");
	CHECK(len == 3);
	CHECK(b.data == NULL && b.len == 0 && b.max == 8);
	free(s);
	buf_release(&b);
}

TEST(buf_read_file_reads_to_the_end_within_the_cap)
{
	char text[] = "print(1)\n";
	FILE *f = fmemopen(text, strlen(text), "r");
	struct buf b;
	struct err *e = NULL;
	buf_init(&b, 1 << 20);
	CHECK(buf_read_file(&b, f, "stdin", &e) == 0);
	CHECK(e == NULL);
	CHECK_STR(b.data, "print(1)\n");
	fclose(f);
	buf_release(&b);

	/* An empty input is an empty C string, not NULL. */
	f = fopen("/dev/null", "r");
	CHECK(buf_read_file(&b, f, "empty", &e) == 0);
	CHECK(b.data != NULL && b.len == 0);
	fclose(f);
	buf_release(&b);
}

TEST(buf_read_file_refuses_more_than_the_cap)
{
	/* Two MiB of input against a one MiB cap. */
	size_t n = 2u << 20;
	char *big = xmalloc(n);
	memset(big, 'x', n);
	FILE *f = fmemopen(big, n, "r");
	struct buf b;
	AUTOERR struct err *e = NULL;
	buf_init(&b, 1u << 20);
	CHECK(buf_read_file(&b, f, "code.py", &e) == -1);
	CHECK(e != NULL && e->code == ERR_PAYLOAD_TOO_LARGE);
	CHECK(e != NULL && strcmp(e->message, "code.py: larger than 1 MiB") == 0);
	CHECK(b.len <= b.max);
	fclose(f);
	free(big);
	buf_release(&b);
}
