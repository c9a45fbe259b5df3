/* test_kernel_frame.c: which frame headers each peer of the IPC link may send. */
#include "kernel_frame.h"
#include "unit.h"

static int decode(enum kernel_frame_from from, const char *hdr, struct kernel_frame *f)
{
	struct err *e = NULL;
	int rc = kernel_frame_decode(from, hdr, strlen(hdr), f, &e);
	CHECK((rc < 0) == (e != NULL));
	err_free(e);
	return rc;
}

static void refused(enum kernel_frame_from from, const char *hdr)
{
	struct kernel_frame f;
	int rc = decode(from, hdr, &f);
	if (rc == 0)
		fprintf(stderr, "  accepted from %d: %s\n", (int)from, hdr);
	CHECK(rc < 0 && f.header == NULL);
	kernel_frame_clear(&f);
}

TEST(kernel_frame_hello_first)
{
	struct kernel_frame f;
	CHECK(decode(KERNEL_FRAME_FROM_PENDING, "{\"t\":\"hello\",\"role\":\"kernel\"}", &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_HELLO);
	CHECK_STR(f.role, "kernel");
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_PENDING, "{\"t\":\"hello\",\"role\":\"supervisor\"}", &f) ==
	      0);
	kernel_frame_clear(&f);
	refused(KERNEL_FRAME_FROM_PENDING, "{\"t\":\"hello\",\"role\":\"root\"}");
	refused(KERNEL_FRAME_FROM_PENDING, "{\"t\":\"hello\"}");
	refused(KERNEL_FRAME_FROM_PENDING, "{\"t\":\"stream\",\"id\":1,\"name\":\"stdout\"}");
	refused(KERNEL_FRAME_FROM_PENDING, "{\"role\":\"kernel\"}");
	refused(KERNEL_FRAME_FROM_PENDING, "{\"t\":\"hello\",\"role\":\"kernel\"");
	refused(KERNEL_FRAME_FROM_PENDING, "[1]");
}

TEST(kernel_frame_kernel_frames)
{
	struct kernel_frame f;
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL,
		     "{\"t\":\"stream\",\"id\":3,\"name\":\"stderr\",\"tail\":true,\"dropped\":9}",
		     &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_STREAM && f.id == 3 && f.is_stderr && f.tail &&
	      f.dropped == 9);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL,
		     "{\"t\":\"stream\",\"id\":3,\"name\":\"stdout\",\"dropped\":-4}", &f) == 0);
	CHECK(!f.is_stderr && !f.tail && f.dropped == 0);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL,
		     "{\"t\":\"display\",\"id\":1,\"mime\":\"image/png\"}", &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_DISPLAY);
	CHECK_STR(f.mime, "image/png");
	CHECK_STR(f.display.mime, "image/png");
	CHECK(f.display.group == -1 && !f.display.result);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL,
		     "{\"t\":\"display\",\"id\":1,\"mime\":\"text/html\",\"group\":3,"
		     "\"result\":true}",
		     &f) == 0);
	CHECK(f.display.group == 3 && f.display.result);
	kernel_frame_clear(&f);
	/* a group that is not a count, a result that is not true: not said */
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL,
		     "{\"t\":\"display\",\"id\":1,\"mime\":\"a/b\",\"group\":-2,"
		     "\"result\":\"yes\"}",
		     &f) == 0);
	CHECK(f.display.group == -1 && !f.display.result);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL,
		     "{\"t\":\"display\",\"id\":1,\"mime\":\"a/b\",\"group\":\"1\"}", &f) == 0);
	CHECK(f.display.group == -1);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"done\",\"id\":1,\"status\":\"ok\"}", &f) ==
	      0);
	CHECK(f.kind == KERNEL_FRAME_DONE && f.header != NULL);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"later\",\"id\":1}", &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_IGNORED);
	kernel_frame_clear(&f);
	refused(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"later\"}");
	refused(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"done\",\"id\":0}");
	refused(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"done\",\"id\":\"1\"}");
	refused(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"stream\",\"id\":1,\"name\":\"stdin\"}");
	refused(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"display\",\"id\":1}");
}

TEST(kernel_frame_supervisor_frames)
{
	struct kernel_frame f;
	CHECK(decode(KERNEL_FRAME_FROM_SUPERVISOR,
		     "{\"t\":\"kernel_exit\",\"code\":3,\"oom\":true}", &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_KERNEL_EXIT && f.code == 3 && f.sig == -1 && f.oom);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_SUPERVISOR, "{\"t\":\"file_data\",\"op\":2}", &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_SUPERVISOR && f.header != NULL);
	kernel_frame_clear(&f);
	refused(KERNEL_FRAME_FROM_SUPERVISOR, "{\"op\":2}");
}

TEST(kernel_frame_pip_open_and_close)
{
	struct kernel_frame f;
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL,
		     "{\"t\":\"pip_open\",\"id\":4,\"specs\":[\"a==1\",\"b\"]}", &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_PIP_OPEN && f.id == 4 && f.pip.bad == NULL);
	CHECK(f.pip.n_specs == 2);
	CHECK_STR(f.pip.specs[0], "a==1");
	CHECK_STR(f.pip.specs[1], "b");
	kernel_frame_clear(&f);
	/* Junk lists are not protocol errors: the cell is told (bad). */
	static const char *const junk[] = {
	    "{\"t\":\"pip_open\",\"id\":4}",
	    "{\"t\":\"pip_open\",\"id\":4,\"specs\":\"a\"}",
	    "{\"t\":\"pip_open\",\"id\":4,\"specs\":[\"a\",3]}",
	    "{\"t\":\"pip_open\",\"id\":4,\"specs\":[{\"x\":1}]}",
	};
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		CHECK(decode(KERNEL_FRAME_FROM_KERNEL, junk[i], &f) == 0);
		CHECK(f.kind == KERNEL_FRAME_PIP_OPEN && f.pip.bad != NULL && f.pip.n_specs == 0);
		kernel_frame_clear(&f);
	}
	char many[1024] = "{\"t\":\"pip_open\",\"id\":4,\"specs\":[";
	for (int i = 0; i < KERNEL_PIP_MAX_SPECS + 1; i++)
		strcat(many, i ? ",\"a\"" : "\"a\"");
	strcat(many, "]}");
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL, many, &f) == 0);
	CHECK(f.pip.bad != NULL && f.pip.n_specs == 0);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"pip_close\",\"id\":4,\"rc\":1}", &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_PIP_CLOSE && f.pip.rc == 1);
	kernel_frame_clear(&f);
	CHECK(decode(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"pip_close\",\"id\":4,\"rc\":\"x\"}", &f) ==
	      0);
	CHECK(f.pip.rc == -1);
	kernel_frame_clear(&f);
	refused(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"pip_open\",\"specs\":[\"a\"]}");
	refused(KERNEL_FRAME_FROM_KERNEL, "{\"t\":\"pip_close\",\"id\":0}");
	/* Only the kernel asks: from the supervisor it is a file reply. */
	CHECK(decode(KERNEL_FRAME_FROM_SUPERVISOR, "{\"t\":\"pip_open\",\"id\":4,\"specs\":[]}",
		     &f) == 0);
	CHECK(f.kind == KERNEL_FRAME_SUPERVISOR);
	kernel_frame_clear(&f);
}
