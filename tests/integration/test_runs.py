"""Issue 12: runs (docs/workflow.md). A run executes code, repairs it on an
error (the rules, then the fixer) and tries again, consults the tenant's
failure memory, and when nothing works takes the caller's ladder. These
tests cover the engine and the API around it; the fixer's cases are in
test_runs_fixer.py, the ladder's tiers in their own files."""
import json
import subprocess
import threading

from harness import CTL_BIN, wait_for

NEVER = "00000000-0000-4000-8000-00000000dead"
ADMIN = "admin-" + "r" * 40


def unique_failure():
    """Code that fails with a pattern of its own: the daemon of a test file
    is shared, and its failure memory would count a common error (1/0) seen
    in other tests, and call it hopeless after a few."""
    import random
    import string
    return "%s_is_not_defined" % "".join(random.choice(string.ascii_lowercase) for _ in range(12))


def run(api, sid, body, **kw):
    path = "/v1/sessions/%s/runs" % sid if sid else "/v1/runs"
    return api.request("POST", path, body, **kw)


def test_a_run_that_works_at_once_is_one_attempt(daemon):
    api = daemon.api
    sid = api.create()["id"]
    st, doc = run(api, sid, {"code": "x = 20\nx * 2 + 2"})
    assert st == 200, doc
    assert doc["status"] == "ok" and doc["state"] == "done", doc
    assert doc["failure"] is None and doc["degraded"] is None
    assert [a["source"] for a in doc["attempts"]] == ["submitted"]
    a = doc["attempts"][0]
    assert a["n"] == 1 and a["status"] == "ok" and a["error"] is None and a["fixer_ms"] is None
    assert doc["result"]["result"] == "42" and doc["session"] == sid
    # The run's variables are the session's.
    assert api.exec(sid, "x")["result"] == "20"
    # GET answers the same document, now and after.
    assert api.request("GET", "/v1/runs/" + doc["id"]) == (200, doc)
    m = api.metrics()
    assert m['ci_runs_total{status="ok"}'] >= 1 and m["ci_runs_active"] == 0, m


def test_a_failure_with_no_fixer_ends_with_the_manual_handoff(daemon):
    api = daemon.api
    sid = api.create()["id"]
    code = ("import numpy as np\nimport requests, json\ntry:\n    from sklearn import tree\n"
            "except ImportError:\n    pass\nraise ValueError('bad 42')")
    st, doc = run(api, sid, {"code": code, "goal": "a model"})
    assert st == 200, doc
    assert doc["status"] == "failed" and doc["state"] == "done", doc
    assert len(doc["attempts"]) == 1
    a = doc["attempts"][0]
    assert a["status"] == "error" and a["error"]["ename"] == "ValueError"
    assert any("raise ValueError" in line for line in a["error"]["traceback"])
    assert doc["failure"]["signature"] == a["signature"] and len(a["signature"]) == 16
    assert "no fixer" in doc["failure"]["reason"]
    d = doc["degraded"]
    assert d["mode"] == "manual" and d["sandbox_unavailable"] is False, d
    h = d["handoff"]
    assert h["code"] == code
    assert h["failures"] == [{"attempt": 1, "ename": "ValueError", "evalue": "bad 42",
                              "signature": a["signature"]}]
    assert h["packages"] == ["numpy", "requests", "scikit-learn"], h
    assert "pip install numpy requests scikit-learn" in h["how_to_run"]


def test_an_empty_ladder_ends_failed_with_nothing_degraded(daemon):
    st, doc = run(daemon.api, None, {"code": unique_failure(), "on_failure": []})
    assert st == 200 and doc["status"] == "failed" and doc["degraded"] is None, doc
    assert doc["attempts"][0]["error"]["ename"] == "NameError"
    # The one-shot's session is gone.
    assert daemon.api.request("GET", "/v1/sessions/" + doc["session"])[0] == 410


def test_the_stream_names_the_run_then_each_attempt_then_the_run(daemon):
    api = daemon.api
    sid = api.create()["id"]
    with api.stream("POST", "/v1/sessions/%s/runs" % sid,
                    {"code": "print('hi')\n" + unique_failure(), "stream": True,
                     "on_failure": []}) as s:
        assert s.header("Content-Type") == "application/x-ndjson"
        events = [e for _, e in s.events()]
    assert events[0]["type"] == "started"
    assert [e["type"] for e in events] == ["started", "attempt", "run"], events
    assert events[1]["attempt"]["n"] == 1 and events[1]["run"] == events[0]["run"]
    last = events[-1]
    assert last["id"] == events[0]["run"] and last["status"] == "failed"
    assert last["result"]["stdout"] == "hi\n"
    st, doc = api.request("GET", "/v1/runs/" + last["id"])
    del last["type"]
    assert st == 200 and doc == last


def test_get_waits_for_the_end_with_wait_s(daemon):
    api = daemon.api
    sid = api.create()["id"]
    got = {}
    s = api.stream("POST", "/v1/sessions/%s/runs" % sid,
                   {"code": "import time\ntime.sleep(1.5)\n'slept'", "stream": True})
    try:
        first = next(s.events())[1]
        rid = first["run"]
        st, now = api.request("GET", "/v1/runs/" + rid)
        assert st == 200 and now["state"] == "running" and now["status"] == "running", now

        def poll():
            got["answer"] = api.request("GET", "/v1/runs/%s?wait_s=30" % rid, timeout=60)
        t = threading.Thread(target=poll)
        t.start()
        t.join(60)
        st, doc = got["answer"]
        assert st == 200 and doc["state"] == "done" and doc["status"] == "ok", doc
        assert doc["result"]["result"] == "'slept'"
        list(s.events())
    finally:
        s.close()


def test_bad_requests_are_400_and_unknown_runs_404(daemon):
    api = daemon.api
    sid = api.create()["id"]
    for body, what in [
        ({}, "code"),
        ({"code": 1}, "code"),
        ({"code": "1", "max_attempts": 0}, "max_attempts"),
        ({"code": "1", "max_attempts": 11}, "max_attempts"),
        ({"code": "1", "on_failure": ["bogus"]}, "on_failure"),
        ({"code": "1", "on_failure": ["manual", "manual"]}, "on_failure"),
        ({"code": "1", "on_failure": "manual"}, "on_failure"),
        ({"code": "1", "fixer": "http://x"}, "fixer"),
        ({"code": "1", "fixer": {"url": "http://x", "token": "t"}}, "fixer"),
        ({"code": "1", "goal": "g" * 9000}, "goal"),
        ({"code": "1", "image": "python"}, "image"),  # a session's run has its image
        ({"code": "1", "nope": True}, "nope"),
    ]:
        r = api.send("POST", "/v1/sessions/%s/runs" % sid, body)
        assert r.status == 400 and what in r.doc["error"]["message"], (body, r.status, r.doc)
    r = api.send("POST", "/v1/sessions/%s/runs" % sid, raw=b'{"code": "a\\u0000b"}',
                 headers={"Content-Type": "application/json"})
    assert r.status == 400
    r = api.send("POST", "/v1/sessions/%s/runs" % NEVER, {"code": "1"})
    assert r.status == 404 and r.doc["error"]["code"] == "not_found"
    ended = api.create()["id"]
    assert api.delete(ended) == 204
    r = api.send("POST", "/v1/sessions/%s/runs" % ended, {"code": "1"})
    assert r.status == 410 and r.doc["error"]["code"] == "expired"
    r = api.send("GET", "/v1/runs/" + NEVER)
    assert r.status == 404 and r.doc["error"]["code"] == "not_found"
    r = api.send("GET", "/v1/runs/%s?wait_s=nope" % NEVER)
    assert r.status == 400
    r = api.send("POST", "/v1/runs", {"code": "1", "image": "no-such-profile"})
    assert r.status == 400, r.doc


def test_another_tenant_s_run_is_a_404_like_one_that_never_existed(make_daemon):
    d = make_daemon("--pool-size", "0", admin_key=ADMIN)
    a = d.client(d.key("alpha")["key"])
    b = d.client(d.key("beta")["key"])
    sid = a.create()["id"]
    st, doc = run(a, sid, {"code": "'alpha-secret'"})
    assert st == 200 and doc["status"] == "ok"
    never = b.send("GET", "/v1/runs/" + NEVER)
    theirs = b.send("GET", "/v1/runs/" + doc["id"])
    assert (theirs.status, theirs.doc["error"]["code"]) == (never.status, never.doc["error"]["code"]) == (404, "not_found")
    assert theirs.doc["error"]["message"].replace(doc["id"], NEVER) == never.doc["error"]["message"]
    # Nor can B run in A's session.
    r = b.send("POST", "/v1/sessions/%s/runs" % sid, {"code": "1"})
    assert r.status == 404
    # Another node on the same Redis answers A (from the record), not B.
    d2 = make_daemon("--pool-size", "0", admin_key=ADMIN, prefix=d.prefix)
    a2 = d2.client(d.key("alpha")["key"])
    b2 = d2.client(d.key("beta")["key"])
    st, there = a2.request("GET", "/v1/runs/" + doc["id"])
    assert st == 200 and there == doc
    assert b2.send("GET", "/v1/runs/" + doc["id"]).status == 404


def test_the_audit_has_one_run_entry(daemon):
    api = daemon.api
    sid = api.create()["id"]
    code = unique_failure()
    st, doc = run(api, sid, {"code": code, "on_failure": []})
    assert st == 200

    def entries():
        return [e for e in api.request("GET", "/v1/audit?limit=100")[1]["entries"]
                if e.get("action") == "run" and e.get("target") == doc["id"]]
    wait_for(lambda: entries(), 10, what="the run's audit entry")
    (e,) = entries()
    assert e["outcome"] == "failed" and e["session"] == sid and e["code_head"] == code


def test_over_the_executions_quota_the_ladder_answers(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-executions", "1")
    api = d.api
    sid = api.create()["id"]
    busy = api.create()["id"]
    t = threading.Thread(target=lambda: api.exec(busy, "import time\ntime.sleep(3)"))
    t.start()
    try:
        wait_for(lambda: api.state(busy) == "busy", 10, interval=0.02, what="busy")
        st, doc = run(api, sid, {"code": "1 + 1"})
    finally:
        t.join(30)
    assert st == 200, doc
    assert doc["status"] == "degraded" and doc["attempts"] == [], doc
    assert doc["degraded"]["mode"] == "manual" and doc["degraded"]["sandbox_unavailable"]
    assert "executions quota" in doc["failure"]["reason"] if doc["failure"] else "executions quota" in doc["degraded"]["reason"]
    # Under the quota again: runs run.
    st, doc = run(api, sid, {"code": "1 + 1"})
    assert doc["status"] == "ok", doc


def test_ctl_run_and_runs_show(daemon):
    env = {"CICTL_SERVER": "http://127.0.0.1:%d" % daemon.port, "PATH": "/usr/bin:/bin"}
    sid = daemon.api.create()["id"]
    p = subprocess.run([CTL_BIN, "run", sid, "x = 6\nx * 7"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "42\n" and "[attempt 1: submitted, ok]" in p.stderr, p
    p = subprocess.run([CTL_BIN, "run", "--on-failure", "manual", unique_failure()], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p
    assert "NameError" in p.stderr and "run failed" in p.stderr and "degraded: manual" in p.stderr
    p = subprocess.run([CTL_BIN, "--json", "run", sid, "x"], env=env, capture_output=True,
                       text=True, timeout=60)
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["result"]["result"] == "6"
    p = subprocess.run([CTL_BIN, "runs", "show", "--wait", "1", doc["id"]], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "6\n", p
    p = subprocess.run([CTL_BIN, "run", "--on-failure", "nope", "1"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 5 and "on_failure" in p.stderr, p


def test_a_tenant_s_runs_in_progress_are_capped_and_old_ones_leave_memory(make_daemon):
    d = make_daemon("--pool-size", "0", "--max-runs-per-tenant", "1", "--max-runs", "2")
    api = d.api
    sid = api.create()["id"]
    other = api.create()["id"]
    s = api.stream("POST", "/v1/sessions/%s/runs" % sid,
                   {"code": "import time\ntime.sleep(2)\n'slow'", "stream": True})
    try:
        rid = next(s.events())[1]["run"]
        r = api.send("POST", "/v1/sessions/%s/runs" % other, {"code": "1"})
        assert r.status == 429 and "max-runs-per-tenant" in r.doc["error"]["message"], r.doc
        assert [e for _, e in s.events()][-1]["status"] == "ok"
    finally:
        s.close()
    # Finished runs make room for new ones; the evicted are answered from Redis.
    ids = [run(api, other, {"code": "%d" % i})[1]["id"] for i in range(4)]
    for i, x in enumerate([rid] + ids):
        st, doc = api.request("GET", "/v1/runs/" + x)
        assert st == 200 and doc["status"] == "ok", (i, doc)


def test_a_broken_record_in_redis_is_an_error_not_passed_through(make_daemon, redis_server):
    d1 = make_daemon("--pool-size", "0")
    d2 = make_daemon("--pool-size", "0", prefix=d1.prefix)
    st, doc = run(d1.api, None, {"code": "1"})
    key = "%srun:%s" % (d1.prefix, doc["id"])
    wait_for(lambda: redis_server.cli("HGET", key, "done").strip() == "1", 10,
             what="the run's record")
    for junk in ("not json", '{"id": "someone-else", "status": "ok", "attempts": []}', "[1, 2]"):
        redis_server.cli("HSET", key, "json", junk)
        r = d2.api.send("GET", "/v1/runs/" + doc["id"])
        assert r.status == 500 and "not a run" in r.doc["error"]["message"], (junk, r.status, r.body)
    redis_server.cli("HSET", key, "tenant", "../x")
    assert d2.api.send("GET", "/v1/runs/" + doc["id"]).status == 404
    # Still serving.
    assert run(d2.api, None, {"code": "2"})[1]["status"] == "ok"


def test_a_client_that_leaves_does_not_stop_or_lose_the_run(daemon):
    api = daemon.api
    sid = api.create()["id"]
    s = api.stream("POST", "/v1/sessions/%s/runs" % sid,
                   {"code": "import time\ntime.sleep(1)\nopen('/workspace/made', 'w').write('y')\n'kept'",
                    "stream": True})
    rid = next(s.events())[1]["run"]
    s.close()  # gone before the first attempt ends
    st, doc = api.request("GET", "/v1/runs/%s?wait_s=30" % rid, timeout=60)
    assert st == 200 and doc["status"] == "ok" and doc["result"]["result"] == "'kept'", doc
    assert api.request("GET", "/v1/sessions/%s/files/made" % sid)[0] == 200


def test_a_session_deleted_under_a_run_ends_it_through_the_ladder(daemon):
    api = daemon.api
    sid = api.create()["id"]
    got = {}
    t = threading.Thread(target=lambda: got.update(doc=run(api, sid, {"code": "import time\ntime.sleep(30)"})[1]))
    t.start()
    try:
        wait_for(lambda: api.state(sid) == "busy", 10, interval=0.02, what="the run's attempt")
        assert api.delete(sid) == 204
    finally:
        t.join(60)
    doc = got["doc"]
    assert doc["state"] == "done" and doc["status"] in ("failed", "degraded"), doc
    assert doc["degraded"]["mode"] == "manual"
