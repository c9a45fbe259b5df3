/*
 * util.h: allocation, errors, bounded buffers and small codecs shared by
 * ci-ctl.  Nothing here knows about HTTP or JSON.
 */
#ifndef CLI_UTIL_H
#define CLI_UTIL_H

#include <stddef.h>
#include <stdio.h>

/* The build may pass -DCI_VERSION="..." (e.g. from git describe). */
#ifndef CI_VERSION
#define CI_VERSION "0.1.0"
#endif

/* Allocation: out of memory is not recoverable in a CLI, so these abort. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* For __attribute__((cleanup)): frees *(void **)p. */
void util_freep(void *p);
#define AUTO_FREE __attribute__((cleanup(util_freep)))

/*
 * ci-ctl's exit statuses; documented in `ci-ctl --help` and docs/cli.md.
 * FAIL doubles as "the code raised" for exec and "something local went
 * wrong" (a file could not be read or written) elsewhere.
 */
enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,
	CLI_EXIT_USAGE = 2,
	CLI_EXIT_TIMEOUT = 3,
	CLI_EXIT_KILLED = 4,
	CLI_EXIT_API = 5,
};

/*
 * Error convention (crun style, see style.md): a function that can fail
 * returns -1 or NULL and, when err is not NULL, stores an allocated
 * struct err that the caller frees with err_free().  `code` is the
 * enum cli_exit status the failure maps to.
 */
struct err {
	int code;
	long http_status; /* status of the server's answer, 0 when there was none */
	char *api_code;   /* the answer's error.code ("not_found"...), or NULL */
	char *msg;
};

void err_set(struct err **err, int code, long http_status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prefixes context to an existing error: "context: old message". */
void err_wrap(struct err **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands e over to *err (keeping an error already there) or frees it. */
void err_give(struct err **err, struct err *e);
void err_free(struct err *e);
void err_freep(struct err **e);
#define AUTO_ERR __attribute__((cleanup(err_freep)))

/*
 * A growing byte buffer with a hard cap: every buffer fed from outside
 * input is bounded.  `data` is always NUL-terminated once non-NULL, so
 * text bodies can be handed to parsers that want C strings.
 */
struct buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;
};

void buf_init(struct buf *b, size_t max);
/* Returns -1 (buffer unchanged) when the result would exceed b->max. */
int buf_append(struct buf *b, const void *p, size_t n);
/* Drops the first n bytes. */
void buf_consume(struct buf *b, size_t n);
void buf_release(struct buf *b);
/* Hands the data to the caller (who frees it) and resets the buffer. */
char *buf_steal(struct buf *b, size_t *len);

/* Reads f to EOF into out (capped by out->max).  `what` names f in errors. */
int util_read_all(FILE *f, struct buf *out, const char *what, struct err **err);

/* Percent-encodes s for a URL path; '/' is kept when keep_slash is set, so
 * each segment of a file path is encoded on its own.  Caller frees. */
char *util_url_escape(const char *s, int keep_slash);

/* Decodes standard base64 (padding optional, whitespace ignored) into out.
 * Returns -1 on malformed input or when out->max is exceeded. */
int util_base64_decode(const char *in, struct buf *out);

/* The last path component of p ("" stays ""); points into p. */
const char *util_basename(const char *p);

/* Parses a whole decimal number; -1 on junk, overflow or out of [min, max]. */
int util_parse_long(const char *s, long min, long max, long *out);
int util_parse_double(const char *s, double min, double max, double *out);

#endif
