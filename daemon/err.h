/* err.h: the error convention of the daemon.
 *
 * A function that can fail returns -1 (or NULL) and fills a `struct err **`
 * with an API code, the HTTP status it maps to and a message. Callers add
 * context as the error climbs ("create session: docker: 409 name in use")
 * with err_wrap(). The boundary that answers the client logs it once and
 * frees it; nobody else logs and returns. */
#ifndef CI_ERR_H
#define CI_ERR_H

enum err_code {
	ERR_BAD_REQUEST,
	ERR_BAD_PATH,
	ERR_UNAUTHORIZED,
	ERR_FORBIDDEN,
	ERR_NOT_FOUND,
	ERR_EXPIRED,
	ERR_BUSY,
	ERR_QUOTA_EXCEEDED,
	ERR_PAYLOAD_TOO_LARGE,
	ERR_UNAVAILABLE,
	ERR_INTERNAL,
};

struct err {
	enum err_code code;
	char *message; /* owned */
};

/* Fill *errp (when errp and not *errp already set) and return -1. */
int err_set(struct err **errp, enum err_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the message of *errp with context: "ctx: old message". */
void err_wrap(struct err **errp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new error; the caller owns it (err_free). */
struct err *err_new(enum err_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void err_free(struct err *e);

/* Free *errp and set it to NULL; for __attribute__((cleanup)). */
void err_cleanup(struct err **errp);

/* The wire name ("not_found") and HTTP status (404) of a code. */
const char *err_code_name(enum err_code code);
int err_code_status(enum err_code code);

#endif
