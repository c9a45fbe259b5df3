/* fixer_target.h: which fixer model a run may use.
 *
 * The operator names a default fixer (--fixer-url, --fixer-model, its key
 * in --fixer-key-file) and may let requests choose their own: a URL that
 * starts with one of --fixer-allowed-urls, and a key by the name of a file
 * in its tenant's subdirectory of --fixer-key-dir (DIR/TENANT/NAME: a
 * tenant never names another's key). Both are off by default, because a
 * request's fixer
 * is a place the daemon POSTs to and a file it reads: a tenant must never
 * make it reach an arbitrary address (SSRF) or read an arbitrary host
 * file. The key files are read when the rules are made (at start and on
 * SIGHUP), never while serving; a request only picks among them by name. */
#ifndef CI_FIXER_TARGET_H
#define CI_FIXER_TARGET_H

#include "err.h"
#include "fixer.h"

struct config;
struct fixer_targets;

/* Key files: how many a key directory may hold, how large one may be. */
#define FIXER_KEY_DIR_MAX_FILES 256
#define FIXER_KEY_MAX_BYTES (16 * 1024)

/* The rules of cfg's fixer options, with the default key and the key
 * directory's files read now. NULL with *errp (bad_request, naming the
 * option) when an option is malformed or a file cannot be read. Caller
 * frees (fixer_targets_free); cfg is not kept. */
struct fixer_targets *fixer_targets_new(const struct config *cfg, struct err **errp);
void fixer_targets_free(struct fixer_targets *ft); /* NULL-safe */

/* SIGHUP: rules made anew from cfg (the key files read again) replace *ft;
 * when they cannot be made, *ft stays as it was and -1 says why. */
int fixer_targets_reload(struct fixer_targets **ft, const struct config *cfg, struct err **errp);

/* The text-only half of fixer_targets_new's checks (fixer-url and
 * fixer-allowed-urls; no file is read), for config_validate: a malformed
 * URL stops the start, or a SIGHUP, before anything is applied. */
int fixer_target_check_config(const struct config *cfg, struct err **errp);

enum fixer_resolved {
	FIXER_NONE = 0, /* no fixer configured and the request named none */
	FIXER_OK = 1,   /* *out filled */
};

/* The fixer of tenant's request's optional fixer.url, fixer.model and
 * fixer.api_key_file (NULL or "": not given). A request URL must be http
 * or https, without userinfo, and start with an allowed prefix on a
 * boundary; a key file must be a plain name of a file in the tenant's
 * subdirectory of the key directory. The default key goes only with the
 * default URL. Returns FIXER_OK with *out (owned copies,
 * fixer_target_clear), FIXER_NONE, or -1 with a bad_request error naming
 * what was refused. */
int fixer_targets_resolve(const struct fixer_targets *ft, const char *tenant, const char *url,
			  const char *model, const char *api_key_file, struct fixer_target *out,
			  struct err **errp);

/* Free what fixer_targets_resolve put in t and zero it. NULL-safe. */
void fixer_target_clear(struct fixer_target *t);

#endif
