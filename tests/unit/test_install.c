/* test_install.c: which specs pip may be given, the index's allowlist
 * entry, and reading the sandbox's install report (hostile input). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "install.h"
#include "unit.h"

static bool spec_ok(const char *s)
{
	struct err *e = NULL;
	int rc = install_check_spec(s, &e);
	err_free(e);
	return rc == 0;
}

TEST(install_specs_accepted_and_refused)
{
	CHECK(spec_ok("tinypkg"));
	CHECK(spec_ok("tinypkg==1.2"));
	CHECK(spec_ok("Tiny_Pkg.x-y==1.2.post1"));
	CHECK(spec_ok("a>=1,<2"));
	CHECK(spec_ok("a~=1.4"));
	CHECK(spec_ok("a===1.0+local"));
	CHECK(!spec_ok(""));
	CHECK(!spec_ok("-r"));
	CHECK(!spec_ok("--index-url=http://evil.test/"));
	CHECK(!spec_ok("a==1 ; python_version>'3'"));
	CHECK(!spec_ok("a[extra]==1"));
	CHECK(!spec_ok("a @ http://x.test/a.whl"));
	CHECK(!spec_ok("./local/path"));
	CHECK(!spec_ok("a=='1'"));
	CHECK(!spec_ok("a==1\\"));
	CHECK(!spec_ok("a==1\nb"));
	CHECK(!spec_ok("a=="));
	CHECK(!spec_ok("_a"));
	CHECK(!spec_ok("a-"));
	CHECK(!spec_ok("a==1,"));
	CHECK(!spec_ok("a==1!\x01"));
	char big[INSTALL_SPEC_MAX + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(!spec_ok(big));
}

TEST(install_index_authority_from_the_url)
{
	char out[300];
	struct err *e = NULL;
	CHECK(install_index_authority("http://pypi.test:8123/simple/", out, sizeof(out), &e) == 0);
	CHECK_STR(out, "pypi.test:8123");
	CHECK(install_index_authority("https://pypi.test/simple", out, sizeof(out), &e) == 0);
	CHECK_STR(out, "pypi.test:443");
	CHECK(install_index_authority("http://PyPI.test", out, sizeof(out), &e) == 0);
	CHECK_STR(out, "pypi.test:80");
	CHECK(e == NULL);
	const char *bad[] = {"ftp://x.test/",      "pypi.test/simple",       "http:///simple",
			     "http://u:p@x.test/", "http://x.test/'+evil+'", "http://x.test/a b",
			     "http://x.test/\\"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(install_index_authority(bad[i], out, sizeof(out), &e) < 0);
		err_free(e);
		e = NULL;
	}
}

TEST(install_script_carries_the_specs_and_the_window)
{
	char *specs[] = {"a==1", "b"};
	char *s = install_script("http://pypi.test:1/simple/", specs, 2, 7);
	CHECK(strstr(s, "'http://pypi.test:1/simple/', ['a==1', 'b'], 7\n") != NULL);
	CHECK(strstr(s, "'--only-binary=:all:'") != NULL);
	CHECK(strstr(s, INSTALL_SITE) != NULL);
	free(s);
}

TEST(install_pip_args_are_the_scripts_command)
{
	char *specs[] = {"a==1", "b"};
	size_t n = 0;
	char **a = install_pip_args("http://pypi.test:1/simple/", specs, 2, &n);
	char *s = install_script("http://pypi.test:1/simple/", specs, 2, 7);
	CHECK(n == 16 && a[n] == NULL);
	CHECK_STR(a[0], "install");
	CHECK_STR(a[9], "http://pypi.test:1/simple/");
	CHECK_STR(a[11], "--trusted-host");
	CHECK_STR(a[12], "pypi.test:1");
	CHECK_STR(a[13], "--");
	CHECK_STR(a[14], "a==1");
	CHECK_STR(a[15], "b");
	/* Every option of the list is one the API's script gives pip too. */
	for (size_t i = 0; i < 9; i++) {
		char quoted[128];
		snprintf(quoted, sizeof(quoted), "'%s'", a[i]);
		if (strcmp(a[i], INSTALL_SITE) != 0)
			CHECK(strstr(s, quoted) != NULL);
	}
	CHECK(strstr(s, "'--only-binary=:all:'") != NULL && strstr(s, "'--trusted-host'") != NULL);
	install_args_free(a);
	free(s);
	a = install_pip_args("https://pypi.test/simple/", specs, 1, &n);
	CHECK(n == 13);
	CHECK_STR(a[11], "--");
	CHECK_STR(a[12], "a==1");
	install_args_free(a);
}

TEST(install_report_parsed_and_hostile_lines_skipped)
{
	const char out[] = "noise\n"
			   "\x1e"
			   "ci-pkg\ttinypkg\t1.2\n"
			   "\x1e"
			   "ci-pkg\tbad name\t1\n"
			   "\x1e"
			   "ci-pkg\tx\t1\"}\n"
			   "\x1e"
			   "ci-pkg\tonly-two\n"
			   "\x1e"
			   "ci-install\tpwned\t0\t1\n"
			   "\x1e"
			   "ci-install\tok\t0\t345\n";
	struct install_result r = {0};
	char status[16];
	int rc = 9;
	install_parse_report(out, sizeof(out) - 1, &r, status, sizeof(status), &rc);
	CHECK_STR(status, "ok");
	CHECK(rc == 0);
	CHECK(r.pip_ms == 345);
	CHECK(r.n_pkgs == 1);
	CHECK_STR(r.pkgs[0].name, "tinypkg");
	CHECK_STR(r.pkgs[0].version, "1.2");
	install_result_release(&r);

	const char none[] = "\x1e"
			    "ci-install\tok\t0\t-5\n\x1e"
			    "ci-install\tok\tx\t5";
	memset(&r, 0, sizeof(r));
	install_parse_report(none, sizeof(none) - 1, &r, status, sizeof(status), &rc);
	CHECK_STR(status, "");
	install_result_release(&r);
}

TEST(install_report_caps_the_package_list)
{
	size_t n = INSTALL_MAX_PKGS + 10;
	char *out = malloc(n * 40);
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(out + len,
				       "\x1e"
				       "ci-pkg\tp%zu\t1.0\n",
				       i);
	struct install_result r = {0};
	char status[16];
	int rc;
	install_parse_report(out, len, &r, status, sizeof(status), &rc);
	CHECK(r.n_pkgs == INSTALL_MAX_PKGS);
	CHECK(r.pkgs_truncated);
	install_result_release(&r);
	free(out);
}
