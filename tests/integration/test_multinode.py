"""Several daemons sharing one Redis and key prefix: each node reaps, lists and
recovers only its own sessions, so every session is reaped exactly once."""
import json
import signal

from harness import wait_for


def test_nodes_sharing_redis_keep_to_their_own(make_daemon, redis_server):
    a = make_daemon("--pool-size", "0")
    b = make_daemon("--pool-size", "0", "--key-prefix", a.prefix)
    sa = a.api.create(idle_timeout_s=2)
    sb = b.api.create(idle_timeout_s=600)
    try:
        # Each node lists its own sessions first, then the other live nodes'
        # (from their records: issue 15), each saying which node runs it.
        wait_for(lambda: len(a.api.request("GET", "/v1/sessions")[1]["sessions"]) == 2, 10,
                 what="a to list b's session (b's first heartbeat)")
        la = a.api.request("GET", "/v1/sessions")[1]["sessions"]
        lb = b.api.request("GET", "/v1/sessions")[1]["sessions"]
        assert [(s["id"], s["node"]) for s in la] == [(sa["id"], a.node), (sb["id"], b.node)]
        assert [(s["id"], s["node"]) for s in lb] == [(sb["id"], b.node), (sa["id"], a.node)]
        # A's session expires on A; the tombstone is shared, so B can explain it too.
        wait_for(lambda: a.api.request("GET", "/v1/sessions/" + sa["id"])[0] == 410, 10,
                 interval=0.05, what="expiry on node a")
        status, doc = b.api.request("GET", "/v1/sessions/" + sa["id"])
        assert status == 410 and "idle" in doc["error"]["message"]
        tomb = json.loads(redis_server.cli("GET", a.prefix + "tomb:" + sa["id"]))
        assert tomb["node"] == a.node
        # B's session is untouched by A's reaper and by A's restart.
        a.stop(signal.SIGKILL)
        a.start()
        assert b.api.exec(sb["id"], "1 + 1")["result"] == "2"
        assert redis_server.cli("SISMEMBER", a.prefix + "node:%s:sessions" % b.node,
                                sb["id"]) == "1"
        assert redis_server.cli("ZSCORE", a.prefix + "expiry:%s" % a.node, sb["id"]) == ""
        assert a.containers("label=ci.session=" + sb["id"])  # labelled with the shared prefix
    finally:
        b.api.delete(sb["id"])
