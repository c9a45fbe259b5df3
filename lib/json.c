/* json.c: bounded parsing and UTF-8-safe generation over yajl. */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "xalloc.h"

/* Reject deep nesting before yajl sees it; strings are skipped so brackets
 * inside them do not count. */
static bool json_depth_ok(const char *s, size_t len)
{
	int depth = 0;
	bool in_string = false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == '"')
			in_string = true;
		else if (c == '[' || c == '{') {
			if (++depth > JSON_MAX_DEPTH)
				return false;
		} else if (c == ']' || c == '}')
			depth--;
	}
	return true;
}

yajl_val json_parse(const char *text, size_t len, struct err **errp)
{
	if (len == 0) {
		err_set(errp, ERR_BAD_REQUEST, "empty body: expected a JSON object");
		return NULL;
	}
	if (memchr(text, '\0', len) != NULL) {
		err_set(errp, ERR_BAD_REQUEST, "invalid JSON: NUL byte in body");
		return NULL;
	}
	if (!json_depth_ok(text, len)) {
		err_set(errp, ERR_BAD_REQUEST, "invalid JSON: nested deeper than %d levels",
			JSON_MAX_DEPTH);
		return NULL;
	}
	char *copy = xmalloc(len + 1);
	memcpy(copy, text, len);
	copy[len] = '\0';
	char msg[256] = "";
	yajl_val tree = yajl_tree_parse(copy, msg, sizeof(msg));
	free(copy);
	if (tree == NULL) {
		/* yajl's message spans lines with a caret; keep the first line. */
		char *nl = strchr(msg, '\n');
		if (nl)
			*nl = '\0';
		err_set(errp, ERR_BAD_REQUEST, "invalid JSON: %s", msg[0] ? msg : "parse error");
	}
	return tree;
}

void json_free(yajl_val v)
{
	if (v != NULL)
		yajl_tree_free(v);
}

void json_cleanup(yajl_val *v)
{
	json_free(*v);
	*v = NULL;
}

yajl_val json_get(yajl_val obj, const char *key)
{
	if (obj == NULL || !YAJL_IS_OBJECT(obj))
		return NULL;
	for (size_t i = 0; i < obj->u.object.len; i++)
		if (strcmp(obj->u.object.keys[i], key) == 0)
			return obj->u.object.values[i];
	return NULL;
}

const char *json_get_str(yajl_val obj, const char *key)
{
	yajl_val v = json_get(obj, key);
	return v && YAJL_IS_STRING(v) ? v->u.string : NULL;
}

bool json_get_int(yajl_val obj, const char *key, int64_t *out)
{
	yajl_val v = json_get(obj, key);
	if (v == NULL || !YAJL_IS_INTEGER(v))
		return false;
	*out = YAJL_GET_INTEGER(v);
	return true;
}

/* The member whose name is key[0..keylen) (a path segment, not terminated). */
static yajl_val json_member(yajl_val obj, const char *key, size_t keylen)
{
	if (obj == NULL || !YAJL_IS_OBJECT(obj))
		return NULL;
	for (size_t i = 0; i < obj->u.object.len; i++) {
		const char *k = obj->u.object.keys[i];
		if (strncmp(k, key, keylen) == 0 && k[keylen] == '\0')
			return obj->u.object.values[i];
	}
	return NULL;
}

yajl_val json_path(yajl_val v, const char *path)
{
	while (v != NULL && *path != '\0') {
		size_t n = strcspn(path, ".");
		v = json_member(v, path, n);
		path += n;
		if (*path == '.')
			path++;
	}
	return v;
}

const char *json_path_str(yajl_val v, const char *path)
{
	yajl_val s = json_path(v, path);
	return YAJL_IS_STRING(s) ? s->u.string : NULL;
}

bool json_path_num(yajl_val v, const char *path, double *out)
{
	yajl_val n = json_path(v, path);
	if (!YAJL_IS_NUMBER(n))
		return false;
	if (YAJL_IS_DOUBLE(n))
		*out = n->u.number.d;
	else if (YAJL_IS_INTEGER(n))
		*out = (double)n->u.number.i;
	else /* too large for either: yajl keeps the text */
		*out = strtod(n->u.number.r, NULL);
	return true;
}

bool json_path_bool(yajl_val v, const char *path, bool *out)
{
	yajl_val b = json_path(v, path);
	if (!YAJL_IS_TRUE(b) && !YAJL_IS_FALSE(b))
		return false;
	*out = YAJL_IS_TRUE(b);
	return true;
}

yajl_val json_path_obj(yajl_val v, const char *path)
{
	yajl_val o = json_path(v, path);
	return YAJL_IS_OBJECT(o) ? o : NULL;
}

yajl_val json_path_arr(yajl_val v, const char *path)
{
	yajl_val a = json_path(v, path);
	return YAJL_IS_ARRAY(a) ? a : NULL;
}

size_t json_arr_len(yajl_val arr)
{
	return YAJL_IS_ARRAY(arr) ? arr->u.array.len : 0;
}

yajl_val json_arr_at(yajl_val arr, size_t i)
{
	return i < json_arr_len(arr) ? arr->u.array.values[i] : NULL;
}

const char *json_type_name(yajl_val v)
{
	if (v == NULL)
		return "missing";
	if (YAJL_IS_STRING(v))
		return "a string";
	if (YAJL_IS_NUMBER(v))
		return "a number";
	if (YAJL_IS_OBJECT(v))
		return "an object";
	if (YAJL_IS_ARRAY(v))
		return "an array";
	if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v))
		return "a boolean";
	return "null";
}

yajl_gen json_gen_new(void)
{
	yajl_gen g = yajl_gen_alloc(NULL);
	if (g == NULL)
		abort();
	return g;
}

void json_gen_cleanup(yajl_gen *g)
{
	if (*g)
		yajl_gen_free(*g);
	*g = NULL;
}

size_t json_utf8_valid_prefix(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			n = 2;
			cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			n = 3;
			cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			n = 4;
			cp = c & 0x07;
		} else
			return i;
		if (i + n > len)
			return i;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		/* Overlong forms, surrogates and values past U+10FFFF are invalid. */
		if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
		    (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
			return i;
		i += n;
	}
	return len;
}

bool json_utf8_valid(const char *s, size_t len)
{
	return json_utf8_valid_prefix((const unsigned char *)s, len) == len;
}

void jg_strn(yajl_gen g, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t ok = json_utf8_valid_prefix(u, len);
	if (ok == len) {
		yajl_gen_string(g, u, len);
		return;
	}
	/* Slow path: rebuild with U+FFFD for each bad byte. */
	unsigned char *out = xmalloc(len * 3 + 1);
	size_t o = 0, i = 0;
	while (i < len) {
		size_t good = json_utf8_valid_prefix(u + i, len - i);
		memcpy(out + o, u + i, good);
		o += good;
		i += good;
		if (i < len) {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
		}
	}
	yajl_gen_string(g, out, o);
	free(out);
}

void jg_str(yajl_gen g, const char *s)
{
	jg_strn(g, s, strlen(s));
}

void jg_int(yajl_gen g, int64_t v)
{
	yajl_gen_integer(g, (long long)v);
}

void jg_double(yajl_gen g, double v)
{
	/* yajl prints doubles with %.20g; two decimals read better for cpus. */
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%.6g", v);
	yajl_gen_number(g, buf, (size_t)n);
}

void jg_number(yajl_gen g, double v)
{
	char text[64];
	if (!isfinite(v)) {
		yajl_gen_null(g);
		return;
	}
	/* yajl_gen_double prints %.20g ("0.10000000000000000555") and appends
	 * ".0" to integers. Below 2^53 every integer is exact in a double; 17
	 * significant digits always read back to the same double. */
	if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(long long)v)
		snprintf(text, sizeof(text), "%lld", (long long)v);
	else {
		snprintf(text, sizeof(text), "%.15g", v);
		if (strtod(text, NULL) != v)
			snprintf(text, sizeof(text), "%.17g", v);
	}
	yajl_gen_number(g, text, strlen(text));
}

void jg_bool(yajl_gen g, bool v)
{
	yajl_gen_bool(g, v);
}

void jg_null(yajl_gen g)
{
	yajl_gen_null(g);
}

void jg_obj(yajl_gen g)
{
	yajl_gen_map_open(g);
}

void jg_obj_end(yajl_gen g)
{
	yajl_gen_map_close(g);
}

void jg_arr(yajl_gen g)
{
	yajl_gen_array_open(g);
}

void jg_arr_end(yajl_gen g)
{
	yajl_gen_array_close(g);
}

void jg_kv_str(yajl_gen g, const char *key, const char *s)
{
	jg_str(g, key);
	if (s)
		jg_str(g, s);
	else
		jg_null(g);
}

void jg_kv_int(yajl_gen g, const char *key, int64_t v)
{
	jg_str(g, key);
	jg_int(g, v);
}

void jg_kv_bool(yajl_gen g, const char *key, bool v)
{
	jg_str(g, key);
	jg_bool(g, v);
}

void jg_kv_time(yajl_gen g, const char *key, int64_t epoch_ms)
{
	char buf[32];
	jg_kv_str(g, key, clock_format_rfc3339(epoch_ms, buf, sizeof(buf)));
}

void jg_value(yajl_gen g, yajl_val v)
{
	if (v == NULL) {
		jg_null(g);
		return;
	}
	switch (v->type) {
	case yajl_t_string: jg_str(g, v->u.string); break;
	case yajl_t_number: yajl_gen_number(g, v->u.number.r, strlen(v->u.number.r)); break;
	case yajl_t_object:
		jg_obj(g);
		for (size_t i = 0; i < v->u.object.len; i++) {
			jg_str(g, v->u.object.keys[i]);
			jg_value(g, v->u.object.values[i]);
		}
		jg_obj_end(g);
		break;
	case yajl_t_array:
		jg_arr(g);
		for (size_t i = 0; i < v->u.array.len; i++)
			jg_value(g, v->u.array.values[i]);
		jg_arr_end(g);
		break;
	case yajl_t_true: jg_bool(g, true); break;
	case yajl_t_false: jg_bool(g, false); break;
	default: jg_null(g); break;
	}
}

const char *jg_text(yajl_gen g, size_t *len)
{
	const unsigned char *buf = NULL;
	size_t n = 0;
	yajl_gen_get_buf(g, &buf, &n);
	if (len)
		*len = n;
	return (const char *)buf;
}
