/* Failure signatures and classes (daemon/failure_sig.c). The results of
 * the classification cases are shaped exactly like the ones a real session
 * gave (ename, evalue, the traceback lines that matter), pasted from
 * `POST /v1/sessions/{id}/exec` against ci/python:latest with the daemon's
 * allowlist proxy; tests/integration/test_failures.py runs the same code in
 * a real session and checks that the answer still looks like this. */
#include <stdlib.h>
#include <string.h>

#include "failure_sig.h"
#include "unit.h"
#include "xalloc.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static struct exec_result error_result(const char *ename, const char *evalue, const char **tb,
				       size_t n_tb)
{
	struct exec_result r;
	memset(&r, 0, sizeof(r));
	r.status = EXEC_ERROR;
	r.has_error = true;
	r.ename = (char *)ename;
	r.evalue = (char *)evalue;
	r.traceback = (char **)tb;
	r.n_traceback = n_tb;
	return r;
}

static void sig_of(const struct exec_result *r, const char *code, char sig[FAILURE_SIG_HEX + 1],
		   struct failure_desc *d)
{
	struct failure_input in = {
	    .r = r, .code = code, .code_len = strlen(code), .image = "python"};
	failure_signature(&in, sig, d);
}

static enum failure_class class_of(const struct exec_result *r, bool t_max, bool m_max,
				   bool can_install)
{
	struct failure_input in = {.r = r,
				   .code = "x",
				   .code_len = 1,
				   .image = "python",
				   .timeout_at_max = t_max,
				   .memory_at_max = m_max,
				   .can_install = can_install};
	return failure_classify(&in);
}

/* ---- signatures ---- */

TEST(failure_sig_same_mistake_other_data_same_signature)
{
	const char *tb1[] = {"Traceback (most recent call last):",
			     "  File \"<cell-3>\", line 2, in <module>\n    v = rows[12]",
			     "IndexError: list index out of range"};
	const char *tb2[] = {"Traceback (most recent call last):",
			     "  File \"<cell-41>\", line 3, in <module>\n    v = rows[7]",
			     "IndexError: list index out of range"};
	struct exec_result a = error_result("IndexError", "list index out of range", tb1, 3);
	struct exec_result b = error_result("IndexError", "list index out of range", tb2, 3);
	char s1[FAILURE_SIG_HEX + 1], s2[FAILURE_SIG_HEX + 1];
	struct failure_desc d1, d2;
	sig_of(&a, "rows = [1, 2]\nv = rows[12]\n", s1, &d1);
	sig_of(&b, "rows = [3]\n\nv =   rows[7]", s2, &d2);
	CHECK_STR(s1, s2);
	CHECK(failure_sig_valid(s1));
	CHECK_STR(d1.line, "v = rows[<n>]");
	CHECK_STR(d2.line, "v = rows[<n>]");
	CHECK_STR(d1.ename, "IndexError");
	CHECK_STR(d1.image, "python");
	failure_desc_clear(&d1);
	failure_desc_clear(&d2);
}

TEST(failure_sig_masks_numbers_strings_paths_addresses)
{
	const char *tb1[] = {"  File \"<cell-1>\", line 1, in <module>\n    ..."};
	struct exec_result a =
	    error_result("FileNotFoundError",
			 "[Errno 2] No such file or directory: '/workspace/a/b.csv'", tb1, 1);
	struct exec_result b = error_result(
	    "FileNotFoundError", "[Errno 2] No such file or directory: 'other.txt'", tb1, 1);
	char s1[FAILURE_SIG_HEX + 1], s2[FAILURE_SIG_HEX + 1];
	struct failure_desc d1;
	sig_of(&a, "df = pd.read_csv('/workspace/a/b.csv')", s1, &d1);
	sig_of(&b, "df = pd.read_csv(\"other.txt\")", s2, NULL);
	CHECK_STR(s1, s2);
	CHECK_STR(d1.message, "[Errno <n>] No such file or directory: <str>");
	CHECK_STR(d1.line, "df = pd.read_csv(<str>)");
	failure_desc_clear(&d1);

	/* addresses, hex ids, unquoted paths, floats, the apostrophe of can't */
	struct exec_result c = error_result(
	    "TypeError",
	    "<Foo object at 0x7f43acf52710> in /usr/lib/python3/x.py: can't add 1.5e3 and 42, "
	    "id deadbeef12",
	    tb1, 1);
	struct failure_desc d3;
	sig_of(&c, "x", s1, &d3);
	CHECK_STR(d3.message, "<Foo object at <hex>> in <path>: can't add <n> and <n>, id <hex>");
	failure_desc_clear(&d3);

	/* a UUID whatever its digits */
	struct exec_result u1 = error_result(
	    "KeyError", "session 123e4567-e89b-12d3-a456-426614174000 is gone", tb1, 1);
	struct exec_result u2 = error_result(
	    "KeyError", "session fedcba98-0000-4000-8000-00000000dead is gone", tb1, 1);
	struct failure_desc d5;
	sig_of(&u1, "x", s1, &d5);
	sig_of(&u2, "x", s2, NULL);
	CHECK_STR(s1, s2);
	CHECK_STR(d5.message, "session <hex> is gone");
	failure_desc_clear(&d5);

	/* names with digits are names; a division is no path */
	const char *tb2[] = {"  File \"<cell-2>\", line 1, in <module>"};
	struct exec_result e = error_result("ZeroDivisionError", "division by zero", tb2, 1);
	struct failure_desc d4;
	sig_of(&e, "x2 = total / count  /  0", s1, &d4);
	CHECK_STR(d4.line, "x2 = total / count / <n>");
	failure_desc_clear(&d4);
}

TEST(failure_sig_other_exception_or_line_other_signature)
{
	const char *tb[] = {"  File \"<cell-1>\", line 1, in <module>"};
	struct exec_result a = error_result("KeyError", "'x'", tb, 1);
	struct exec_result b = error_result("IndexError", "'x'", tb, 1);
	char s1[FAILURE_SIG_HEX + 1], s2[FAILURE_SIG_HEX + 1], s3[FAILURE_SIG_HEX + 1],
	    s4[FAILURE_SIG_HEX + 1];
	sig_of(&a, "v = d['x']", s1, NULL);
	sig_of(&b, "v = d['x']", s2, NULL);
	sig_of(&a, "v = e['x']", s3, NULL);
	CHECK(strcmp(s1, s2) != 0);
	CHECK(strcmp(s1, s3) != 0);
	/* another image, another signature */
	struct failure_input in = {.r = &a, .code = "v = d['x']", .code_len = 10, .image = "gpu"};
	failure_signature(&in, s4, NULL);
	CHECK(strcmp(s1, s4) != 0);
}

TEST(failure_sig_line_is_the_last_frame_of_this_cell)
{
	/* A function of this cell raising: its line, not the call's. A frame of
	 * an older cell (a function defined earlier) is not this code's. */
	const char *tb[] = {"Traceback (most recent call last):",
			    "  File \"<cell-7>\", line 4, in <module>\n    f(3)",
			    "  File \"<cell-7>\", line 2, in f\n    return 1 / n",
			    "  File \"<cell-5>\", line 9, in g\n    ...",
			    "ZeroDivisionError: division by zero"};
	struct exec_result a = error_result("ZeroDivisionError", "division by zero", tb, 5);
	char s[FAILURE_SIG_HEX + 1];
	struct failure_desc d;
	sig_of(&a, "def f(n):\n    return 1 / n\n\nf(3)\n", s, &d);
	CHECK_STR(d.line, "return <n> / n");
	failure_desc_clear(&d);

	/* A SyntaxError's frame has no ", in"; a line past the code is none. */
	const char *tb2[] = {"  File \"<cell-2>\", line 1\n    x = (\n        ^",
			     "SyntaxError: '(' was never closed"};
	struct exec_result b =
	    error_result("SyntaxError", "'(' was never closed (<cell-2>, line 1)", tb2, 2);
	sig_of(&b, "x = (", s, &d);
	CHECK_STR(d.line, "x = (");
	CHECK_STR(d.message, "<str> was never closed (<cell-<n>>, line <n>)");
	failure_desc_clear(&d);
	const char *tb3[] = {"  File \"<cell-2>\", line 99, in <module>",
			     "  File \"<cell-99999999999999>\", line 1, in <module>"};
	struct exec_result c = error_result("E", "m", tb3, 2);
	sig_of(&c, "one line", s, &d);
	CHECK_STR(d.line, "");
	failure_desc_clear(&d);
}

/* error.cell_line: the same frame, with its text; nothing when the frame
 * is not this code's, a long line cut on a UTF-8 boundary. */
TEST(exec_result_cell_line_is_the_last_frame_of_this_cell)
{
	/* A KeyError raised inside pandas: the last frame is the library's. */
	char *tb[] = {xstrdup("Traceback (most recent call last):"),
		      xstrdup("  File \"<cell-3>\", line 3, in <module>"),
		      xstrdup("    print(totals['Revenue'])"),
		      xstrdup("  File \"/usr/lib/python3/site-packages/pandas/core/series.py\", "
			      "line 1121, in __getitem__"),
		      xstrdup("KeyError: 'Revenue'")};
	struct exec_result *r = exec_result_new(64);
	r->status = EXEC_ERROR;
	r->has_error = true;
	r->ename = xstrdup("KeyError");
	r->evalue = xstrdup("'Revenue'");
	r->traceback = xcalloc(5, sizeof(char *));
	memcpy(r->traceback, tb, sizeof(tb));
	r->n_traceback = 5;
	const char code[] = "import pandas as pd\ntotals = pd.Series({'revenue': 1})\r\n"
			    "print(totals['Revenue'])\r\nprint('after')";
	exec_result_set_cell_line(r, code, sizeof(code) - 1);
	CHECK(r->cell_line == 3);
	CHECK_STR(r->cell_text, "print(totals['Revenue'])");
	/* a line past the code: none */
	exec_result_set_cell_line(r, "one line", 8);
	CHECK(r->cell_line == 3); /* unchanged */
	struct exec_result *fresh = exec_result_new(64);
	fresh->has_error = true;
	fresh->traceback = r->traceback;
	fresh->n_traceback = r->n_traceback;
	exec_result_set_cell_line(fresh, "one line", 8);
	CHECK(fresh->cell_line == 0 && fresh->cell_text == NULL);
	fresh->traceback = NULL;
	fresh->n_traceback = 0;
	exec_result_free(fresh);
	/* a long line of multi-byte characters: cut at a character's start */
	char *big = xmalloc(3 * 1000 + 40);
	strcpy(big, "a\nb\n");
	for (int i = 0; i < 1000; i++)
		strcat(big, "\xc3\xa9");
	exec_result_set_cell_line(r, big, strlen(big));
	CHECK(r->cell_line == 3 && strlen(r->cell_text) == EXEC_CELL_TEXT_MAX);
	free(big);
	/* no error: nothing */
	struct exec_result *ok = exec_result_new(64);
	exec_result_set_cell_line(ok, code, sizeof(code) - 1);
	CHECK(ok->cell_line == 0);
	exec_result_free(ok);
	exec_result_free(r);
}

TEST(failure_sig_without_error_uses_status_and_reason)
{
	struct exec_result r;
	memset(&r, 0, sizeof(r));
	r.status = EXEC_KILLED;
	r.reason = (char *)"out of memory: the kernel exceeded memory_mb=128 and was killed";
	char s1[FAILURE_SIG_HEX + 1], s2[FAILURE_SIG_HEX + 1];
	struct failure_desc d;
	sig_of(&r, "x = bytearray(512*1024*1024)", s1, &d);
	CHECK_STR(d.ename, "killed");
	CHECK_STR(d.message, "out of memory: the kernel exceeded memory_mb=<n> and was killed");
	CHECK_STR(d.line, "");
	failure_desc_clear(&d);
	r.reason = (char *)"out of memory: the kernel exceeded memory_mb=512 and was killed";
	sig_of(&r, "y = 2", s2, NULL);
	CHECK_STR(s1, s2);
}

TEST(failure_sig_bounded_on_hostile_input)
{
	size_t n = 1 << 20;
	char *big = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		big[i] = "a 1'\"/\xc3\xa9"[i % 8];
	big[n] = '\0';
	const char *tb[] = {big};
	struct exec_result a = error_result(big, big, tb, 1);
	char s[FAILURE_SIG_HEX + 1];
	struct failure_desc d;
	sig_of(&a, big, s, &d);
	CHECK(failure_sig_valid(s));
	CHECK(strlen(d.message) <= 1024);
	CHECK(strlen(d.ename) <= 128);
	failure_desc_clear(&d);
	free(big);
}

TEST(failure_sig_valid_shape)
{
	CHECK(failure_sig_valid("0123456789abcdef"));
	CHECK(!failure_sig_valid("0123456789ABCDEF"));
	CHECK(!failure_sig_valid("0123456789abcde"));
	CHECK(!failure_sig_valid("0123456789abcdef0"));
	CHECK(!failure_sig_valid("0123456789abcdeg"));
	CHECK(!failure_sig_valid("../../../etc/pas"));
	CHECK(!failure_sig_valid(""));
	CHECK(!failure_sig_valid(NULL));
}

/* ---- classes, with results as a real session gave them ---- */

TEST(failure_class_egress_denied_as_observed)
{
	/* urllib, https to a host not on the allowlist (the proxy's 403 to
	 * the CONNECT). */
	const char *tb_urllib[] = {
	    "Traceback (most recent call last):",
	    "  File \"/usr/lib/python3.11/http/client.py\", line 944, in _tunnel\n    raise "
	    "OSError(f\"Tunnel connection failed: {code} {message.strip()}\")",
	    "OSError: Tunnel connection failed: 403 Forbidden",
	    "\nDuring handling of the above exception, another exception occurred:\n",
	    "Traceback (most recent call last):",
	    "  File \"<cell-4>\", line 2, in <module>\n    "
	    "urllib.request.urlopen('https://denied.test:44775/', timeout=10).read()",
	    "urllib.error.URLError: <urlopen error Tunnel connection failed: 403 Forbidden>"};
	struct exec_result a =
	    error_result("URLError", "<urlopen error Tunnel connection failed: 403 Forbidden>",
			 tb_urllib, N_ELEMS(tb_urllib));
	CHECK(class_of(&a, false, false, false) == FAILURE_CLASS_EGRESS_DENIED);
	CHECK_STR(failure_class_name(FAILURE_CLASS_EGRESS_DENIED), "egress_denied");

	/* requests, the same */
	struct exec_result b = error_result(
	    "ProxyError",
	    "HTTPSConnectionPool(host='denied.test', port=44775): Max retries exceeded with url: / "
	    "(Caused by ProxyError('Cannot connect to proxy.', OSError('Tunnel connection failed: "
	    "403 Forbidden')))",
	    NULL, 0);
	CHECK(class_of(&b, false, false, false) == FAILURE_CLASS_EGRESS_DENIED);

	/* a session without network: no resolver in the sandbox */
	struct exec_result c =
	    error_result("gaierror", "[Errno -3] Temporary failure in name resolution", NULL, 0);
	CHECK(class_of(&c, false, false, false) == FAILURE_CLASS_EGRESS_DENIED);
	struct exec_result d = error_result(
	    "URLError", "<urlopen error [Errno -3] Temporary failure in name resolution>", NULL, 0);
	CHECK(class_of(&d, false, false, false) == FAILURE_CLASS_EGRESS_DENIED);
	const char *tb_req[] = {
	    "socket.gaierror: [Errno -3] Temporary failure in name resolution",
	    "requests.exceptions.ConnectionError: HTTPConnectionPool(host='allowed.test', "
	    "port=44775): Max retries exceeded with url: / (Caused by NewConnectionError(...))"};
	struct exec_result e = error_result(
	    "ConnectionError",
	    "HTTPConnectionPool(host='allowed.test', port=44775): Max retries exceeded with url: / "
	    "(Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at "
	    "0x7f43acf52710>: Failed to establish a new connection: [Errno -3] Temporary failure "
	    "in name resolution'))",
	    tb_req, 2);
	CHECK(class_of(&e, false, false, false) == FAILURE_CLASS_EGRESS_DENIED);
}

TEST(failure_class_not_egress_when_not_clearly_the_policy)
{
	/* http:// through the proxy: an HTTPError 403 like any server's */
	struct exec_result a = error_result("HTTPError", "HTTP Error 403: Forbidden", NULL, 0);
	CHECK(class_of(&a, false, false, false) == FAILURE_CLASS_NONE);
	/* a tunnel the upstream refused (502 from the proxy: cannot connect) */
	struct exec_result b = error_result(
	    "URLError", "<urlopen error Tunnel connection failed: 502 Bad Gateway>", NULL, 0);
	CHECK(class_of(&b, false, false, false) == FAILURE_CLASS_NONE);
	struct exec_result c =
	    error_result("ConnectionRefusedError", "[Errno 111] Connection refused", NULL, 0);
	CHECK(class_of(&c, false, false, false) == FAILURE_CLASS_NONE);
	/* the text in a frame's source line is not the exception */
	const char *tb[] = {"  File \"<cell-1>\", line 1, in <module>\n    "
			    "print('Tunnel connection failed: 403')",
			    "ValueError: x"};
	struct exec_result d = error_result("ValueError", "x", tb, 2);
	CHECK(class_of(&d, false, false, false) == FAILURE_CLASS_NONE);
}

TEST(failure_class_timeout_at_max)
{
	/* as observed: interrupted at the deadline, with the KeyboardInterrupt */
	const char *tb[] = {"Traceback (most recent call last):",
			    "  File \"<cell-3>\", line 1, in <module>\n    while True: pass",
			    "KeyboardInterrupt"};
	struct exec_result a = error_result("KeyboardInterrupt", "", tb, 3);
	a.status = EXEC_TIMEOUT;
	a.reason = (char *)"interrupted at the 3s deadline; the kernel and its variables are kept";
	CHECK(class_of(&a, true, false, false) == FAILURE_CLASS_TIMEOUT_AT_MAX);
	CHECK(class_of(&a, false, true, false) == FAILURE_CLASS_NONE);
	/* and killed after ignoring it */
	struct exec_result b;
	memset(&b, 0, sizeof(b));
	b.status = EXEC_TIMEOUT;
	b.reason = (char *)"the code ignored the interrupt at the 3s deadline; the kernel was "
			   "killed and restarted (variables lost, files kept)";
	CHECK(class_of(&b, true, false, false) == FAILURE_CLASS_TIMEOUT_AT_MAX);
	CHECK_STR(failure_class_name(FAILURE_CLASS_TIMEOUT_AT_MAX), "timeout_at_max");
	/* the code never ran: not the code's timeout */
	b.reason = (char *)"the kernel was restarting and did not come back before the deadline";
	CHECK(class_of(&b, true, false, false) == FAILURE_CLASS_NONE);
}

TEST(failure_class_memory_at_max)
{
	struct exec_result a;
	memset(&a, 0, sizeof(a));
	a.status = EXEC_KILLED;
	a.kernel_restarted = true;
	a.reason = (char *)"out of memory: the kernel exceeded memory_mb=128 and was killed";
	CHECK(class_of(&a, false, true, false) == FAILURE_CLASS_MEMORY_AT_MAX);
	CHECK(class_of(&a, true, false, false) == FAILURE_CLASS_NONE);
	struct exec_result b = error_result("MemoryError", "", NULL, 0);
	CHECK(class_of(&b, false, true, false) == FAILURE_CLASS_MEMORY_AT_MAX);
	/* killed for another reason */
	a.reason = (char *)"the kernel was killed by signal 9 (Killed)";
	CHECK(class_of(&a, false, true, false) == FAILURE_CLASS_NONE);
	CHECK_STR(failure_class_name(FAILURE_CLASS_MEMORY_AT_MAX), "memory_at_max");
}

TEST(failure_class_module_unavailable)
{
	const char *tb[] = {"Traceback (most recent call last):",
			    "  File \"<cell-2>\", line 2, in <module>\n    import sklearn",
			    "ModuleNotFoundError: No module named 'sklearn'"};
	struct exec_result a =
	    error_result("ModuleNotFoundError", "No module named 'sklearn'", tb, 3);
	CHECK(class_of(&a, false, false, false) == FAILURE_CLASS_MODULE_UNAVAILABLE);
	CHECK(class_of(&a, false, false, true) == FAILURE_CLASS_NONE);
	struct exec_result b = error_result("ImportError", "No module named 'foo.bar'", NULL, 0);
	CHECK(class_of(&b, false, false, false) == FAILURE_CLASS_MODULE_UNAVAILABLE);
	struct exec_result c = error_result(
	    "ImportError", "cannot import name 'x' from 'os' (/usr/lib/x.py)", NULL, 0);
	CHECK(class_of(&c, false, false, false) == FAILURE_CLASS_NONE);
	CHECK_STR(failure_class_name(FAILURE_CLASS_MODULE_UNAVAILABLE), "module_unavailable");
	CHECK(failure_class_name(FAILURE_CLASS_NONE) == NULL);
}
