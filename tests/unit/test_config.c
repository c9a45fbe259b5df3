/* test_config.c: the option table, precedence and validation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Load argv (NULL-terminated) with an empty environment; the error's
 * message, if any, goes to msg. */
static int load_args(struct config *c, char **argv, char *msg, size_t size)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	char *envp[] = {NULL};
	struct err *e = NULL;
	int rc = config_load(c, argc, argv, envp, &e);
	snprintf(msg, size, "%s", e ? e->message : "");
	err_free(e);
	return rc;
}

TEST(config_listener_rule_names_what_is_missing)
{
	struct config c;
	char msg[512];
	char *bare[] = {"ci-daemon", "--listen", "0.0.0.0:8080", NULL};
	CHECK(load_args(&c, bare, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "not loopback") && strstr(msg, "--admin-key-file") &&
	      strstr(msg, "--plain-http-behind-proxy") && strstr(msg, "--tls-cert"));
	config_free(&c);
	char *keys[] = {"ci-daemon", "--listen", "0.0.0.0:8080", "--admin-key-file", "/k", NULL};
	CHECK(load_args(&c, keys, msg, sizeof(msg)) < 0);
	CHECK(!strstr(msg, "--admin-key-file") && strstr(msg, "--plain-http-behind-proxy"));
	config_free(&c);
	char *proxy[] = {"ci-daemon", "--listen", "[::]:8080", "--plain-http-behind-proxy", NULL};
	CHECK(load_args(&c, proxy, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "--admin-key-file") && !strstr(msg, "--plain-http-behind-proxy"));
	config_free(&c);
	char *ok_proxy[] = {"ci-daemon",
			    "--listen",
			    "0.0.0.0:8080",
			    "--admin-key-file",
			    "/k",
			    "--plain-http-behind-proxy",
			    NULL};
	CHECK(load_args(&c, ok_proxy, msg, sizeof(msg)) == 0);
	CHECK(c.plain_http_behind_proxy);
	config_free(&c);
	char *ok_tls[] = {"ci-daemon",  "--listen", "0.0.0.0:8080", "--admin-key-file", "/k",
			  "--tls-cert", "/c.pem",   "--tls-key",    "/k.pem",           NULL};
	CHECK(load_args(&c, ok_tls, msg, sizeof(msg)) == 0);
	config_free(&c);
	char *half[] = {"ci-daemon", "--tls-key", "/k.pem", NULL};
	CHECK(load_args(&c, half, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "tls-key is set but tls-cert is not"));
	config_free(&c);
}

TEST(config_listen_local_forms)
{
	CHECK(config_listen_is_local("127.0.0.1:1"));
	CHECK(config_listen_is_local("127.9.8.7:1"));
	CHECK(config_listen_is_local("[::1]:1"));
	CHECK(config_listen_is_local("[::ffff:127.0.0.1]:1"));
	CHECK(config_listen_is_local("unix:/run/ci.sock"));
	CHECK(config_listen_is_local("localhost:8080"));
	CHECK(!config_listen_is_local("0.0.0.0:1"));
	CHECK(!config_listen_is_local("[::]:1"));
	CHECK(!config_listen_is_local("128.0.0.1:1"));
	CHECK(!config_listen_is_local("127.0.0.1.example:1"));
	CHECK(!config_listen_is_local("[::ffff:10.0.0.1]:1"));
	CHECK(!config_listen_is_local("nonsense"));
}

TEST(config_argv_unknown_missing_and_flags)
{
	struct config c;
	char msg[512];
	/* argv after the program name, and the error (or "" with rc). */
	static const struct {
		const char *args[5];
		int rc;
		const char *message;
	} cases[] = {
	    {{"--foo", "1"}, -1, "unknown option --foo (see --help)"},
	    /* Unknown wins over a missing value. */
	    {{"--bar=2"}, -1, "unknown option --bar (see --help)"},
	    {{"--listen"}, -1, "option --listen needs a value"},
	    /* The next option is not a value. */
	    {{"--listen", "--node", "n"}, -1, "option --listen needs a value"},
	    {{"--node", "n", "--version"}, CONFIG_LOAD_VERSION, ""},
	    {{"--version=1"}, -1, "option --version takes no value"},
	    {{"--help=x"}, -1, "option --help takes no value"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[7] = {"ci-daemon"};
		for (int j = 0; j < 5 && cases[i].args[j]; j++)
			argv[j + 1] = (char *)cases[i].args[j];
		CHECK(load_args(&c, argv, msg, sizeof(msg)) == cases[i].rc);
		CHECK_STR(msg, cases[i].message);
		config_free(&c);
	}
	char *stray[] = {"ci-daemon", "listen", NULL};
	CHECK(load_args(&c, stray, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "unexpected argument 'listen'"));
	config_free(&c);
	/* A bool alone is true; followed by a bool word it takes it. */
	char *bools[] = {"ci-daemon", "--remove-on-exit", "--node", "n", "--ipc-tmpfs", "false",
			 NULL};
	CHECK(load_args(&c, bools, msg, sizeof(msg)) == 0);
	CHECK(c.remove_on_exit && !c.ipc_tmpfs);
	CHECK_STR(c.node, "n");
	config_free(&c);
	char *bad_bool[] = {"ci-daemon", "--remove-on-exit=maybe", NULL};
	CHECK(load_args(&c, bad_bool, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "expected true or false"));
	config_free(&c);
}

struct seen {
	char lines[8][160];
	int n;
};

static void seen_change(const char *key, const char *before, const char *after, bool applied,
			void *arg)
{
	struct seen *s = arg;
	if (s->n < 8)
		snprintf(s->lines[s->n++], sizeof(s->lines[0]), "%s %s>%s %s", key, before, after,
			 applied ? "live" : "restart");
}

TEST(config_reload_live_column)
{
	struct config run, file;
	config_defaults(&run);
	config_defaults(&file);
	struct err *e = NULL;
	CHECK(
	    config_apply_text(&file,
			      "pool-size = 5\nlisten = 127.0.0.1:9\negress-trusted = 127.0.0.1:80\n"
			      "log-level = debug\nkey-prefix = other:\n",
			      "f", &e) == 0);
	struct seen s = {0};
	CHECK(config_reload_into(&run, &file, seen_change, &s) == 5);
	CHECK(s.n == 5);
	/* Table order: listen, log-level, key-prefix... */
	CHECK_STR(s.lines[0], "listen 127.0.0.1:8080>127.0.0.1:9 restart");
	CHECK(run.pool_size == 5);
	CHECK_STR(run.listen, "127.0.0.1:8080");
	CHECK_STR(run.key_prefix, "ci:");
	CHECK_STR(run.log_level, "debug");
	CHECK_STR(run.egress_trusted, "127.0.0.1:80");
	bool pool_seen = false, prefix_seen = false, trusted_seen = false;
	for (int i = 0; i < s.n; i++) {
		pool_seen |= strcmp(s.lines[i], "pool-size 2>5 live") == 0;
		prefix_seen |= strcmp(s.lines[i], "key-prefix ci:>other: restart") == 0;
		trusted_seen |= strcmp(s.lines[i], "egress-trusted \"\">127.0.0.1:80 live") == 0;
	}
	CHECK(pool_seen && prefix_seen && trusted_seen);
	/* Again: the restart ones still differ, nothing else does. */
	struct seen again = {0};
	CHECK(config_reload_into(&run, &file, seen_change, &again) == 2);
	/* A copy is deep and equal. */
	struct config copy;
	config_copy(&copy, &run);
	CHECK(config_reload_into(&copy, &run, NULL, NULL) == 0);
	CHECK(copy.listen != run.listen);
	config_free(&copy);
	CHECK(config_option_is_live("pool-size") && config_option_is_live("pool_network_size"));
	CHECK(config_option_is_live("egress-trusted") && config_option_is_live("log-level"));
	CHECK(config_option_is_live("max-connections") && config_option_is_live("tls-cert"));
	CHECK(!config_option_is_live("listen") && !config_option_is_live("admin-key-file"));
	CHECK(!config_option_is_live("no-such-option"));
	config_free(&run);
	config_free(&file);
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

TEST(config_workspace_backend_is_loop_or_tmpfs)
{
	struct config c;
	config_defaults(&c);
	free(c.node);
	c.node = strdup("n1");
	struct err *e = NULL;
	CHECK_STR(c.workspace_backend, "loop");
	free(c.workspace_backend);
	c.workspace_backend = strdup("tmpfs");
	CHECK(config_validate(&c, &e) == 0);
	free(c.workspace_backend);
	c.workspace_backend = strdup("xfs-quota");
	CHECK(config_validate(&c, &e) < 0);
	CHECK(e && strstr(e->message, "workspace-backend: expected loop or tmpfs"));
	err_free(e);
	config_free(&c);
}

TEST(config_node_lost_after_two_heartbeats_and_advertise_url_scheme)
{
	struct config c;
	char msg[512];
	char *tight[] = {"ci-daemon", "--heartbeat-ms", "1000", "--node-lost-ms", "2000", NULL};
	CHECK(load_args(&c, tight, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "node-lost-ms 2000 must be more than twice heartbeat-ms 1000") != NULL);
	config_free(&c);
	char *ok[] = {"ci-daemon", "--heartbeat-ms", "500", "--node-lost-ms", "1001", NULL};
	CHECK(load_args(&c, ok, msg, sizeof(msg)) == 0);
	CHECK(c.heartbeat_ms == 500 && c.node_lost_ms == 1001);
	config_free(&c);
	char *url[] = {"ci-daemon", "--advertise-url", "ftp://a.test:1", NULL};
	CHECK(load_args(&c, url, msg, sizeof(msg)) < 0);
	CHECK(strstr(msg, "advertise-url") != NULL);
	config_free(&c);
	char *defaults[] = {"ci-daemon", NULL};
	CHECK(load_args(&c, defaults, msg, sizeof(msg)) == 0);
	CHECK(c.heartbeat_ms == 1000 && c.node_lost_ms == 4000 && c.advertise_url[0] == '\0');
	config_free(&c);
}
