/* test_workspace_disk.c: the parts of workspace_disk.c that need no mount:
 * the tmpfs backend, paths, and which leftovers a sweep names. */
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "workspace_disk.h"

static bool keep_live(const char *id, void *arg)
{
	return strcmp(id, arg) == 0;
}

static void count_named(const char *id, void *arg)
{
	(void)id;
	(*(int *)arg)++;
}

static void touch(const char *dir, const char *name)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/w/%s", dir, name);
	close(open(p, O_CREAT | O_WRONLY, 0600));
}

TEST(workspace_disk_tmpfs_backend_and_sweep_names)
{
	struct event_base *base = event_base_new();
	char dir[] = "/tmp/ci-unit-ws-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct err *e = NULL;
	struct workspace_disk *wd = workspace_disk_new(base, dir, "tmpfs", "/nonexistent", &e);
	CHECK(wd != NULL && e == NULL);
	CHECK(!workspace_disk_is_loop(wd));
	CHECK_STR(workspace_disk_backend(wd), "tmpfs");
	char path[256];
	CHECK(workspace_disk_path(wd, "x", path, sizeof(path)) < 0); /* no host path */
	char w[512];
	snprintf(w, sizeof(w), "%s/w", dir);
	struct stat st;
	CHECK(stat(w, &st) == 0 && (st.st_mode & 0777) == 0700);
	const char *live = "11111111-1111-4111-8111-111111111111";
	const char *dead = "22222222-2222-4222-8222-222222222222";
	const char *img_only = "33333333-3333-4333-8333-333333333333";
	char p[600];
	snprintf(p, sizeof(p), "%s/%s", w, live);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/%s", w, dead);
	mkdir(p, 0700);
	char name[64];
	snprintf(name, sizeof(name), "%s.img", dead); /* counted once, with its directory */
	touch(dir, name);
	snprintf(name, sizeof(name), "%s.img", img_only);
	touch(dir, name);
	touch(dir, "not-a-session.img"); /* never touched */
	touch(dir, "probe-1");
	int named = 0;
	CHECK(workspace_disk_sweep(wd, keep_live, (void *)live, false, count_named, &named, NULL,
				   NULL) == 2);
	CHECK(named == 2);
	/* Listing removes nothing. */
	snprintf(p, sizeof(p), "%s/%s.img", w, dead);
	CHECK(access(p, F_OK) == 0);
	workspace_disk_free(wd);
	workspace_disk_free(NULL);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	event_base_free(base);
}
