"""The stateless tier while the Docker engine is unreachable (issue 12, the
chaos case of item 4): POST /v1/runs with on_failure ["stateless"], the
daemon's way to the engine cut (chaos_lib.DockerForwarder; the real dockerd is
never touched). The sandbox tier is unavailable, so the ladder runs the code in
the stateless tier: degraded.mode "stateless", the exec result of the usual
shape, stdlib only, nothing of the host's network."""
from chaos_lib import request
from harness import wait_for


def _degraded_run(d, code, **extra):
    body = {"code": code, "on_failure": ["stateless"], "max_attempts": 1}
    body.update(extra)
    status, doc, _ = request(d, "POST", "/v1/runs", body, timeout=60)
    assert status == 200, (status, doc)
    return doc


def test_stateless_tier_during_an_engine_outage(docker_forwarder, chaos):
    f = docker_forwarder
    d = chaos("--docker", f.path, "--pool-size", "0", "--log-level", "debug")
    wait_for(lambda: "stateless tier: available" in open(d.log_path).read(), 20,
             what="the stateless tier's start check")
    f.down()
    try:
        wait_for(lambda: request(d, "GET", "/readyz", timeout=5)[0] == 503, 10,
                 what="/readyz to say the engine is down")
        doc = _degraded_run(d, "import json, statistics\nprint('mean', statistics.mean([1, 2, 3]))\n6 * 7\n")
        assert doc["status"] == "degraded", doc
        assert doc["degraded"]["mode"] == "stateless", doc
        r = doc["result"]
        assert r["status"] == "ok" and r["result"] == "42" and r["stdout"] == "mean 2\n", r
        assert r["files"] == [] and r["error"] is None
        # An error has the kernel's traceback shape.
        doc = _degraded_run(d, "def f():\n    return {}['k']\nf()\n")
        assert doc["degraded"]["mode"] == "stateless"
        e = doc["result"]["error"]
        assert e["ename"] == "KeyError" and any("<cell-1>" in line for line in e["traceback"])
        # Still no network, no packages.
        doc = _degraded_run(d, "import numpy\n")
        assert doc["result"]["error"]["ename"] == "ModuleNotFoundError"
    finally:
        f.up()
