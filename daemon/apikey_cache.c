/* apikey_cache.c: a hash table of key ids with a list in insertion order,
 * so both the lookup and the eviction of the oldest are O(1). */
#include "apikey_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "xalloc.h"

struct node {
	struct apikey_entry e;
	struct node *hnext;
	TAILQ_ENTRY(node) age; /* oldest first */
};

struct apikey_cache {
	size_t cap, count, nbuckets;
	int64_t ttl_ms;
	struct node **buckets;
	TAILQ_HEAD(, node) ages;
};

/* FNV-1a: ids are random hex, any mix will do. */
static size_t bucket_of(const struct apikey_cache *kc, const char *id)
{
	uint32_t h = 2166136261u;
	for (const char *p = id; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h % kc->nbuckets;
}

struct apikey_cache *apikey_cache_new(size_t cap, int64_t ttl_ms)
{
	struct apikey_cache *kc = xcalloc(1, sizeof(*kc));
	kc->cap = cap ? cap : 1;
	kc->ttl_ms = ttl_ms;
	kc->nbuckets = kc->cap * 2 + 1;
	kc->buckets = xcalloc(kc->nbuckets, sizeof(*kc->buckets));
	TAILQ_INIT(&kc->ages);
	return kc;
}

void apikey_cache_free(struct apikey_cache *kc)
{
	if (kc == NULL)
		return;
	struct node *n;
	while ((n = TAILQ_FIRST(&kc->ages)) != NULL) {
		TAILQ_REMOVE(&kc->ages, n, age);
		free(n);
	}
	free(kc->buckets);
	free(kc);
}

static struct node **find_link(struct apikey_cache *kc, const char *id)
{
	struct node **pp = &kc->buckets[bucket_of(kc, id)];
	while (*pp && strcmp((*pp)->e.id, id) != 0)
		pp = &(*pp)->hnext;
	return pp;
}

static void unlink_node(struct apikey_cache *kc, struct node **pp)
{
	struct node *n = *pp;
	*pp = n->hnext;
	TAILQ_REMOVE(&kc->ages, n, age);
	kc->count--;
	free(n);
}

const struct apikey_entry *apikey_cache_get(struct apikey_cache *kc, const char *id, int64_t now_ms)
{
	struct node **pp = find_link(kc, id);
	if (*pp == NULL)
		return NULL;
	/* A clock that went back also ends trust: the entry's age is unknown. */
	int64_t age = now_ms - (*pp)->e.at_ms;
	if (age >= kc->ttl_ms || age < 0) {
		unlink_node(kc, pp);
		return NULL;
	}
	return &(*pp)->e;
}

void apikey_cache_put(struct apikey_cache *kc, const char *id, bool found, const char *tenant,
		      const char *sha256, int64_t now_ms)
{
	struct node **pp = find_link(kc, id);
	if (*pp)
		unlink_node(kc, pp);
	while (kc->count >= kc->cap) {
		struct node *old = TAILQ_FIRST(&kc->ages);
		unlink_node(kc, find_link(kc, old->e.id));
	}
	struct node *n = xcalloc(1, sizeof(*n));
	snprintf(n->e.id, sizeof(n->e.id), "%s", id);
	n->e.found = found;
	if (found) {
		snprintf(n->e.tenant, sizeof(n->e.tenant), "%s", tenant);
		snprintf(n->e.sha256, sizeof(n->e.sha256), "%s", sha256);
	}
	n->e.at_ms = now_ms;
	pp = &kc->buckets[bucket_of(kc, id)];
	n->hnext = *pp;
	*pp = n;
	TAILQ_INSERT_TAIL(&kc->ages, n, age);
	kc->count++;
}

void apikey_cache_drop(struct apikey_cache *kc, const char *id)
{
	struct node **pp = find_link(kc, id);
	if (*pp)
		unlink_node(kc, pp);
}

size_t apikey_cache_size(const struct apikey_cache *kc)
{
	return kc->count;
}
