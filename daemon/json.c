/* json.c: bounded parsing and UTF-8-safe generation over yajl. */
#include "json.h"

#include <inttypes.h>
#include <stdio.h>
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

const char *jg_text(yajl_gen g, size_t *len)
{
	const unsigned char *buf = NULL;
	size_t n = 0;
	yajl_gen_get_buf(g, &buf, &n);
	if (len)
		*len = n;
	return (const char *)buf;
}
