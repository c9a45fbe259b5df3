"""Issue 12: the degradation ladder while the sandbox tier is down. With the
Docker engine unreachable a run cannot have a session; its ladder answers:
the stateless tier runs stdlib code (same result shape, degraded.mode
stateless), code it cannot run goes on to the manual handoff, and once the
engine is back runs run in sandboxes again."""
from chaos_lib import request
from harness import wait_for


def _run(d, body):
    status, doc, _ = request(d, "POST", "/v1/runs", body, timeout=60)
    assert status == 200, (status, doc)
    return doc


def test_stateless_tier_answers_while_the_engine_is_unreachable(docker_forwarder, chaos):
    f = docker_forwarder
    d = chaos("--docker", f.path, "--pool-size", "0")
    assert _run(d, {"code": "1 + 1", "on_failure": ["stateless"]})["status"] == "ok"
    f.down()
    try:
        wait_for(lambda: request(d, "GET", "/readyz", timeout=5)[0] == 503, 10, interval=0.05,
                 what="/readyz to see the engine gone")
        doc = _run(d, {"code": "import math\nprint('hi')\nmath.factorial(5)",
                       "on_failure": ["stateless", "manual"]})
        assert doc["status"] == "degraded", doc
        assert doc["attempts"] == []
        dg = doc["degraded"]
        assert dg["mode"] == "stateless" and dg["sandbox_unavailable"] is True, dg
        # The stateless tier's result is the run's result.
        assert doc["result"]["status"] == "ok" and doc["result"]["result"] == "120"
        assert doc["result"]["stdout"] == "hi\n"
        # Same shape as any execution: the error is structured there too
        # (the last rung's result is the answer; the run is degraded, for
        # the sandbox tier could not take it).
        doc = _run(d, {"code": "def f():\n    return 1 / 0\nf()", "on_failure": ["stateless"]})
        dg = doc["degraded"]
        assert doc["status"] == "degraded" and dg["mode"] == "stateless", doc
        assert doc["result"]["status"] == "error"
        assert doc["result"]["error"]["ename"] == "ZeroDivisionError"
        assert any("return 1 / 0" in line for line in doc["result"]["error"]["traceback"])
        # What the weak tier cannot run goes on down the ladder.
        doc = _run(d, {"code": "import numpy\nnumpy.zeros(3)", "on_failure": ["stateless", "manual"]})
        dg = doc["degraded"]
        assert doc["status"] == "degraded" and dg["mode"] == "manual", doc
        assert "stateless" in dg["tried"] and "ModuleNotFoundError" in dg["tried"], dg
        assert dg["handoff"]["packages"] == ["numpy"]
        # Without a ladder, the run says the tier was unavailable.
        doc = _run(d, {"code": "1", "on_failure": []})
        assert doc["status"] == "failed" and doc["degraded"] is None
        assert "unavailable" in doc["failure"]["reason"] if doc["failure"] else True
    finally:
        f.up()
    wait_for(lambda: request(d, "GET", "/readyz", timeout=5)[0] == 200, 20, interval=0.05,
             what="/readyz 200 again")
    doc = _run(d, {"code": "6 * 7", "on_failure": ["stateless"]})
    assert doc["status"] == "ok" and doc["degraded"] is None and doc["result"]["result"] == "42"
