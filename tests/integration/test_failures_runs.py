"""The rules before the model and the failure memory, through runs
(POST /v1/sessions/{id}/runs): each rule repairs or reports without a round
trip to the model, the memory counts what runs saw, retried and fixed, and
a pattern known to be hopeless is skipped the next time with the reason."""
import json
import re
import subprocess

import pytest

from harness import CTL_BIN, wait_for

from harness.fake_llm import FakeLLM

SIG = re.compile(r"[0-9a-f]{16}")


def run(d, sid, code, fixer=None, **extra):
    body = dict(code=code, max_attempts=3, on_failure=["manual"], **extra)
    if fixer is not None:
        body["fixer"] = fixer
    status, doc = d.api.request("POST", "/v1/sessions/%s/runs" % sid, body=body, timeout=120)
    assert status == 200, (status, doc)
    return doc


def failures(d):
    status, doc = d.api.request("GET", "/v1/failures")
    assert status == 200, (status, doc)
    return {f["signature"]: f for f in doc["failures"]}


@pytest.fixture
def rig(make_daemon):
    # A fixer whose code never helps: whatever a run fixes here, a rule fixed.
    with FakeLLM(replies={"m": ["raise RuntimeError('the fixer cannot help')"]}) as llm:
        d = make_daemon("--pool-size", "0", "--failure-hopeless-after", "2",
                        "--fixer-allowed-urls", llm.url)
        s = d.api.create()
        try:
            yield d, s["id"], {"url": llm.url, "model": "m"}, llm
        finally:
            d.api.delete(s["id"])


def test_import_alias_rule_in_a_run(rig):
    d, sid, fixer, llm = rig
    r = run(d, sid, "x = np.arange(5)\nprint(int(x.sum()))", fixer)
    assert r["status"] == "ok", r
    assert [a["source"] for a in r["attempts"]] == ["submitted", "rule"]
    assert r["attempts"][1]["code"].startswith("import numpy as np\n")
    assert r["result"]["stdout"] == "10\n"
    assert llm.requests == []  # no round trip
    f = failures(d)[r["failure"]["signature"]] if r.get("failure") else \
        [f for f in failures(d).values() if f["ename"] == "NameError"][0]
    assert f["fixed"]["rule"] == 1 and f["seen"] == 1


def test_file_near_miss_rule_in_a_run(rig):
    d, sid, fixer, llm = rig
    status, _ = d.api.request("PUT", "/v1/sessions/%s/files/data/Sales.csv" % sid,
                              raw=b"a,b\n1,2\n")
    assert status in (200, 201)
    r = run(d, sid, "print(open('data/sales.csv').read().splitlines()[1])", fixer)
    assert r["status"] == "ok", r
    assert r["attempts"][-1]["source"] == "rule"
    assert "data/Sales.csv" in r["attempts"][-1]["code"]
    assert r["result"]["stdout"] == "1,2\n"
    assert llm.requests == []


def test_module_report_rule_and_the_class_in_a_run(rig):
    d, sid, fixer, llm = rig
    r = run(d, sid, "import cv2", fixer)  # not in the image (scikit-learn is)
    assert r["status"] != "ok", r
    assert r["failure"] and SIG.fullmatch(r["failure"]["signature"])
    assert "module" in r["failure"]["reason"]
    # not retried: a module that cannot be installed is hopeless by class
    assert len(r["attempts"]) == 1
    assert "opencv-python" in str(r["attempts"][0].get("error")) + str(r["degraded"])
    assert failures(d)[r["failure"]["signature"]]["class"] == "module_unavailable"


def test_hopeless_by_history_is_skipped_with_the_reason(rig):
    d, sid, fixer, llm = rig
    code = "rows = [1, 2]\nprint(rows[%d])"
    # The fixer's code fails otherwise (RuntimeError), then it answers the
    # same code again: the run stops there (nothing new to try).
    first = run(d, sid, code % 7, fixer)
    assert first["status"] == "failed", first
    a, b = (x["signature"] for x in first["attempts"])
    assert a != b and first["failure"]["signature"] == b
    assert "same code" in first["attempts"][1]["repair_error"]["message"]
    # The same mistake with other data has the same signature; seen twice
    # but repaired only once (--failure-hopeless-after 2): repaired again.
    second = run(d, sid, code % 9, fixer)
    assert second["status"] == "failed", second
    assert [x["signature"] for x in second["attempts"]] == [a, b]
    # Repaired twice, never fixed: skipped at once, and says how to override.
    third = run(d, sid, code % 11, fixer)
    assert third["status"] == "skipped", third
    assert len(third["attempts"]) == 1 and third["failure"]["signature"] == a
    reason = third["failure"]["reason"]
    assert third["failure"]["seen"] == 3 and third["failure"]["retried"] == 2, third
    assert "never fixed" in reason and '"retry_hopeless": true' in reason, reason
    assert "tried 2 times" in reason and a in reason, reason
    f = failures(d)[a]
    assert f["seen"] == 3 and f["retried"] == 2 and f["fixed"] == {"rule": 0, "fixer": 0}
    # The override, per request: repaired anyway; the next run without it
    # is skipped again.
    asked = len(llm.requests)
    forced = run(d, sid, code % 12, fixer, retry_hopeless=True)
    assert [x["signature"] for x in forced["attempts"]] == [a, b], forced
    assert forced["attempts"][1]["source"] == "fixer" and len(llm.requests) > asked
    assert run(d, sid, code % 14, fixer)["status"] == "skipped"
    # ci-ctl run --retry-hopeless sends it (this daemon has no default
    # fixer: not skipped, failed for want of one)
    env = {"CICTL_SERVER": "http://127.0.0.1:%d" % d.port, "PATH": "/usr/bin:/bin"}
    for flags, status in (([], "skipped"), (["--retry-hopeless"], "failed")):
        p = subprocess.run([CTL_BIN, "--json", "run", *flags, sid, code % 15], env=env,
                           capture_output=True, text=True, timeout=120)
        doc = json.loads(p.stdout)
        assert doc["status"] == status and doc["attempts"][0]["signature"] == a, (flags, doc)
    # Forgotten: retried again.
    assert d.api.request("DELETE", "/v1/failures/" + a)[0] == 204
    again = run(d, sid, code % 13, fixer)
    assert len(again["attempts"]) == 2 and again["attempts"][0]["signature"] == a
    wait_for(lambda: failures(d).get(a, {}).get("seen") == 1, 10, what="a fresh entry")


def test_sightings_without_a_repair_never_make_a_pattern_hopeless(rig):
    """Issue 29: three runs with no fixer (nothing could repair the
    KeyError) do not switch repair off: the fourth, with a fixer, asks it."""
    d, sid, fixer, llm = rig
    code = "totals = {'revenue': %d}\nprint(totals['Revenue'])"
    for i in range(3):
        r = run(d, sid, code % i)  # no fixer: this daemon has no --fixer-url
        assert r["status"] == "failed" and len(r["attempts"]) == 1, r
        assert "no fixer is configured" in r["failure"]["reason"], r
    sig = r["failure"]["signature"]
    f = failures(d)[sig]
    assert f["seen"] == 3 and f["retried"] == 0, f
    assert llm.requests == []
    r = run(d, sid, code % 9, fixer)
    assert r["status"] != "skipped", r
    assert llm.requests and "KeyError" in str(llm.requests[0])
    assert [a["source"] for a in r["attempts"]][:2] == ["submitted", "fixer"], r
    f = failures(d)[sig]
    assert f["seen"] == 4 and f["retried"] == 1, f
