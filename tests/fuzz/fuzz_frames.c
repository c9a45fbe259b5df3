/* fuzz_frames.c: the frame stream a sandbox sends the daemon, on hostile
 * bytes. The input is cut into frames as kernel.c's read loop cuts them
 * (frame_parse_prefix, then the two lengths), each header decoded as
 * kernel.c decodes it (kernel_frame_decode) for what the peer is at that
 * point (a new connection until its hello names a role), and what a kernel
 * sends is assembled into an execution's result as the manager does
 * (exec_result.c), then serialised, as an answer would be, at each "done"
 * and at the end. A frame the daemon would refuse ends the stream, as it
 * ends the connection. Memory errors, leaks and broken invariants are what
 * this looks for. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec_result.h"
#include "frame.h"
#include "json.h"
#include "kernel_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small caps, so that inputs of a few KiB reach them. */
#define OUTPUT_CAP 512

static void answer(struct exec_result *r)
{
	AUTOGEN yajl_gen g = json_gen_new();
	exec_result_to_json(r, g);
	size_t len;
	const char *text = jg_text(g, &len);
	if (text == NULL || strlen(text) != len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum kernel_frame_from from = KERNEL_FRAME_FROM_PENDING;
	struct exec_result *r = exec_result_new(OUTPUT_CAP);
	size_t off = 0;
	while (size - off >= FRAME_PREFIX) {
		uint32_t hlen, blen;
		struct err *e = NULL;
		if (frame_parse_prefix(data + off, &hlen, &blen, &e) < 0) {
			if (e == NULL)
				abort();
			err_free(e);
			break;
		}
		if (hlen < 2 || hlen > FRAME_MAX_HEADER || blen > FRAME_MAX_BODY)
			abort();
		size_t total = FRAME_PREFIX + (size_t)hlen + blen;
		if (size - off < total)
			break; /* the rest has not arrived */
		const char *hdr = (const char *)data + off + FRAME_PREFIX;
		const char *body = hdr + hlen;
		struct kernel_frame f;
		if (kernel_frame_decode(from, hdr, hlen, &f, &e) < 0) {
			if (e == NULL || f.header != NULL)
				abort();
			err_free(e);
			break;
		}
		switch (f.kind) {
		case KERNEL_FRAME_HELLO:
			if (f.role == NULL)
				abort();
			from = strcmp(f.role, "kernel") == 0 ? KERNEL_FRAME_FROM_KERNEL
							     : KERNEL_FRAME_FROM_SUPERVISOR;
			break;
		case KERNEL_FRAME_STREAM: {
			size_t kept =
			    exec_result_on_stream(r, f.is_stderr, body, blen, f.tail, f.dropped);
			if (kept > blen)
				abort();
			break;
		}
		case KERNEL_FRAME_DISPLAY:
			if (f.mime == NULL || f.display.mime != f.mime)
				abort();
			exec_result_on_display(r, &f.display, body, blen);
			break;
		case KERNEL_FRAME_DONE:
			if (f.id == 0)
				abort();
			if (exec_result_on_done(r, f.header, &e) < 0) {
				err_free(e);
				kernel_frame_clear(&f);
				goto out; /* the daemon drops that kernel */
			}
			answer(r);
			exec_result_free(r); /* the next execution has a result of its own */
			r = exec_result_new(OUTPUT_CAP);
			break;
		case KERNEL_FRAME_KERNEL_EXIT:
			exec_result_fail(r, EXEC_KILLED, true, "the kernel exited");
			break;
		case KERNEL_FRAME_PIP_OPEN:
			/* Either a list of strings within the cap, or why not. */
			if (f.pip.n_specs > KERNEL_PIP_MAX_SPECS || (f.pip.bad && f.pip.n_specs))
				abort();
			for (size_t i = 0; i < f.pip.n_specs; i++)
				if (f.pip.specs[i] == NULL)
					abort();
			break;
		case KERNEL_FRAME_PIP_CLOSE:
			if (f.pip.rc < -1000 || f.pip.rc > 1000)
				abort();
			break;
		case KERNEL_FRAME_IGNORED:
		case KERNEL_FRAME_SUPERVISOR:
			if (f.header == NULL)
				abort();
			break;
		}
		kernel_frame_clear(&f);
		off += total;
	}
out:
	answer(r);
	exec_result_free(r);
	return 0;
}
