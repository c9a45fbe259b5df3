"""Issue 12: the failure memory (GET /v1/failures, DELETE
/v1/failures/{signature}, ci-ctl failures) against the real daemon and
Redis, its Lua scripts against a real Redis, and the signature, the classes
and the rules on the exec results of real sessions.

The run engine, which will write the memory, is not there yet: entries are
seeded by writing the documented keys (docs/operations.md) under the test
daemon's own prefix, or by tests/tools/failure_tool.c (store_failures.c's
scripts, failure_sig.c and fix_rules.c on a real exec result)."""
import json
import os
import re
import subprocess
import time

import pytest

from harness import DAEMON_BIN, ROOT, RedisServer, wait_for
from harness.servers import HttpServer

ADMIN = "admin-" + "f" * 40
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def error_of(resp):
    doc = resp.doc
    assert isinstance(doc, dict) and "error" in doc, (resp.status, resp.body[:300])
    return doc["error"]["code"], doc["error"]["message"]


def seed(d, tenant, sig, last_ms, redis=None, **fields):
    """One entry as store_failures.c writes it: the hash and its member (in
    redis, the daemon's by default)."""
    redis = redis or d.redis
    f = {"ename": "NameError", "message": "name <str> is not defined",
         "line": "x = np.zeros(<n>)", "image": "python", "class": "", "seen": "3",
         "retried": "1", "fixed_rule": "0", "fixed_fixer": "2",
         "first_ms": str(last_ms - 60000), "last_ms": str(last_ms)}
    f.update({k: str(v) for k, v in fields.items()})
    key = "%sfail:%s:%s" % (d.prefix, tenant, sig)
    args = []
    for k, v in f.items():
        args += [k, v]
    redis.cli("HSET", key, *args)
    redis.cli("EXPIRE", key, "600")
    redis.cli("ZADD", "%sfails:%s" % (d.prefix, tenant), str(last_ms), sig)
    return key


def sig_n(i):
    return "%016x" % (0xabc0000000000000 + i)


def listed(client, query=""):
    status, doc = client.request("GET", "/v1/failures" + query)
    assert status == 200, (status, doc)
    return doc["failures"]


NOW_MS = 1796140000000  # 2026-12-01


# ------------------------------------------------------------ the API


def test_list_shape_order_limit_and_delete(make_daemon):
    d = make_daemon("--pool-size", "0")
    for i in range(5):
        seed(d, "default", sig_n(i), NOW_MS + i * 1000, seen=i + 1)
    seed(d, "default", sig_n(9), NOW_MS - 5000, **{"class": "egress_denied"})
    got = listed(d.api)
    assert [f["signature"] for f in got] == [sig_n(i) for i in (4, 3, 2, 1, 0, 9)]
    f = got[0]
    assert set(f) == {"signature", "ename", "message", "line", "image", "class", "seen",
                      "retried", "fixed", "first_seen", "last_seen"}
    assert f["ename"] == "NameError" and f["message"] == "name <str> is not defined"
    assert f["line"] == "x = np.zeros(<n>)" and f["image"] == "python"
    assert f["class"] is None and f["seen"] == 5 and f["retried"] == 1
    assert f["fixed"] == {"rule": 0, "fixer": 2}
    assert RFC3339.fullmatch(f["first_seen"]) and RFC3339.fullmatch(f["last_seen"])
    assert f["last_seen"] > f["first_seen"]
    assert got[-1]["class"] == "egress_denied"
    # limit
    assert [f["signature"] for f in listed(d.api, "?limit=2")] == [sig_n(4), sig_n(3)]
    assert len(listed(d.api, "?limit=1000")) == 6
    for bad in ("?limit=0", "?limit=1001", "?limit=x", "?limit=", "?limit=-1", "?tenant=other",
                "?limit=2&x=1"):
        r = d.api.send("GET", "/v1/failures" + bad)
        assert r.status == 400 and error_of(r)[0] == "bad_request", bad
    # delete: 204, then 404; the keys are gone from Redis
    assert d.api.request("DELETE", "/v1/failures/" + sig_n(3))[0] == 204
    assert d.redis.cli("EXISTS", "%sfail:default:%s" % (d.prefix, sig_n(3))) == "0"
    assert d.redis.cli("ZSCORE", "%sfails:default" % d.prefix, sig_n(3)) == ""
    r = d.api.send("DELETE", "/v1/failures/" + sig_n(3))
    assert r.status == 404 and error_of(r)[0] == "not_found"
    assert sig_n(3) not in [f["signature"] for f in listed(d.api)]
    # a signature that is not one: 400, and nothing reaches Redis
    for bad in ("0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "xyz",
                "..%2f..%2fkeys", "%30123456789abcde"):
        r = d.api.send("DELETE", "/v1/failures/" + bad)
        assert r.status == 400 and error_of(r)[0] == "bad_request", (bad, r.status)
        assert "signature" in error_of(r)[1]
    # GET on a signature's path: the method is refused, with Allow
    r = d.api.send("GET", "/v1/failures/" + sig_n(4))
    assert r.status == 405 and r.header("Allow") == "DELETE"
    # the deletion is audited (the trail is written in batches: wait for it)
    def audited():
        status, doc = d.api.request("GET", "/v1/audit?action=failure_delete")
        assert status == 200
        return {(e["outcome"], e.get("target")) for e in doc["entries"]}
    want = {("ok", "failure " + sig_n(3)), ("not_found", "failure " + sig_n(3))}
    wait_for(lambda: want <= audited(), 10, what="both deletions in the audit trail")


def test_decayed_and_broken_entries_are_left_out(make_daemon):
    d = make_daemon("--pool-size", "0")
    good = seed(d, "default", sig_n(1), NOW_MS)
    # a member whose hash has expired (decayed): not listed, and dropped
    d.redis.cli("ZADD", "%sfails:default" % d.prefix, str(NOW_MS + 5), sig_n(2))
    # malformed entries, as a broken or hostile Redis could hold them
    seed(d, "default", sig_n(3), NOW_MS + 1, seen="lots")
    seed(d, "default", sig_n(4), NOW_MS + 2, **{"class": "root"})
    seed(d, "default", sig_n(5), NOW_MS + 3, retried="-4")
    d.redis.cli("ZADD", "%sfails:default" % d.prefix, str(NOW_MS + 6), "not-a-signature")
    d.redis.cli("HSET", "%sfail:default:not-a-signature" % d.prefix, "seen", "1")
    got = listed(d.api)
    assert [f["signature"] for f in got] == [sig_n(1)]
    assert d.redis.cli("ZSCORE", "%sfails:default" % d.prefix, sig_n(2)) == ""
    assert "left out" in d.read_log()
    assert d.redis.cli("EXISTS", good) == "1"
    d.redis.cli("DEL", "%sfail:default:not-a-signature" % d.prefix)


def test_each_tenant_sees_and_forgets_only_its_own(make_daemon):
    d = make_daemon("--pool-size", "0", admin_key=ADMIN)
    acme = d.client(d.key("acme")["key"])
    beta = d.client(d.key("beta")["key"])
    shared = sig_n(7)  # the same signature in both tenants
    seed(d, "acme", shared, NOW_MS, seen=4)
    seed(d, "acme", sig_n(1), NOW_MS + 1)
    seed(d, "beta", shared, NOW_MS, seen=9)
    a = listed(acme)
    b = listed(beta)
    assert sorted(f["signature"] for f in a) == sorted([shared, sig_n(1)])
    assert [(f["signature"], f["seen"]) for f in b] == [(shared, 9)]
    # beta cannot delete acme's entry: as if it did not exist
    r = beta.send("DELETE", "/v1/failures/" + sig_n(1))
    assert r.status == 404 and error_of(r)[0] == "not_found"
    assert sig_n(1) in [f["signature"] for f in listed(acme)]
    # beta deleting its own leaves acme's of the same signature
    assert beta.request("DELETE", "/v1/failures/" + shared)[0] == 204
    assert listed(beta) == []
    assert shared in [f["signature"] for f in listed(acme)]
    # a query parameter names no tenant
    assert beta.send("GET", "/v1/failures?tenant=acme").status == 400
    # without a key: 401; the admin key is not a tenant: 403
    r = d.client(None).send("GET", "/v1/failures")
    assert r.status == 401
    r = d.admin.send("GET", "/v1/failures")
    assert r.status == 403 and error_of(r)[0] == "forbidden"
    r = d.admin.send("DELETE", "/v1/failures/" + shared)
    assert r.status == 403


def test_redis_down_is_503(make_daemon, tmp_path):
    own = RedisServer(str(tmp_path))
    try:
        d = make_daemon("--pool-size", "0", "--redis", own.url)
        assert d.api.request("GET", "/v1/failures")[0] == 200
        own.kill()
        wait_for(lambda: d.api.send("GET", "/v1/failures", timeout=5).status == 503, 15,
                 interval=0.05, what="503 once Redis is gone")
        r = d.api.send("GET", "/v1/failures", timeout=5)
        assert error_of(r)[0] == "unavailable" and r.header("Retry-After")
        r = d.api.send("DELETE", "/v1/failures/" + sig_n(1), timeout=5)
        assert r.status == 503 and error_of(r)[0] == "unavailable"
        # and the daemon keeps serving what needs no Redis
        assert d.api.request("GET", "/healthz")[0] == 200
    finally:
        own.stop()


def test_frozen_redis_is_answered_not_hung(make_daemon, tmp_path):
    """A Redis that takes commands and never answers (stopped): the call is
    answered 503 by the store's own deadline, and the late answer, once Redis
    runs again, is dropped without harm."""
    import signal
    own = RedisServer(str(tmp_path))
    try:
        d = make_daemon("--pool-size", "0", "--redis", own.url)
        seed(d, "default", sig_n(1), NOW_MS, redis=own)
        assert len(listed(d.api)) == 1
        os.kill(own.proc.pid, signal.SIGSTOP)
        try:
            r = d.api.send("GET", "/v1/failures", timeout=20)
            assert r.status == 503 and "in time" in error_of(r)[1], (r.status, r.body[:200])
            r = d.api.send("DELETE", "/v1/failures/" + sig_n(1), timeout=20)
            assert r.status == 503
        finally:
            os.kill(own.proc.pid, signal.SIGCONT)
        # the late answers come and are dropped; the delete did happen in Redis
        wait_for(lambda: listed(d.api) == [], 10, what="Redis to answer again")
        assert d.api.request("GET", "/healthz")[0] == 200
    finally:
        own.stop()


def test_ctl_failures(make_daemon):
    d = make_daemon("--pool-size", "0")
    seed(d, "default", sig_n(1), NOW_MS, **{"class": "module_unavailable", "ename":
                                            "ModuleNotFoundError", "message":
                                            "No module named <str>", "line": "import sklearn"})
    seed(d, "default", sig_n(2), NOW_MS + 1)
    out = d.ctl("failures")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["SIGNATURE", "SEEN", "RETRIED", "FIXED"]
    assert lines[1].startswith(sig_n(2)) and lines[2].startswith(sig_n(1))
    assert "module_unavailable" in lines[2] and "import sklearn" in lines[2]
    assert "0 rule, 2 fixer" in lines[1]
    out = d.ctl("failures", "ls", "--limit", "1")
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 2
    out = d.ctl("--json", "failures")
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert [f["signature"] for f in doc["failures"]] == [sig_n(2), sig_n(1)]
    out = d.ctl("failures", "rm", sig_n(1))
    assert out.returncode == 0 and "forgot " + sig_n(1) in out.stdout
    out = d.ctl("failures", "rm", sig_n(1))
    assert out.returncode != 0 and "not_found" in out.stderr
    out = d.ctl("failures", "rm", "NOTASIG")
    assert out.returncode != 0 and "bad_request" in out.stderr
    out = d.ctl("failures", "rm")
    assert out.returncode != 0
    out = d.ctl("failures", "bogus")
    assert out.returncode != 0 and "unknown subcommand" in out.stderr


def test_options_in_the_table():
    out = subprocess.run([DAEMON_BIN, "--help"], capture_output=True, text=True, timeout=30)
    text = out.stdout + out.stderr
    assert "--failure-memory-ttl-s" in text and "--failure-hopeless-after" in text
    for flag, bad in (("--failure-memory-ttl-s", "10"), ("--failure-hopeless-after", "0")):
        out = subprocess.run([DAEMON_BIN, flag, bad], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode != 0 and "outside" in out.stderr, out.stderr


# ------------------------------------------------------------ the scripts, on a real Redis

def failure_tool():
    """tests/tools/failure_tool.c, built next to the daemon under test."""
    path = os.path.join(os.path.dirname(os.path.abspath(DAEMON_BIN)), "tools", "failure-tool")
    if not os.path.exists(path):
        target = os.path.relpath(path, ROOT)
        env = dict(os.environ)
        if "/asan/" in path:
            env["SANITIZE"] = "1"
        subprocess.run(["make", "-s", target], cwd=ROOT, check=True, timeout=600, env=env,
                       capture_output=True)
    return path


def run_tool(doc, *args):
    out = subprocess.run([failure_tool(), *args], input=json.dumps(doc), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, (out.stdout, out.stderr)
    return json.loads(out.stdout)


NAME_ERROR = {"result": {"status": "error", "error": {
    "ename": "NameError", "evalue": "name 'np' is not defined",
    "traceback": ["Traceback (most recent call last):",
                  "  File \"<cell-1>\", line 1, in <module>\n    x = np.zeros(3)",
                  "NameError: name 'np' is not defined"]}},
    "code": "x = np.zeros(3)"}


def test_sightings_notes_ttl_and_decay_through_the_scripts(make_daemon):
    d = make_daemon("--pool-size", "0")
    redis = ("--redis", d.redis.url, "--prefix", d.prefix, "--tenant", "default")
    a = run_tool(NAME_ERROR, *redis, "--ttl-s", "600")
    sig = a["signature"]
    assert re.fullmatch(r"[0-9a-f]{16}", sig)
    assert a["record"]["seen"] == 1 and a["record"]["first_ms"] == a["record"]["last_ms"]
    # the same mistake with other numbers: the same entry, seen twice
    other = json.loads(json.dumps(NAME_ERROR).replace("zeros(3)", "zeros(17)"))
    b = run_tool(other, *redis, "--ttl-s", "600", "--note", "retried")
    assert b["signature"] == sig and b["record"]["seen"] == 2
    assert b["record"]["first_ms"] == a["record"]["first_ms"]
    assert b["noted"]["retried"] == 1
    c = run_tool(other, *redis, "--ttl-s", "600", "--note", "fixed_rule")
    assert c["record"]["seen"] == 3 and c["noted"]["fixed_rule"] == 1
    # seen 3 times but repaired only once: not hopeless (sightings alone
    # never count); fixed once since: never hopeless by history
    assert c["record"]["hopeless_after_3"] is False
    assert c["noted"]["hopeless_after_3"] is False
    key = "%sfail:default:%s" % (d.prefix, sig)
    assert 590 <= int(d.redis.cli("TTL", key)) <= 600
    assert 590 <= int(d.redis.cli("TTL", "%sfails:default" % d.prefix)) <= 600
    # the daemon reads what the scripts wrote
    f = [x for x in listed(d.api) if x["signature"] == sig][0]
    assert (f["seen"], f["retried"], f["fixed"]) == (3, 1, {"rule": 1, "fixer": 0})
    assert f["line"] == "x = np.zeros(<n>)" and f["message"] == "name <str> is not defined"
    # seen three times, no repair tried: not hopeless (nobody tried)
    e = json.loads(json.dumps(NAME_ERROR).replace("'np'", "'npx'").replace("np.", "npx."))
    for i in range(3):
        r = run_tool(e, *redis, "--ttl-s", "600")
    assert r["record"]["seen"] == 3 and r["record"]["hopeless_after_3"] is False
    # repaired three times over and never fixed: hopeless by history
    for i in range(3):
        r = run_tool(e, *redis, "--ttl-s", "600", "--note", "retried")
    assert r["record"]["retried"] == 2 and r["record"]["hopeless_after_3"] is False
    assert r["noted"]["retried"] == 3 and r["noted"]["hopeless_after_3"] is True
    # each sighting refreshes the TTL
    d.redis.cli("EXPIRE", key, "100")
    run_tool(NAME_ERROR, *redis, "--ttl-s", "600")
    assert int(d.redis.cli("TTL", key)) > 500
    # decay: a short TTL, not seen again: gone from the list
    short = json.loads(json.dumps(NAME_ERROR).replace("'np'", "'pd'").replace("np.", "pd."))
    s = run_tool(short, *redis, "--ttl-s", "1")["signature"]
    assert s in [x["signature"] for x in listed(d.api)]
    wait_for(lambda: s not in [x["signature"] for x in listed(d.api)], 10,
             what="the entry to decay")
    assert d.redis.cli("ZSCORE", "%sfails:default" % d.prefix, s) == ""
    # a bad tenant never reaches a key
    out = subprocess.run([failure_tool(), "--redis", d.redis.url, "--prefix", d.prefix,
                          "--tenant", "../x"], input=json.dumps(NAME_ERROR),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "not a tenant name" in out.stdout
    assert d.redis.cli("KEYS", d.prefix + "fail:../*") == ""


# ------------------------------------------------------------ real sessions

@pytest.fixture(scope="module")
def sandbox(redis_server, tmpdir_session):
    """A daemon whose limits are its maxima (so timeouts and OOMs are at the
    server's maximum), with the egress proxy resolving only our names."""
    from harness import Daemon
    http = HttpServer(b"hello from test_failures\n")
    hosts = os.path.join(tmpdir_session, "failures-hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 allowed.test denied.test\n")
    d = Daemon(redis_server, tmpdir_session,
               ("--egress-resolver", "hosts-only", "--egress-hosts-file", hosts,
                "--egress-trusted", "127.0.0.1:%d" % http.port, "--pool-size", "0",
                "--memory-mb", "128", "--max-memory-mb", "128",
                "--exec-timeout-s", "3", "--max-exec-timeout-s", "3", "--kill-grace-ms", "1000"))
    try:
        yield d, http
    finally:
        d.finish()
        http.stop()


def classify(result, code, files=(), **flags):
    doc = {"result": result, "code": code, "files": list(files), "image": "python"}
    doc.update(flags)
    return run_tool(doc)


def test_real_sessions_classified(sandbox):
    d, http = sandbox
    p = http.port
    s = d.api.create(network={"allow": ["allowed.test:%d" % p]})
    try:
        # the allowlist works, so what follows is the policy and not a broken network
        ok = d.api.exec(s["id"], "import urllib.request\n"
                        "print(urllib.request.urlopen('http://allowed.test:%d/', "
                        "timeout=10).read())" % p)
        assert ok["status"] == "ok" and "hello from test_failures" in ok["stdout"], ok
        sigs = set()
        for host in ("denied.test", "other.test"):
            code = ("import urllib.request\n"
                    "urllib.request.urlopen('https://%s:%d/', timeout=10).read()" % (host, p))
            r = d.api.exec(s["id"], code)
            assert r["error"]["ename"] == "URLError", r
            assert r["error"]["evalue"] == ("<urlopen error Tunnel connection failed: 403 "
                                            "host '%s:%d' is not in the allowlist "
                                            "(network.allow)>" % (host, p)), r
            c = classify(r, code)
            assert c["class"] == "egress_denied", c
            sigs.add(c["signature"])
        assert len(sigs) == 1  # another host, the same mistake
        code = "import requests\nrequests.get('https://denied.test:%d/', timeout=10)" % p
        r = d.api.exec(s["id"], code)
        assert r["error"]["ename"] == "ProxyError", r
        assert ("Tunnel connection failed: 403 host 'denied.test:%d' is not in the allowlist"
                % p) in r["error"]["evalue"], r
        assert classify(r, code)["class"] == "egress_denied"
        # plain http refused: an HTTPError 403 like a server's own: no class
        code = ("import urllib.request\n"
                "urllib.request.urlopen('http://denied.test:%d/', timeout=10)" % p)
        r = d.api.exec(s["id"], code)
        assert (r["error"]["ename"], r["error"]["evalue"]) == ("HTTPError",
                                                              "HTTP Error 403: Forbidden"), r
        assert classify(r, code)["class"] is None
        # a module that is not in the image (scikit-learn is, since issue
        # 14; OpenCV is not): the class, and the rule's report
        code = "import math\nimport cv2.dnn"
        r = d.api.exec(s["id"], code)
        assert (r["error"]["ename"], r["error"]["evalue"]) == (
            "ModuleNotFoundError", "No module named 'cv2'"), r
        c = classify(r, code)
        assert c["class"] == "module_unavailable" and c["line"] == "import cv2.dnn"
        assert c["rule"]["kind"] == "report" and c["rule"]["package"] == "opencv-python"
        assert classify(r, code, can_install=True)["class"] is None
        # the timeout at the server's maximum
        code = "while True:\n    pass"
        r = d.api.exec(s["id"], code)
        assert r["status"] == "timeout", r
        assert classify(r, code, timeout_at_max=True)["class"] == "timeout_at_max"
        assert classify(r, code)["class"] is None
    finally:
        d.api.delete(s["id"])
    # without network: the sandbox has no resolver
    s = d.api.create()
    try:
        code = ("import urllib.request\n"
                "urllib.request.urlopen('http://allowed.test:%d/', timeout=10)" % p)
        r = d.api.exec(s["id"], code)
        assert r["error"]["evalue"] == ("<urlopen error [Errno -3] Temporary failure in name "
                                        "resolution>"), r
        assert classify(r, code)["class"] == "egress_denied"
        code = "import socket\nsocket.create_connection(('allowed.test', %d), timeout=5)" % p
        r = d.api.exec(s["id"], code)
        assert r["error"]["ename"] == "gaierror", r
        assert classify(r, code)["class"] == "egress_denied"
        # out of memory at the server's maximum
        code = "x = []\nwhile True:\n    x.append(bytearray(10 * 1024 * 1024))"
        r = d.api.exec(s["id"], code)
        assert r["status"] == "killed" and r["reason"].startswith("out of memory"), r
        c = classify(r, code, memory_at_max=True)
        assert c["class"] == "memory_at_max" and c["ename"] == "killed"
        assert classify(r, code)["class"] is None
    finally:
        d.api.delete(s["id"])


def test_real_sessions_rules_repair(sandbox):
    """The rules on real failures: their repaired code then runs."""
    d, _ = sandbox
    s = d.api.create()
    try:
        sid = s["id"]
        code = "x = np.arange(4)\nprint(int(x.sum()))"
        r = d.api.exec(sid, code)
        assert r["error"]["ename"] == "NameError", r
        c = classify(r, code)
        assert c["rule"]["rule"] == "import_alias" and c["line"] == "x = np.arange(<n>)"
        fixed = d.api.exec(sid, c["rule"]["code"])
        assert fixed["status"] == "ok" and fixed["stdout"] == "6\n", fixed
        # a file name with the wrong case, one file in the workspace like it
        status, _ = d.api.request("PUT", "/v1/sessions/%s/files/data/Sales.csv" % sid,
                                  raw=b"a,b\n1,2\n")
        assert status in (200, 201, 204), status
        code = "print(open('data/sales.csv').read().splitlines()[1])"
        r = d.api.exec(sid, code)
        assert r["error"]["ename"] == "FileNotFoundError", r
        status, listing = d.api.request("GET", "/v1/sessions/%s/files" % sid)
        files = [f["path"] for f in listing["files"] if f.get("type", "file") == "file"]
        c = classify(r, code, files=files)
        assert c["rule"]["rule"] == "file_near_miss", (c, files)
        fixed = d.api.exec(sid, c["rule"]["code"])
        assert fixed["status"] == "ok" and fixed["stdout"] == "1,2\n", fixed
        # and not again on its own output failing the same way
        r2 = dict(r)
        r2["error"] = dict(r["error"], evalue="[Errno 2] No such file or directory: "
                           "'data/Sales.csv'")
        assert classify(r2, c["rule"]["code"], files=files)["rule"] is None
    finally:
        d.api.delete(s["id"])
