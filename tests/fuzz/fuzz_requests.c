/* fuzz_requests.c: the API's request bodies (create, PATCH, exec, one-shot)
 * from any bytes: parsed into typed requests and validated against the
 * default config, without crashing or leaking whatever the bytes are. */
#include <stddef.h>
#include <stdint.h>

#include "api_requests.h"
#include "config.h"
#include "json.h"
#include "session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config cfg;
	static int init;
	if (!init) {
		config_defaults(&cfg);
		init = 1;
	}
	struct err *e = NULL;
	yajl_val v = json_parse((const char *)data, size, &e);
	err_free(e);
	e = NULL;
	if (v) {
		struct session_request r;
		if (api_parse_session_request(v, &r, &e) == 0) {
			session_free(session_from_request(&r, &cfg, "default", &e));
			session_request_release(&r);
		}
		err_free(e);
		e = NULL;
		if (api_parse_patch_request(v, &r, &e) == 0) {
			session_check_allow(r.allow, r.n_allow, &e);
			session_request_release(&r);
		}
		err_free(e);
		e = NULL;
		yajl_tree_free(v);
	}
	for (int oneshot = 0; oneshot < 2; oneshot++) {
		struct exec_request x;
		if (api_parse_exec_request((const char *)data, size, oneshot, &x, &e) == 0)
			exec_request_release(&x);
		err_free(e);
		e = NULL;
	}
	return 0;
}
