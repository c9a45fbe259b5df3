/* test_config.c: the option table, precedence and validation. */
#include <stdlib.h>

#include "config.h"
#include "unit.h"

TEST(config_defaults_are_valid)
{
	struct config c;
	config_defaults(&c);
	free(c.node);
	c.node = strdup("n1");
	struct err *e = NULL;
	CHECK(config_validate(&c, &e) == 0);
	CHECK_STR(c.listen, "127.0.0.1:8080");
	CHECK_STR(c.key_prefix, "ci:");
	CHECK(c.idle_timeout_s == 600 && c.exec_timeout_s == 60);
	err_free(e);
	config_free(&c);
}

TEST(config_file_env_flags_precedence)
{
	struct config c;
	struct err *e = NULL;
	char *argv[] = {"ci-daemon", "--key-prefix", "flag:", "--memory-mb=256", NULL};
	char *envp[] = {"CID_KEY_PREFIX=env:", "CID_NODE=envnode", "CI_LISTEN=0.0.0.0:1", NULL};
	CHECK(config_load(&c, 4, argv, envp, &e) == 0);
	CHECK_STR(c.key_prefix, "flag:");
	CHECK_STR(c.node, "envnode");
	CHECK(c.memory_mb == 256);
	CHECK_STR(c.listen, "127.0.0.1:8080"); /* a bare CI_ variable is ignored */
	err_free(e);
	config_free(&c);
}

TEST(config_text_parses_and_reports_lines)
{
	struct config c;
	config_defaults(&c);
	struct err *e = NULL;
	CHECK(config_apply_text(&c, "# comment\n listen = unix:/tmp/x.sock \nmax_pids=99\n", "f",
				&e) == 0);
	CHECK_STR(c.listen, "unix:/tmp/x.sock");
	CHECK(c.max_pids == 99);
	CHECK(config_apply_text(&c, "listen\n", "f", &e) < 0);
	CHECK(e && strstr(e->message, "f:1"));
	err_free(e);
	e = NULL;
	CHECK(config_apply_text(&c, "nosuch = 1\n", "f", &e) < 0);
	CHECK(e && strstr(e->message, "unknown option"));
	err_free(e);
	e = NULL;
	CHECK(config_set(&c, "memory-mb", "12abc", "t", &e) < 0);
	err_free(e);
	e = NULL;
	CHECK(config_set(&c, "memory-mb", "1", "t", &e) < 0 && strstr(e->message, "outside"));
	err_free(e);
	config_free(&c);
}

TEST(config_refuses_public_listen_without_keys)
{
	struct config c;
	struct err *e = NULL;
	char *argv[] = {"ci-daemon", "--listen", "0.0.0.0:8080", NULL};
	char *envp[] = {NULL};
	CHECK(config_load(&c, 3, argv, envp, &e) < 0);
	CHECK(e && strstr(e->message, "non-loopback"));
	err_free(e);
	config_free(&c);
}

TEST(config_image_profiles)
{
	struct config c;
	config_defaults(&c);
	char *t = config_image_tag(&c, "python");
	CHECK_STR(t, "ci/python:latest");
	free(t);
	CHECK(config_image_tag(&c, "py") == NULL);
	CHECK(config_image_tag(&c, "nope") == NULL);
	config_free(&c);
}
