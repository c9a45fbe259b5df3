/* test_runs.c: the pure parts of runs: the request body (defaults, every
 * field's checks, the message naming the field) and the manual handoff's
 * guess at the packages code imports. */
#include <stdlib.h>

#include "api_requests.h"
#include "runs.h"
#include "runs_internal.h"
#include "unit.h"

static int parse(const char *body, bool oneshot, struct run_request *r, char *msg, size_t n)
{
	struct err *e = NULL;
	int rc = api_parse_run_request(body, strlen(body), oneshot, r, &e);
	snprintf(msg, n, "%s", e ? e->message : "");
	if (e)
		CHECK(e->code == ERR_BAD_REQUEST);
	err_free(e);
	return rc;
}

TEST(run_request_defaults)
{
	struct run_request r;
	char msg[256];
	CHECK(parse("{\"code\": \"1 + 1\"}", false, &r, msg, sizeof(msg)) == 0);
	CHECK_STR(r.code, "1 + 1");
	CHECK(r.len == 5 && r.goal == NULL && r.max_attempts == RUN_DEFAULT_ATTEMPTS);
	CHECK(r.n_on_failure == 1 && r.on_failure[0] == RUN_MODE_MANUAL);
	CHECK(!r.fixer_set && !r.stream && r.timeout_s == 0 && r.image == NULL);
	run_request_release(&r);
}

TEST(run_request_every_field)
{
	struct run_request r;
	char msg[256];
	const char *body =
	    "{\"code\": \"x\", \"goal\": \"g\", \"max_attempts\": 5, \"timeout_s\": 9,"
	    " \"fixer\": {\"url\": \"http://f.test/v1\", \"model\": \"m\","
	    " \"api_key_file\": \"k\"}, \"on_failure\": [\"review\", \"stateless\"],"
	    " \"stream\": true, \"image\": \"python\"}";
	CHECK(parse(body, true, &r, msg, sizeof(msg)) == 0);
	CHECK_STR(r.goal, "g");
	CHECK(r.max_attempts == 5 && r.timeout_s == 9 && r.stream);
	CHECK(r.fixer_set && !r.fixer_null);
	CHECK_STR(r.fixer_url, "http://f.test/v1");
	CHECK_STR(r.fixer_model, "m");
	CHECK_STR(r.fixer_key_file, "k");
	CHECK(r.n_on_failure == 2 && r.on_failure[0] == RUN_MODE_REVIEW &&
	      r.on_failure[1] == RUN_MODE_STATELESS);
	CHECK_STR(r.image, "python");
	run_request_release(&r);
	CHECK(parse("{\"code\": \"x\", \"fixer\": null, \"on_failure\": []}", false, &r, msg,
		    sizeof(msg)) == 0);
	CHECK(r.fixer_set && r.fixer_null && r.n_on_failure == 0);
	run_request_release(&r);
}

TEST(run_request_refusals_name_the_field)
{
	static const char *const bad[][2] = {
	    {"[]", "body"},
	    {"{}", "code"},
	    {"{\"code\": 3}", "code"},
	    {"{\"code\": \"x\", \"max_attempts\": 0}", "max_attempts"},
	    {"{\"code\": \"x\", \"max_attempts\": 11}", "max_attempts"},
	    {"{\"code\": \"x\", \"max_attempts\": 2.5}", "max_attempts"},
	    {"{\"code\": \"x\", \"timeout_s\": 0}", "timeout_s"},
	    {"{\"code\": \"x\", \"goal\": 1}", "goal"},
	    {"{\"code\": \"x\", \"fixer\": []}", "fixer"},
	    {"{\"code\": \"x\", \"fixer\": {\"url\": \"\"}}", "fixer.url"},
	    {"{\"code\": \"x\", \"fixer\": {\"key\": \"k\"}}", "fixer"},
	    {"{\"code\": \"x\", \"on_failure\": [\"manual\", \"manual\"]}", "twice"},
	    {"{\"code\": \"x\", \"on_failure\": [\"a\"]}", "on_failure[0]"},
	    {"{\"code\": \"x\", \"on_failure\": [\"manual\", \"stateless\", \"review\", "
	     "\"manual\"]}",
	     "at most"},
	    {"{\"code\": \"x\", \"stream\": 1}", "stream"},
	    {"{\"code\": \"x\", \"image\": \"python\"}", "image"}, /* not on a session's run */
	    {"{\"code\": \"a\\u0000b\"}", "NUL"},
	    {"{\"code\": \"x\", \"extra\": 1}", "extra"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct run_request r;
		char msg[256];
		CHECK(parse(bad[i][0], false, &r, msg, sizeof(msg)) < 0);
		if (strstr(msg, bad[i][1]) == NULL)
			fprintf(stderr, "  %s: \"%s\" lacks \"%s\"\n", bad[i][0], msg, bad[i][1]);
		CHECK(strstr(msg, bad[i][1]) != NULL);
		CHECK(r.code == NULL && r.goal == NULL);
	}
	char big[RUN_GOAL_MAX + 64];
	snprintf(big, sizeof(big), "{\"code\": \"x\", \"goal\": \"%0*d\"}", RUN_GOAL_MAX + 1, 0);
	struct run_request r;
	char msg[256];
	CHECK(parse(big, false, &r, msg, sizeof(msg)) < 0 && strstr(msg, "goal"));
}

static void check_imports(const char *code, const char *want)
{
	char *got = run_code_imports(code, strlen(code));
	if (strcmp(got, want) != 0)
		fprintf(stderr, "  imports of %s: \"%s\", expected \"%s\"\n", code, got, want);
	CHECK(strcmp(got, want) == 0);
	free(got);
}

TEST(run_code_imports_guesses_the_packages)
{
	check_imports("", "");
	check_imports("import os, sys\nimport json as j\nfrom collections import Counter\n", "");
	check_imports("import numpy as np\nimport pandas\n", "numpy,pandas");
	check_imports("  import numpy.linalg\nfrom numpy import zeros\n", "numpy");
	check_imports("from sklearn.tree import X\nimport cv2, yaml\nfrom PIL import Image",
		      "scikit-learn,opencv-python,pyyaml,pillow");
	check_imports("from . import sibling\nfrom .pkg import x\n", "");
	check_imports("x = 'import fake'\nimportant = 1\n", "");
	check_imports("import requests,bs4", "requests,beautifulsoup4");
}
