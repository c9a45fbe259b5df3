"""Issue 12: runs with a fixer. A scripted OpenAI-compatible server (real
HTTP on loopback, deterministic replies per model name) stands in for the
model: fixed at attempt 2, never fixed, fixer down or slow or nonsense,
the rules before the model, the failure memory (a hopeless pattern is
skipped, by class and by history), and the seed's scenario end to end."""
import base64

import pytest

from harness import FakeLLM, wait_for



@pytest.fixture(scope="module")
def llm():
    with FakeLLM({}) as fake:
        yield fake


@pytest.fixture(scope="module")
def fd(redis_server, tmpdir_session, llm):
    """A daemon that lets requests name the fake as their fixer."""
    from harness.daemon import Daemon
    d = Daemon(redis_server, tmpdir_session,
               ("--pool-size", "1", "--fixer-allowed-urls", llm.url, "--fixer-timeout-ms", "1500",
                "--failure-hopeless-after", "3", "--exec-timeout-s", "8", "--max-exec-timeout-s", "8"))
    yield d
    d.finish()


def fixer(llm, model):
    return {"url": llm.url, "model": model}


def post_run(api, sid, body):
    st, doc = api.request("POST", "/v1/sessions/%s/runs" % sid if sid else "/v1/runs", body,
                          timeout=120)
    assert st == 200, doc
    return doc


def prompt_text(req):
    return "\n".join(m.get("content", "") for m in req["messages"])


def requests_for(llm, model):
    return [r for r in llm.requests if r.get("model") == model]


def test_fixed_at_attempt_2_with_the_session_in_the_prompt(fd, llm):
    llm.add("fix-at-2", ["total = sum(prices)\ntotal"])
    api = fd.api
    sid = api.create()["id"]
    assert api.exec(sid, "prices = [1, 2, 39]\nopen('/workspace/notes.txt', 'w').write('x')\n"
                    "import numpy as np\ngrid = np.zeros((3, 4))")["status"] == "ok"
    doc = post_run(api, sid, {"code": "total = sum(price)\ntotal", "goal": "add the prices",
                              "fixer": fixer(llm, "fix-at-2")})
    assert doc["status"] == "ok", doc
    assert [a["source"] for a in doc["attempts"]] == ["submitted", "fixer"]
    first, second = doc["attempts"]
    assert first["status"] == "error" and first["error"]["ename"] == "NameError"
    assert second["status"] == "ok" and isinstance(second["fixer_ms"], int) and second["fixer_ms"] >= 0
    assert doc["result"]["result"] == "42"
    assert doc["failure"]["signature"] == first["signature"] and doc["failure"]["fixed"] >= 1
    assert doc["failure"]["reason"] is None and doc["degraded"] is None
    (req,) = requests_for(llm, "fix-at-2")
    text = prompt_text(req)
    for part in ("add the prices", "sum(price)", "NameError", "prices", "list", "notes.txt",
                 "- grid: ndarray, shape (3, 4), dtype float64\n"):
        assert part in text, (part, text)
    # The variables and files the fixer saw came from a probe that left nothing behind.
    assert api.exec(sid, "[k for k in globals() if 'probe' in k]")["result"] == "[]"
    # The failure memory counts the fix.
    st, fl = api.request("GET", "/v1/failures")
    entry = [f for f in fl["failures"] if f["signature"] == first["signature"]]
    assert entry and entry[0]["fixed"]["fixer"] >= 1, fl


def test_never_fixed_three_attempts_then_manual(fd, llm):
    llm.add("never", ["x = 1 / 0\nx", "y = [][3]"])
    doc = post_run(fd.api, None, {"code": "z = {}['k']", "fixer": fixer(llm, "never")})
    assert doc["status"] == "failed", doc
    assert [a["source"] for a in doc["attempts"]] == ["submitted", "fixer", "fixer"]
    assert [a["error"]["ename"] for a in doc["attempts"]] == ["KeyError", "ZeroDivisionError", "IndexError"]
    assert "3 attempts failed" in doc["failure"]["reason"]
    h = doc["degraded"]["handoff"]
    assert doc["degraded"]["mode"] == "manual" and h["code"] == "y = [][3]"
    assert [f["ename"] for f in h["failures"]] == ["KeyError", "ZeroDivisionError", "IndexError"]


@pytest.mark.parametrize("reply, says", [
    ({"delay_s": 5.0, "content": "```python\n1\n```"}, "deadline"),
    ({"status": 500, "body": "model crashed"}, "500"),
    ({"content": "I would rather not write code today."}, "code block"),
    ({"close": True}, ""),
])
def test_a_fixer_that_is_slow_broken_or_nonsense_ends_in_the_ladder(fd, llm, reply, says):
    model = "bad-%d" % abs(hash(str(reply)))
    llm.add(model, [reply])
    # A name of its own (letters: digits are masked in signatures), so that
    # the cases do not add up to a pattern the memory calls hopeless.
    name = "".join(chr(97 + int(c)) for c in model[4:14])
    doc = post_run(fd.api, None, {"code": name, "fixer": fixer(llm, model)})
    assert doc["status"] == "failed" and len(doc["attempts"]) == 1, doc
    err = doc["attempts"][0]["repair_error"]
    assert err["source"] == "fixer" and says in err["message"], err
    assert doc["degraded"]["mode"] == "manual"
    assert "fixer" in doc["failure"]["reason"]


def test_a_fixer_that_is_not_there(redis_server, tmpdir_session):
    from harness import free_port
    from harness.daemon import Daemon
    gone = "http://127.0.0.1:%d/v1" % free_port()
    d = Daemon(redis_server, tmpdir_session, ("--pool-size", "0", "--fixer-url", gone,
                                              "--fixer-model", "m"))
    try:
        doc = post_run(d.api, None, {"code": "undefined_fixer_gone"})
        err = doc["attempts"][0]["repair_error"]
        assert doc["status"] == "failed" and err["source"] == "fixer", doc
        assert doc["degraded"]["mode"] == "manual"
    finally:
        d.finish()


def test_a_request_may_not_aim_the_fixer_elsewhere(fd, llm):
    port = llm.url.split(":")[2].split("/")[0]
    for f in ({"url": "http://localhost:9/v1"}, {"url": "file:///etc/passwd"},
              {"url": llm.url.replace("http://", "http://user:pw@")},
              {"url": "http://127.0.0.1:%s0/v1" % port},
              {"url": llm.url, "api_key_file": "/etc/shadow"},
              {"url": llm.url, "api_key_file": "../x"}):
        r = fd.api.send("POST", "/v1/runs", {"code": "1", "fixer": f})
        assert r.status == 400 and "fixer" in r.doc["error"]["message"], (f, r.doc)


def test_rule_adds_a_well_known_import_without_the_fixer(fd, llm):
    doc = post_run(fd.api, None, {"code": "a = np.arange(4)\nint(a.sum())",
                                  "fixer": fixer(llm, "unused-by-rules")})
    assert doc["status"] == "ok", doc
    assert [a["source"] for a in doc["attempts"]] == ["submitted", "rule"]
    assert doc["attempts"][1]["rule"] and "import numpy as np" in doc["attempts"][1]["code"]
    assert doc["result"]["result"] == "6"
    assert requests_for(llm, "unused-by-rules") == []


def test_rule_names_the_near_miss_file(fd):
    api = fd.api
    sid = api.create()["id"]
    assert api.exec(sid, "open('/workspace/sales.csv', 'w').write('a,b\\n1,2\\n')")["status"] == "ok"
    doc = post_run(api, sid, {"code": "open('/workspace/Sales.csv').read()"})
    assert doc["status"] == "ok", doc
    assert doc["attempts"][1]["source"] == "rule" and "sales.csv" in doc["attempts"][1]["code"]
    assert "sales.csv" in doc["attempts"][1].get("note", doc["attempts"][0].get("note", ""))


def test_a_missing_module_is_hopeless_and_skipped_at_once(fd, llm):
    llm.add("module", ["import cv2"])  # not in the image (scikit-learn is)
    doc = post_run(fd.api, None, {"code": "import cv2\ncv2.__version__",
                                  "fixer": fixer(llm, "module")})
    assert doc["status"] == "skipped", doc
    assert len(doc["attempts"]) == 1 and doc["failure"]["class"] == "module_unavailable"
    assert "module_unavailable" in doc["failure"]["reason"]
    assert "opencv-python" in doc["degraded"]["handoff"]["packages"]
    assert requests_for(llm, "module") == []


def test_a_timeout_at_the_maximum_is_not_retried(fd, llm):
    llm.add("slow", ["while True: pass"])
    doc = post_run(fd.api, None, {"code": "while True: pass", "timeout_s": 8,
                                  "fixer": fixer(llm, "slow")})
    assert doc["status"] == "skipped" and doc["failure"]["class"] == "timeout_at_max", doc
    assert doc["attempts"][0]["status"] == "timeout" and requests_for(llm, "slow") == []


def test_a_pattern_repaired_often_and_never_fixed_is_skipped_the_next_time(fd, llm):
    api = fd.api
    code = "raise RuntimeError('upstream said 17')"
    llm.add("hopeless", ["raise RuntimeError('upstream said 18')", "raise RuntimeError('upstream said 19')"])
    first = post_run(api, None, {"code": code, "fixer": fixer(llm, "hopeless")})
    assert first["status"] == "failed" and len(first["attempts"]) == 3, first
    sigs = {a["signature"] for a in first["attempts"]}
    assert len(sigs) == 1, first  # the numbers are masked: one pattern
    assert first["failure"]["retried"] == 2, first  # two repairs ran
    # Repaired twice so far (--failure-hopeless-after 3): the model is asked
    # once more; that third repair fails the same way: skipped there.
    asked = len(requests_for(llm, "hopeless"))
    second = post_run(api, None, {"code": code, "fixer": fixer(llm, "hopeless")})
    assert second["status"] == "skipped", second
    assert [a["source"] for a in second["attempts"]] == ["submitted", "fixer"], second
    assert len(requests_for(llm, "hopeless")) == asked + 1
    # Three failed repairs: skipped at once, the model not asked.
    asked = len(requests_for(llm, "hopeless"))
    third = post_run(api, None, {"code": code, "fixer": fixer(llm, "hopeless")})
    assert third["status"] == "skipped" and len(third["attempts"]) == 1, third
    reason = third["failure"]["reason"]
    assert "never fixed" in reason and '"retry_hopeless": true' in reason, reason
    assert third["failure"]["seen"] >= 5 and third["failure"]["retried"] == 3, third
    assert len(requests_for(llm, "hopeless")) == asked  # the model was not asked again
    # The override, per request: the model is asked again.
    forced = post_run(api, None, {"code": code, "fixer": fixer(llm, "hopeless"),
                                  "retry_hopeless": True, "max_attempts": 2})
    assert forced["status"] == "failed" and len(forced["attempts"]) == 2, forced
    assert len(requests_for(llm, "hopeless")) == asked + 1
    # Forgetting it (DELETE /v1/failures/{sig}) lets it be retried.
    sig = sigs.pop()
    assert api.request("DELETE", "/v1/failures/" + sig)[0] == 204
    llm.add("hopeless-2", ["'recovered'"])
    third = post_run(api, None, {"code": code, "fixer": fixer(llm, "hopeless-2")})
    assert third["status"] == "ok", third


SEED_SETUP = """
import pandas as pd
df = pd.DataFrame({"Region": ["North", "South", "North", "East", "South"],
                   "Sales": [120, 80, 200, 50, 70]})
df.to_excel("/workspace/sales.xlsx", index=False)
"""

SEED_BUGGY = """
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_excel("/workspace/sales.xlsx")
totals = df.groupby("region")["sales"].sum()
"""

SEED_FIXED = """
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_excel("/workspace/sales.xlsx")
totals = df.groupby("Region")["Sales"].sum().sort_values(ascending=False)
totals.to_csv("/workspace/summary.csv")
totals.plot(kind="bar", title="Sales by region")
plt.show()
totals.to_dict()
"""


def test_the_seed_scenario_a_spreadsheet_analysis_repaired_by_the_fixer(fd, llm):
    llm.add("seed", [SEED_FIXED])
    api = fd.api
    sid = api.create()["id"]
    assert api.exec(sid, SEED_SETUP)["status"] == "ok"
    doc = post_run(api, sid, {"code": SEED_BUGGY, "goal": "Total sales per region as a bar chart, "
                              "and a summary.csv", "fixer": fixer(llm, "seed")})
    assert doc["status"] == "ok", doc
    assert [a["source"] for a in doc["attempts"]] == ["submitted", "fixer"]
    assert doc["attempts"][0]["error"]["ename"] == "KeyError"
    # the line of the agent's code the KeyError went through (pandas raised it)
    assert doc["attempts"][0]["error"]["cell_line"] == {
        "line": 5, "text": 'totals = df.groupby("region")["sales"].sum()'}, doc["attempts"][0]
    assert doc["attempts"][1]["error"] is None
    r = doc["result"]
    assert r["result"] == "{'North': 320, 'South': 150, 'East': 50}"
    (png,) = [d for d in r["display"] if d["mime"] == "image/png"]
    assert base64.b64decode(png["data"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert [f["path"] for f in r["files"]] == ["summary.csv"]
    st, body = api.request("GET", "/v1/sessions/%s/files/summary.csv" % sid)
    assert st == 200
    (req,) = requests_for(llm, "seed")
    text = prompt_text(req)
    assert "KeyError" in text and "sales.xlsx" in text and "df" in text
    # the frame's shape and columns with their dtypes: the model sees that
    # the column is 'Sales', not 'sales' (issue 29)
    assert "- df: DataFrame, shape (5, 2)\n  2 columns (name: dtype): 'Region': object, " \
        "'Sales': int64\n" in text, text
