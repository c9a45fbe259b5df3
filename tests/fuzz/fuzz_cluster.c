/* fuzz_cluster.c: a node's heartbeat as Redis hands it back (cluster.h),
 * from any bytes: parsed without crashing or leaking, and what comes out
 * has a name and URL of their shapes and no negative number. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cluster_node n;
	struct err *e = NULL;
	if (cluster_node_parse((const char *)data, size, &n, &e) < 0) {
		if (e == NULL)
			abort();
		err_free(e);
		return 0;
	}
	if (n.name[0] == '\0' || strlen(n.name) > CLUSTER_NODE_NAME_MAX ||
	    (n.url[0] && strncmp(n.url, "http://", 7) != 0 && strncmp(n.url, "https://", 8) != 0) ||
	    n.sessions < 0 || n.room < 0 || n.max_sessions < 0 || !n.live)
		abort();
	size_t asked;
	if (cluster_pick(&n, 1, "", &asked) > 0)
		abort();
	return 0;
}
