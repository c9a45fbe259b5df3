/* err.c: errors that carry an API code and a message, wrapped as they climb. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

static const struct {
	const char *name;
	int status;
} err_table[] = {
    [ERR_BAD_REQUEST] = {"bad_request", 400},
    [ERR_BAD_PATH] = {"bad_path", 400},
    [ERR_UNAUTHORIZED] = {"unauthorized", 401},
    [ERR_FORBIDDEN] = {"forbidden", 403},
    [ERR_NOT_FOUND] = {"not_found", 404},
    [ERR_EXPIRED] = {"expired", 410},
    [ERR_BUSY] = {"busy", 409},
    [ERR_QUOTA_EXCEEDED] = {"quota_exceeded", 429},
    [ERR_PAYLOAD_TOO_LARGE] = {"payload_too_large", 413},
    [ERR_UNAVAILABLE] = {"unavailable", 503},
    [ERR_INTERNAL] = {"internal", 500},
    [ERR_TIMEOUT] = {"timeout", 504},
    [ERR_CORRUPT] = {"corrupt", 422},
    [ERR_NODE_LOST] = {"node_lost", 410},
    [ERR_IS_A_DIRECTORY] = {"is_a_directory", 409},
    [ERR_METHOD_NOT_ALLOWED] = {"method_not_allowed", 405},
    [ERR_UNSUPPORTED_MEDIA_TYPE] = {"unsupported_media_type", 415},
};

#define ERR_NCODES (sizeof(err_table) / sizeof(err_table[0]))

static struct err *err_vnew(enum err_code code, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static struct err *err_vnew(enum err_code code, const char *fmt, va_list ap)
{
	struct err *e = xcalloc(1, sizeof(*e));
	e->code = code;
	e->message = xvasprintf(fmt, ap);
	return e;
}

struct err *err_new(enum err_code code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct err *e = err_vnew(code, fmt, ap);
	va_end(ap);
	return e;
}

int err_set(struct err **errp, enum err_code code, const char *fmt, ...)
{
	if (errp == NULL || *errp != NULL)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	*errp = err_vnew(code, fmt, ap);
	va_end(ap);
	return -1;
}

void err_wrap(struct err **errp, const char *fmt, ...)
{
	if (errp == NULL || *errp == NULL)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *ctx = xvasprintf(fmt, ap);
	va_end(ap);
	char *joined = xasprintf("%s: %s", ctx, (*errp)->message);
	free(ctx);
	free((*errp)->message);
	(*errp)->message = joined;
}

void err_give(struct err **errp, struct err *e)
{
	if (errp != NULL && *errp == NULL)
		*errp = e;
	else
		err_free(e);
}

void err_set_peer(struct err *e, int status, const char *code)
{
	e->peer_status = status;
	free(e->peer_code);
	e->peer_code = code != NULL ? xstrdup(code) : NULL;
}

void err_free(struct err *e)
{
	if (e == NULL)
		return;
	free(e->message);
	free(e->peer_code);
	free(e);
}

void err_cleanup(struct err **errp)
{
	err_free(*errp);
	*errp = NULL;
}

const char *err_code_name(enum err_code code)
{
	if ((unsigned)code >= ERR_NCODES)
		return "internal";
	return err_table[code].name;
}

int err_code_status(enum err_code code)
{
	if ((unsigned)code >= ERR_NCODES)
		return 500;
	return err_table[code].status;
}

int err_code_from_name(const char *name, enum err_code *out)
{
	for (size_t i = 0; i < ERR_NCODES; i++) {
		if (strcmp(err_table[i].name, name) == 0) {
			*out = (enum err_code)i;
			return 0;
		}
	}
	return -1;
}
