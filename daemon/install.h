/* install.h: time-boxed package installs (POST /v1/sessions/{id}/packages).
 *
 * An install runs pip inside the sandbox, as the sandbox user, through the
 * session's kernel (an execution the daemon writes, not the client):
 *   python3 -m pip install --no-cache-dir --upgrade --target INSTALL_SITE
 *       --index-url URL --only-binary=:all: -- SPEC...
 * into INSTALL_SITE under /workspace, which the kernel puts on sys.path
 * (images/python/runner/kernel.py at start; the install itself for a
 * kernel already running). For the window, and only then, the session's
 * egress allowlist has one more entry, the index's host:port; when the
 * window ends (pip done, or the deadline, whichever first) the entry goes
 * and the proxy closes every connection of the session that the remaining
 * allowlist does not permit (open tunnels included). Both are logged with
 * the session id. A session must be on the sandbox network (created with a
 * non-empty network.allow) to install: one without is answered 400.
 *
 * For the snapshot API: what was installed lives in INSTALL_SITE, plain
 * files in the workspace (a snapshot of /workspace/.ci/site carries the
 * packages, and a restore that puts the directory back needs no pip: the
 * kernel finds it on sys.path). install_site_dir() names it. */
#ifndef CI_INSTALL_H
#define CI_INSTALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define INSTALL_SITE "/workspace/.ci/site"
#define INSTALL_MAX_SPECS 32
#define INSTALL_SPEC_MAX 200
#define INSTALL_NAME_MAX 128
#define INSTALL_VERSION_MAX 64
#define INSTALL_MAX_PKGS 256 /* reported back; more are dropped (and said so) */

struct install_request {
	char **specs; /* checked by install_check_spec */
	size_t n_specs;
	int64_t timeout_s; /* 0: --install-max-timeout-s */
};

/* Free what r holds (not r). */
void install_request_release(struct install_request *r);

struct install_pkg {
	char *name;
	char *version;
};

struct install_result {
	struct install_pkg *pkgs; /* the requested ones, then new dependencies */
	size_t n_pkgs;
	bool pkgs_truncated;
	char index_host[300]; /* host:port the window opened */
	int64_t window_s;     /* the window granted */
	int64_t window_ms;    /* how long egress was open */
	int64_t pip_ms;       /* pip's run, measured in the sandbox */
	size_t closed;        /* proxy connections closed at the window's end */
};

void install_result_release(struct install_result *r);

/* Whether spec is one requirement pip may be given: a PEP 508 name
 * (letters, digits, '.', '_', '-', starting and ending with a letter or
 * digit), optionally followed by version clauses "OP VERSION" joined by
 * ',' (OP one of == != <= >= ~= < > ===; VERSION letters, digits and
 * . * + ! _ -). Nothing else: no URL, path, option, marker or space, so a
 * spec can be neither an option to pip nor break out of the Python string
 * it is written into. On -1 the message names the spec and what is wrong. */
int install_check_spec(const char *spec, struct err **errp);

/* The index URL's host:port (for the allowlist entry), from an http:// or
 * https:// URL; -1 when it is not one (--pip-index-url is checked with it).
 * The URL must also be free of quotes, backslashes and control bytes: it is
 * written into the Python the sandbox runs. */
int install_index_authority(const char *url, char *out, size_t size, struct err **errp);

/* The Python source of one install (caller frees). specs checked first. */
char *install_script(const char *index_url, char *const *specs, size_t n_specs, int64_t window_s);

/* The arguments after `python3 -m pip` of the same install as
 * install_script's (a %pip install in a cell runs them itself: the kernel
 * gets them in its pip_window frame), NULL-terminated, *n set; specs
 * checked first. Caller frees with install_args_free. */
char **install_pip_args(const char *index_url, char *const *specs, size_t n_specs, size_t *n);
void install_args_free(char **args);

/* Read the install script's report out of the execution's stdout: the
 * packages ("\x1eci-pkg\tNAME\tVERSION" lines) and the last status line
 * ("\x1eci-install\tSTATUS\tRC\tPIP_MS"); *status is "ok", "timeout",
 * "failed" or "" when there is none. Hostile input: every field checked and
 * capped; a line that does not parse is skipped. */
void install_parse_report(const char *out, size_t len, struct install_result *r, char *status,
			  size_t status_size, int *rc);

#endif
