/* json.h: parsing untrusted JSON safely and generating JSON, over yajl.
 *
 * Every JSON document the daemon reads comes from outside (clients, the
 * sandbox, Docker, Redis), so parsing is bounded: a size cap decided by the
 * caller, and a nesting cap checked before yajl builds its tree (yajl frees
 * trees recursively, so a body of a million '[' would overflow the stack). */
#ifndef CI_JSON_H
#define CI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "err.h"

#define JSON_MAX_DEPTH 32

/* Parse len bytes (need not be NUL-terminated). NULL and a bad_request error
 * when the text is not JSON or nests deeper than JSON_MAX_DEPTH. The caller
 * frees the tree with yajl_tree_free. */
yajl_val json_parse(const char *text, size_t len, struct err **errp);

/* The member `key` of an object, or NULL (also when obj is not an object). */
yajl_val json_get(yajl_val obj, const char *key);

/* The string member `key`, or NULL when absent or not a string. */
const char *json_get_str(yajl_val obj, const char *key);

/* The integer member `key` into *out; false when absent or not an integer. */
bool json_get_int(yajl_val obj, const char *key, int64_t *out);

/* Name of a node's type for error messages ("a string", "an object"). */
const char *json_type_name(yajl_val v);

/* A generator. Strings given to it may be any bytes: invalid UTF-8 is replaced
 * by U+FFFD, so output from a sandbox never makes invalid JSON. */
yajl_gen json_gen_new(void);
void json_gen_cleanup(yajl_gen *g);
#define AUTOGEN __attribute__((cleanup(json_gen_cleanup)))

void jg_str(yajl_gen g, const char *s);
void jg_strn(yajl_gen g, const char *s, size_t len);
void jg_int(yajl_gen g, int64_t v);
void jg_double(yajl_gen g, double v);
void jg_bool(yajl_gen g, bool v);
void jg_null(yajl_gen g);
void jg_obj(yajl_gen g);
void jg_obj_end(yajl_gen g);
void jg_arr(yajl_gen g);
void jg_arr_end(yajl_gen g);
/* A string member, or null when s is NULL. */
void jg_kv_str(yajl_gen g, const char *key, const char *s);
void jg_kv_int(yajl_gen g, const char *key, int64_t v);
void jg_kv_bool(yajl_gen g, const char *key, bool v);
/* An RFC 3339 time member from epoch milliseconds. */
void jg_kv_time(yajl_gen g, const char *key, int64_t epoch_ms);

/* The generated text; valid until the next call on g. */
const char *jg_text(yajl_gen g, size_t *len);

/* Number of bytes of s[0..len) that form valid UTF-8 up to the first bad
 * sequence (exposed for tests). */
size_t json_utf8_valid_prefix(const unsigned char *s, size_t len);

#endif
