/* tar_scan.c: a streaming pax/ustar checker and hasher; see tar_scan.h.
 *
 * One state machine fed from tar_scan_feed: a 512-byte header is collected
 * in hdr, then according to its type the scanner hashes a file's data
 * straight from the caller's buffer (never copied), collects an 'x' header's
 * records (capped) or skips a 'g' header's, then skips the padding to the
 * next block. Two zero blocks end the archive; after them only zeros. */
#include "tar_scan.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "xalloc.h"

#define BLOCK 512

enum ts_state {
	TS_HEADER, /* collecting a header block */
	TS_DATA,   /* a regular file's contents */
	TS_PAX,    /* an 'x' header's records */
	TS_SKIP,   /* a 'g' header's data: ignored */
	TS_PAD,    /* zeros up to the next block */
	TS_ZERO2,  /* one zero block seen: the next must be zero too */
	TS_END,    /* both end blocks seen: only zeros may follow */
	TS_FAILED,
};

struct tar_scan {
	enum ts_state state;
	uint64_t max_bytes, max_entries;
	tar_entry_fn fn;
	void *arg;

	EVP_MD_CTX *all;  /* every byte fed */
	EVP_MD_CTX *file; /* the current file's contents */
	uint64_t fed;     /* bytes fed (and scanned) so far */
	uint64_t entries, files, content_bytes;

	unsigned char hdr[BLOCK];
	size_t hdr_len;
	uint64_t hdr_at; /* offset of the current header */

	uint64_t left; /* bytes left in the current data or pad */
	uint64_t pad;  /* padding after the data */

	/* The pending 'x' header: its data, and what it set. */
	char *pax;
	size_t pax_len, pax_size;
	bool pax_pending; /* an 'x' header applies to the next entry */
	bool pax_has_path, pax_has_size;
	char *pax_path;
	uint64_t pax_sz;

	/* The current entry, and the previous one for the order check. */
	struct tar_entry cur;
	char *path;
	char *prev;
	bool prev_dir;
};

static const char hexdig[] = "0123456789abcdef";

static void md_hex(const unsigned char *md, char out[TAR_SHA256_HEX + 1])
{
	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = hexdig[md[i] >> 4];
		out[2 * i + 1] = hexdig[md[i] & 15];
	}
	out[TAR_SHA256_HEX] = '\0';
}

static EVP_MD_CTX *md_new(void)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (c == NULL || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1)
		abort(); /* only fails without memory */
	return c;
}

struct tar_scan *tar_scan_new(uint64_t max_bytes, uint64_t max_entries, tar_entry_fn fn, void *arg)
{
	struct tar_scan *ts = xcalloc(1, sizeof(*ts));
	ts->max_bytes = max_bytes;
	ts->max_entries = max_entries;
	ts->fn = fn;
	ts->arg = arg;
	ts->all = md_new();
	ts->file = md_new();
	return ts;
}

void tar_scan_free(struct tar_scan *ts)
{
	if (ts == NULL)
		return;
	EVP_MD_CTX_free(ts->all);
	EVP_MD_CTX_free(ts->file);
	free(ts->pax);
	free(ts->pax_path);
	free(ts->path);
	free(ts->prev);
	free(ts);
}

static int ts_fail(struct tar_scan *ts, struct err **errp, enum err_code code, uint64_t at,
		   const char *what)
{
	ts->state = TS_FAILED;
	return err_set(errp, code, "tar: %s, at byte %llu", what, (unsigned long long)at);
}

int tar_path_check(const char *path, size_t len, struct err **errp)
{
	if (len == 0)
		return err_set(errp, ERR_BAD_REQUEST, "an empty path");
	if (len > TAR_PATH_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "a path of %zu bytes (at most %d)", len,
			       TAR_PATH_MAX);
	if (memchr(path, '\0', len) != NULL)
		return err_set(errp, ERR_BAD_REQUEST, "a NUL byte in a path");
	if (!json_utf8_valid(path, len))
		return err_set(errp, ERR_BAD_REQUEST, "a path that is not UTF-8");
	if (path[0] == '/')
		return err_set(errp, ERR_BAD_REQUEST, "an absolute path");
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		size_t n = i - start;
		if (n == 0)
			return err_set(errp, ERR_BAD_REQUEST, "an empty path component");
		if (n == 1 && path[start] == '.')
			return err_set(errp, ERR_BAD_REQUEST, "a '.' path component");
		if (n == 2 && path[start] == '.' && path[start + 1] == '.')
			return err_set(errp, ERR_BAD_REQUEST, "a '..' path component");
		start = i + 1;
	}
	return 0;
}

/* '/' sorts below every other byte and the end below '/': that is
 * comparing component by component, which is the depth-first order. */
bool tar_path_before(const char *a, const char *b)
{
	for (size_t i = 0;; i++) {
		int ca = a[i] == '\0' ? -1 : a[i] == '/' ? 0 : (unsigned char)a[i] + 1;
		int cb = b[i] == '\0' ? -1 : b[i] == '/' ? 0 : (unsigned char)b[i] + 1;
		if (ca != cb)
			return ca < cb;
		if (ca == -1)
			return false;
	}
}

/* Whether dir (a directory's path, len bytes) is prev or an ancestor of prev. */
static bool is_self_or_ancestor(const char *dir, size_t len, const char *prev)
{
	return strncmp(prev, dir, len) == 0 && (prev[len] == '\0' || prev[len] == '/');
}

/* The tar's order: after the previous entry, and its parent directory is
 * the previous entry (a directory) or one of the previous entry's
 * ancestors, which were entries themselves (by the same rule, earlier). */
const char *tar_order_check(const char *prev, bool prev_dir, const char *path)
{
	const char *slash = strrchr(path, '/');
	if (prev == NULL)
		return slash == NULL ? NULL : "an entry before its directory";
	if (!tar_path_before(prev, path))
		return "an entry out of order (or twice)";
	if (slash == NULL)
		return NULL;
	size_t plen = (size_t)(slash - path);
	if (!is_self_or_ancestor(path, plen, prev))
		return "an entry before its directory";
	if (prev[plen] == '\0' && !prev_dir)
		return "an entry under a regular file";
	return NULL;
}

/* A numeric field: octal digits (leading spaces, then NUL or space to the
 * end), or base-256 (first byte 0x80, big-endian, not negative). */
static int parse_num(const unsigned char *f, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	if (f[0] == 0x80) {
		for (size_t i = 1; i < n; i++) {
			if (v >> 56)
				return -1;
			v = (v << 8) | f[i];
		}
		*out = v;
		return 0;
	}
	size_t i = 0;
	while (i < n && f[i] == ' ')
		i++;
	size_t digits = 0;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
		if (v >> 61)
			return -1;
		v = (v << 3) | (uint64_t)(f[i] - '0');
	}
	if (digits == 0)
		return -1;
	for (; i < n; i++)
		if (f[i] != '\0' && f[i] != ' ')
			return -1;
	*out = v;
	return 0;
}

/* The records of an 'x' header: "LEN KEY=VALUE\n", LEN counting the whole
 * record. path and size are taken (the last of each wins, as POSIX says);
 * a sparse file's keys are refused, the rest (times, owners) ignored. */
static const char *pax_parse(struct tar_scan *ts)
{
	const char *p = ts->pax, *end = ts->pax + ts->pax_len;
	while (p < end) {
		size_t len = 0, digits = 0;
		const char *q = p;
		while (q < end && *q >= '0' && *q <= '9') {
			if (++digits > 6)
				return "a pax record's length is too long";
			len = len * 10 + (size_t)(*q - '0');
			q++;
		}
		if (digits == 0 || q >= end || *q != ' ')
			return "a pax record without a length";
		if (len > (size_t)(end - p) || len < (size_t)(q - p) + 4 || p[len - 1] != '\n')
			return "a pax record whose length does not match";
		const char *key = q + 1, *rec_end = p + len - 1;
		const char *eq = memchr(key, '=', (size_t)(rec_end - key));
		if (eq == NULL || eq == key)
			return "a pax record without a key";
		size_t klen = (size_t)(eq - key);
		const char *val = eq + 1;
		size_t vlen = (size_t)(rec_end - val);
		if (klen == 4 && memcmp(key, "path", 4) == 0) {
			if (vlen > TAR_PATH_MAX + 1)
				return "a pax path over 4096 bytes";
			free(ts->pax_path);
			ts->pax_path = xstrndup(val, vlen);
			if (strlen(ts->pax_path) != vlen)
				return "a NUL byte in a pax path";
			ts->pax_has_path = true;
		} else if (klen == 4 && memcmp(key, "size", 4) == 0) {
			uint64_t v = 0;
			if (vlen == 0 || vlen > 19)
				return "a bad pax size";
			for (size_t i = 0; i < vlen; i++) {
				if (val[i] < '0' || val[i] > '9')
					return "a bad pax size";
				v = v * 10 + (uint64_t)(val[i] - '0');
			}
			ts->pax_sz = v;
			ts->pax_has_size = true;
		} else if (klen >= 10 && memcmp(key, "GNU.sparse", 10) == 0) {
			return "a sparse file (GNU.sparse pax records)";
		} else if (memchr(key, '\0', klen) != NULL) {
			return "a NUL byte in a pax key";
		}
		p += len;
	}
	return NULL;
}

static const char *type_name(unsigned char t)
{
	switch (t) {
	case '1': return "a hard link";
	case '2': return "a symlink";
	case '3': return "a character device";
	case '4': return "a block device";
	case '6': return "a FIFO";
	case '7': return "a contiguous file";
	case 'L':
	case 'K': return "a GNU long name";
	case 'S': return "a GNU sparse file";
	case 'D': return "a GNU dump directory";
	case 'M':
	case 'V': return "a GNU multi-volume entry";
	default: return "an unknown entry type";
	}
}

/* The entry is complete: count it, check the cap, call fn. */
static int entry_done(struct tar_scan *ts, struct err **errp)
{
	if (ts->cur.dir) {
		ts->cur.sha256[0] = '\0';
	} else {
		unsigned char md[32];
		unsigned int n = 0;
		if (EVP_DigestFinal_ex(ts->file, md, &n) != 1 ||
		    EVP_DigestInit_ex(ts->file, EVP_sha256(), NULL) != 1)
			abort();
		md_hex(md, ts->cur.sha256);
		ts->files++;
		ts->content_bytes += ts->cur.size;
	}
	ts->entries++;
	free(ts->prev);
	ts->prev = ts->path;
	ts->prev_dir = ts->cur.dir;
	ts->path = NULL;
	ts->cur.path = ts->prev;
	if (ts->fn != NULL && ts->fn(&ts->cur, ts->arg, errp) != 0) {
		ts->state = TS_FAILED;
		return err_set(errp, ERR_INTERNAL, "tar: an entry callback failed without a cause");
	}
	return 0;
}

static void pax_reset(struct tar_scan *ts)
{
	free(ts->pax);
	ts->pax = NULL;
	ts->pax_len = ts->pax_size = 0;
	ts->pax_pending = ts->pax_has_path = ts->pax_has_size = false;
	free(ts->pax_path);
	ts->pax_path = NULL;
}

static uint64_t pad_of(uint64_t size)
{
	return (BLOCK - size % BLOCK) % BLOCK;
}

/* After a data part: its padding, then the next header. */
static void to_pad(struct tar_scan *ts, uint64_t pad)
{
	ts->left = pad;
	ts->state = pad > 0 ? TS_PAD : TS_HEADER;
}

static int header_done(struct tar_scan *ts, struct err **errp)
{
	const unsigned char *h = ts->hdr;
	uint64_t at = ts->hdr_at;
	bool zero = true;
	for (size_t i = 0; i < BLOCK; i++)
		if (h[i] != 0) {
			zero = false;
			break;
		}
	if (zero) {
		if (ts->pax_pending)
			return ts_fail(ts, errp, ERR_BAD_REQUEST, at,
				       "a pax header without an entry");
		ts->state = ts->state == TS_ZERO2 ? TS_END : TS_ZERO2;
		return 0;
	}
	if (ts->state == TS_ZERO2)
		return ts_fail(ts, errp, ERR_BAD_REQUEST, at, "a lone zero block");

	uint64_t sum = 0, want = 0;
	for (size_t i = 0; i < BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : h[i];
	if (parse_num(h + 148, 8, &want) != 0 || want != sum)
		return ts_fail(ts, errp, ERR_BAD_REQUEST, at, "a header checksum does not match");
	static const char magic[8] = {'u', 's', 't', 'a', 'r', '\0', '0', '0'};
	if (memcmp(h + 257, magic, sizeof(magic)) != 0)
		return ts_fail(ts, errp, ERR_BAD_REQUEST, at, "not a POSIX (ustar) header");
	uint64_t size = 0, mode = 0;
	if (parse_num(h + 124, 12, &size) != 0)
		return ts_fail(ts, errp, ERR_BAD_REQUEST, at, "a bad size field");
	if (parse_num(h + 100, 8, &mode) != 0)
		return ts_fail(ts, errp, ERR_BAD_REQUEST, at, "a bad mode field");

	unsigned char type = h[156];
	if (type == 'x' || type == 'g') {
		if (ts->pax_pending)
			return ts_fail(ts, errp, ERR_BAD_REQUEST, at, "two pax headers in a row");
		if (size > TAR_PAX_MAX)
			return ts_fail(ts, errp, ERR_BAD_REQUEST, at, "a pax header over 64 KiB");
		ts->pad = pad_of(size);
		ts->left = size;
		if (type == 'g') {
			ts->state = size > 0 ? TS_SKIP : TS_HEADER;
			return 0;
		}
		ts->pax_pending = true;
		ts->pax_size = (size_t)size;
		ts->pax_len = 0;
		free(ts->pax);
		ts->pax = xmalloc(size > 0 ? (size_t)size : 1);
		ts->state = size > 0 ? TS_PAX : TS_HEADER;
		return 0;
	}
	if (type != '0' && type != '\0' && type != '5')
		return ts_fail(ts, errp, ERR_BAD_REQUEST, at, type_name(type));

	/* The name: the pax path, else prefix "/" name (each NUL-terminated
	 * unless full). */
	char name[TAR_PATH_MAX + 2];
	size_t nlen;
	if (ts->pax_has_path) {
		nlen = strlen(ts->pax_path);
		memcpy(name, ts->pax_path, nlen + 1);
	} else {
		size_t plen = strnlen((const char *)h + 345, 155);
		size_t blen = strnlen((const char *)h, 100);
		nlen = 0;
		if (plen > 0) {
			memcpy(name, h + 345, plen);
			name[plen] = '/';
			nlen = plen + 1;
		}
		memcpy(name + nlen, h, blen);
		nlen += blen;
		name[nlen] = '\0';
	}
	if (ts->pax_has_size)
		size = ts->pax_sz;
	pax_reset(ts);

	bool dir = type == '5';
	if (dir && nlen > 0 && name[nlen - 1] == '/')
		name[--nlen] = '\0';
	AUTOERR struct err *pe = NULL;
	if (tar_path_check(name, nlen, &pe) != 0)
		return ts_fail(ts, errp, ERR_BAD_REQUEST, at, pe->message);
	const char *why = tar_order_check(ts->prev, ts->prev_dir, name);
	if (why != NULL) {
		ts->state = TS_FAILED;
		return err_set(errp, ERR_BAD_REQUEST, "tar: %s (%s), at byte %llu", why, name,
			       (unsigned long long)at);
	}
	if (dir && size != 0)
		return ts_fail(ts, errp, ERR_BAD_REQUEST, at, "a directory with a size");
	if (ts->max_entries > 0 && ts->entries >= ts->max_entries) {
		ts->state = TS_FAILED;
		return err_set(errp, ERR_PAYLOAD_TOO_LARGE,
			       "tar: more than %llu entries, at byte %llu",
			       (unsigned long long)ts->max_entries, (unsigned long long)at);
	}
	if (ts->max_bytes > 0 && size > ts->max_bytes) {
		ts->state = TS_FAILED;
		return err_set(errp, ERR_PAYLOAD_TOO_LARGE,
			       "tar: %s is %llu bytes, over the %llu-byte cap, at byte %llu", name,
			       (unsigned long long)size, (unsigned long long)ts->max_bytes,
			       (unsigned long long)at);
	}
	free(ts->path);
	ts->path = xstrdup(name);
	ts->cur = (struct tar_entry){
	    .path = ts->path, .dir = dir, .size = size, .mode = (uint32_t)(mode & 0777)};
	if (size == 0) {
		ts->state = TS_HEADER;
		return entry_done(ts, errp);
	}
	ts->left = size;
	ts->pad = pad_of(size);
	ts->state = TS_DATA;
	return 0;
}

int tar_scan_feed(struct tar_scan *ts, const void *buf, size_t len, struct err **errp)
{
	if (ts->state == TS_FAILED)
		return err_set(errp, ERR_BAD_REQUEST, "tar: the scan already failed");
	if (len == 0)
		return 0;
	if (ts->max_bytes > 0 && (len > ts->max_bytes || ts->fed > ts->max_bytes - len)) {
		ts->state = TS_FAILED;
		return err_set(errp, ERR_PAYLOAD_TOO_LARGE, "tar: over the %llu-byte cap",
			       (unsigned long long)ts->max_bytes);
	}
	if (EVP_DigestUpdate(ts->all, buf, len) != 1)
		abort();
	const unsigned char *p = buf, *end = p + len;
	while (p < end) {
		size_t avail = (size_t)(end - p);
		uint64_t at = ts->fed;
		switch (ts->state) {
		case TS_HEADER:
		case TS_ZERO2: {
			if (ts->hdr_len == 0)
				ts->hdr_at = at;
			size_t n = BLOCK - ts->hdr_len;
			if (n > avail)
				n = avail;
			memcpy(ts->hdr + ts->hdr_len, p, n);
			ts->hdr_len += n;
			p += n;
			ts->fed += n;
			if (ts->hdr_len == BLOCK) {
				ts->hdr_len = 0;
				if (header_done(ts, errp) != 0)
					return -1;
			}
			break;
		}
		case TS_DATA: {
			size_t n = ts->left < avail ? (size_t)ts->left : avail;
			if (EVP_DigestUpdate(ts->file, p, n) != 1)
				abort();
			p += n;
			ts->fed += n;
			ts->left -= n;
			if (ts->left == 0) {
				to_pad(ts, ts->pad);
				if (entry_done(ts, errp) != 0)
					return -1;
			}
			break;
		}
		case TS_PAX: {
			size_t n = ts->pax_size - ts->pax_len;
			if (n > avail)
				n = avail;
			memcpy(ts->pax + ts->pax_len, p, n);
			ts->pax_len += n;
			p += n;
			ts->fed += n;
			if (ts->pax_len == ts->pax_size) {
				const char *why = pax_parse(ts);
				if (why != NULL)
					return ts_fail(ts, errp, ERR_BAD_REQUEST, ts->hdr_at, why);
				free(ts->pax);
				ts->pax = NULL;
				to_pad(ts, ts->pad);
			}
			break;
		}
		case TS_SKIP: {
			size_t n = ts->left < avail ? (size_t)ts->left : avail;
			p += n;
			ts->fed += n;
			ts->left -= n;
			if (ts->left == 0)
				to_pad(ts, ts->pad);
			break;
		}
		case TS_PAD: {
			size_t n = ts->left < avail ? (size_t)ts->left : avail;
			p += n;
			ts->fed += n;
			ts->left -= n;
			if (ts->left == 0)
				ts->state = TS_HEADER;
			break;
		}
		case TS_END: {
			for (const unsigned char *q = p; q < end; q++)
				if (*q != 0)
					return ts_fail(ts, errp, ERR_BAD_REQUEST,
						       ts->fed + (uint64_t)(q - p),
						       "non-zero bytes after the end blocks");
			ts->fed += avail;
			p = end;
			break;
		}
		case TS_FAILED: return -1;
		}
	}
	return 0;
}

int tar_scan_finish(struct tar_scan *ts, struct err **errp)
{
	switch (ts->state) {
	case TS_END: return 0;
	case TS_FAILED: return err_set(errp, ERR_BAD_REQUEST, "tar: the scan already failed");
	case TS_DATA:
		ts->state = TS_FAILED;
		return err_set(errp, ERR_BAD_REQUEST, "tar: truncated in %s, at byte %llu",
			       ts->path, (unsigned long long)ts->fed);
	default:
		ts->state = TS_FAILED;
		return err_set(errp, ERR_BAD_REQUEST,
			       "tar: truncated (no end blocks), at byte %llu",
			       (unsigned long long)ts->fed);
	}
}

void tar_scan_sha256(const struct tar_scan *ts, char out[TAR_SHA256_HEX + 1])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char md[32];
	unsigned int n = 0;
	if (c == NULL || EVP_MD_CTX_copy_ex(c, ts->all) != 1 || EVP_DigestFinal_ex(c, md, &n) != 1)
		abort();
	EVP_MD_CTX_free(c);
	md_hex(md, out);
}

uint64_t tar_scan_bytes(const struct tar_scan *ts)
{
	return ts->fed;
}

uint64_t tar_scan_entries(const struct tar_scan *ts)
{
	return ts->entries;
}

uint64_t tar_scan_files(const struct tar_scan *ts)
{
	return ts->files;
}

uint64_t tar_scan_content_bytes(const struct tar_scan *ts)
{
	return ts->content_bytes;
}
