/* http_guard.h: what a request's Origin, Host and Content-Type must be
 * before the API looks at it (pure, unit-tested; api.c applies them).
 *
 * A web page in a browser can send requests to a daemon on loopback: a
 * "simple" cross-site POST (text/plain, no preflight) reaches the daemon,
 * and a DNS-rebound name makes the page same-origin with it. So:
 *   - a request with an Origin header is refused unless the Origin is
 *     listed (--allowed-origins, comma-separated, exact) or is the daemon's
 *     own (scheme://Host, the reviewer's page served by the daemon itself);
 *   - without keys, the Host must be loopback (127.x, [::1]) or localhost,
 *     with an optional port: a rebound name is refused;
 *   - a JSON body must say Content-Type: application/json (parameters such
 *     as "; charset=utf-8" allowed). */
#ifndef CI_HTTP_GUARD_H
#define CI_HTTP_GUARD_H

#include <stdbool.h>

/* Whether origin is one of the comma-separated list (exact, blanks around
 * the items ignored, case-insensitive). "" or NULL lists nothing. */
bool http_guard_origin_listed(const char *list, const char *origin);

/* Whether origin is http://HOST or https://HOST for the request's Host
 * header host (case-insensitive): a page the daemon itself served. */
bool http_guard_origin_is_host(const char *origin, const char *host);

/* Whether a Host header names a loopback address or localhost: "127.x.y.z",
 * "[::1]" (or an IPv4-mapped 127 address), "localhost", each optionally
 * with ":PORT" (1 to 5 digits). */
bool http_guard_host_is_loopback(const char *host);

/* Whether a Content-Type is application/json, with optional parameters
 * ("application/json; charset=utf-8"); case-insensitive. */
bool http_guard_content_type_is_json(const char *content_type);

#endif
