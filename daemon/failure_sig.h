/* failure_sig.h: what a failure is, for the failure memory: its signature
 * and, for some, a class that says no retry can help. Pure, unit-tested.
 *
 * The signature is a hash of the exception name, its message with numbers,
 * quoted strings and paths masked, the failing line of the user's code
 * normalised (whitespace collapsed, literals masked the same way), and the
 * image profile: the same mistake made with other data has the same
 * signature, and a different mistake has another. */
#ifndef CI_FAILURE_SIG_H
#define CI_FAILURE_SIG_H

#include <stdbool.h>
#include <stddef.h>

#include "exec_result.h"

/* 16 hex digits (the first 64 bits of a SHA-256). */
#define FAILURE_SIG_HEX 16

/* A failed execution and what the session's limits were. Borrowed. */
struct failure_input {
	const struct exec_result *r; /* status not EXEC_OK, or has_error */
	const char *code;            /* the code that failed */
	size_t code_len;
	const char *image;   /* the image profile ("python") */
	bool timeout_at_max; /* its exec timeout was the server's maximum */
	bool memory_at_max;  /* its memory limit was the server's maximum */
	bool can_install;    /* the session may install packages (none can, yet) */
};

/* Failures that no retry can fix. */
enum failure_class {
	FAILURE_CLASS_NONE,
	FAILURE_CLASS_EGRESS_DENIED,      /* the network policy refused a host */
	FAILURE_CLASS_MEMORY_AT_MAX,      /* out of memory at the server's maximum */
	FAILURE_CLASS_TIMEOUT_AT_MAX,     /* timed out at the server's maximum */
	FAILURE_CLASS_MODULE_UNAVAILABLE, /* a module the session cannot install */
};

/* "egress_denied", "memory_at_max", "timeout_at_max", "module_unavailable";
 * NULL for FAILURE_CLASS_NONE. */
const char *failure_class_name(enum failure_class c);
enum failure_class failure_classify(const struct failure_input *in);

/* The normalised parts, for people reading GET /v1/failures. Owned. */
struct failure_desc {
	char *ename;
	char *message; /* masked */
	char *line;    /* the failing line, normalised; "" when unknown */
	char *image;
};
void failure_desc_clear(struct failure_desc *d);

/* in's signature into sig, and (desc not NULL) its parts. */
void failure_signature(const struct failure_input *in, char sig[FAILURE_SIG_HEX + 1],
		       struct failure_desc *desc);

bool failure_sig_valid(const char *s);

#endif
