/* seccomp.c: loading and checking the sandbox's seccomp profile. */
#include "seccomp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "xalloc.h"

/* Generated from daemon/policy/sandbox-seccomp.json by the Makefile. */
extern const char seccomp_builtin_profile[];

#define PROFILE_MAX (256 * 1024)

const char *seccomp_builtin_text(void)
{
	return seccomp_builtin_profile;
}

/* The text without whitespace outside strings: the profile travels inside
 * every container create body, so it should not carry its indentation. */
static char *compact(const char *text, size_t len)
{
	char *out = xmalloc(len + 1);
	size_t o = 0;
	bool in_string = false, escaped = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_string) {
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			continue;
		}
		out[o++] = c;
	}
	out[o] = '\0';
	return out;
}

static char *check(const char *text, size_t len, const char *origin, struct err **errp)
{
	struct err *e = NULL;
	yajl_val v = json_parse(text, len, &e);
	if (v == NULL) {
		err_set(errp, ERR_BAD_REQUEST, "seccomp profile %s: %s", origin, e->message);
		err_free(e);
		return NULL;
	}
	const char *action = json_get_str(v, "defaultAction");
	yajl_val calls = json_get(v, "syscalls");
	bool ok = action && calls && YAJL_IS_ARRAY(calls) && calls->u.array.len > 0;
	yajl_tree_free(v);
	if (!ok) {
		err_set(errp, ERR_BAD_REQUEST,
			"seccomp profile %s: expected an object with defaultAction and a syscalls "
			"list",
			origin);
		return NULL;
	}
	return compact(text, len);
}

char *seccomp_profile_load(const char *path, struct err **errp)
{
	if (path == NULL || *path == '\0')
		return check(seccomp_builtin_profile, strlen(seccomp_builtin_profile), "(built in)",
			     errp);
	if (strcmp(path, "engine") == 0)
		return NULL;
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		err_set(errp, ERR_BAD_REQUEST, "seccomp profile %s: %s", path, strerror(errno));
		return NULL;
	}
	AUTOFREE char *buf = xmalloc(PROFILE_MAX + 1);
	size_t n = fread(buf, 1, PROFILE_MAX + 1, f);
	fclose(f);
	if (n > PROFILE_MAX) {
		err_set(errp, ERR_BAD_REQUEST, "seccomp profile %s: larger than %d bytes", path,
			PROFILE_MAX);
		return NULL;
	}
	return check(buf, n, path, errp);
}
