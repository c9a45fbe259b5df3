/* version.h: what this build is, for --version, GET /version and
 * ci_build_info. One place: the release is the VERSION file at the top of
 * the repository, the commit is `git rev-parse --short HEAD` at build time
 * ("unknown" outside a git checkout); the Makefile writes them into
 * build/gen/version.c, and rewrites it only when they change, so a make
 * with nothing changed rebuilds nothing. */
#ifndef CI_VERSION_H
#define CI_VERSION_H

extern const char ci_version[]; /* "0.1.0" */
extern const char ci_git[];     /* short commit id, or "unknown" */

/* The API's version, as in its paths. */
#define CI_API_VERSION "v1"

#endif
