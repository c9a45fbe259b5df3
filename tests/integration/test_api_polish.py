"""API polish over real HTTP against the real daemon and real sandboxes:

  405 method_not_allowed with Allow on every route family (walking the
  daemon's own route table in daemon/api.c), OPTIONS and HEAD;
  timeout_s above the bound answers 400 naming it (session exec, one-shot,
  runs, packages), never a silently lower deadline;
  the traceback one line per entry, a deep recursion's cut in the middle;
  the ordered "output" list of stdout/stderr chunks;
  a refused HTTPS tunnel (CONNECT) that says why, as requests and urllib
  show it inside the sandbox (a made-up *.test name mapped to our own server).
"""
import os
import re

import pytest

from harness import ROOT, Daemon
from harness.servers import HttpServer

MAX_TIMEOUT = 10


@pytest.fixture(scope="module")
def polish(redis_server, tmpdir_session):
    http = HttpServer(b"hello from test_api_polish\n")
    hosts = os.path.join(tmpdir_session, "polish-hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 allowed.test refused.test\n")
    d = Daemon(redis_server, tmpdir_session,
               ("--egress-resolver", "hosts-only", "--egress-hosts-file", hosts,
                "--egress-trusted", "127.0.0.1:%d" % http.port, "--pool-size", "0",
                "--exec-timeout-s", "5", "--max-exec-timeout-s", str(MAX_TIMEOUT)))
    try:
        yield d, http
    finally:
        d.finish()
        http.stop()


@pytest.fixture
def sess(polish):
    d, http = polish
    s = d.api.create(network={"allow": ["allowed.test:%d" % http.port]})
    yield s
    d.api.delete(s["id"])


# ---- 405 ----------------------------------------------------------------

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
SAMPLE = {"{id}": "0123abcd-0123-4567-89ab-cdef01234567", "{key}": "0123456789abcdef",
          "{tenant}": "acme", "{signature}": "0123456789abcdef", "{path...}": "a/b.txt"}


def route_table():
    """{path: [methods]} from daemon/api.c's table, in its order."""
    src = open(os.path.join(ROOT, "daemon", "api.c")).read()
    table = src[src.index("api_routes[] = {"):src.index("};", src.index("api_routes[] = {"))]
    paths = {}
    for method, pattern in re.findall(r'\{"([A-Z*]+)", "([^"]+)"', table):
        if method == "*":
            continue
        path = pattern[:-2] if pattern.endswith("/?") else pattern
        for k, v in SAMPLE.items():
            path = path.replace(k, v)
        paths.setdefault(path, []).append(method)
    return paths


def test_every_route_answers_405_with_allow(polish):
    d, _ = polish
    paths = route_table()
    families = {p.split("/")[2] if p.startswith("/v1/") else p.split("/")[1] for p in paths}
    assert {"sessions", "snapshots", "runs", "reviews", "admin", "exec"} <= families, families
    checked = 0
    for path, methods in paths.items():
        for wrong in METHODS:
            if wrong in methods:
                continue
            r = d.api.send(wrong, path, raw=b"" if wrong in ("POST", "PUT", "PATCH") else None)
            assert r.status == 405, (wrong, path, r.status, r.body[:300])
            assert r.header("Allow") == ", ".join(methods), (wrong, path, r.headers)
            err = r.doc["error"]
            assert err["code"] == "method_not_allowed", (wrong, path, err)
            assert wrong in err["message"] and ", ".join(methods) in err["message"], err
            checked += 1
    assert checked > 100, checked


def test_options_head_and_unknown_admin_names(polish):
    d, _ = polish
    r = d.api.send("OPTIONS", "/v1/sessions")
    assert r.status == 204 and r.header("Allow") == "GET, POST" and r.body == b"", r.headers
    r = d.api.send("OPTIONS", "/v1/admin/gc")
    assert r.status == 204 and r.header("Allow") == "POST", r.headers
    # HEAD is no route's method: 405 listing the path's, and no body
    r = d.api.send("HEAD", "/v1/sessions")
    assert r.status == 405 and r.header("Allow") == "GET, POST" and r.body == b""
    # the server keeps serving on the same connection and after
    assert d.api.send("GET", "/healthz").status == 200
    # an admin name no route has is still the catch-all's list (404)
    r = d.api.send("GET", "/v1/admin/nothing")
    assert r.status == 404 and "no such admin route" in r.doc["error"]["message"], r.doc
    # an unknown path is a 404, not a 405
    r = d.api.send("DELETE", "/v1/nothing")
    assert r.status == 404 and r.header("Allow") is None


# ---- timeout_s -------------------------------------------------------------

def test_timeout_above_the_maximum_is_refused_naming_it(polish, sess):
    d, _ = polish
    sid = sess["id"]
    # the session's limit is the default 5: above it is refused, not lowered
    st, doc = d.api.request("POST", "/v1/sessions/%s/exec" % sid,
                            body={"code": "1", "timeout_s": 7})
    assert st == 400 and doc["error"]["code"] == "bad_request", doc
    assert doc["error"]["message"] == (
        "timeout_s 7 is above this session's limit 5 (limits.exec_timeout_s, at most "
        "--max-exec-timeout-s %d on this node)" % MAX_TIMEOUT), doc
    ok = d.api.exec(sid, "print('fine')", timeout_s=5)
    assert ok["status"] == "ok" and ok["stdout"] == "fine\n", ok
    node_max = "timeout_s 900 is above this node's maximum %d (--max-exec-timeout-s)" % MAX_TIMEOUT
    for path, body in (("/v1/exec", {"code": "1", "timeout_s": 900}),
                       ("/v1/runs", {"code": "1", "timeout_s": 900, "fixer": None}),
                       ("/v1/sessions/%s/runs" % sid, {"code": "1", "timeout_s": 900,
                                                        "fixer": None})):
        st, doc = d.api.request("POST", path, body=body)
        assert st == 400 and doc["error"]["code"] == "bad_request", (path, st, doc)
        if path.startswith("/v1/sessions/"):
            assert "above this session's limit 5" in doc["error"]["message"], doc
        else:
            assert doc["error"]["message"] == node_max, (path, doc)
    # below 1 and not a number stay 400
    for bad in (0, -1, "ten"):
        st, doc = d.api.request("POST", "/v1/exec", body={"code": "1", "timeout_s": bad})
        assert st == 400 and "timeout_s" in doc["error"]["message"], (bad, doc)
    # the session is untouched
    assert d.api.state(sid) == "ready"


def test_oneshot_gets_the_deadline_it_asked_for(polish):
    """Above the default (5) and within the maximum (10): the one-shot used
    to be lowered to the default; now 7 s is 7 s."""
    d, _ = polish
    st, doc = d.api.request("POST", "/v1/exec",
                            body={"code": "import time; time.sleep(6); print('slept')",
                                  "timeout_s": 8}, timeout=60)
    assert st == 200 and doc["status"] == "ok" and doc["stdout"] == "slept\n", doc


# ---- traceback and output ------------------------------------------------

def test_traceback_one_line_per_entry(polish, sess):
    d, _ = polish
    r = d.api.exec(sess["id"], "def f():\n    return 1/0\n\nf()\n")
    tb = r["error"]["traceback"]
    assert all("\n" not in line for line in tb), tb
    assert tb[0] == "Traceback (most recent call last):", tb
    assert tb[-1] == "ZeroDivisionError: division by zero", tb
    assert '  File "<cell-1>", line 4, in <module>' in tb and "    f()" in tb, tb


def test_deep_recursion_traceback_is_cut_in_the_middle(polish, sess):
    d, _ = polish
    # frames alternate between two lines, so Python's own "[Previous line
    # repeated N more times]" does not shorten it: thousands of lines
    r = d.api.exec(sess["id"], "import sys\nsys.setrecursionlimit(3000)\n"
                   "def g(n):\n    if n % 2:\n        return g(n + 1)\n"
                   "    return g(n + 1)\n\ng(0)\n")
    tb = r["error"]["traceback"]
    assert r["error"]["ename"] == "RecursionError", r["error"]
    assert len(tb) <= 200 and all("\n" not in line for line in tb), len(tb)
    assert tb[0] == "Traceback (most recent call last):"
    assert any(re.fullmatch(r"\[\.\.\. \d+ traceback lines omitted \.\.\.\]", l) for l in tb), tb
    assert tb[-1].startswith("RecursionError: maximum recursion depth exceeded"), tb[-3:]


def test_output_keeps_stdout_and_stderr_in_order(polish, sess):
    d, _ = polish
    code = ("import sys\n"
            "print('o1'); print('o2')\n"
            "print('e1', file=sys.stderr)\n"
            "sys.stdout.write('partial ')\n"
            "sys.stderr.write('e2\\n')\n"
            "print('o3')\n"
            "for i in range(50):\n"
            "    print('x%d' % i, file=sys.stderr if i % 2 else sys.stdout)\n")
    r = d.api.exec(sess["id"], code)
    assert r["status"] == "ok", r
    want = [("stdout", "o1\no2\n"), ("stderr", "e1\n"), ("stdout", "partial "),
            ("stderr", "e2\n"), ("stdout", "o3\n")]
    want += [("stderr" if i % 2 else "stdout", "x%d\n" % i) for i in range(50)]
    merged = []
    for s, t in want:
        if merged and merged[-1][0] == s:
            merged[-1] = (s, merged[-1][1] + t)
        else:
            merged.append((s, t))
    got = [(c["stream"], c["text"]) for c in r["output"]]
    assert got == merged, got
    assert r["output_truncated"] is False
    # stdout and stderr are as they were
    assert r["stdout"] == "".join(t for s, t in want if s == "stdout")
    assert r["stderr"] == "".join(t for s, t in want if s == "stderr")


def test_output_truncated_by_the_cap(polish, sess):
    d, _ = polish
    r = d.api.exec(sess["id"], "import sys\nprint('first', file=sys.stderr)\n"
                   "sys.stdout.write('y' * (3 << 20))\n")
    assert r["output_truncated"] is True and r["stdout_truncated"] is True, \
        {k: v for k, v in r.items() if k not in ("stdout", "output")}
    assert r["output"][0] == {"stream": "stderr", "text": "first\n"}, r["output"][:1]
    assert sum(len(c["text"]) for c in r["output"]) < (3 << 20)


def test_oneshot_and_runs_carry_output(polish):
    d, _ = polish
    code = "import sys\nprint('a'); print('b', file=sys.stderr); print('c')\n"
    want = [{"stream": "stdout", "text": "a\n"}, {"stream": "stderr", "text": "b\n"},
            {"stream": "stdout", "text": "c\n"}]
    st, doc = d.api.request("POST", "/v1/exec", body={"code": code}, timeout=60)
    assert st == 200 and doc["output"] == want, doc
    st, doc = d.api.request("POST", "/v1/runs", body={"code": code, "fixer": None}, timeout=60)
    assert st == 200, doc
    assert doc["result"]["output"] == want, doc


# ---- egress refusal ------------------------------------------------------

def test_refused_tunnel_says_why_inside_the_sandbox(polish, sess):
    d, http = polish
    p = http.port
    ok = d.api.exec(sess["id"], "import urllib.request\nprint(urllib.request.urlopen("
                    "'http://allowed.test:%d/', timeout=10).read())" % p)
    assert "hello from test_api_polish" in ok["stdout"], ok
    reason = "403 host 'refused.test:%d' is not in the allowlist (network.allow)" % p
    r = d.api.exec(sess["id"], "import requests\n"
                   "requests.get('https://refused.test:%d/', timeout=10)" % p)
    assert r["error"]["ename"] == "ProxyError", r["error"]
    assert ("Tunnel connection failed: " + reason) in r["error"]["evalue"], r["error"]
    r = d.api.exec(sess["id"], "import urllib.request\n"
                   "urllib.request.urlopen('https://refused.test:%d/', timeout=10)" % p)
    assert r["error"]["evalue"] == "<urlopen error Tunnel connection failed: %s>" % reason, \
        r["error"]
    # the raw answer: the reason in the status line and a body a client can read
    r = d.api.exec(sess["id"], (
        "import os, socket, urllib.parse\n"
        "u = urllib.parse.urlsplit(os.environ.get('HTTPS_PROXY') or os.environ['https_proxy'])\n"
        "s = socket.create_connection((u.hostname, u.port), timeout=10)\n"
        "s.sendall(b'CONNECT refused.test:%d HTTP/1.1\\r\\nHost: refused.test\\r\\n\\r\\n')\n"
        "data = b''\n"
        "while True:\n"
        "    b = s.recv(4096)\n"
        "    if not b: break\n"
        "    data += b\n"
        "print(data.decode())\n") % p)
    head, _, body = r["stdout"].partition("\r\n\r\n")
    assert head.split("\r\n")[0] == "HTTP/1.1 " + reason, r["stdout"]
    assert body.strip() == "ci egress proxy: " + reason[4:], r["stdout"]
