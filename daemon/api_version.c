/* api_version.c: GET /version, what this daemon is (no key needed, like
 * the probes: a client checks that it talks to a server it understands
 * before it has a key to send). */
#include "api.h"

#include "json.h"
#include "version.h"

void api_version_get(struct call *c)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_kv_str(g, "version", ci_version);
	jg_kv_str(g, "git", ci_git);
	jg_kv_str(g, "api", CI_API_VERSION);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}
