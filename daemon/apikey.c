/* apikey.c: the key format and tenant names (apikey.h). */
#include "apikey.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool is_lower_hex(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
}

static bool is_b64url(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       ch == '-' || ch == '_';
}

static bool all_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_lower_hex(s[i]))
			return false;
	return true;
}

/* 32 bytes -> 43 characters of unpadded base64url. */
static void b64url_32(const unsigned char in[32], char out[APIKEY_SECRET_LEN + 1])
{
	static const char abc[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	for (size_t i = 0; i < 32; i += 3) {
		unsigned v = (unsigned)in[i] << 16;
		if (i + 1 < 32)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < 32)
			v |= in[i + 2];
		out[o++] = abc[(v >> 18) & 63];
		out[o++] = abc[(v >> 12) & 63];
		if (i + 1 < 32)
			out[o++] = abc[(v >> 6) & 63];
		if (i + 2 < 32)
			out[o++] = abc[v & 63];
	}
	out[o] = '\0';
}

void apikey_generate(char id[APIKEY_ID_LEN + 1], char key[APIKEY_LEN + 1],
		     char sha256[DIGEST_HEX_LEN + 1])
{
	unsigned char idb[APIKEY_ID_LEN / 2], secret[32];
	digest_random(idb, sizeof(idb));
	digest_random(secret, sizeof(secret));
	for (size_t i = 0; i < sizeof(idb); i++)
		snprintf(id + 2 * i, 3, "%02x", idb[i]);
	char s[APIKEY_SECRET_LEN + 1];
	b64url_32(secret, s);
	snprintf(key, APIKEY_LEN + 1, "%s.%s", id, s);
	apikey_hash(s, sha256);
}

int apikey_parse(const char *text, char id[APIKEY_ID_LEN + 1], const char **secret)
{
	if (text == NULL || strlen(text) != APIKEY_LEN || text[APIKEY_ID_LEN] != '.' ||
	    !all_lower_hex(text, APIKEY_ID_LEN))
		return -1;
	const char *s = text + APIKEY_ID_LEN + 1;
	for (size_t i = 0; i < APIKEY_SECRET_LEN; i++)
		if (!is_b64url(s[i]))
			return -1;
	memcpy(id, text, APIKEY_ID_LEN);
	id[APIKEY_ID_LEN] = '\0';
	*secret = s;
	return 0;
}

void apikey_hash(const char *secret, char sha256[DIGEST_HEX_LEN + 1])
{
	digest_sha256_hex(secret, strlen(secret), sha256);
}

bool apikey_id_valid(const char *s)
{
	return s && strlen(s) == APIKEY_ID_LEN && all_lower_hex(s, APIKEY_ID_LEN);
}

bool apikey_sha256_valid(const char *s)
{
	return s && strlen(s) == DIGEST_HEX_LEN && all_lower_hex(s, DIGEST_HEX_LEN);
}

bool apikey_tenant_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > APIKEY_TENANT_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
			  (i > 0 && (ch == '_' || ch == '-'));
		if (!ok)
			return false;
	}
	return true;
}

int apikey_bearer(const char *value, char *out, size_t cap)
{
	if (value == NULL || strncasecmp(value, "Bearer", 6) != 0 ||
	    (value[6] != ' ' && value[6] != '\t'))
		return -1;
	const char *t = value + 6;
	t += strspn(t, " \t");
	size_t n = strcspn(t, " \t");
	if (n == 0 || n >= cap || t[n + strspn(t + n, " \t")] != '\0')
		return -1;
	memcpy(out, t, n);
	out[n] = '\0';
	return 0;
}
