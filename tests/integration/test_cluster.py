"""Issue 15, item 5: several daemons on one Redis and one key prefix.

Three daemons share the host's engine, one Redis and one key prefix, with
node names, state directories and ports of their own (make_daemon). They
heartbeat into Redis, place new sessions on the node with room, answer for
any session by forwarding to its owner, answer 410 node_lost for the sessions
of a node that stopped heartbeating, and a node that comes back ends exactly
the sessions that were declared lost. Sharing one engine does not prove what
separate engines and hosts would (docs/deploy.md, "Several nodes on one
Redis")."""
import json
import os
import signal
import subprocess
import time
import uuid

import pytest

from harness import wait_for

SECRET = "ci15-cluster-test-secret-" + "x" * 40


@pytest.fixture
def cluster(make_daemon, tmp_path):
    """make(n, *flags per node...): n daemons sharing one prefix, each
    advertising its loopback URL, with a cluster secret."""
    secret = tmp_path / "cluster-secret"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, 0o600)
    prefix = "ci15-cluster-%s:" % uuid.uuid4().hex[:8]
    stopped = []

    def make(*per_node):
        nodes = []
        for i, flags in enumerate(per_node):
            # Nodes on one host take disjoint uid ranges (docs/deploy.md).
            d = make_daemon("--pool-size", "0", "--cluster-secret-file", str(secret),
                            "--sandbox-uid-base", str(600000 + 10000 * i),
                            "--sandbox-uid-count", "2048", *flags, prefix=prefix)
            d.stopped = stopped
            nodes.append(d)
        return nodes

    yield make
    # A node left stopped would never hear the harness's SIGTERM.
    for d in stopped:
        if d.proc.poll() is None:
            os.kill(d.proc.pid, signal.SIGCONT)


def nodes_of(d):
    status, doc = d.admin.request("GET", "/v1/admin/nodes")
    assert status == 200, (status, doc)
    return {n["node"]: n for n in doc["nodes"]}


def wait_all_live(nodes, timeout=15):
    names = {d.node for d in nodes}
    for d in nodes:
        wait_for(lambda: all(n in nodes_of(d) and nodes_of(d)[n]["state"] == "live"
                             for n in names), timeout,
                 what="%s to see every node live" % d.node)


def containers(d, sid):
    """sid's containers on d's node (the prefix is shared: the node label says whose)."""
    return d.containers("label=ci.session=" + sid, "label=ci.node=" + d.node)


def test_heartbeats_visible_in_admin_nodes_and_ctl(cluster, redis_server):
    a, b, c = cluster((), ("--max-sessions", "7"), ())
    wait_all_live([a, b, c])
    view = nodes_of(a)
    nb = view[b.node]
    assert nb["url"] == "http://127.0.0.1:%d" % b.port
    assert nb["max_sessions"] == 7 and nb["room"] == 7 and nb["sessions"] == 0
    assert nb["draining"] is False and nb["version"]
    assert nb["heartbeat_ms"] >= nb["started_ms"] > 0
    # What Redis holds: the heartbeat with its TTL, and the node's score.
    hb = json.loads(redis_server.cli("GET", a.prefix + "heartbeat:" + b.node))
    assert hb["node"] == b.node and hb["max_sessions"] == 7
    ttl = int(redis_server.cli("PTTL", a.prefix + "heartbeat:" + b.node))
    assert 0 < ttl <= 4000
    assert redis_server.cli("ZSCORE", a.prefix + "nodes", b.node) != ""
    # ci-ctl nodes: a table, and --json.
    out = a.ctl("nodes")
    assert out.returncode == 0, out.stderr
    for d in (a, b, c):
        assert d.node in out.stdout
    assert "live" in out.stdout
    out = a.ctl("nodes", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {n["node"] for n in doc["nodes"]} >= {a.node, b.node, c.node}
    m = a.metrics()
    assert m['ci_cluster_nodes{state="live"}'] == 3 and m['ci_cluster_nodes{state="lost"}'] == 0
    assert m['ci_cluster_heartbeats_total{outcome="written"}'] >= 1


def test_placement_when_full_and_calls_through_the_receiving_node(cluster):
    a, b, c = cluster(("--max-sessions", "1"), (), ())
    wait_all_live([a, b, c])
    first = a.api.create()
    assert first["node"] == a.node  # room here: here
    wait_for(lambda: nodes_of(a)[a.node]["room"] == 0, 10, what="a's heartbeat to say full")
    second = a.api.create()
    assert second["node"] in (b.node, c.node), second
    assert a.metric('ci_cluster_routed_total{to="placed"}') == 1
    owner = b if second["node"] == b.node else c
    assert containers(owner, second["id"]) and not containers(a, second["id"])
    sid = second["id"]
    # Exec, files and delete of it through a.
    assert a.api.exec(sid, "6 * 7")["result"] == "42"
    st, _ = a.api.request("PUT", "/v1/sessions/%s/files/x.txt" % sid, raw=b"through a",
                          headers={"Content-Type": "application/octet-stream"})
    assert st in (200, 201, 204), st
    r = a.api.send("GET", "/v1/sessions/%s/files/x.txt" % sid)
    assert r.status == 200 and r.body == b"through a"
    assert a.api.delete(sid) == 204
    wait_for(lambda: not containers(owner, sid), 30, what="the container to go")
    assert a.api.request("GET", "/v1/sessions/" + sid)[0] == 410
    assert a.api.delete(first["id"]) == 204


def test_full_everywhere_names_how_many_nodes_were_asked(cluster):
    a, b = cluster(("--max-sessions", "1"), ("--max-sessions", "1"))
    wait_all_live([a, b])
    s1 = a.api.create()
    s2 = b.api.create()
    try:
        wait_for(lambda: all(n["room"] == 0 for n in nodes_of(a).values()), 10,
                 what="both heartbeats to say full")
        st, doc = a.api.request("POST", "/v1/sessions", body={})
        assert st == 503 and doc["error"]["code"] == "unavailable", (st, doc)
        assert "1 other live node" in doc["error"]["message"], doc
    finally:
        a.api.delete(s1["id"])
        b.api.delete(s2["id"])


def test_session_on_c_answered_through_a_and_b(cluster):
    a, b, c = cluster((), (), ())
    wait_all_live([a, b, c])
    s = c.api.create()
    sid = s["id"]
    assert s["node"] == c.node
    try:
        for via in (a, b):
            assert via.api.exec(sid, "x = %d\nx" % via.port)["result"] == str(via.port)
            st, doc = via.api.request("GET", "/v1/sessions/" + sid)
            assert st == 200 and doc["node"] == c.node
            # Streamed: the events come as C writes them.
            with via.api.stream("POST", "/v1/sessions/%s/exec" % sid,
                                body={"code": "for i in range(3): print(i, flush=True)",
                                      "stream": True}) as resp:
                assert resp.status == 200
                assert "ndjson" in resp.header("content-type", "")
                events = [e for _, e in resp.events()]
            assert [e.get("text") for e in events if e.get("type") == "stdout"]
            assert events[-1]["type"] in ("result", "done", "end"), events[-1]
            body = os.urandom(300000)
            st, _ = via.api.request("PUT", "/v1/sessions/%s/files/blob.bin" % sid, raw=body,
                                    headers={"Content-Type": "application/octet-stream"})
            assert st in (200, 201, 204)
            r = via.api.send("GET", "/v1/sessions/%s/files/blob.bin" % sid)
            assert r.status == 200 and r.body == body
        # Listed on every node, with its node.
        for via in (a, b, c):
            listed = via.api.request("GET", "/v1/sessions")[1]["sessions"]
            assert [(x["id"], x["node"]) for x in listed] == [(sid, c.node)], via.node
        # An unknown id stays 404.
        st, doc = a.api.request("GET", "/v1/sessions/00000000-0000-4000-8000-000000000000")
        assert st == 404
    finally:
        c.api.delete(sid)


def poll_status(d, path, timeout):
    """GET path on d until it answers (a forwarded call to a stopped node
    hangs: each try has a short timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            st, doc = d.api.request("GET", path, timeout=0.5)
            if st == 410:
                return st, doc
        except OSError:
            pass
    raise AssertionError("no 410 from %s within %ss" % (d.node, timeout))


def test_stopped_node_is_lost_and_reconciles_on_return(cluster, redis_server):
    a, b, c = cluster((), (), ())
    wait_all_live([a, b, c])
    lost = c.api.create()
    kept = c.api.create()
    assert containers(c, lost["id"]) and containers(c, kept["id"])
    assert a.api.exec(lost["id"], "1")["result"] == "1"  # a knows its owner
    c.stopped.append(c)
    os.kill(c.proc.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        st, doc = poll_status(a, "/v1/sessions/" + lost["id"], 10)
        took = time.monotonic() - t0
        print("node_lost answered %.2f s after SIGSTOP" % took)
        assert doc["error"]["code"] == "node_lost", doc
        msg = doc["error"]["message"]
        assert c.node in msg and "has not heartbeated since" in msg and "4000 ms" in msg, msg
        # The tomb holds, and every node says the same.
        tomb = json.loads(redis_server.cli("GET", a.prefix + "tomb:" + lost["id"]))
        assert tomb["reason"].startswith("node_lost") and tomb["node"] == c.node
        last = float(redis_server.cli("ZSCORE", a.prefix + "nodes", c.node))
        print("node_lost tombstoned %.2f s after c's last heartbeat"
              % ((tomb["ended_at_ms"] - last) / 1000.0))
        for via in (a, b):
            st, doc = via.api.request("GET", "/v1/sessions/" + lost["id"], timeout=5)
            assert st == 410 and doc["error"]["code"] == "node_lost", (st, doc)
        st, _ = a.api.request("POST", "/v1/sessions/%s/exec" % lost["id"],
                              body={"code": "1"}, timeout=5)
        assert st == 410
        wait_for(lambda: nodes_of(a)[c.node]["state"] == "lost", 5, what="c listed lost")
        mark = c.log_mark()
    finally:
        os.kill(c.proc.pid, signal.SIGCONT)
    # C comes back: ends exactly the tombstoned session, keeps the other.
    c.wait_log("session %s: ended here" % lost["id"], timeout=15, since=mark)
    wait_for(lambda: not containers(c, lost["id"]), 30, what="the lost session's container to go")
    assert containers(c, kept["id"])
    assert c.log_since(mark).count("ended here") == 1
    assert a.api.exec(kept["id"], "2 + 2")["result"] == "4"
    assert c.metric("ci_cluster_reconciled_total") == 1
    assert a.metric('ci_cluster_routed_total{to="node_lost"}') >= 1
    assert redis_server.cli("EXISTS", a.prefix + "session:" + lost["id"]) == "0"
    assert redis_server.cli("SISMEMBER", a.prefix + "node:%s:sessions" % c.node,
                            lost["id"]) == "0"
    # Still node_lost, now from the tombstone alone, here and on C itself.
    for via in (a, c):
        st, doc = via.api.request("GET", "/v1/sessions/" + lost["id"])
        assert st == 410 and doc["error"]["code"] == "node_lost", (via.node, st, doc)
    assert json.loads(redis_server.cli("GET", a.prefix + "tomb:" + lost["id"]))["reason"] \
        == tomb["reason"]  # not rewritten
    wait_all_live([a])
    c.api.delete(kept["id"])


def test_killed_node_restarts_and_its_sessions_answer_through_a(cluster):
    a, b, c = cluster((), (), ())
    wait_all_live([a, b, c])
    s = c.api.create()
    sid = s["id"]
    assert a.api.exec(sid, "y = 5\ny")["result"] == "5"
    c.kill()
    c.restart()
    wait_for(lambda: nodes_of(a)[c.node]["state"] == "live" and c.api.state(sid) == "ready",
             30, what="c back with its session")
    assert a.api.exec(sid, "y + 1")["result"] == "6"
    assert a.api.delete(sid) == 204


def test_another_tenants_session_on_a_peer_is_not_reached_nor_tombstoned(make_daemon,
                                                                       redis_server, tmp_path):
    secret = tmp_path / "s2"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, 0o600)
    prefix = "ci15-cluster-%s:" % uuid.uuid4().hex[:8]
    admin = "ci15-cluster-admin-" + uuid.uuid4().hex
    a, c = [make_daemon("--pool-size", "0", "--cluster-secret-file", str(secret), prefix=prefix,
                        admin_key=admin) for _ in range(2)]
    wait_all_live([a, c])
    t1 = a.client(a.key("t1")["key"])
    t2 = a.client(a.key("t2")["key"])
    s = c.client(t1.api_key).create()
    sid = s["id"]
    try:
        assert t1.exec(sid, "3")["result"] == "3"  # through a: the owner's tenant
        assert t2.request("GET", "/v1/sessions/" + sid)[0] == 404
        assert t2.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "1"})[0] == 404
        assert t2.request("GET", "/v1/sessions")[1]["sessions"] == []
        assert [x["id"] for x in t1.request("GET", "/v1/sessions")[1]["sessions"]] == [sid]
        # A client posing as a peer is refused.
        st, doc = t2.request("GET", "/v1/sessions/" + sid,
                             headers={"X-CI-Cluster-Token": "not-the-secret"})
        assert st == 403, (st, doc)
        # c lost: another tenant's asking writes no tomb for it.
        os.kill(c.proc.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: nodes_of(a)[c.node]["state"] == "lost", 10, what="c lost")
            assert t2.request("GET", "/v1/sessions/" + sid, timeout=5)[0] == 404
            assert redis_server.cli("EXISTS", prefix + "tomb:" + sid) == "0"
        finally:
            os.kill(c.proc.pid, signal.SIGCONT)
        wait_all_live([a, c])
        assert t1.exec(sid, "4")["result"] == "4"
    finally:
        c.client(t1.api_key).delete(sid)


def test_forget_a_lost_node(cluster, redis_server):
    a, c = cluster((), ())
    wait_all_live([a, c])
    s = c.api.create()
    sid = s["id"]
    # A live node is refused, an unknown one is 404, a bad name 400.
    out = a.ctl("nodes", "--forget", c.node)
    assert out.returncode != 0 and "is live" in out.stderr, (out.stdout, out.stderr)
    assert a.admin.request("DELETE", "/v1/admin/nodes?node=nosuchnode")[0] == 404
    assert a.admin.request("DELETE", "/v1/admin/nodes")[0] == 400
    c.kill()  # gone for good; its container stays on the engine (the harness removes it)
    wait_for(lambda: nodes_of(a)[c.node]["state"] == "lost", 10, what="c lost")
    out = a.ctl("nodes", "--forget", c.node)
    assert out.returncode == 0, out.stderr
    assert "forgot node %s: 1 of its sessions ended" % c.node in out.stdout
    wait_for(lambda: c.node not in nodes_of(a), 5, what="c to leave a's view")
    for key in ("expiry:" + c.node, "node:%s:sessions" % c.node, "lost:" + c.node,
                "session:" + sid):
        assert redis_server.cli("EXISTS", a.prefix + key) == "0", key
    st, doc = a.api.request("GET", "/v1/sessions/" + sid)
    assert st == 410 and doc["error"]["code"] == "node_lost", (st, doc)
    assert "forgotten by the operator" in doc["error"]["message"]
