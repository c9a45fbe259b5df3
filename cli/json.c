/*
 * json.c: yajl helpers (see json.h).
 */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "util.h"

struct json_gen {
	yajl_gen gen;
	yajl_gen_status status; /* first failure, yajl_gen_status_ok if none */
};

yajl_val json_parse(const char *text, struct err **err)
{
	char errbuf[256] = "";
	yajl_val v = yajl_tree_parse(text, errbuf, sizeof(errbuf));

	if (v == NULL) {
		/* yajl's verbose message spans lines with a caret; keep line one. */
		errbuf[strcspn(errbuf, "\n")] = '\0';
		err_set(err, CLI_EXIT_API, 0, "invalid JSON: %s",
			errbuf[0] ? errbuf : "parse error");
	}
	return v;
}

void json_free(yajl_val v)
{
	if (v != NULL)
		yajl_tree_free(v);
}

void json_freep(yajl_val *v)
{
	json_free(*v);
	*v = NULL;
}

static yajl_val json_member(yajl_val obj, const char *key, size_t keylen)
{
	size_t i;

	if (!YAJL_IS_OBJECT(obj))
		return NULL;
	for (i = 0; i < obj->u.object.len; i++) {
		const char *k = obj->u.object.keys[i];

		if (strncmp(k, key, keylen) == 0 && k[keylen] == '\0')
			return obj->u.object.values[i];
	}
	return NULL;
}

yajl_val json_get(yajl_val v, const char *path)
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

const char *json_get_str(yajl_val v, const char *path)
{
	yajl_val s = json_get(v, path);

	return YAJL_IS_STRING(s) ? s->u.string : NULL;
}

int json_get_num(yajl_val v, const char *path, double *out)
{
	yajl_val n = json_get(v, path);

	if (!YAJL_IS_NUMBER(n))
		return -1;
	if (YAJL_IS_DOUBLE(n))
		*out = n->u.number.d;
	else if (YAJL_IS_INTEGER(n))
		*out = (double)n->u.number.i;
	else
		*out = strtod(n->u.number.r, NULL);
	return 0;
}

int json_get_bool(yajl_val v, const char *path, int *out)
{
	yajl_val b = json_get(v, path);

	if (YAJL_IS_TRUE(b))
		*out = 1;
	else if (YAJL_IS_FALSE(b))
		*out = 0;
	else
		return -1;
	return 0;
}

yajl_val json_get_obj(yajl_val v, const char *path)
{
	yajl_val o = json_get(v, path);

	return YAJL_IS_OBJECT(o) ? o : NULL;
}

yajl_val json_get_arr(yajl_val v, const char *path)
{
	yajl_val a = json_get(v, path);

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

char *json_text(yajl_val v)
{
	struct json_gen *g;
	const char *doc;
	char *s;

	if (v == NULL)
		return xstrdup("");
	switch (v->type) {
	case yajl_t_string: return xstrdup(v->u.string);
	case yajl_t_number: return xstrdup(v->u.number.r);
	case yajl_t_true: return xstrdup("true");
	case yajl_t_false: return xstrdup("false");
	case yajl_t_null: return xstrdup("null");
	default: break;
	}
	g = json_gen_new();
	json_gen_value(g, v);
	doc = json_gen_finish(g, NULL, NULL);
	s = xstrdup(doc != NULL ? doc : "?");
	json_gen_free(g);
	return s;
}

struct json_gen *json_gen_new(void)
{
	struct json_gen *g = xcalloc(1, sizeof(*g));

	g->gen = yajl_gen_alloc(NULL);
	if (g->gen == NULL) {
		fprintf(stderr, "ci-ctl: out of memory (yajl_gen_alloc)\n");
		abort();
	}
	/* The server parses with UTF-8 validation on, so catch bad input here,
	 * where the message can name the argument, instead of getting a 400. */
	yajl_gen_config(g->gen, yajl_gen_validate_utf8, 1);
	g->status = yajl_gen_status_ok;
	return g;
}

void json_gen_free(struct json_gen *g)
{
	if (g == NULL)
		return;
	yajl_gen_free(g->gen);
	free(g);
}

static void json_gen_check(struct json_gen *g, yajl_gen_status st)
{
	if (st != yajl_gen_status_ok && g->status == yajl_gen_status_ok)
		g->status = st;
}

void json_gen_map_open(struct json_gen *g)
{
	json_gen_check(g, yajl_gen_map_open(g->gen));
}

void json_gen_map_close(struct json_gen *g)
{
	json_gen_check(g, yajl_gen_map_close(g->gen));
}

void json_gen_array_open(struct json_gen *g)
{
	json_gen_check(g, yajl_gen_array_open(g->gen));
}

void json_gen_array_close(struct json_gen *g)
{
	json_gen_check(g, yajl_gen_array_close(g->gen));
}

void json_gen_key(struct json_gen *g, const char *key)
{
	json_gen_str(g, key);
}

void json_gen_str(struct json_gen *g, const char *s)
{
	json_gen_strn(g, s, strlen(s));
}

void json_gen_strn(struct json_gen *g, const char *s, size_t n)
{
	json_gen_check(g, yajl_gen_string(g->gen, (const unsigned char *)s, n));
}

void json_gen_num(struct json_gen *g, double v)
{
	char text[64];

	if (!isfinite(v)) {
		json_gen_check(g, yajl_gen_invalid_number);
		return;
	}
	/* yajl_gen_double prints %.20g ("0.10000000000000000555") and appends
	 * ".0" to integers, which a server checking YAJL_IS_INTEGER refuses.
	 * Write integers as integers and other values in the shortest form
	 * that reads back exactly. */
	if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(long long)v)
		snprintf(text, sizeof(text), "%lld", (long long)v);
	else {
		snprintf(text, sizeof(text), "%.15g", v);
		if (strtod(text, NULL) != v)
			snprintf(text, sizeof(text), "%.17g", v);
	}
	json_gen_check(g, yajl_gen_number(g->gen, text, strlen(text)));
}

void json_gen_bool(struct json_gen *g, int v)
{
	json_gen_check(g, yajl_gen_bool(g->gen, v));
}

void json_gen_null(struct json_gen *g)
{
	json_gen_check(g, yajl_gen_null(g->gen));
}

void json_gen_value(struct json_gen *g, yajl_val v)
{
	size_t i;

	if (v == NULL) {
		json_gen_null(g);
		return;
	}
	switch (v->type) {
	case yajl_t_string: json_gen_str(g, v->u.string); break;
	case yajl_t_number:
		json_gen_check(g, yajl_gen_number(g->gen, v->u.number.r, strlen(v->u.number.r)));
		break;
	case yajl_t_object:
		json_gen_map_open(g);
		for (i = 0; i < v->u.object.len; i++) {
			json_gen_key(g, v->u.object.keys[i]);
			json_gen_value(g, v->u.object.values[i]);
		}
		json_gen_map_close(g);
		break;
	case yajl_t_array:
		json_gen_array_open(g);
		for (i = 0; i < v->u.array.len; i++)
			json_gen_value(g, v->u.array.values[i]);
		json_gen_array_close(g);
		break;
	case yajl_t_true: json_gen_bool(g, 1); break;
	case yajl_t_false: json_gen_bool(g, 0); break;
	default: json_gen_null(g); break;
	}
}

static const char *json_gen_status_text(yajl_gen_status st)
{
	switch (st) {
	case yajl_gen_invalid_string: return "text is not valid UTF-8";
	case yajl_gen_invalid_number: return "number is not finite";
	default: return "internal error generating JSON";
	}
}

const char *json_gen_finish(struct json_gen *g, size_t *len, struct err **err)
{
	const unsigned char *buf;
	size_t n;

	if (g->status != yajl_gen_status_ok) {
		err_set(err, CLI_EXIT_USAGE, 0, "%s", json_gen_status_text(g->status));
		return NULL;
	}
	if (yajl_gen_get_buf(g->gen, &buf, &n) != yajl_gen_status_ok) {
		err_set(err, CLI_EXIT_USAGE, 0, "internal error generating JSON");
		return NULL;
	}
	if (len != NULL)
		*len = n;
	return (const char *)buf;
}
