/*
 * json.h: small helpers over yajl 2 for ci-ctl: parse a document into a
 * tree, read values by dotted path, and generate documents.
 */
#ifndef CLI_JSON_H
#define CLI_JSON_H

#include <stddef.h>

#include <yajl/yajl_tree.h>

struct err;

/*
 * Parses a NUL-terminated document.  The caller frees the tree with
 * json_free().  Note: yajl_tree hands out C strings, so a string that
 * contains "\u0000" is seen up to that character only.
 */
yajl_val json_parse(const char *text, struct err **err);
void json_free(yajl_val v);
void json_freep(yajl_val *v);
#define AUTO_JSON __attribute__((cleanup(json_freep)))

/* Looks up a dotted path ("limits.memory_mb") in nested objects; NULL when
 * any step is missing or not an object.  The result is borrowed from v. */
yajl_val json_get(yajl_val v, const char *path);
/* A string at path, or NULL when absent or of another type. */
const char *json_get_str(yajl_val v, const char *path);
/* 0 and *out set when path holds a number, else -1. */
int json_get_num(yajl_val v, const char *path, double *out);
/* 0 and *out set when path holds true or false, else -1. */
int json_get_bool(yajl_val v, const char *path, int *out);
/* An object or array at path, or NULL. */
yajl_val json_get_obj(yajl_val v, const char *path);
yajl_val json_get_arr(yajl_val v, const char *path);
/* Number of elements of an array value (0 for NULL or non-arrays). */
size_t json_arr_len(yajl_val arr);
yajl_val json_arr_at(yajl_val arr, size_t i);

/* Text of a scalar for display: strings as they are, numbers as the server
 * wrote them, true/false/null; objects and arrays are re-encoded as JSON.
 * Caller frees. */
char *json_text(yajl_val v);

/*
 * Generator.  Calls never fail one by one: the first problem (invalid
 * UTF-8 in a string, a non-string key) is latched and reported once by
 * json_gen_finish(), so building a body reads straight through.
 */
struct json_gen;

struct json_gen *json_gen_new(void);
void json_gen_free(struct json_gen *g);
void json_gen_map_open(struct json_gen *g);
void json_gen_map_close(struct json_gen *g);
void json_gen_array_open(struct json_gen *g);
void json_gen_array_close(struct json_gen *g);
void json_gen_key(struct json_gen *g, const char *key);
void json_gen_str(struct json_gen *g, const char *s);
void json_gen_strn(struct json_gen *g, const char *s, size_t n);
/* Integral values are written as integers ("60", not "60.0"). */
void json_gen_num(struct json_gen *g, double v);
void json_gen_bool(struct json_gen *g, int v);
void json_gen_null(struct json_gen *g);
/* Re-emits a parsed tree. */
void json_gen_value(struct json_gen *g, yajl_val v);
/* The finished document (borrowed, valid until json_gen_free), or NULL
 * with err set (CLI_EXIT_USAGE) when a call failed, e.g. a string was not
 * valid UTF-8.  Balancing open/close calls is the caller's job. */
const char *json_gen_finish(struct json_gen *g, size_t *len, struct err **err);

#endif
