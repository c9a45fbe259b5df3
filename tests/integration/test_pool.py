"""Issue 6: the warm pool. Creates it can serve are claimed from pre-started
sandboxes (limits applied live); the pool refills; others are created cold."""
import json
import subprocess

from harness import wait_for
from harness.servers import HttpServer


def memory_of(container):
    out = subprocess.run(["docker", "inspect", container], capture_output=True, text=True,
                         timeout=30)
    return json.loads(out.stdout)[0]["HostConfig"]["Memory"]


def test_pool_serves_refills_and_applies_limits(make_daemon):
    d = make_daemon("--pool-size", "2")
    api = d.api
    wait_for(lambda: d.metric("ci_pool_size") == 2, 60, interval=0.1, what="a full pool")
    hits = d.metric("ci_pool_hits_total")
    s = api.create(limits={"memory_mb": 128})
    try:
        assert d.metric("ci_pool_hits_total") == hits + 1
        assert s["limits"]["memory_mb"] == 128 and s["tenant"] == "default"
        (cid,) = d.containers("label=ci.session=" + s["id"])
        assert memory_of(cid) == 128 << 20  # applied to the running container
        assert api.exec(s["id"], "x = 1")["status"] == "ok"
        assert api.exec(s["id"], "x + 1")["result"] == "2"
        r = api.exec(s["id"], "b = bytearray(400 * 1024 * 1024)")
        assert r["status"] == "killed" and "out of memory" in r["reason"]
        # The pool makes up for the one it gave away.
        wait_for(lambda: d.metric("ci_pool_size") == 2, 60, interval=0.1,
                 what="the pool to refill")
        # A pool sandbox is nobody's session.
        listed = [x["id"] for x in api.request("GET", "/v1/sessions")[1]["sessions"]]
        assert listed == [s["id"]]
    finally:
        api.delete(s["id"])


def test_requests_the_pool_cannot_serve_are_created_cold(make_daemon):
    d = make_daemon("--pool-size", "1")
    api = d.api
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1, what="a full pool")
    hits = d.metric("ci_pool_hits_total")
    s = api.create(env={"GREETING": "hello"}, limits={"disk_mb": 64})
    try:
        assert d.metric("ci_pool_hits_total") == hits
        assert d.metric("ci_pool_size") == 1
        r = api.exec(s["id"], "import os; os.environ['GREETING']")
        assert r["result"] == "'hello'"
    finally:
        api.delete(s["id"])


def test_network_pool_serves_allowlisted_sessions(make_daemon, tmp_path):
    server = HttpServer(body=b"hello from the test's own server")
    port = server.port
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 allowed.test other.test\n")
    try:
        d = make_daemon("--pool-size", "0", "--pool-network-size", "1",
                        "--egress-resolver", "hosts-only", "--egress-hosts-file", str(hosts),
                        "--egress-trusted", "127.0.0.1:%d" % port)
        api = d.api
        wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1,
                 what="a warm networked sandbox")
        s = api.create(network={"allow": ["allowed.test:%d" % port]})
        try:
            assert d.metric("ci_pool_hits_total") == 1
            code = ("import urllib.request\n"
                    "urllib.request.urlopen('http://allowed.test:%d/').read()" % port)
            r = api.exec(s["id"], code)
            assert r["status"] == "ok" and "hello from the test" in r["result"], r
            r = api.exec(s["id"], code.replace("allowed.test", "other.test"))
            assert r["status"] == "error" and "403" in r["error"]["evalue"], r
        finally:
            api.delete(s["id"])
    finally:
        server.stop()
