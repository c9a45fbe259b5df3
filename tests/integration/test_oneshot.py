"""Issue 3: POST /v1/exec, the one-shot stateless execution: a sandbox for one
piece of code, removed afterwards."""
import threading
import time

import pytest

from harness import Daemon, wait_for
from helpers_exec import error_of


# These tests follow containers by id, so they run on a daemon without a warm
# pool (whose refills would come and go under them).
@pytest.fixture(scope="module")
def daemon(redis_server, tmpdir_session):
    d = Daemon(redis_server, tmpdir_session, ("--pool-size", "0"))
    yield d
    d.finish()


@pytest.fixture
def api(daemon):
    return daemon.api


def oneshot(api, body, timeout=120):
    return api.request("POST", "/v1/exec", body=body, timeout=timeout)


def test_oneshot_runs_and_leaves_nothing(daemon, api):
    before = set(daemon.containers())
    sessions_before = {s["id"] for s in api.request("GET", "/v1/sessions")[1]["sessions"]}
    status, r = oneshot(api, {"code": "print(6*7)"})
    assert status == 200, (status, r)
    assert r["status"] == "ok" and r["stdout"] == "42\n" and r["stderr"] == "", r
    assert r["result"] is None and r["error"] is None
    assert isinstance(r["duration_ms"], int) and r["duration_ms"] >= 0
    t0 = time.monotonic()
    wait_for(lambda: set(daemon.containers()) <= before, 10, interval=0.1,
             what="the one-shot container to be removed")
    print("\n[measure] one-shot container gone %.2f s after the answer" % (time.monotonic() - t0))
    sessions_after = {s["id"] for s in api.request("GET", "/v1/sessions")[1]["sessions"]}
    assert sessions_after <= sessions_before, sessions_after - sessions_before


def test_oneshot_uses_a_container_of_its_own_and_removes_it(daemon, api):
    before = set(daemon.containers())
    out = {}
    t = threading.Thread(target=lambda: out.setdefault(
        # (the sandbox's sleep keeps the one-shot running while we look)
        "r", oneshot(api, {"code": "import time\ntime.sleep(1.5)\n'slept'", "timeout_s": 10})))
    t.start()
    try:
        new = wait_for(lambda: set(daemon.containers()) - before, 15, interval=0.05,
                       what="a container for the one-shot")
        assert len(new) == 1, new
    finally:
        t.join(60)
    status, r = out["r"]
    assert status == 200 and r["status"] == "ok" and r["result"] == "'slept'", (status, r)
    wait_for(lambda: not (set(daemon.containers()) & new), 10, interval=0.1,
             what="the one-shot container to be removed")


def test_oneshot_results_errors_and_timeouts(daemon, api):
    before = set(daemon.containers())
    status, r = oneshot(api, {"code": "x = 6\nx * 7", "image": "python"})
    assert status == 200 and r["result"] == "42", r
    # Stateless: nothing carries over from the previous one.
    status, r = oneshot(api, {"code": "x"})
    assert status == 200 and r["status"] == "error" and r["error"]["ename"] == "NameError", r
    status, r = oneshot(api, {"code": "1/0"})
    assert r["status"] == "error" and r["error"]["ename"] == "ZeroDivisionError", r
    assert "line 1" in "\n".join(r["error"]["traceback"])
    t0 = time.monotonic()
    status, r = oneshot(api, {"code": "while True:\n    pass", "timeout_s": 1})
    took = time.monotonic() - t0
    assert status == 200 and r["status"] == "timeout", r
    # A hang detector, not a speed claim: a 1 s deadline answered within ten.
    assert took < 10, took
    wait_for(lambda: set(daemon.containers()) <= before, 15, interval=0.1,
             what="every one-shot container to be removed")


def test_oneshot_bad_body(daemon, api):
    before = set(daemon.containers())
    bad = [
        dict(raw=b"{not json"),
        dict(raw=b"[1]"),
        dict(body={}),
        dict(body={"code": 5}),
        dict(body={"code": "1", "bogus": True}),
        dict(body={"code": "1", "timeout_s": "x"}),
        dict(body={"code": "1", "timeout_s": 0}),
        dict(body={"code": "1", "image": "no-such-profile"}),
    ]
    for kw in bad:
        assert error_of(api.request("POST", "/v1/exec", **kw)) == (400, "bad_request"), kw
    big = b'{"code":"' + b"x" * (3 << 20) + b'"}'
    assert error_of(api.request("POST", "/v1/exec", raw=big)) == (413, "payload_too_large")
    assert error_of(api.request("GET", "/v1/exec")) == (405, "method_not_allowed")
    # Refused requests start nothing.
    assert set(daemon.containers()) <= before
