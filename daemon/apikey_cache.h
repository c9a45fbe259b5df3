/* apikey_cache.h: what this daemon recently learnt from Redis about key
 * ids, so that a busy client does not cost a Redis round trip per request.
 * Pure (the caller passes the time), unit-tested.
 *
 * An entry says "key id X belongs to tenant T and its secret hashes to H"
 * or "there is no key X" (a negative entry, so that a flood of unknown ids
 * does not become a flood of lookups). Entries are trusted for ttl_ms
 * only: a key revoked through any daemon sharing the Redis is refused by
 * every one of them within ttl_ms (plus one lookup). The cache holds at
 * most cap entries; a new one pushes the oldest out. */
#ifndef CI_APIKEY_CACHE_H
#define CI_APIKEY_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "apikey.h"

struct apikey_cache;

struct apikey_entry {
	char id[APIKEY_ID_LEN + 1];
	bool found; /* false: Redis has no such key */
	char tenant[APIKEY_TENANT_MAX + 1];
	char sha256[DIGEST_HEX_LEN + 1];
	int64_t at_ms; /* when Redis said so (the caller's clock) */
};

/* Caller owns it (apikey_cache_free). */
struct apikey_cache *apikey_cache_new(size_t cap, int64_t ttl_ms);
void apikey_cache_free(struct apikey_cache *kc);

/* The entry for id if it is younger than ttl_ms at now_ms, else NULL (a
 * stale one is dropped). Borrowed until the next put or drop. */
const struct apikey_entry *apikey_cache_get(struct apikey_cache *kc, const char *id,
					    int64_t now_ms);

/* Remember what Redis said about id at now_ms (found: tenant and sha256;
 * else they are ignored), replacing an older entry for it. */
void apikey_cache_put(struct apikey_cache *kc, const char *id, bool found, const char *tenant,
		      const char *sha256, int64_t now_ms);

/* Forget id (this daemon revoked it). */
void apikey_cache_drop(struct apikey_cache *kc, const char *id);

size_t apikey_cache_size(const struct apikey_cache *kc);

#endif
