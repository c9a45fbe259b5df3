/* seccomp.h: the seccomp profile every sandbox container runs under.
 *
 * The profile is ours (daemon/policy/sandbox-seccomp.json, embedded at build
 * time): an allowlist in the spirit of the engine's default, minus what a
 * Python sandbox has no use for and what has carried kernel exploits
 * (io_uring, ptrace and cross-process memory access, user namespaces, rare
 * socket families). docs/security.md says which and why. */
#ifndef CI_SECCOMP_H
#define CI_SECCOMP_H

#include "err.h"

/* The profile to pass to Docker ("seccomp=<json>"), compacted: the built-in
 * one when path is NULL or "", the engine's own default when path is
 * "engine" (then NULL is returned and *errp is untouched), else the JSON file
 * at path, checked to be a seccomp profile. Caller frees. */
char *seccomp_profile_load(const char *path, struct err **errp);

/* The built-in profile's text, as embedded (for tests). */
const char *seccomp_builtin_text(void);

#endif
