/* test_fixer_target.c: which fixer a request may use (fixer_target.c):
 * the default and its key, request URLs against the allowed prefixes (on a
 * boundary, in one spelling), key files by plain name from the key
 * directory read at load time, and "no fixer" as its own outcome. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fixer_target.h"
#include "unit.h"
#include "xalloc.h"

struct kdir {
	char path[64];
	char files[8][128];
	int n;
	char dirs[4][128];
	int n_dirs;
};

/* name may be "SUBDIR/NAME" (a tenant's key): the subdirectory is made. */
static void kdir_add(struct kdir *k, const char *name, const char *text)
{
	char dir[sizeof(k->path)];
	memcpy(dir, k->path, sizeof(dir));
	for (const char *slash = strchr(name, '/'); slash && k->n_dirs < 4;
	     slash = strchr(slash + 1, '/')) {
		snprintf(k->dirs[k->n_dirs], sizeof(k->dirs[0]), "%s/%.*s", dir,
			 (int)(slash - name), name);
		if (mkdir(k->dirs[k->n_dirs], 0700) == 0)
			k->n_dirs++;
	}
	snprintf(k->files[k->n], sizeof(k->files[0]), "%s/%s", dir, name);
	FILE *f = fopen(k->files[k->n++], "w");
	fputs(text, f);
	fclose(f);
}

/* A fresh directory with the files of files[] (name, text, ..., NULL). */
static void kdir_make(struct kdir *k, const char *const *files)
{
	memset(k, 0, sizeof(*k));
	snprintf(k->path, sizeof(k->path), "/tmp/ci-fixer-keys-XXXXXX");
	CHECK(mkdtemp(k->path) != NULL);
	for (; files && files[0]; files += 2)
		kdir_add(k, files[0], files[1]);
}

static void kdir_remove(struct kdir *k)
{
	for (int i = 0; i < k->n; i++)
		unlink(k->files[i]);
	for (int i = k->n_dirs - 1; i >= 0; i--)
		rmdir(k->dirs[i]);
	rmdir(k->path);
}

static struct fixer_targets *targets(const char *url, const char *model, const char *key_file,
				     const char *allowed, const char *key_dir, struct err **e)
{
	struct config cfg;
	config_defaults(&cfg);
	free(cfg.fixer_url);
	free(cfg.fixer_model);
	free(cfg.fixer_key_file);
	free(cfg.fixer_allowed_urls);
	free(cfg.fixer_key_dir);
	cfg.fixer_url = xstrdup(url);
	cfg.fixer_model = xstrdup(model);
	cfg.fixer_key_file = xstrdup(key_file);
	cfg.fixer_allowed_urls = xstrdup(allowed);
	cfg.fixer_key_dir = xstrdup(key_dir);
	struct fixer_targets *ft = fixer_targets_new(&cfg, e);
	config_free(&cfg);
	return ft;
}

/* resolve's outcome for tenant's request: 1 (and *t), 0, or -1 with the
 * message in why. */
static int resolve_as(const struct fixer_targets *ft, const char *tenant, const char *url,
		      const char *model, const char *key_file, struct fixer_target *t, char *why,
		      size_t why_size)
{
	struct err *e = NULL;
	int rc = fixer_targets_resolve(ft, tenant, url, model, key_file, t, &e);
	why[0] = '\0';
	if (rc < 0) {
		CHECK(e != NULL && e->code == ERR_BAD_REQUEST);
		snprintf(why, why_size, "%s", e ? e->message : "");
		CHECK(t->url == NULL);
	}
	err_free(e);
	return rc;
}

/* ... for tenant "a". */
static int resolve(const struct fixer_targets *ft, const char *url, const char *model,
		   const char *key_file, struct fixer_target *t, char *why, size_t why_size)
{
	return resolve_as(ft, "a", url, model, key_file, t, why, why_size);
}

TEST(fixer_target_defaults_and_no_fixer)
{
	struct kdir k;
	kdir_make(&k, (const char *[]){"default.key", "  sk-default\n", NULL});
	struct err *e = NULL;
	struct fixer_targets *ft = targets("http://127.0.0.1:9/v1", "m", k.files[0], "", "", &e);
	CHECK(ft != NULL && e == NULL);
	struct fixer_target t;
	char why[256];
	CHECK(resolve(ft, NULL, NULL, NULL, &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.url, "http://127.0.0.1:9/v1");
	CHECK_STR(t.model, "m");
	CHECK_STR(t.key, "sk-default");
	fixer_target_clear(&t);
	CHECK(resolve(ft, "", "other", "", &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.model, "other");
	fixer_target_clear(&t);
	fixer_targets_free(ft);

	ft = targets("", "", "", "", "", &e);
	CHECK(ft != NULL);
	CHECK(resolve(ft, NULL, "m", NULL, &t, why, sizeof(why)) == FIXER_NONE);
	CHECK(t.url == NULL);
	fixer_targets_free(ft);
	fixer_targets_free(NULL);
	fixer_target_clear(NULL);
	kdir_remove(&k);
}

TEST(fixer_target_request_urls_need_an_allowed_prefix_on_a_boundary)
{
	struct err *e = NULL;
	struct fixer_targets *ft =
	    targets("http://127.0.0.1:9/v1", "m", "", "", "", &e); /* no allowed URLs */
	struct fixer_target t;
	char why[256];
	CHECK(resolve(ft, "http://127.0.0.1:9/v1", NULL, NULL, &t, why, sizeof(why)) == -1);
	CHECK(strstr(why, "fixer.url") && strstr(why, "--fixer-allowed-urls"));
	fixer_targets_free(ft);

	ft = targets("", "m", "", "http://a.test:80, https://b.test/v1/", "", &e);
	CHECK(ft != NULL);
	static const struct {
		const char *url;
		int rc;
	} cases[] = {
	    {"http://a.test:80", FIXER_OK},
	    {"http://a.test:80/v1", FIXER_OK},
	    {"https://b.test/v1/", FIXER_OK},
	    {"https://b.test/v1", FIXER_OK},
	    {"https://b.test/v1/x", FIXER_OK},
	    {"http://a.test:8080", -1},
	    {"http://a.test:80.evil.test", -1},
	    {"http://a.test:80@evil.test/", -1},
	    {"http://user:pw@a.test:80/", -1},
	    {"https://b.test/v10", -1},
	    {"https://b.test/v2", -1},
	    {"http://b.test/v1/", -1}, /* the scheme is part of the prefix */
	    {"HTTP://a.test:80", -1},
	    {"http://a.test:80/v1/../../admin", -1},
	    {"http://a.test:80/./x", -1},
	    {"http://a.test:80/%2e%2e/x", -1},
	    {"http://a.test:80/v1?x=1", -1},
	    {"http://a.test:80/v1#f", -1},
	    {"http://a.test:80/v 1", -1},
	    {"http://a.test:80/\r\nX: y", -1},
	    {"http://a.test:80\\@evil.test", -1},
	    {"file:///etc/passwd", -1},
	    {"gopher://a.test:80/", -1},
	    {"http://", -1},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = resolve(ft, cases[i].url, NULL, NULL, &t, why, sizeof(why));
		CHECK(rc == cases[i].rc);
		if (rc != cases[i].rc)
			fprintf(stderr, "  case %s: %d (%s)\n", cases[i].url, rc, why);
		if (rc == FIXER_OK) {
			CHECK_STR(t.url, cases[i].url);
			CHECK(t.key == NULL);
		} else {
			CHECK(strncmp(why, "fixer.url", 9) == 0);
		}
		fixer_target_clear(&t);
	}
	fixer_targets_free(ft);
}

TEST(fixer_target_default_key_never_goes_to_a_request_url)
{
	struct kdir k;
	kdir_make(&k, (const char *[]){"default.key", "sk-default", NULL});
	struct err *e = NULL;
	struct fixer_targets *ft =
	    targets("http://a.test/v1", "m", k.files[0], "http://b.test", "", &e);
	struct fixer_target t;
	char why[256];
	CHECK(resolve(ft, "http://b.test/v1", NULL, NULL, &t, why, sizeof(why)) == FIXER_OK);
	CHECK(t.key == NULL);
	fixer_target_clear(&t);
	fixer_targets_free(ft);
	kdir_remove(&k);
}

TEST(fixer_target_key_files_by_plain_name_from_memory)
{
	struct kdir k;
	kdir_make(&k, (const char *[]){"a/tenant-a", "sk-a\n", "a/.hidden", "sk-hidden\n",
				       "b/tenant-b", "sk-b\n", NULL});
	struct err *e = NULL;
	struct fixer_target t = {0};
	char why[256] = "";
	/* No key directory: a request may not name key files. */
	struct fixer_targets *ft = targets("http://a.test/v1", "m", "", "", "", &e);
	CHECK(resolve(ft, NULL, NULL, "tenant-a", &t, why, sizeof(why)) == -1);
	CHECK(strstr(why, "fixer.api_key_file") && strstr(why, "--fixer-key-dir"));
	fixer_targets_free(ft);

	ft = targets("http://a.test/v1", "m", "", "", k.path, &e);
	CHECK(ft != NULL && e == NULL);
	CHECK(resolve(ft, NULL, NULL, "tenant-a", &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.key, "sk-a");
	fixer_target_clear(&t);
	/* Read at load time: a file removed or added later changes nothing. */
	unlink(k.files[0]);
	CHECK(resolve(ft, NULL, NULL, "tenant-a", &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.key, "sk-a");
	fixer_target_clear(&t);
	kdir_add(&k, "a/later", "sk-later");
	static const char *refused[] = {
	    "later", "../tenant-a", "/etc/passwd", "a/b",           ".hidden",   "..",
	    ".",     "nope",        "tenant-b",    "../b/tenant-b", "b/tenant-b"};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		CHECK(resolve(ft, NULL, NULL, refused[i], &t, why, sizeof(why)) == -1);
		CHECK(strncmp(why, "fixer.api_key_file", 18) == 0);
	}
	/* Each tenant names its own keys only (issue 28 item 7). */
	CHECK(resolve_as(ft, "b", NULL, NULL, "tenant-b", &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.key, "sk-b");
	fixer_target_clear(&t);
	CHECK(resolve_as(ft, "b", NULL, NULL, "tenant-a", &t, why, sizeof(why)) == -1);
	CHECK(resolve_as(ft, "c", NULL, NULL, "tenant-a", &t, why, sizeof(why)) == -1);
	CHECK(resolve_as(ft, NULL, NULL, NULL, "tenant-a", &t, why, sizeof(why)) == -1);
	fixer_targets_free(ft);
	kdir_remove(&k);
}

/* A key file at the top of the directory, or under a name that is no
 * tenant's, would be nobody's or anybody's: the load stops, naming it. */
TEST(fixer_target_key_dir_holds_a_directory_per_tenant)
{
	static const char *const layouts[][3] = {
	    {"shared-key", "", "is a file at the top"},
	    {"Not_A_Tenant/k", "", "is not a tenant name"},
	    {"a/k", "-bad/k", "is not a tenant name"},
	};
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		struct kdir k;
		kdir_make(&k, NULL);
		kdir_add(&k, layouts[i][0], "sk\n");
		if (layouts[i][1][0])
			kdir_add(&k, layouts[i][1], "sk\n");
		struct err *e = NULL;
		CHECK(targets("", "m", "", "", k.path, &e) == NULL);
		CHECK(e && strstr(e->message, layouts[i][2]) &&
		      strstr(e->message, "fixer-key-dir"));
		err_free(e);
		kdir_remove(&k);
	}
	/* An empty tenant directory, and links (a Kubernetes secret volume's
	 * ..data and its per-tenant links) are fine. */
	struct kdir k;
	kdir_make(&k, (const char *[]){".data/a/openai", "sk-linked\n", NULL});
	char link_path[192], target[192];
	snprintf(link_path, sizeof(link_path), "%s/a", k.path);
	snprintf(target, sizeof(target), "%s/.data/a", k.path);
	CHECK(symlink(target, link_path) == 0);
	char empty[192];
	snprintf(empty, sizeof(empty), "%s/empty", k.path);
	CHECK(mkdir(empty, 0700) == 0);
	struct err *e = NULL;
	struct fixer_targets *ft = targets("http://a.test/v1", "m", "", "", k.path, &e);
	CHECK(ft != NULL && e == NULL);
	struct fixer_target t = {0};
	char why[256];
	CHECK(resolve_as(ft, "a", NULL, NULL, "openai", &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.key, "sk-linked");
	fixer_target_clear(&t);
	CHECK(resolve_as(ft, "empty", NULL, NULL, "openai", &t, why, sizeof(why)) == -1);
	fixer_targets_free(ft);
	err_free(e);
	unlink(link_path);
	rmdir(empty);
	kdir_remove(&k);
}

TEST(fixer_target_refuses_bad_options_at_load)
{
	struct kdir k;
	kdir_make(&k, (const char *[]){"a/two-lines", "sk-1\nsk-2\n", "a/empty", "\n", NULL});
	static const struct {
		const char *url, *key_file, *allowed, *key_dir, *error;
	} cases[] = {
	    {"ftp://a.test/", "", "", "", "fixer-url"},
	    {"http://u@a.test/", "", "", "", "fixer-url"},
	    {"", "/nonexistent/key", "", "", "fixer-key-file"},
	    {"", "/tmp", "", "", "not a regular file"},
	    {"", "", "http://a.test,gopher://b.test", "", "fixer-allowed-urls"},
	    {"", "", "", "/nonexistent/dir", "fixer-key-dir"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err *e = NULL;
		struct fixer_targets *ft = targets(cases[i].url, "m", cases[i].key_file,
						   cases[i].allowed, cases[i].key_dir, &e);
		CHECK(ft == NULL && e != NULL && strstr(e->message, cases[i].error) != NULL);
		err_free(e);
	}
	struct err *e = NULL;
	CHECK(targets("", "m", k.files[0], "", "", &e) == NULL);
	CHECK(e && strstr(e->message, "line break"));
	err_free(e);
	e = NULL;
	CHECK(targets("", "m", k.files[1], "", "", &e) == NULL);
	CHECK(e && strstr(e->message, "empty"));
	err_free(e);
	e = NULL;
	CHECK(targets("", "m", "", "", k.path, &e) == NULL); /* a bad file in the directory */
	err_free(e);
	kdir_remove(&k);
}

TEST(fixer_target_urls_are_checked_by_config_validate)
{
	struct config cfg;
	config_defaults(&cfg);
	struct err *e = NULL;
	CHECK(config_validate(&cfg, &e) == 0);
	free(cfg.fixer_url);
	cfg.fixer_url = xstrdup("http://u:p@a.test/v1");
	CHECK(config_validate(&cfg, &e) == -1 && e && strstr(e->message, "fixer-url"));
	err_free(e);
	e = NULL;
	free(cfg.fixer_url);
	cfg.fixer_url = xstrdup("http://a.test/v1");
	free(cfg.fixer_allowed_urls);
	cfg.fixer_allowed_urls = xstrdup("http://b.test,file:///etc");
	CHECK(config_validate(&cfg, &e) == -1 && e && strstr(e->message, "fixer-allowed-urls"));
	err_free(e);
	config_free(&cfg);
}

/* SIGHUP reads the key files again; a reload that cannot keeps the old. */
TEST(fixer_target_reload_reads_keys_again_or_keeps_the_old)
{
	struct kdir k;
	kdir_make(&k, (const char *[]){"default.key", "sk-1", NULL});
	struct config cfg;
	config_defaults(&cfg);
	free(cfg.fixer_url);
	free(cfg.fixer_key_file);
	cfg.fixer_url = xstrdup("http://a.test/v1");
	cfg.fixer_key_file = xstrdup(k.files[0]);
	struct err *e = NULL;
	struct fixer_targets *ft = fixer_targets_new(&cfg, &e);
	struct fixer_target t;
	char why[256];
	CHECK(resolve(ft, NULL, NULL, NULL, &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.key, "sk-1");
	fixer_target_clear(&t);
	FILE *f = fopen(k.files[0], "w");
	fputs("sk-2\n", f);
	fclose(f);
	CHECK(fixer_targets_reload(&ft, &cfg, &e) == 0);
	CHECK(resolve(ft, NULL, NULL, NULL, &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.key, "sk-2");
	fixer_target_clear(&t);
	unlink(k.files[0]);
	CHECK(fixer_targets_reload(&ft, &cfg, &e) == -1 && e &&
	      strstr(e->message, "fixer-key-file"));
	err_free(e);
	CHECK(resolve(ft, NULL, NULL, NULL, &t, why, sizeof(why)) == FIXER_OK);
	CHECK_STR(t.key, "sk-2");
	fixer_target_clear(&t);
	fixer_targets_free(ft);
	config_free(&cfg);
	k.n = 0;
	kdir_remove(&k);
}
