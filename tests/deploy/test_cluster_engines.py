"""Issue 15, item 5, on engines of their own: three daemons on one Redis and
one key prefix, each driving a Docker engine of its own (tests/harness/
engines.py: a ci/engine:latest container per node, with its own image store,
its own containers and its own /var/lib/docker). tests/integration/
test_cluster.py runs the same cluster on the host's one engine; this shows
what that cannot: a session placed on a peer lives in that peer's engine and
in no other, and a node that has no such container still answers for it by
forwarding. What it still does not show: separate hosts (the three daemons
and Redis share this machine's loopback; docs/deploy.md)."""
import os
import threading
import uuid

from harness import Daemon, wait_for
from harness.engines import Engine, remove_engines
from deploy_lib import RUN, docker

SECRET = "ci15-engines-test-secret-" + "y" * 40


def start_engines(run, names):
    """Start the engines at once: each loads the sandbox image into its own
    store (half a minute or so), so one after another would triple that."""
    engines, errors = {}, []

    def start(name):
        try:
            engines[name] = Engine(run, name)
        except BaseException as e:  # reported below, after every start ended
            errors.append(e)

    threads = [threading.Thread(target=start, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [engines[n] for n in names]


def sessions_in(engine, sid):
    return engine.docker("ps", "-aq", "--filter", "label=ci.session=" + sid).stdout.split()


def test_three_nodes_on_engines_of_their_own(redis_server, tmp_path):
    run = RUN + "-clu"
    prefix = "ci15-engines-%s:" % uuid.uuid4().hex[:8]
    secret = tmp_path / "cluster-secret"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, 0o600)
    daemons, engines = [], []
    try:
        engines = start_engines(run, ["a", "b", "c"])
        for i, (eng, extra) in enumerate(zip(engines, (("--max-sessions", "1"), (), ()))):
            daemons.append(Daemon(redis_server, str(tmp_path), [
                "--pool-size", "0", "--cluster-secret-file", str(secret),
                "--sandbox-uid-base", str(700000 + 10000 * i), "--sandbox-uid-count", "2048",
                *eng.daemon_args("n%d" % i), *extra], prefix=prefix))
        a, b, c = daemons
        names = {d.node for d in daemons}
        for d in daemons:
            wait_for(lambda: {n["node"] for n in d.admin.request("GET", "/v1/admin/nodes")[1]["nodes"]
                              if n["state"] == "live"} >= names, 20,
                     what="%s to see every node live" % d.node)

        first = a.api.create()
        assert first["node"] == a.node, first
        assert sessions_in(engines[0], first["id"])
        wait_for(lambda: {n["node"]: n for n in a.admin.request("GET", "/v1/admin/nodes")[1]["nodes"]}
                 [a.node]["room"] == 0, 10, what="a's heartbeat to say it is full")
        placed = a.api.create()
        assert placed["node"] in (b.node, c.node), placed
        sid = placed["id"]
        owner_i = 1 if placed["node"] == b.node else 2
        other_i = 3 - owner_i
        owner, other = daemons[owner_i], daemons[other_i]
        # The sandbox is in the owner's engine, and in no other engine nor the host's.
        assert sessions_in(engines[owner_i], sid)
        assert not sessions_in(engines[0], sid) and not sessions_in(engines[other_i], sid)
        assert not docker("ps", "-aq", "--filter", "label=ci.session=" + sid).stdout.split()

        # State kept across executions sent through the two nodes that do not hold it.
        r = a.api.exec(sid, "x = 6")
        assert r["status"] == "ok", r
        r = other.api.exec(sid, "x * 7")
        assert r["status"] == "ok" and r["result"] == "42", r
        st, _ = other.api.request("PUT", "/v1/sessions/%s/files/out.txt" % sid, raw=b"from afar",
                                  headers={"Content-Type": "application/octet-stream"})
        assert st == 201, st
        rr = a.api.send("GET", "/v1/sessions/%s/files/out.txt" % sid)
        assert rr.status == 200 and rr.body == b"from afar"
        listed = {s["id"]: s["node"] for s in other.api.request("GET", "/v1/sessions")[1]["sessions"]}
        assert listed.get(sid) == owner.node and listed.get(first["id"]) == a.node, listed

        # Deleted through a: gone from the owner's engine.
        assert a.api.delete(sid) == 204
        wait_for(lambda: not sessions_in(engines[owner_i], sid), 60, interval=0.25,
                 what="the session's container to leave its engine")
        assert a.api.delete(first["id"]) == 204
    finally:
        for d in daemons:
            d.finish()  # before their engines go
        for eng in engines:
            eng.stop()
        remove_engines(run)  # engines whose start failed half-way
        out = docker("ps", "-aq", "--filter", "label=ci.test.engine=" + run).stdout.split()
        assert not out, "engines left: %s" % out
