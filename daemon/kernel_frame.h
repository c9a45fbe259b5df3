/* kernel_frame.h: what a frame from the sandbox says, decoded and checked.
 *
 * Pure (no I/O, no state): kernel.c cuts frames off the socket (frame.c
 * bounds their lengths) and acts on what this decodes; the fuzz target
 * tests/fuzz/fuzz_frames.c feeds it arbitrary bytes. Which frames a peer may
 * send depends on what it said it is (docs/protocol.md): a new connection
 * only "hello", the kernel its execution's output, the supervisor the rest. */
#ifndef CI_KERNEL_FRAME_H
#define CI_KERNEL_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_tree.h>

#include "err.h"
#include "exec_result.h"

enum kernel_frame_from {
	KERNEL_FRAME_FROM_PENDING, /* before hello */
	KERNEL_FRAME_FROM_KERNEL,
	KERNEL_FRAME_FROM_SUPERVISOR,
};

enum kernel_frame_kind {
	KERNEL_FRAME_HELLO,       /* pending: role is "kernel" or "supervisor" */
	KERNEL_FRAME_STREAM,      /* kernel: id, is_stderr, tail, dropped; body = output */
	KERNEL_FRAME_DISPLAY,     /* kernel: id, display; body = the data */
	KERNEL_FRAME_DONE,        /* kernel: id; the header is the result */
	KERNEL_FRAME_PIP_OPEN,    /* kernel: id, pip (a %pip install asks for the window) */
	KERNEL_FRAME_PIP_CLOSE,   /* kernel: id, pip.rc (pip ended) */
	KERNEL_FRAME_IGNORED,     /* kernel: a type a newer runner may send */
	KERNEL_FRAME_KERNEL_EXIT, /* supervisor: code, sig (-1: none), oom */
	KERNEL_FRAME_SUPERVISOR,  /* supervisor: any other frame (file replies) */
};

/* What a pip_open or pip_close frame says (docs/protocol.md). The specs are
 * borrowed from the header and not yet checked as requirements (the
 * manager answers a bad one with an error the cell shows): a list that is
 * not strings, or longer than KERNEL_PIP_MAX_SPECS, sets bad. */
#define KERNEL_PIP_MAX_SPECS 32
struct kernel_pip {
	const char *specs[KERNEL_PIP_MAX_SPECS];
	size_t n_specs;
	const char *bad; /* static: what is wrong with the list, or NULL */
	int rc;          /* pip_close: pip's exit status (-1: killed, not known) */
};

struct kernel_frame {
	enum kernel_frame_kind kind;
	yajl_val header;         /* the parsed header; owned, kernel_frame_clear frees */
	const char *role, *mime; /* borrowed from header */
	uint64_t id;
	bool is_stderr, tail;
	uint64_t dropped;
	int code, sig;
	bool oom;
	struct exec_display_info display; /* mime borrowed from header */
	struct kernel_pip pip;
};

/* Decode the JSON header of a frame sent by `from`. -1 (bad_request) when
 * it is not JSON or not a frame that peer may send; f is then empty. */
int kernel_frame_decode(enum kernel_frame_from from, const char *hdr, size_t hlen,
			struct kernel_frame *f, struct err **errp);

/* Free what kernel_frame_decode kept (NULL-safe on an empty frame). */
void kernel_frame_clear(struct kernel_frame *f);

#endif
