/* failure_sig.c: a failure's signature and class (failure_sig.h).
 *
 * Everything here reads what the sandbox sent (ename, evalue, traceback),
 * so each part is cut to a fixed size before it is looked at: a message of
 * a megabyte costs the same as one of a kilobyte. */
#include "failure_sig.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "xalloc.h"

/* What of a message and of a line is kept (masked, before the cut). */
#define SIG_MESSAGE_MAX 1024
#define SIG_LINE_MAX 512
#define SIG_ENAME_MAX 128
#define SIG_IMAGE_MAX 64

const char *failure_class_name(enum failure_class c)
{
	switch (c) {
	case FAILURE_CLASS_NONE: return NULL;
	case FAILURE_CLASS_EGRESS_DENIED: return "egress_denied";
	case FAILURE_CLASS_MEMORY_AT_MAX: return "memory_at_max";
	case FAILURE_CLASS_TIMEOUT_AT_MAX: return "timeout_at_max";
	case FAILURE_CLASS_MODULE_UNAVAILABLE: return "module_unavailable";
	}
	return NULL;
}

/* ---- masking ---- */

static bool is_word(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c >= 0x80;
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* A quote at s[i] opens a string literal when what is before it is not a
 * word (so the apostrophe of "can't" opens nothing), or is a one-letter
 * prefix (f'', b'', r'', u'') that itself starts a word. The closing quote
 * is the next unescaped one on the same line; none: no literal. Returns
 * the index after the literal, or 0. */
static size_t literal_end(const char *s, size_t n, size_t i)
{
	char q = s[i];
	if (i > 0 && is_word((unsigned char)s[i - 1])) {
		char p = s[i - 1];
		bool prefix =
		    strchr("fbruFBRU", p) != NULL && (i < 2 || !is_word((unsigned char)s[i - 2]));
		if (!prefix)
			return 0;
	}
	for (size_t j = i + 1; j < n; j++) {
		if (s[j] == '\\') {
			j++;
			continue;
		}
		if (s[j] == '\n')
			return 0;
		if (s[j] == q)
			return j + 1;
	}
	return 0;
}

/* A path starts with '/' at a word boundary and goes on to the next space
 * or closing punctuation: "/workspace/data.csv", "/usr/lib/x.py". A '/'
 * that is followed by a space or that ends a word ("a / b", "a/b") is not
 * one. Returns the index after it, or 0. */
static size_t path_end(const char *s, size_t n, size_t i)
{
	if (s[i] != '/' || (i > 0 && (is_word((unsigned char)s[i - 1]) || s[i - 1] == ')' ||
				      s[i - 1] == ']' || s[i - 1] == '/')))
		return 0;
	size_t j = i + 1;
	while (j < n && !is_space((unsigned char)s[j]) && strchr("'\",)]}:;<>", s[j]) == NULL)
		j++;
	return j > i + 1 && (is_word((unsigned char)s[i + 1]) || s[i + 1] == '.') ? j : 0;
}

/* A number: digits, a fraction, an exponent, not inside a word (x1 is a
 * name); a hex literal or an address (0x7f3a...) is one too. */
static size_t number_end(const char *s, size_t n, size_t i, bool *hex)
{
	*hex = false;
	if (!is_digit((unsigned char)s[i]) || (i > 0 && is_word((unsigned char)s[i - 1])))
		return 0;
	size_t j = i;
	if (s[i] == '0' && i + 2 < n && (s[i + 1] == 'x' || s[i + 1] == 'X') &&
	    is_hex((unsigned char)s[i + 2])) {
		j = i + 2;
		while (j < n && is_hex((unsigned char)s[j]))
			j++;
		*hex = true;
		return j;
	}
	while (j < n && is_digit((unsigned char)s[j]))
		j++;
	if (j + 1 < n && s[j] == '.' && is_digit((unsigned char)s[j + 1])) {
		j++;
		while (j < n && is_digit((unsigned char)s[j]))
			j++;
	}
	if (j + 1 < n && (s[j] == 'e' || s[j] == 'E') &&
	    (is_digit((unsigned char)s[j + 1]) ||
	     ((s[j + 1] == '-' || s[j + 1] == '+') && j + 2 < n &&
	      is_digit((unsigned char)s[j + 2])))) {
		j += 2;
		while (j < n && is_digit((unsigned char)s[j]))
			j++;
	}
	/* 1a2b3c4d...: a hex id that happens to begin with a digit */
	size_t k = j;
	while (k < n && is_hex((unsigned char)s[k]))
		k++;
	if (k > j && k - i >= 8 && (k == n || !is_word((unsigned char)s[k]))) {
		*hex = true;
		return k;
	}
	return j < n && is_word((unsigned char)s[j]) ? 0 : j;
}

/* A word of 8 or more hex digits with a digit in it (an id, a digest)
 * that does not begin with a digit (number_end has those). */
static size_t hexword_end(const char *s, size_t n, size_t i)
{
	if (!is_hex((unsigned char)s[i]) || (i > 0 && is_word((unsigned char)s[i - 1])))
		return 0;
	size_t j = i;
	bool digit = false;
	while (j < n && is_hex((unsigned char)s[j])) {
		digit |= is_digit((unsigned char)s[j]);
		j++;
	}
	return digit && j - i >= 8 && (j == n || !is_word((unsigned char)s[j])) ? j : 0;
}

/* A UUID (8-4-4-4-12 hex digits), at a word boundary: a session's, a
 * request's, a file's name. */
static size_t uuid_end(const char *s, size_t n, size_t i)
{
	static const int groups[] = {8, 4, 4, 4, 12};
	if (i > 0 && is_word((unsigned char)s[i - 1]))
		return 0;
	size_t j = i;
	for (int g = 0; g < 5; g++) {
		if (g > 0) {
			if (j >= n || s[j] != '-')
				return 0;
			j++;
		}
		for (int k = 0; k < groups[g]; k++, j++)
			if (j >= n || !is_hex((unsigned char)s[j]))
				return 0;
	}
	return j == n || !is_word((unsigned char)s[j]) ? j : 0;
}

struct out {
	char *p;
	size_t len, cap;
	bool space; /* a space is owed before the next byte */
};

static void out_put(struct out *o, const char *s, size_t n)
{
	if (o->space && o->len > 0 && o->len < o->cap) {
		o->p[o->len++] = ' ';
	}
	o->space = false;
	for (size_t i = 0; i < n && o->len < o->cap; i++)
		o->p[o->len++] = s[i];
}

/* Masked, whitespace collapsed, trimmed, at most cap bytes (cut at a UTF-8
 * boundary). Caller frees. */
static char *mask(const char *s, size_t n, size_t cap)
{
	struct out o = {.p = xmalloc(cap + 1), .cap = cap};
	size_t i = 0;
	while (i < n && o.len < cap) {
		unsigned char c = (unsigned char)s[i];
		size_t e;
		bool hex;
		if (c == '\0')
			break;
		if (is_space(c)) {
			o.space = true;
			i++;
		} else if ((c == '\'' || c == '"') && (e = literal_end(s, n, i)) != 0) {
			out_put(&o, "<str>", 5);
			i = e;
		} else if (is_hex(c) && (e = uuid_end(s, n, i)) != 0) {
			out_put(&o, "<hex>", 5);
			i = e;
		} else if (c == '/' && (e = path_end(s, n, i)) != 0) {
			out_put(&o, "<path>", 6);
			i = e;
		} else if ((e = number_end(s, n, i, &hex)) != 0) {
			out_put(&o, hex ? "<hex>" : "<n>", hex ? 5 : 3);
			i = e;
		} else if ((e = hexword_end(s, n, i)) != 0) {
			out_put(&o, "<hex>", 5);
			i = e;
		} else if (is_word(c)) {
			/* a whole word, so that no mask starts inside it */
			size_t j = i;
			while (j < n && is_word((unsigned char)s[j]))
				j++;
			out_put(&o, s + i, j - i);
			i = j;
		} else {
			out_put(&o, s + i, 1);
			i++;
		}
	}
	/* A cut inside a UTF-8 sequence is backed up to its start. */
	if (o.len == cap) {
		size_t k = o.len;
		while (k > 0 && ((unsigned char)o.p[k - 1] & 0xC0) == 0x80)
			k--;
		if (k > 0 && ((unsigned char)o.p[k - 1] & 0x80))
			o.len = k - 1;
	}
	o.p[o.len] = '\0';
	return o.p;
}

/* ---- the signature ---- */

static char *cut(const char *s, size_t max)
{
	size_t n = s ? strnlen(s, max) : 0;
	return xstrndup(s ? s : "", n);
}

/* The parts, before hashing: the exception (or, without one, the status:
 * "timeout", "killed"), its message (or the reason) masked, the line. */
static void describe(const struct failure_input *in, struct failure_desc *d)
{
	const struct exec_result *r = in->r;
	const char *msg;
	if (r->has_error && r->ename && *r->ename) {
		d->ename = cut(r->ename, SIG_ENAME_MAX);
		msg = r->evalue ? r->evalue : "";
	} else {
		d->ename = xstrdup(exec_status_name(r->status));
		msg = r->reason ? r->reason : "";
	}
	/* Enough of the message for the mask to fill its cap, not all of it. */
	d->message = mask(msg, strnlen(msg, 4 * SIG_MESSAGE_MAX), SIG_MESSAGE_MAX);
	long l = in->code ? exec_result_cell_frame(r) : 0;
	size_t n = 0;
	const char *line = l > 0 ? exec_code_line(in->code, in->code_len, l, &n) : NULL;
	/* A literal's closing quote is looked for to the end of what is given,
	 * so what is given is bounded: the mask stays linear in practice. */
	if (n > 4 * SIG_LINE_MAX)
		n = 4 * SIG_LINE_MAX;
	d->line = line ? mask(line, n, SIG_LINE_MAX) : xstrdup("");
	d->image = cut(in->image, SIG_IMAGE_MAX);
}

void failure_desc_clear(struct failure_desc *d)
{
	if (d == NULL)
		return;
	free(d->ename);
	free(d->message);
	free(d->line);
	free(d->image);
	memset(d, 0, sizeof(*d));
}

void failure_signature(const struct failure_input *in, char sig[FAILURE_SIG_HEX + 1],
		       struct failure_desc *desc)
{
	struct failure_desc d = {0};
	describe(in, &d);
	/* The parts are joined with a byte none of them can hold after the
	 * mask (a NUL ends each), so no two splits hash the same. */
	size_t a = strlen(d.ename), b = strlen(d.message), c = strlen(d.line), e = strlen(d.image);
	size_t total = a + b + c + e + 4;
	AUTOFREE char *buf = xmalloc(total);
	char *p = buf;
	memcpy(p, d.ename, a + 1);
	p += a + 1;
	memcpy(p, d.message, b + 1);
	p += b + 1;
	memcpy(p, d.line, c + 1);
	p += c + 1;
	memcpy(p, d.image, e + 1);
	char hex[DIGEST_HEX_LEN + 1];
	digest_sha256_hex(buf, total, hex);
	memcpy(sig, hex, FAILURE_SIG_HEX);
	sig[FAILURE_SIG_HEX] = '\0';
	if (desc)
		*desc = d;
	else
		failure_desc_clear(&d);
}

bool failure_sig_valid(const char *s)
{
	if (s == NULL)
		return false;
	for (size_t i = 0; i < FAILURE_SIG_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[FAILURE_SIG_HEX] == '\0';
}

/* ---- the class ---- */

static bool has(const char *s, const char *needle)
{
	return s && strstr(s, needle) != NULL;
}

static bool is_ename(const struct exec_result *r, const char *name)
{
	return r->has_error && r->ename && strcmp(r->ename, name) == 0;
}

/* What the code sees when the network policy refuses it (observed in a
 * real session, tests/unit/test_failure_sig.c has the results):
 *   - through the allowlist proxy, a CONNECT (https, any library) to a host
 *     that is not on the list: the proxy answers 403, which Python reports
 *     as "Tunnel connection failed: 403 Forbidden" (OSError from
 *     http.client; URLError from urllib, ProxyError from requests, which
 *     carry that text in their message). Only our proxy answers a CONNECT
 *     there, so a 403 to one is the policy.
 *   - a name looked up in the sandbox itself: the sandbox has no resolver
 *     (names go to the proxy, or nowhere without network), so it fails
 *     with "[Errno -3] Temporary failure in name resolution" (socket.gaierror,
 *     and the URLError/ConnectionError wrapping it).
 * A plain-http request refused by the proxy is an HTTPError 403 whose
 * message cannot be told from a server's own 403: not classified. */
static bool egress_denied(const struct exec_result *r)
{
	if (!r->has_error)
		return false;
	if (has(r->evalue, "Tunnel connection failed: 403") ||
	    has(r->evalue, "[Errno -3] Temporary failure in name resolution"))
		return true;
	/* the message can be a wrapper's ("Max retries exceeded"); the
	 * chained cause is in the traceback's exception lines */
	for (size_t i = 0; i < r->n_traceback; i++) {
		const char *t = r->traceback[i];
		if (t && strncmp(t, "  File ", 7) != 0 &&
		    (has(t, "Tunnel connection failed: 403") ||
		     (strncmp(t, "socket.gaierror: ", 17) == 0 &&
		      has(t, "[Errno -3] Temporary failure in name resolution"))))
			return true;
	}
	return false;
}

static bool out_of_memory(const struct exec_result *r)
{
	if (r->status == EXEC_KILLED && r->reason && strncmp(r->reason, "out of memory", 13) == 0)
		return true;
	return is_ename(r, "MemoryError");
}

static bool module_missing(const struct exec_result *r)
{
	return (is_ename(r, "ModuleNotFoundError") || is_ename(r, "ImportError")) && r->evalue &&
	       strncmp(r->evalue, "No module named ", 16) == 0;
}

enum failure_class failure_classify(const struct failure_input *in)
{
	const struct exec_result *r = in->r;
	if (r == NULL)
		return FAILURE_CLASS_NONE;
	/* A kernel that was restarting and never ran the code did not time
	 * out on the code's account (manager_exec.c's reason says so). */
	if (r->status == EXEC_TIMEOUT && in->timeout_at_max &&
	    !(r->reason && strncmp(r->reason, "the kernel was restarting", 25) == 0))
		return FAILURE_CLASS_TIMEOUT_AT_MAX;
	if (in->memory_at_max && out_of_memory(r))
		return FAILURE_CLASS_MEMORY_AT_MAX;
	if (egress_denied(r))
		return FAILURE_CLASS_EGRESS_DENIED;
	if (!in->can_install && module_missing(r))
		return FAILURE_CLASS_MODULE_UNAVAILABLE;
	return FAILURE_CLASS_NONE;
}
