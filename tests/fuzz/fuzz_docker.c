/* fuzz_docker.c: the engine's answers, read as outside input: a container's
 * state, a container list, a network, a created id, an error message, an
 * image (its labels, ci.packages parsed). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "docker_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	struct docker_container_state st;
	docker_json_container_state(body, size, "ci-egress-0", &st);
	docker_json_container_state(body, size, NULL, &st);
	struct docker_network_info info;
	docker_json_network_info(body, size, &info);
	char id[DOCKER_ID_MAX + 1];
	docker_json_created_id(body, size, id, sizeof(id));
	struct docker_json_list *l = docker_json_container_list(body, size);
	size_t n = 0;
	const struct docker_container_summary *items = docker_json_list_items(l, &n);
	for (size_t i = 0; i < n; i++)
		if (items[i].id == NULL)
			__builtin_trap(); /* every listed container has an id */
	docker_json_list_free(l);
	free(docker_json_error_message(body, size));
	struct docker_json_image *im = docker_json_image_info(body, size);
	const struct docker_image_info *ii = docker_json_image_get(im);
	for (size_t i = 0; ii && i < ii->n_packages; i++)
		if (ii->packages[i].name == NULL || ii->packages[i].version == NULL)
			__builtin_trap();
	docker_json_image_free(im);
	return 0;
}
