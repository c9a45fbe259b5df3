/* fuzz_route.c: the API's route matcher from any request line: the input
 * is "METHOD PATH" (split at the first space). Whatever the bytes, the
 * match is one of its four kinds, a found route serves the method, the
 * {id} it hands over is a valid session id, the {path...} points into the
 * path, and the Allow value fits. */
#include <stdlib.h>
#include <string.h>

#include "api.h"

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
	}
	free(text);
	return 0;
}
