/* err.h: the error convention of the daemon and ci-ctl.
 *
 * A function that can fail returns -1 (or NULL) and fills a `struct err **`
 * with an API code (which maps to an HTTP status) and a message. Callers add
 * context as the error climbs ("create session: docker: 409 name in use")
 * with err_wrap(). The boundary that answers the client (or, in ci-ctl,
 * prints to the user) reports it once and frees it; nobody else logs and
 * returns.
 *
 * Errors read from someone else's answer: ci-ctl turns the daemon's
 * {"error":{"code","message"}} into a struct err and must still say what the
 * answer was (its HTTP status and error code, which may be one this build
 * does not know). That is two optional fields, peer_status and peer_code,
 * zero and NULL unless err_set_peer() filled them; the daemon never sets
 * them. The CLI's exit status is not stored here either: cli/util.h maps
 * a struct err to it (cli_exit_status), so nothing in the daemon carries a
 * CLI notion. */
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
	ERR_TIMEOUT,        /* a time window ended before the work did (504) */
	ERR_CORRUPT,        /* stored data that fails its own checks: a snapshot (422) */
	ERR_NODE_LOST,      /* the session's node stopped heartbeating: gone for good (410) */
	ERR_IS_A_DIRECTORY, /* a file operation named a directory without asking for one (409) */
	ERR_METHOD_NOT_ALLOWED, /* a known path, another method: the Allow header lists them (405)
				 */
	ERR_UNSUPPORTED_MEDIA_TYPE, /* a JSON route's body not sent as application/json (415) */
};

struct err {
	enum err_code code;
	char *message; /* owned */
	/* Optional: the answer this error was read from (see above). */
	int peer_status; /* its HTTP status; 0 when there was no answer */
	char *peer_code; /* owned: its error.code as sent; NULL when none */
};

/* Fill *errp (when errp and not *errp already set) and return -1. The first
 * error is kept: it is the cause, later ones are fallout. */
int err_set(struct err **errp, enum err_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the message of *errp with context: "ctx: old message". */
void err_wrap(struct err **errp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new error; the caller owns it (err_free). */
struct err *err_new(enum err_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Hand e (owned, may be NULL) to *errp; when errp is NULL or already holds
 * an error, e is freed instead (the first error wins, as with err_set). */
void err_give(struct err **errp, struct err *e);

/* Record on e the answer it came from: an HTTP status (0: none) and the
 * answer's error code (copied; NULL: none). */
void err_set_peer(struct err *e, int status, const char *code);

void err_free(struct err *e);

/* Free *errp and set it to NULL; for __attribute__((cleanup)). */
void err_cleanup(struct err **errp);
#define AUTOERR __attribute__((cleanup(err_cleanup)))

/* The wire name ("not_found") and HTTP status (404) of a code. */
const char *err_code_name(enum err_code code);
int err_code_status(enum err_code code);

/* The code whose wire name is name, into *out; -1 when there is none. */
int err_code_from_name(const char *name, enum err_code *out);

#endif
