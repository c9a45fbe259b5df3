/* fuzz_route.c: the API's route matcher from any request line: the input
 * is "METHOD PATH" (split at the first space). Whatever the bytes, the
 * match is one of its four kinds, a found route serves the method, the
 * {id} it hands over is a valid session id, the {path...} points into the
 * path, the {key} is letters and digits that fit, and the Allow value
 * fits. The same bytes go through the Authorization header's parsers
 * (apikey_bearer, apikey_parse): whatever they take is of a key's shape. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "apikey.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	char *sp = strchr(text, ' ');
	const char *method = "GET", *path = text;
	if (sp) {
		*sp = '\0';
		method = text;
		path = sp + 1;
	}
	struct api_match m;
	api_route_match(api_routes, api_routes_count, method, path, &m);
	if (strlen(m.allow) >= API_ALLOW_MAX)
		abort();
	if (m.kind == API_MATCH_FOUND) {
		if (m.route == NULL ||
		    (strcmp(m.route->method, "*") != 0 && strcmp(m.route->method, method) != 0))
			abort();
	} else if (m.route != NULL) {
		abort();
	}
	if (m.kind <= API_MATCH_METHOD) {
		if (strstr(m.route ? m.route->pattern : "", "{id}") && !session_id_valid(m.id))
			abort();
		if (m.path && (m.path < path || m.path > path + strlen(path)))
			abort();
		size_t kn = strlen(m.key);
		if (kn > API_KEY_PARAM_MAX || strspn(m.key, "0123456789abcdefghijklmnopqrstuvwxyz"
							    "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != kn)
			abort();
	}
	char token[300], id[APIKEY_ID_LEN + 1];
	const char *secret = NULL;
	const char *hdr = sp ? sp + 1 : text;
	if (apikey_bearer(hdr, token, sizeof(token)) == 0 &&
	    (token[0] == '\0' || strlen(token) >= sizeof(token)))
		abort();
	if (apikey_parse(hdr, id, &secret) == 0 &&
	    (!apikey_id_valid(id) || strlen(secret) != APIKEY_SECRET_LEN))
		abort();
	free(text);
	return 0;
}
