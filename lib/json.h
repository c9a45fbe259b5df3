/* json.h: parsing untrusted JSON safely and generating JSON, over yajl.
 *
 * Every JSON document the daemon reads comes from outside (clients, the
 * sandbox, Docker, Redis), and every one ci-ctl reads comes from a server, so
 * parsing is bounded: a size cap decided by the caller (the buffer that
 * collected the text is capped before json_parse sees it), and a nesting cap
 * checked before yajl builds its tree (yajl builds and frees trees
 * recursively, so a body of a million '[' would overflow the stack).
 *
 * Lookups: json_get* take one member name, exactly as written (a name may
 * contain dots); json_path* walk a dotted path through nested objects
 * ("limits.memory_mb", "error.code"). Every result is borrowed from the tree.
 *
 * The generator is yajl's, driven by the jg_* helpers; output is always valid
 * JSON (invalid UTF-8 in a string is repaired, never passed on). */
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
 * when the text is empty, holds a NUL byte, is not JSON or nests deeper than
 * JSON_MAX_DEPTH. The caller frees the tree with json_free (or
 * yajl_tree_free). */
yajl_val json_parse(const char *text, size_t len, struct err **errp);

/* Free a tree; NULL is fine. json_cleanup is for AUTOJSON locals. */
void json_free(yajl_val v);
void json_cleanup(yajl_val *v);
#define AUTOJSON __attribute__((cleanup(json_cleanup)))

/* The member `key` of an object, or NULL (also when obj is not an object). */
yajl_val json_get(yajl_val obj, const char *key);

/* The string member `key`, or NULL when absent or not a string. */
const char *json_get_str(yajl_val obj, const char *key);

/* The integer member `key` into *out; false when absent or not an integer. */
bool json_get_int(yajl_val obj, const char *key, int64_t *out);

/* The value at a dotted path ("limits.memory_mb") through nested objects, or
 * NULL when a step is missing or not an object. "" is v itself. */
yajl_val json_path(yajl_val v, const char *path);

/* The same, typed: NULL (or false, *out untouched) when absent or of another
 * type. A number is any JSON number, read as a double. */
const char *json_path_str(yajl_val v, const char *path);
bool json_path_num(yajl_val v, const char *path, double *out);
bool json_path_bool(yajl_val v, const char *path, bool *out);
yajl_val json_path_obj(yajl_val v, const char *path);
yajl_val json_path_arr(yajl_val v, const char *path);

/* Elements of an array (0 for NULL or another type) and the i-th one (NULL
 * past the end). */
size_t json_arr_len(yajl_val arr);
yajl_val json_arr_at(yajl_val arr, size_t i);

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
/* Six significant digits: for measurements shown to people (cpus, ratios). */
void jg_double(yajl_gen g, double v);
/* Exactly: integers below 2^53 as integers ("60", never "60.0", which a
 * reader checking for an integer refuses), other values with 15 significant
 * digits when that reads back to v, else 17 (which always does). JSON has no
 * infinity or NaN: those are written as null. */
void jg_number(yajl_gen g, double v);
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

/* Re-emit a parsed tree (from json_parse, so its depth is capped and the
 * recursion bounded). NULL is written as null; numbers as they were read. */
void jg_value(yajl_gen g, yajl_val v);

/* The generated text; valid until the next call on g. */
const char *jg_text(yajl_gen g, size_t *len);

/* Number of bytes of s[0..len) that form valid UTF-8 up to the first bad
 * sequence (overlong forms, surrogates and values past U+10FFFF are bad). */
size_t json_utf8_valid_prefix(const unsigned char *s, size_t len);

/* Whether all of s[0..len) is valid UTF-8: for a caller that must refuse
 * text rather than have jg_strn repair it (ci-ctl's arguments). */
bool json_utf8_valid(const char *s, size_t len);

#endif
