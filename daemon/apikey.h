/* apikey.h: what an API key looks like, and tenant names. Pure,
 * unit-tested; the keys live in Redis (store_keys.c), are checked by
 * api_auth.c and issued by api_keys.c.
 *
 * A key is "<id>.<secret>": the id is 16 lowercase hex digits (8 random
 * bytes), public, and names the key in Redis, in logs and in the audit;
 * the secret is 32 random bytes in unpadded base64url (43 characters).
 * Only the SHA-256 of the secret is stored: a key is checked by hashing
 * what the caller sent and comparing the hashes in constant time. */
#ifndef CI_APIKEY_H
#define CI_APIKEY_H

#include <stdbool.h>
#include <stddef.h>

#include "digest.h"

#define APIKEY_ID_LEN 16
#define APIKEY_SECRET_LEN 43
#define APIKEY_LEN (APIKEY_ID_LEN + 1 + APIKEY_SECRET_LEN)
#define APIKEY_TENANT_MAX 63

/* A new key: its id, its whole text (shown to the caller once) and the
 * SHA-256 hex of its secret (what is stored). */
void apikey_generate(char id[APIKEY_ID_LEN + 1], char key[APIKEY_LEN + 1],
		     char sha256[DIGEST_HEX_LEN + 1]);

/* Split a key a caller sent into its id (copied) and its secret (a pointer
 * into text). -1 when text does not have a key's shape. */
int apikey_parse(const char *text, char id[APIKEY_ID_LEN + 1], const char **secret);

/* The SHA-256 hex of a secret, as stored. */
void apikey_hash(const char *secret, char sha256[DIGEST_HEX_LEN + 1]);

/* Whether s is a key id (16 lowercase hex digits). */
bool apikey_id_valid(const char *s);

/* Whether s is a tenant name: [a-z0-9][a-z0-9_-]{0,62}. */
bool apikey_tenant_valid(const char *s);

/* Whether s is a SHA-256 hex (64 lowercase hex digits), as stored. */
bool apikey_sha256_valid(const char *s);

/* The token of an Authorization header value "Bearer <token>" (the scheme
 * in any case, spaces after it skipped; the token is what follows, up to
 * trailing spaces, into out), or -1 when value is NULL, another scheme, an
 * empty token or one longer than cap - 1. */
int apikey_bearer(const char *value, char *out, size_t cap);

#endif
