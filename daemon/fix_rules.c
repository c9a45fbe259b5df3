/* fix_rules.c: the rules tried before the model (fix_rules.h; the table is
 * in docs/workflow.md, "Rules before the model").
 *
 * Each rule is a function that looks at what failed and either repairs the
 * code, reports what it found, or does not apply; the first that applies
 * wins. None of them may apply to its own output, or a run would loop on
 * one rule:
 *   import_alias    adds an import, and does not apply when the code has
 *                   that import line already (its output has it);
 *   module_report   gives no code, so there is no output to apply to;
 *   file_near_miss  names a file that is in the listing, and does not apply
 *                   when the missing name is in the listing (its output's
 *                   would be).
 * Everything read here came from the sandbox (the exception's message, the
 * file list) and is treated as such: names are checked before they are
 * used, and sizes are bounded. */
#include "fix_rules.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xalloc.h"

/* A module or name longer than this is no alias or package of ours. */
#define RULE_NAME_MAX 128
/* File names compared by edit distance are at most this long. */
#define RULE_FILE_NAME_MAX 255

static bool is_ename(const struct exec_result *r, const char *name)
{
	return r && r->has_error && r->ename && strcmp(r->ename, name) == 0 && r->evalue;
}

static bool ident_char(unsigned char c)
{
	return isalnum(c) || c == '_';
}

/* The text between prefix and the next quote q in s (prefix then q then
 * the name then q), into out; false when s does not have that shape or the
 * name is empty or too long. */
static bool quoted_after(const char *s, const char *prefix, char *out, size_t cap)
{
	size_t pl = strlen(prefix);
	if (strncmp(s, prefix, pl) != 0)
		return false;
	char q = s[pl];
	if (q != '\'' && q != '"')
		return false;
	const char *b = s + pl + 1, *e = strchr(b, q);
	if (e == NULL || e == b || (size_t)(e - b) >= cap)
		return false;
	memcpy(out, b, (size_t)(e - b));
	out[e - b] = '\0';
	return true;
}

/* ---- import_alias: a NameError on a well-known alias ---- */

static const struct alias {
	const char *name;
	const char *import;
} aliases[] = {
    {"np", "import numpy as np"},
    {"pd", "import pandas as pd"},
    {"plt", "import matplotlib.pyplot as plt"},
    {"sns", "import seaborn as sns"},
    {"math", "import math"},
    {"os", "import os"},
    {"re", "import re"},
    {"json", "import json"},
    {"sys", "import sys"},
    {"time", "import time"},
    {"random", "import random"},
    {"datetime", "import datetime"},
    {"collections", "import collections"},
    {"itertools", "import itertools"},
    {"pathlib", "import pathlib"},
};

/* Whether code uses name as a module: "name." at a word's start. A
 * variable that happens to be called time (print(time)) is not one. */
static bool used_as_module(const char *code, size_t len, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i + n < len; i++) {
		if (memcmp(code + i, name, n) != 0 || code[i + n] != '.')
			continue;
		if (i > 0 && (ident_char((unsigned char)code[i - 1]) || code[i - 1] == '.'))
			continue;
		return true;
	}
	return false;
}

/* Whether code has line as one of its lines (surrounding spaces ignored). */
static bool has_line(const char *code, size_t len, const char *line)
{
	size_t n = strlen(line);
	const char *p = code, *end = code + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		const char *a = p, *b = e;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
			b--;
		if ((size_t)(b - a) == n && memcmp(a, line, n) == 0)
			return true;
		p = e + 1;
	}
	return false;
}

/* Where an import may go: after a leading shebang, encoding line and
 * `from __future__` imports (which must stay first), past the comments
 * and blank lines among them; 0 when there are none. */
static size_t import_point(const char *code, size_t len)
{
	size_t at = 0, lineno = 0;
	const char *p = code, *end = code + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		size_t n = (size_t)(e - p);
		lineno++;
		const char *a = p;
		while (a < e && (*a == ' ' || *a == '\t'))
			a++;
		bool blank = a == e || (a + 1 == e && *a == '\r');
		bool comment = a < e && *a == '#';
		bool shebang = lineno == 1 && n >= 2 && p[0] == '#' && p[1] == '!';
		bool encoding = lineno <= 2 && comment &&
				(memmem(p, n, "coding:", 7) || memmem(p, n, "coding=", 7));
		bool future = n >= 22 && strncmp(p, "from __future__ import", 22) == 0;
		if (shebang || encoding || future)
			at = nl ? (size_t)(nl + 1 - code) : len;
		else if (!blank && !comment)
			break;
		if (future && nl == NULL)
			break;
		p = e + 1;
	}
	return at;
}

static void rule_import_alias(const struct fix_rule_input *in, struct fix_rule_outcome *out)
{
	char name[RULE_NAME_MAX];
	if (!is_ename(in->r, "NameError") ||
	    !quoted_after(in->r->evalue, "name ", name, sizeof(name)))
		return;
	/* "name 'np' is not defined" (and 3.11's ". Did you mean: ...?") */
	const char *rest = in->r->evalue + 5 + strlen(name) + 2;
	if (strncmp(rest, " is not defined", 15) != 0)
		return;
	const struct alias *a = NULL;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(aliases[i].name, name) == 0)
			a = &aliases[i];
	if (a == NULL || !used_as_module(in->code, in->code_len, a->name) ||
	    has_line(in->code, in->code_len, a->import))
		return;
	size_t at = import_point(in->code, in->code_len);
	bool nl_before = at > 0 && in->code[at - 1] != '\n'; /* a last line with no newline */
	size_t il = strlen(a->import);
	out->code_len = in->code_len + il + 1 + (nl_before ? 1 : 0);
	out->code = xmalloc(out->code_len + 1);
	char *p = out->code;
	memcpy(p, in->code, at);
	p += at;
	if (nl_before)
		*p++ = '\n';
	memcpy(p, a->import, il);
	p += il;
	*p++ = '\n';
	memcpy(p, in->code + at, in->code_len - at);
	p += in->code_len - at;
	*p = '\0';
	out->kind = FIX_RULE_REPAIR;
	out->rule = "import_alias";
	out->note = xasprintf("added '%s' (NameError: name '%s' is not defined)", a->import, name);
}

/* ---- module_report: a module that is not in the image ---- */

static const struct package {
	const char *module;
	const char *package;
} packages[] = {
    {"sklearn", "scikit-learn"}, {"cv2", "opencv-python"},  {"PIL", "pillow"},
    {"yaml", "pyyaml"},          {"bs4", "beautifulsoup4"},
};

static bool module_name_ok(const char *s)
{
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (const char *p = s; *p; p++)
		if (!ident_char((unsigned char)*p) && *p != '.')
			return false;
	return true;
}

static void rule_module_report(const struct fix_rule_input *in, struct fix_rule_outcome *out)
{
	char mod[RULE_NAME_MAX];
	if (!(is_ename(in->r, "ModuleNotFoundError") || is_ename(in->r, "ImportError")) ||
	    !quoted_after(in->r->evalue, "No module named ", mod, sizeof(mod)) ||
	    !module_name_ok(mod))
		return;
	char top[RULE_NAME_MAX];
	snprintf(top, sizeof(top), "%.*s", (int)strcspn(mod, "."), mod);
	const char *pkg = top;
	for (size_t i = 0; i < sizeof(packages) / sizeof(packages[0]); i++)
		if (strcmp(packages[i].module, top) == 0)
			pkg = packages[i].package;
	out->kind = FIX_RULE_REPORT;
	out->rule = "module_report";
	out->package = xstrdup(pkg);
	out->note = xasprintf("module '%s' is not in the image: it needs the package '%s' "
			      "(installing packages in a session comes with a later issue)",
			      mod, pkg);
}

/* ---- file_near_miss: a file name one typo away from one that exists ---- */

/* Levenshtein distance of a and b, bytes compared without case; more than
 * 2 is answered as 3 (all that matters here). Only the band of cells within
 * 2 of the diagonal is computed: a path outside it costs more than 2 edits.
 * So a name costs about 5 cells a byte, and a listing of 10,000 names of
 * 255 bytes stays a few million steps on the loop. Both at most
 * RULE_FILE_NAME_MAX. */
static int edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
	enum { FAR = 3, BAND = 2 };
	if ((la > lb ? la - lb : lb - la) > BAND)
		return FAR;
	int prev[RULE_FILE_NAME_MAX + 1], cur[RULE_FILE_NAME_MAX + 1];
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j <= BAND ? (int)j : FAR;
	for (size_t i = 1; i <= la; i++) {
		size_t lo = i > BAND ? i - BAND : 1, hi = i + BAND < lb ? i + BAND : lb;
		for (size_t j = 0; j <= lb; j++)
			cur[j] = FAR;
		if (i <= BAND)
			cur[0] = (int)i;
		int best = cur[0];
		for (size_t j = lo; j <= hi; j++) {
			int sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) !=
						 tolower((unsigned char)b[j - 1]));
			int del = prev[j] + 1, ins = cur[j - 1] + 1;
			int v = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
			cur[j] = v > FAR ? FAR : v;
			if (cur[j] < best)
				best = cur[j];
		}
		if (best > BAND)
			return FAR;
		memcpy(prev, cur, (lb + 1) * sizeof(int));
	}
	return prev[lb] > BAND ? FAR : prev[lb];
}

/* The extension of a base name ("" for none), for comparing. */
static const char *extension(const char *base, size_t n, size_t *len)
{
	const char *dot = NULL;
	for (size_t i = 1; i < n; i++)
		if (base[i] == '.')
			dot = base + i;
	*len = dot ? (size_t)(base + n - dot) : 0;
	return dot ? dot : base + n;
}

/* Whether two extensions are the same kind of file: equal up to case and
 * the order of their letters, so a typo like ".cvs" for ".csv" still
 * matches and ".tsv" for ".csv" (another format) does not. */
static bool same_extension(const char *a, size_t la, const char *b, size_t lb)
{
	if (la != lb)
		return false;
	size_t ca[256] = {0}, cb[256] = {0};
	for (size_t i = 0; i < la; i++) {
		ca[(unsigned char)tolower((unsigned char)a[i])]++;
		cb[(unsigned char)tolower((unsigned char)b[i])]++;
	}
	return memcmp(ca, cb, sizeof(ca)) == 0;
}

/* Whether the literal `q name q` occurs in code, for either quote. */
static bool literal_in(const char *code, size_t len, const char *name, size_t n, char *quote)
{
	for (size_t i = 0; i + n + 2 <= len; i++) {
		char q = code[i];
		if ((q == '\'' || q == '"') && code[i + n + 1] == q &&
		    memcmp(code + i + 1, name, n) == 0) {
			*quote = q;
			return true;
		}
	}
	return false;
}

/* code with every literal `q from q` (either quote) made `q to q`. */
static char *replace_literal(const char *code, size_t len, const char *from, const char *to,
			     size_t *out_len)
{
	size_t fl = strlen(from), tl = strlen(to), cap = len + 1;
	size_t count = 0;
	for (size_t i = 0; i + fl + 2 <= len; i++)
		if ((code[i] == '\'' || code[i] == '"') && code[i + fl + 1] == code[i] &&
		    memcmp(code + i + 1, from, fl) == 0)
			count++;
	if (tl > fl)
		cap += count * (tl - fl);
	char *out = xmalloc(cap);
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		if (i + fl + 2 <= len && (code[i] == '\'' || code[i] == '"') &&
		    code[i + fl + 1] == code[i] && memcmp(code + i + 1, from, fl) == 0) {
			out[o++] = code[i];
			memcpy(out + o, to, tl);
			o += tl;
			out[o++] = code[i];
			i += fl + 2;
		} else {
			out[o++] = code[i++];
		}
	}
	out[o] = '\0';
	*out_len = o;
	return out;
}

static void rule_file_near_miss(const struct fix_rule_input *in, struct fix_rule_outcome *out)
{
	/* "[Errno 2] No such file or directory: 'data/sales.csv'" */
	static const char prefix[] = "[Errno 2] No such file or directory: ";
	char lit[RULE_FILE_NAME_MAX * 2];
	if (!is_ename(in->r, "FileNotFoundError") ||
	    !quoted_after(in->r->evalue, prefix, lit, sizeof(lit)) || strpbrk(lit, "\\'\""))
		return; /* a name with quotes or escapes is not matched against literals */
	/* The name relative to /workspace, as the listing has it. */
	const char *rel = lit;
	if (strncmp(rel, "/workspace/", 11) == 0)
		rel += 11;
	else if (rel[0] == '/')
		return; /* outside the workspace: nothing of ours to look at */
	while (strncmp(rel, "./", 2) == 0)
		rel += 2;
	const char *slash = strrchr(rel, '/');
	size_t dlen = slash ? (size_t)(slash + 1 - rel) : 0;
	const char *base = rel + dlen;
	size_t blen = strlen(base), elen;
	if (blen == 0 || blen > RULE_FILE_NAME_MAX || strstr(rel, "../"))
		return;
	const char *ext = extension(base, blen, &elen);
	const char *found = NULL;
	for (size_t i = 0; i < in->n_files; i++) {
		const char *f = in->files[i];
		if (f == NULL)
			continue;
		if (strcmp(f, rel) == 0)
			return; /* it exists: not a name to correct (and not our output) */
		const char *fs = strrchr(f, '/');
		size_t fd = fs ? (size_t)(fs + 1 - f) : 0;
		const char *fb = f + fd;
		size_t fbl = strlen(fb), fel;
		if (fd != dlen || strncmp(f, rel, dlen) != 0 || fbl == 0 ||
		    fbl > RULE_FILE_NAME_MAX)
			continue;
		const char *fe = extension(fb, fbl, &fel);
		if (!same_extension(fe, fel, ext, elen))
			continue; /* data.tsv is no near miss of data.csv */
		if (strcasecmp(fb, base) == 0 || edit_distance(base, blen, fb, fbl) <= 2) {
			if (found)
				return; /* two of them: which one is a guess */
			found = f;
		}
	}
	char quote;
	if (found == NULL || !literal_in(in->code, in->code_len, lit, strlen(lit), &quote))
		return;
	/* The literal keeps its form (/workspace/..., ./...): only the base
	 * name changes. */
	size_t keep = strlen(lit) - blen;
	const char *fb = found + dlen;
	AUTOFREE char *to = xasprintf("%.*s%s", (int)keep, lit, fb);
	out->code = replace_literal(in->code, in->code_len, lit, to, &out->code_len);
	out->kind = FIX_RULE_REPAIR;
	out->rule = "file_near_miss";
	out->note =
	    xasprintf("'%s' does not exist; the workspace has '%s', used instead", rel, found);
}

/* ---- the table ---- */

static void (*const rules[])(const struct fix_rule_input *, struct fix_rule_outcome *) = {
    rule_import_alias,
    rule_module_report,
    rule_file_near_miss,
};

void fix_rules_apply(const struct fix_rule_input *in, struct fix_rule_outcome *out)
{
	memset(out, 0, sizeof(*out));
	if (in == NULL || in->r == NULL || in->code == NULL)
		return;
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		rules[i](in, out);
		if (out->kind != FIX_RULE_NONE)
			return;
	}
}

void fix_rule_outcome_clear(struct fix_rule_outcome *o)
{
	if (o == NULL)
		return;
	free(o->code);
	free(o->note);
	free(o->package);
	memset(o, 0, sizeof(*o));
}
