/* docker_json.h: the engine's JSON, both ways (docker_json.c). Part of the
 * driver: only docker*.c, the unit tests and the fuzz target include it. */
#ifndef CI_DOCKER_JSON_H
#define CI_DOCKER_JSON_H

#include <stddef.h>

#include "docker.h"

/* Request bodies; caller frees. */
char *docker_json_container_config(const struct docker_container_config *c, size_t *len);
char *docker_json_limits(const struct docker_limits *l, size_t *len);
char *docker_json_network_config(const struct docker_network_config *c, size_t *len);

/* The percent-encoded filters={"label":[...]} value for a list call; -1 when
 * it does not fit size. */
int docker_json_label_filter(const char *const *labels, size_t n, char *out, size_t size);

/* Answers. -1 when the body is not what the engine sends. */
int docker_json_created_id(const char *body, size_t len, char *id, size_t size);
int docker_json_container_state(const char *body, size_t len, const char *network,
				struct docker_container_state *st);
int docker_json_network_info(const char *body, size_t len, struct docker_network_info *info);

/* A container list; its strings live as long as the list. NULL when the body
 * is not a list. */
struct docker_json_list;
struct docker_json_list *docker_json_container_list(const char *body, size_t len);
const struct docker_container_summary *docker_json_list_items(const struct docker_json_list *l,
							      size_t *n);
void docker_json_list_free(struct docker_json_list *l);

/* The "message" of an error answer (at most 300 bytes), or NULL. Caller frees. */
char *docker_json_error_message(const char *body, size_t len);

/* An image's inspect answer; its strings live as long as it. NULL when the
 * body is not an image (an object with an Id). */
struct docker_json_image;
struct docker_json_image *docker_json_image_info(const char *body, size_t len);
const struct docker_image_info *docker_json_image_get(const struct docker_json_image *im);
void docker_json_image_free(struct docker_json_image *im);

/* The percent-encoded image reference for a path ("ci/python:latest" stays
 * as it is; anything outside [A-Za-z0-9._/:@-] is encoded); -1 when it does
 * not fit size or is empty. */
int docker_json_image_ref(const char *ref, char *out, size_t size);

#endif
