/* fixer_target.c: the rules of fixer_target.h, and the key files read
 * into memory when they are made.
 *
 * A request URL is checked by its text, strictly, before any prefix
 * comparison: one spelling per place (lower-case scheme, no userinfo, no
 * percent-escapes, no dot segments, no query or fragment, no blanks or
 * control bytes), so that "starts with an allowed prefix" cannot be
 * fooled by a URL that curl would read as somewhere else. */
#include "fixer_target.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apikey.h"
#include "config.h"
#include "xalloc.h"

#define FIXER_URL_MAX 2048
#define FIXER_MODEL_MAX 256
#define FIXER_PREFIXES_MAX 64
#define FIXER_KEY_NAME_MAX 255

struct fixer_key {
	char *tenant; /* the subdirectory it was read from */
	char *name;
	char *key;
};

struct fixer_targets {
	struct fixer_target def; /* owned; def.url NULL when there is no default */
	char **prefixes;
	size_t n_prefixes;
	bool key_dir; /* requests may name key files */
	struct fixer_key *keys;
	size_t n_keys;
};

/* A secret's bytes are wiped before its memory goes back. */
static void free_secret(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

void fixer_targets_free(struct fixer_targets *ft)
{
	if (ft == NULL)
		return;
	fixer_target_clear(&ft->def);
	for (size_t i = 0; i < ft->n_prefixes; i++)
		free(ft->prefixes[i]);
	free(ft->prefixes);
	for (struct fixer_key *k = ft->keys; k < ft->keys + ft->n_keys; k++) {
		free(k->tenant);
		free(k->name);
		free_secret(k->key);
	}
	free(ft->keys);
	free(ft);
}

/* Whether url is one the daemon may POST to, as text; -1 with why. */
static int url_check(const char *url, const char *what, struct err **errp)
{
	size_t len = strlen(url);
	if (len > FIXER_URL_MAX)
		return err_set(errp, ERR_BAD_REQUEST, "%s: longer than %d bytes", what,
			       FIXER_URL_MAX);
	const char *rest;
	if (strncmp(url, "http://", 7) == 0)
		rest = url + 7;
	else if (strncmp(url, "https://", 8) == 0)
		rest = url + 8;
	else
		return err_set(errp, ERR_BAD_REQUEST, "%s: not an http:// or https:// URL", what);
	for (const char *p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f || strchr("\\%?#", *p))
			return err_set(errp, ERR_BAD_REQUEST,
				       "%s: holds a character a fixer URL may not have (blank, "
				       "control, non-ASCII, \\, %%, ? or #)",
				       what);
	size_t host_len = strcspn(rest, "/");
	if (host_len == 0)
		return err_set(errp, ERR_BAD_REQUEST, "%s: no host", what);
	if (memchr(rest, '@', host_len))
		return err_set(errp, ERR_BAD_REQUEST, "%s: a user name or password in a URL", what);
	for (const char *p = rest + host_len; *p; p++) {
		if (*p != '/')
			continue;
		size_t seg = strcspn(p + 1, "/");
		if ((seg == 1 && p[1] == '.') || (seg == 2 && p[1] == '.' && p[2] == '.'))
			return err_set(errp, ERR_BAD_REQUEST, "%s: a . or .. path segment", what);
	}
	return 0;
}

/* url starts with prefix and the match ends on a boundary: the prefix's
 * end is the URL's, a '/' follows, or the prefix ends with '/'. So
 * http://a.test:80 admits http://a.test:80/v1 but not http://a.test:8080
 * nor http://a.test:80.evil.test. */
static bool prefix_match(const char *prefix, const char *url)
{
	size_t n = strlen(prefix);
	if (strncmp(url, prefix, n) != 0)
		return n > 1 && prefix[n - 1] == '/' && strlen(url) == n - 1 &&
		       strncmp(url, prefix, n - 1) == 0;
	return url[n] == '\0' || url[n] == '/' || prefix[n - 1] == '/';
}

/* Read a key file (at start or on SIGHUP): a regular file of at most
 * FIXER_KEY_MAX_BYTES, blanks around it trimmed, one line. */
static int read_key(int dirfd, const char *path, const char *what, char **out, struct err **errp)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return err_set(errp, ERR_BAD_REQUEST, "%s %s: %s", what, path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(errp, ERR_BAD_REQUEST, "%s %s: not a regular file", what, path);
	}
	char buf[FIXER_KEY_MAX_BYTES + 1];
	ssize_t n = st.st_size <= FIXER_KEY_MAX_BYTES ? read(fd, buf, sizeof(buf)) : -2;
	int saved = errno;
	close(fd);
	if (n == -1)
		return err_set(errp, ERR_BAD_REQUEST, "%s %s: %s", what, path, strerror(saved));
	if (n < 0 || n > FIXER_KEY_MAX_BYTES)
		return err_set(errp, ERR_BAD_REQUEST, "%s %s: larger than %d bytes", what, path,
			       FIXER_KEY_MAX_BYTES);
	size_t b = 0, e = (size_t)n;
	while (b < e && strchr(" \t\r\n", buf[b]))
		b++;
	while (e > b && strchr(" \t\r\n", buf[e - 1]))
		e--;
	if (b == e)
		return err_set(errp, ERR_BAD_REQUEST, "%s %s: empty", what, path);
	for (size_t i = b; i < e; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			return err_set(errp, ERR_BAD_REQUEST,
				       "%s %s: holds a line break or a control byte", what, path);
	*out = xstrndup(buf + b, e - b);
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

static int load_prefixes(struct fixer_targets *ft, const char *csv, struct err **errp)
{
	const char *p = csv;
	while (*p) {
		size_t n = strcspn(p, ",");
		size_t b = 0, e = n;
		while (b < e && p[b] == ' ')
			b++;
		while (e > b && p[e - 1] == ' ')
			e--;
		if (e > b) {
			AUTOFREE char *prefix = xstrndup(p + b, e - b);
			if (url_check(prefix, "fixer-allowed-urls", errp) < 0)
				return -1;
			if (ft->n_prefixes == FIXER_PREFIXES_MAX)
				return err_set(errp, ERR_BAD_REQUEST,
					       "fixer-allowed-urls: more than %d prefixes",
					       FIXER_PREFIXES_MAX);
			ft->prefixes =
			    xrealloc(ft->prefixes, (ft->n_prefixes + 1) * sizeof(char *));
			ft->prefixes[ft->n_prefixes++] = steal_pointer(&prefix);
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* One tenant's subdirectory: its regular files, not hidden ones. */
static int load_tenant_keys(struct fixer_targets *ft, int parent, const char *dir,
			    const char *tenant, struct err **errp)
{
	int fd = openat(parent, tenant, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		int saved = errno;
		if (fd >= 0)
			close(fd);
		return err_set(errp, ERR_BAD_REQUEST, "fixer-key-dir %s/%s: %s", dir, tenant,
			       strerror(saved));
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (ft->n_keys == FIXER_KEY_DIR_MAX_FILES) {
			rc = err_set(errp, ERR_BAD_REQUEST, "fixer-key-dir %s: more than %d files",
				     dir, FIXER_KEY_DIR_MAX_FILES);
			break;
		}
		char *key = NULL;
		rc = read_key(dirfd(d), de->d_name, "fixer-key-dir: key file", &key, errp);
		if (rc == 0) {
			ft->keys = xrealloc(ft->keys, (ft->n_keys + 1) * sizeof(*ft->keys));
			ft->keys[ft->n_keys++] =
			    (struct fixer_key){xstrdup(tenant), xstrdup(de->d_name), key};
		}
	}
	closedir(d);
	return rc;
}

/* DIR/TENANT/NAME: a key belongs to the tenant whose subdirectory holds it,
 * and only that tenant's requests may name it. A file at the top level
 * would be anyone's: it stops the load, like a subdirectory whose name is
 * no tenant's. Hidden names are left out (".", "..", and the ..data links
 * a Kubernetes secret volume keeps); links are followed (the directory is
 * the operator's). */
static int load_key_dir(struct fixer_targets *ft, const char *dir, struct err **errp)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return err_set(errp, ERR_BAD_REQUEST, "fixer-key-dir %s: %s", dir, strerror(errno));
	ft->key_dir = true;
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, 0) != 0)
			continue;
		if (S_ISREG(st.st_mode))
			rc = err_set(errp, ERR_BAD_REQUEST,
				     "fixer-key-dir %s: %s is a file at the top; key files go in a "
				     "directory per tenant (%s/TENANT/NAME), so that a tenant can "
				     "name only its own",
				     dir, de->d_name, dir);
		else if (S_ISDIR(st.st_mode) && !apikey_tenant_valid(de->d_name))
			rc = err_set(errp, ERR_BAD_REQUEST,
				     "fixer-key-dir %s: %s is not a tenant name ([a-z0-9][a-z0-9_-]"
				     "{0,62}); key files go in a directory per tenant",
				     dir, de->d_name);
		else if (S_ISDIR(st.st_mode))
			rc = load_tenant_keys(ft, dirfd(d), dir, de->d_name, errp);
	}
	closedir(d);
	return rc;
}

int fixer_target_check_config(const struct config *cfg, struct err **errp)
{
	if (cfg->fixer_url && cfg->fixer_url[0] && url_check(cfg->fixer_url, "fixer-url", errp) < 0)
		return -1;
	struct fixer_targets tmp = {0};
	int rc = cfg->fixer_allowed_urls ? load_prefixes(&tmp, cfg->fixer_allowed_urls, errp) : 0;
	for (size_t i = 0; i < tmp.n_prefixes; i++)
		free(tmp.prefixes[i]);
	free(tmp.prefixes);
	return rc;
}

struct fixer_targets *fixer_targets_new(const struct config *cfg, struct err **errp)
{
	struct fixer_targets *ft = xcalloc(1, sizeof(*ft));
	const char *url = cfg->fixer_url ? cfg->fixer_url : "";
	int rc = 0;
	if (url[0]) {
		rc = url_check(url, "fixer-url", errp);
		ft->def.url = xstrdup(url);
	}
	ft->def.model = xstrdup(cfg->fixer_model ? cfg->fixer_model : "");
	char *key = NULL;
	if (rc == 0 && cfg->fixer_key_file && cfg->fixer_key_file[0])
		rc = read_key(AT_FDCWD, cfg->fixer_key_file, "fixer-key-file", &key, errp);
	ft->def.key = key;
	if (rc == 0 && cfg->fixer_allowed_urls)
		rc = load_prefixes(ft, cfg->fixer_allowed_urls, errp);
	if (rc == 0 && cfg->fixer_key_dir && cfg->fixer_key_dir[0])
		rc = load_key_dir(ft, cfg->fixer_key_dir, errp);
	if (rc < 0) {
		fixer_targets_free(ft);
		return NULL;
	}
	return ft;
}

int fixer_targets_reload(struct fixer_targets **ft, const struct config *cfg, struct err **errp)
{
	struct fixer_targets *fresh = fixer_targets_new(cfg, errp);
	if (fresh == NULL)
		return -1;
	fixer_targets_free(*ft);
	*ft = fresh;
	return 0;
}

static bool given(const char *s)
{
	return s && s[0];
}

static int key_by_name(const struct fixer_targets *ft, const char *tenant, const char *name,
		       const char **key, struct err **errp)
{
	if (!ft->key_dir)
		return err_set(errp, ERR_BAD_REQUEST,
			       "fixer.api_key_file: this daemon does not let a request name a key "
			       "file (no --fixer-key-dir)");
	if (strlen(name) > FIXER_KEY_NAME_MAX || strchr(name, '/') || name[0] == '.')
		return err_set(errp, ERR_BAD_REQUEST,
			       "fixer.api_key_file: must be the plain name of a file in the key "
			       "directory (no /, no leading dot)");
	for (size_t i = 0; tenant && i < ft->n_keys; i++)
		if (strcmp(ft->keys[i].tenant, tenant) == 0 &&
		    strcmp(ft->keys[i].name, name) == 0) {
			*key = ft->keys[i].key;
			return 0;
		}
	return err_set(errp, ERR_BAD_REQUEST,
		       "fixer.api_key_file: no key file of that name among this tenant's (the key "
		       "directory's subdirectory named after the tenant)");
}

int fixer_targets_resolve(const struct fixer_targets *ft, const char *tenant, const char *url,
			  const char *model, const char *api_key_file, struct fixer_target *out,
			  struct err **errp)
{
	*out = (struct fixer_target){0};
	const char *key = NULL;
	if (given(url)) {
		if (ft->n_prefixes == 0)
			return err_set(errp, ERR_BAD_REQUEST,
				       "fixer.url: this daemon does not let a request name a fixer "
				       "URL (no --fixer-allowed-urls)");
		if (url_check(url, "fixer.url", errp) < 0)
			return -1;
		bool ok = false;
		for (size_t i = 0; i < ft->n_prefixes && !ok; i++)
			ok = prefix_match(ft->prefixes[i], url);
		if (!ok)
			return err_set(
			    errp, ERR_BAD_REQUEST,
			    "fixer.url: not under any of the daemon's allowed fixer URLs");
	} else {
		url = ft->def.url;
		key = ft->def.key; /* the default key goes to the default URL only */
	}
	if (given(model)) {
		if (strlen(model) > FIXER_MODEL_MAX)
			return err_set(errp, ERR_BAD_REQUEST, "fixer.model: longer than %d bytes",
				       FIXER_MODEL_MAX);
		for (const char *p = model; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return err_set(errp, ERR_BAD_REQUEST,
					       "fixer.model: holds a control byte");
	} else {
		model = ft->def.model;
	}
	if (given(api_key_file) && key_by_name(ft, tenant, api_key_file, &key, errp) < 0)
		return -1;
	if (!given(url))
		return FIXER_NONE;
	out->url = xstrdup(url);
	out->model = xstrdup(model);
	out->key = key ? xstrdup(key) : NULL;
	return FIXER_OK;
}

void fixer_target_clear(struct fixer_target *t)
{
	if (t == NULL)
		return;
	free((char *)t->url);
	free((char *)t->model);
	free_secret((char *)t->key);
	*t = (struct fixer_target){0};
}
