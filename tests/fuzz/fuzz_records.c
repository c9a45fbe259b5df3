/* fuzz_records.c: what comes from Redis and from the sandbox: a session
 * record (adoption), a kernel's "done" header, an allowlist entry. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "exec_result.h"
#include "json.h"
#include "netpolicy.h"
#include "session.h"
#include "session_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err *e = NULL;
	struct session *s = session_from_record((const char *)data, size, &e);
	if (s) {
		AUTOGEN yajl_gen g = json_gen_new();
		session_to_json(s, g, true);
		session_free(s);
	}
	err_free(e);
	e = NULL;

	yajl_val v = json_parse((const char *)data, size, &e);
	if (v) {
		struct exec_result *r = exec_result_new(64);
		exec_result_on_stream(r, false, (const char *)data, size, false, 0);
		exec_result_on_stream(r, true, (const char *)data, size, true, size);
		if (exec_result_on_done(r, v, &e) == 0) {
			AUTOGEN yajl_gen g = json_gen_new();
			exec_result_to_json(r, g);
		}
		exec_result_free(r);
		yajl_tree_free(v);
	}
	err_free(e);
	e = NULL;

	char text[512], host[NETPOLICY_HOST_MAX + 1];
	size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
	memcpy(text, data, n);
	text[n] = '\0';
	int port;
	if (netpolicy_split(text, 443, host, sizeof(host), &port, &e) == 0) {
		char *allow[] = {text, "*.example.org"};
		netpolicy_allowed(allow, 2, host, port);
	}
	err_free(e);
	return 0;
}
