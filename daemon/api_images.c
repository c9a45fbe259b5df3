/* api_images.c: GET /v1/images, the image profiles this daemon serves
 * (--images NAME=TAG,...): each one's tag, whether the engine has it, and
 * what the image says of itself in the labels images/python/build.sh
 * writes (its recipe, suite, Python and package versions).
 *
 * The engine is asked through image inspect (docker_image_inspect), at most
 * once per profile every IMAGES_FRESH_US: the answer is cached here, and
 * the calls that come while an inspect is in flight wait for that one. A
 * profile whose image is missing answers "present": false; one the engine
 * could not answer for (it is down) "present": null with the error, for a
 * shorter while, so a list is always answered 200. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "docker.h"
#include "json.h"
#include "xalloc.h"

/* How long an answer of the engine is served from the cache: a rebuilt
 * image shows within this; an unanswered inspect is retried sooner. */
#define IMAGES_FRESH_US (10 * 1000000LL)
#define IMAGES_RETRY_US (1 * 1000000LL)
/* Profiles (the option is the operator's: a bound against a typo). */
#define IMAGES_MAX 64
/* The tag of a profile: a Docker reference, as build.sh and docker take it. */
#define IMAGES_TAG_MAX 255

enum images_state {
	IMAGES_UNKNOWN, /* never asked, or the engine could not say */
	IMAGES_PRESENT,
	IMAGES_MISSING,
};

/* What the cache knows of one profile. */
struct images_entry {
	char *name, *tag;
	enum images_state state;
	char *error;                    /* IMAGES_UNKNOWN after an inspect failed */
	int64_t checked_us, checked_ms; /* monotonic (freshness), wall (for the client) */
	struct docker_call *call;       /* the inspect in flight, or NULL */
	/* IMAGES_PRESENT: the image's id, created, size and labels */
	char *id, *created;
	int64_t size;
	char *recipe, *profile, *protocol, *suite, *debian, *python;
	bool has_packages;
	struct docker_package *packages; /* names and versions owned (free) */
	size_t n_packages;
	struct api_images *owner;
};

/* A GET waiting for the inspects in flight. */
struct images_waiter {
	LIST_ENTRY(images_waiter) link;
	struct call *c;
};

struct api_images {
	struct http_api *api;
	char *spec; /* the --images value the entries were made from */
	struct images_entry *e;
	size_t n;
	size_t in_flight;
	LIST_HEAD(, images_waiter) waiters;
};

static void entry_clear_info(struct images_entry *en)
{
	free(en->error);
	free(en->id);
	free(en->created);
	free(en->recipe);
	free(en->profile);
	free(en->protocol);
	free(en->suite);
	free(en->debian);
	free(en->python);
	for (size_t i = 0; i < en->n_packages; i++) {
		free((char *)en->packages[i].name);
		free((char *)en->packages[i].version);
	}
	free(en->packages);
	en->error = en->id = en->created = NULL;
	en->recipe = en->profile = en->protocol = en->suite = en->debian = en->python = NULL;
	en->packages = NULL;
	en->n_packages = 0;
	en->has_packages = false;
	en->size = -1;
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/* The profiles of spec ("NAME=TAG,..."), as config_validate accepted them;
 * a malformed piece is skipped (the default profile is known to be there). */
static void images_build(struct api_images *im, const char *spec)
{
	im->spec = xstrdup(spec);
	im->e = xcalloc(IMAGES_MAX, sizeof(*im->e));
	const char *p = spec;
	while (p && *p && im->n < IMAGES_MAX) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		if (eq && eq > p && eq + 1 < p + len) {
			struct images_entry *en = &im->e[im->n++];
			en->name = xstrndup(p, (size_t)(eq - p));
			en->tag = xstrndup(eq + 1, (size_t)(p + len - eq - 1));
			en->size = -1;
			en->owner = im;
		}
		p = comma ? comma + 1 : NULL;
	}
}

static void images_clear(struct api_images *im)
{
	for (size_t i = 0; i < im->n; i++) {
		struct images_entry *en = &im->e[i];
		docker_cancel(en->call);
		entry_clear_info(en);
		free(en->name);
		free(en->tag);
	}
	free(im->e);
	free(im->spec);
	im->e = NULL;
	im->spec = NULL;
	im->n = 0;
	im->in_flight = 0;
}

/* A tag docker and build.sh would take: [A-Za-z0-9._/:@-], bounded. */
static bool tag_ok(const char *t)
{
	size_t n = strlen(t);
	if (n == 0 || n > IMAGES_TAG_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = t[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr("._/:@-", ch)))
			return false;
	}
	return true;
}

static void kv_str_or_null(yajl_gen g, const char *key, const char *v)
{
	jg_str(g, key);
	if (v)
		jg_str(g, v);
	else
		jg_null(g);
}

static void write_entry(yajl_gen g, const struct images_entry *en, const char *default_profile)
{
	jg_obj(g);
	jg_kv_str(g, "name", en->name);
	jg_kv_str(g, "tag", en->tag);
	jg_kv_bool(g, "default", strcmp(en->name, default_profile) == 0);
	jg_str(g, "present");
	if (en->state == IMAGES_UNKNOWN)
		jg_null(g);
	else
		jg_bool(g, en->state == IMAGES_PRESENT);
	if (en->checked_ms)
		jg_kv_time(g, "checked_at", en->checked_ms);
	else
		kv_str_or_null(g, "checked_at", NULL);
	if (en->state == IMAGES_UNKNOWN)
		kv_str_or_null(g, "error", en->error ? en->error : "not asked yet");
	bool p = en->state == IMAGES_PRESENT;
	kv_str_or_null(g, "id", p ? en->id : NULL);
	kv_str_or_null(g, "created", p ? en->created : NULL);
	jg_str(g, "size");
	if (p && en->size >= 0)
		jg_int(g, en->size);
	else
		jg_null(g);
	kv_str_or_null(g, "recipe", p ? en->recipe : NULL);
	kv_str_or_null(g, "profile", p ? en->profile : NULL);
	kv_str_or_null(g, "protocol", p ? en->protocol : NULL);
	kv_str_or_null(g, "suite", p ? en->suite : NULL);
	kv_str_or_null(g, "debian", p ? en->debian : NULL);
	kv_str_or_null(g, "python", p ? en->python : NULL);
	/* null: the image carries no package record (built before build.sh
	 * wrote one, or not by it); {} would say it lists nothing. */
	jg_str(g, "packages");
	if (p && en->has_packages) {
		jg_obj(g);
		for (size_t i = 0; i < en->n_packages; i++)
			jg_kv_str(g, en->packages[i].name, en->packages[i].version);
		jg_obj_end(g);
	} else {
		jg_null(g);
	}
	jg_obj_end(g);
}

static void images_answer(struct api_images *im, struct call *c)
{
	AUTOGEN yajl_gen g = json_gen_new();
	jg_obj(g);
	jg_str(g, "images");
	jg_arr(g);
	for (size_t i = 0; i < im->n; i++)
		write_entry(g, &im->e[i], c->api->cfg->image);
	jg_arr_end(g);
	jg_obj_end(g);
	api_reply(c, 200, g, NULL);
}

static void answer_waiters(struct api_images *im)
{
	struct images_waiter *w;
	while ((w = LIST_FIRST(&im->waiters)) != NULL) {
		LIST_REMOVE(w, link);
		struct call *c = w->c;
		free(w);
		images_answer(im, c);
	}
}

static void inspected(const struct docker_result *r, const struct docker_image_info *info,
		      void *arg)
{
	struct images_entry *en = arg;
	struct api_images *im = en->owner;
	en->call = NULL;
	im->in_flight--;
	entry_clear_info(en);
	en->checked_us = clock_mono_us();
	en->checked_ms = clock_now_ms();
	if (r->error == NULL && info) {
		en->state = IMAGES_PRESENT;
		en->id = xstrdup(info->id);
		en->created = dup_or_null(info->created);
		en->size = info->size;
		en->recipe = dup_or_null(info->recipe);
		en->profile = dup_or_null(info->profile);
		en->protocol = dup_or_null(info->protocol);
		en->suite = dup_or_null(info->suite);
		en->debian = dup_or_null(info->debian);
		en->python = dup_or_null(info->python);
		en->has_packages = info->has_packages;
		if (info->n_packages) {
			en->packages = xcalloc(info->n_packages, sizeof(*en->packages));
			for (size_t i = 0; i < info->n_packages; i++) {
				en->packages[i].name = xstrdup(info->packages[i].name);
				en->packages[i].version = xstrdup(info->packages[i].version);
			}
			en->n_packages = info->n_packages;
		}
	} else if (r->status == 404) {
		en->state = IMAGES_MISSING;
	} else {
		/* Down or confused: say so, and ask again soon rather than in 10 s. */
		en->state = IMAGES_UNKNOWN;
		en->error = xstrdup(r->error ? r->error->message : "inspect image: no answer");
		en->checked_us -= IMAGES_FRESH_US - IMAGES_RETRY_US;
	}
	if (im->in_flight == 0)
		answer_waiters(im);
}

/* Start an inspect for every profile whose answer is stale and not being
 * asked already. */
static void images_refresh(struct api_images *im)
{
	int64_t now = clock_mono_us();
	for (size_t i = 0; i < im->n; i++) {
		struct images_entry *en = &im->e[i];
		if (en->call || (en->checked_us && now - en->checked_us < IMAGES_FRESH_US))
			continue;
		if (!tag_ok(en->tag)) {
			entry_clear_info(en);
			en->state = IMAGES_UNKNOWN;
			en->error = xstrdup("not a Docker image reference ([A-Za-z0-9._/:@-], at "
					    "most 255 bytes)");
			en->checked_us = now;
			en->checked_ms = clock_now_ms();
			continue;
		}
		en->call = docker_image_inspect(im->api->docker, en->tag, inspected, en);
		im->in_flight++;
	}
}

void api_images_list(struct call *c)
{
	struct http_api *api = c->api;
	struct api_images *im = api->images;
	if (im == NULL) {
		im = api->images = xcalloc(1, sizeof(*im));
		im->api = api;
		LIST_INIT(&im->waiters);
	}
	/* images is a restart option: the same spec, unless that changes. */
	if (im->spec == NULL || strcmp(im->spec, api->cfg->images) != 0) {
		/* inspects in flight are cancelled; their waiters get the new ones' */
		images_clear(im);
		images_build(im, api->cfg->images);
	}
	images_refresh(im);
	if (im->in_flight == 0) {
		answer_waiters(im);
		images_answer(im, c);
		return;
	}
	struct images_waiter *w = xcalloc(1, sizeof(*w));
	w->c = c;
	LIST_INSERT_HEAD(&im->waiters, w, link);
}

void api_images_stop(struct http_api *api)
{
	struct api_images *im = api->images;
	if (im == NULL)
		return;
	struct images_waiter *w;
	while ((w = LIST_FIRST(&im->waiters)) != NULL) {
		LIST_REMOVE(w, link);
		api_fail(w->c, ERR_UNAVAILABLE, "the daemon is stopping");
		free(w);
	}
	images_clear(im);
	free(im);
	api->images = NULL;
}
