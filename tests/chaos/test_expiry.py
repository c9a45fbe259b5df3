"""Idle expiry precision: how late after its expires_at is a session gone?"""
import statistics

from chaos_lib import record
from harness import wait_for
from harness.measure import expiry_lateness

N = 10


def test_idle_expiry_is_punctual(chaos):
    d = chaos()
    p, node, r = d.prefix, d.node, d.redis
    # Created half with 1 s, half with 2 s; each watched until it is gone
    # (GET is no activity: the clock must not slide on its own; still there
    # 5 s after expires_at fails, a hang detector).
    late, errors = expiry_lateness(d, N)
    assert not errors, errors
    assert len(late) == N, late
    lateness = sorted(v[0] for v in late.values())
    record("idle expiry lateness over %d sessions (ms)" % N,
           "p50 %.0f, max %.0f, min %.0f" % (statistics.median(lateness) * 1000,
                                             lateness[-1] * 1000, lateness[0] * 1000))
    for sid, (_, msg, doc) in late.items():
        assert "(expired): idle for %ds (idle_timeout_s)" % doc["idle_timeout_s"] in msg, msg
    # Not early (the same machine's clock, ms-rounded). How late is a number
    # the benchmarks report (tests/bench/bench.py, row 10), not a bound here.
    assert lateness[0] > -0.02, lateness

    # The registry agrees: no record, no clock, no node membership; a tombstone.
    def registry_clean():
        for sid in late:
            if (r.cli("EXISTS", p + "session:" + sid) != "0" or
                    r.cli("ZSCORE", "%sexpiry:%s" % (p, node), sid) != "" or
                    r.cli("SISMEMBER", "%snode:%s:sessions" % (p, node), sid) != "0" or
                    r.cli("EXISTS", p + "tomb:" + sid) != "1"):
                return False
        return True

    wait_for(registry_clean, 5, interval=0.05, what="the registry to forget the sessions")
    for sid in late:
        wait_for(lambda: not d.containers("label=ci.session=%s" % sid), 10,
                 interval=0.05, what="the expired session's container to be removed")
