/*
 * util.c: exit statuses from errors, and a path helper.
 */
#include "util.h"

#include <string.h>

#include "err.h"

int cli_exit_status(const struct err *e)
{
	if (e->peer_status != 0 || e->peer_code != NULL)
		return CLI_EXIT_API;
	switch (e->code) {
	case ERR_BAD_REQUEST:
	case ERR_BAD_PATH: return CLI_EXIT_USAGE;
	case ERR_UNAVAILABLE: return CLI_EXIT_API;
	default: return CLI_EXIT_FAIL;
	}
}

const char *util_basename(const char *p)
{
	const char *slash = strrchr(p, '/');

	return slash != NULL ? slash + 1 : p;
}
