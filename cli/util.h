/*
 * util.h: ci-ctl's own small pieces beside lib/: the version, the exit statuses
 * and how an error maps to one, and a path helper.  Allocation, errors,
 * JSON, buffers and codecs come from lib/ (xalloc.h, err.h, json.h, buf.h,
 * codec.h), shared with the daemon.
 */
#ifndef CLI_UTIL_H
#define CLI_UTIL_H

struct err;

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
 * The exit status an error gives, so that struct err needs no CLI field:
 *   an answer from the server (peer_status or peer_code set)   API
 *   bad_request, bad_path: the user's arguments                USAGE
 *   unavailable: the server could not be reached, or its answer
 *     could not be used (cut off, too large, not JSON)         API
 *   anything else: a local failure (a file, stdout)            FAIL
 * So ci-ctl sets ERR_BAD_REQUEST for usage errors, ERR_UNAVAILABLE for
 * transport errors and ERR_INTERNAL (or payload_too_large for an input over
 * its cap) for local ones.
 */
int cli_exit_status(const struct err *e);

/* The last path component of p ("" stays ""); points into p. */
const char *util_basename(const char *p);

#endif
