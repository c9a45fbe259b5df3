"""Redis that fails over under the daemon, through Sentinel (issue 15, item 6).

A master and a replica redis-server and three sentinels of the test's own
(harness.sentinel.SentinelGroup: quorum 2, down-after 1 s), and a daemon given
--redis sentinel://.../<name>. The master is SIGKILLed (or handed over with
SENTINEL FAILOVER); the sentinels promote the replica; the daemon follows:
every live session still executes with its variables, its record, clock,
node-set membership and quota reservation are in the new master, a new
session can be created, and keepalives move the clocks there.

Replication is asynchronous, so the last writes before a crash can be lost.
The test makes that loss certain instead of likely: the replica is made
writable and one session's keys are deleted on it alone before the kill, so
the promoted master lacks them; the daemon's write-back after it connects to
the new master must put them back. Likewise an ending: a session deleted
just before the crash has its record back and its tombstone gone on the
replica, and the daemon must write the ending again."""
import time

import pytest

from chaos_lib import exec_value, live_ids, record, request
from harness import wait_for
from harness.sentinel import SentinelGroup


@pytest.fixture
def group(tmpdir_session):
    g = SentinelGroup(tmpdir_session)
    yield g
    g.stop()


def _readyz(d):
    status, doc, _ = request(d, "GET", "/readyz", timeout=5)
    return status, doc


def _session_keys_ok(r, d, sid):
    """What a live session owns in Redis, in server r: (ok, what is missing)."""
    p, node = d.prefix, d.node
    missing = []
    if r.cli("EXISTS", p + "session:" + sid) != "1":
        missing.append("record")
    if r.cli("ZSCORE", "%sexpiry:%s" % (p, node), sid) == "":
        missing.append("clock")
    if r.cli("SISMEMBER", "%snode:%s:sessions" % (p, node), sid) != "1":
        missing.append("node set")
    if r.cli("ZSCORE", "%squota:default:sessions" % p, sid) == "":
        missing.append("quota reservation")
    return not missing, missing


def _sessions_with_variables(d, n):
    ids = []
    for i in range(n):
        sid = d.api.create()["id"]
        assert exec_value(d, sid, "x = %d; x" % (100 + i)) == str(100 + i)
        ids.append(sid)
    return ids


def _lose_on_replica(g, d, sid):
    """The last writes before the crash that replication did not carry: the
    session's keys deleted on the replica only (made writable for it)."""
    rep, p, node = g.replica, d.prefix, d.node
    assert rep.cli("CONFIG", "SET", "replica-read-only", "no") == "OK"
    rep.cli("DEL", p + "session:" + sid)
    rep.cli("ZREM", "%sexpiry:%s" % (p, node), sid)
    rep.cli("SREM", "%snode:%s:sessions" % (p, node), sid)
    rep.cli("ZREM", "%squota:default:sessions" % p, sid)
    assert not _session_keys_ok(rep, d, sid)[0]


def _end_lost_on_replica(g, d):
    """A session ended just before the crash whose ending replication did not
    carry: on the replica its record and node-set entry are back, its
    tombstone gone. Returns its id."""
    sid = d.api.create()["id"]
    p, node, rep = d.prefix, d.node, g.replica
    wait_for(lambda: _session_keys_ok(rep, d, sid)[0], 10, interval=0.05,
             what="the session's keys replicated")
    record_text = rep.cli("GET", p + "session:" + sid)
    status, doc, _ = request(d, "DELETE", "/v1/sessions/%s" % sid, timeout=30)
    assert status == 204, (status, doc)
    wait_for(lambda: rep.cli("EXISTS", p + "tomb:" + sid) == "1", 10, interval=0.05,
             what="the tombstone replicated")
    assert rep.cli("CONFIG", "SET", "replica-read-only", "no") == "OK"
    rep.cli("SET", p + "session:" + sid, record_text, "EX", "600")
    rep.cli("SADD", "%snode:%s:sessions" % (p, node), sid)
    rep.cli("DEL", p + "tomb:" + sid)
    return sid


def _check_after_failover(g, d, ids, new_port):
    new = next(r for r in g.servers if r.port == new_port)
    # /readyz names the new master, and the metrics counted the change.
    wait_for(lambda: _readyz(d)[0] == 200 and
             _readyz(d)[1]["redis"]["master"] == "127.0.0.1:%d" % new_port, 15, interval=0.05,
             what="/readyz 200 naming the new master")
    doc = _readyz(d)[1]
    assert doc["redis"]["via"] == "sentinel" and doc["redis"]["failovers"] >= 1, doc
    m = d.metrics()
    assert m.get("ci_redis_failovers_total", 0) >= 1, m.get("ci_redis_failovers_total")
    assert m.get('ci_redis_master_info{master="127.0.0.1:%d"}' % new_port) == 1
    # Every session still executes, with its variables.
    for i, sid in enumerate(ids):
        assert exec_value(d, sid, "x") == str(100 + i), sid
    # What each one owns is in the new master (the lost one written back).
    wait_for(lambda: all(_session_keys_ok(new, d, sid)[0] for sid in ids), 10, interval=0.05,
             what="every live session's keys in the new master: %s" %
             {sid: _session_keys_ok(new, d, sid)[1] for sid in ids})
    # Keepalives move the clocks in the new master.
    zkey = "%sexpiry:%s" % (d.prefix, d.node)
    before = {sid: int(new.cli("ZSCORE", zkey, sid)) for sid in ids}
    # The daemon writes a session's clock at most once a second (manager.c's
    # CLOCK_WRITE_MS): keep the sessions alive until each one's moves.
    def moved():
        for sid in ids:
            status, doc, _ = request(d, "POST", "/v1/sessions/%s/keepalive" % sid)
            assert status == 200, (status, doc)
        return all(int(new.cli("ZSCORE", zkey, sid)) > before[sid] for sid in ids)
    wait_for(moved, 10, interval=0.1, what="keepalives to move the clocks in the new master")
    return new


def _first_create_after(d, t0):
    """Create until one works (503 while Redis is being found again); the
    time from t0 to it, and the session."""
    attempts = []

    def created():
        status, doc, _ = request(d, "POST", "/v1/sessions", {}, timeout=30)
        attempts.append(status)
        assert status in (201, 503), (status, doc)
        return doc if status == 201 else None
    doc = wait_for(created, 60, interval=0.05, what="a create to work after the failover")
    return time.monotonic() - t0, doc["id"], len(attempts)


def test_master_killed_sessions_survive(group, chaos):
    g = group
    d = chaos(redis=g)
    assert _readyz(d)[1]["redis"]["master"] == "127.0.0.1:%d" % g.master.port
    ids = _sessions_with_variables(d, 3)
    wait_for(lambda: all(_session_keys_ok(g.replica, d, sid)[0] for sid in ids), 10,
             interval=0.05, what="the sessions' keys replicated")
    _lose_on_replica(g, d, ids[0])
    ended = _end_lost_on_replica(g, d)

    old = g.kill_master()
    t_kill = time.monotonic()
    # Creates from the moment of the kill: 503 until the daemon has the new
    # master.
    t_create, fresh, attempts = _first_create_after(d, t_kill)
    record("sentinel: master SIGKILLed -> first successful create (s)",
           "%.3f (%d attempts)" % (t_create, attempts))
    new_port = g.wait_master_change(old.port)
    new = _check_after_failover(g, d, ids, new_port)
    assert live_ids(d) == set(ids) | {fresh}
    # The ending the new master missed is written again: no record of an
    # ended session comes back to life.
    p = d.prefix
    wait_for(lambda: new.cli("EXISTS", p + "tomb:" + ended) == "1" and
             new.cli("EXISTS", p + "session:" + ended) == "0" and
             new.cli("SISMEMBER", "%snode:%s:sessions" % (p, d.node), ended) == "0", 10,
             interval=0.05, what="the lost ending written again in the new master")
    d.wait_log("redis: master 127.0.0.1:%d moved to 127.0.0.1:%d" % (old.port, new_port))


class _ByName:
    """The group, given to the daemon with its first sentinel by name."""

    def __init__(self, g):
        self.g = g
        self.url = g.url_by_name

    def cli(self, *args):
        return self.g.cli(*args)


def test_graceful_failover_is_followed(group, chaos):
    g = group
    d = chaos(redis=_ByName(g))
    ids = _sessions_with_variables(d, 2)
    wait_for(lambda: all(_session_keys_ok(g.replica, d, sid)[0] for sid in ids), 10,
             interval=0.05, what="the sessions' keys replicated")
    old_port = g.master.port
    t0 = time.monotonic()
    assert g.failover() == "OK"
    new_port = g.wait_master_change(old_port)
    t_create, fresh, attempts = _first_create_after(d, t0)
    record("sentinel: SENTINEL FAILOVER -> first successful create (s)",
           "%.3f (%d attempts)" % (t_create, attempts))
    new = _check_after_failover(g, d, ids, new_port)
    assert _session_keys_ok(new, d, fresh)[0]
    # The old master is a replica now: nothing of ours is written there but
    # what replication brings.
    wait_for(lambda: g.master.cli("ROLE").split("\n")[0] == "slave", 15, interval=0.05,
             what="the old master to become a replica")
