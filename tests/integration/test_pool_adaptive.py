"""Issue 17: the warm pool grows with bursts of creates (the most in any 10 s
of the last 5 minutes), within --pool-max and --pool-memory-mb, serves the
next burst warm, and shrinks back (pool.h, pool_demand.h)."""
import signal
import subprocess

from harness import wait_for


def containers_of(d):
    out = subprocess.run(["docker", "ps", "-q", "--filter", "label=ci.prefix=" + d.prefix],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def burst(d, n):
    ids = []
    for _ in range(n):
        ids.append(d.api.create()["id"])
    return ids


def delete_all(d, ids):
    for sid in ids:
        d.api.delete(sid)


def test_grows_after_a_burst_and_serves_the_next_one_warm(make_daemon):
    d = make_daemon("--pool-size", "1", "--pool-max", "6", "--pool-memory-mb", "512")
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1, what="a pool of 1")
    assert d.metric("ci_pool_target") == 1
    ids = burst(d, 6)                 # the warm-up: one hit, five cold
    try:
        assert d.metric("ci_pool_target") == 6
        wait_for(lambda: d.metric("ci_pool_size") == 6, 180, interval=0.2,
                 what="the pool grown to 6")
        hits = d.metric("ci_pool_hits_total")
        misses = d.metric("ci_pool_misses_total")
        ids += burst(d, 6)            # the same shape again: all warm
        assert d.metric("ci_pool_hits_total") == hits + 6
        assert d.metric("ci_pool_misses_total") == misses
        for sid in ids[-6:]:
            assert d.api.exec(sid, "6*7")["result"] == "42"
        # never above pool-max, whatever comes
        ids += burst(d, 4)
        assert d.metric("ci_pool_target") == 6
    finally:
        delete_all(d, ids)


def test_the_memory_budget_bounds_it(make_daemon):
    # 48 MiB at 16 MiB a warm sandbox: 3, though pool-max says 6
    d = make_daemon("--pool-size", "1", "--pool-max", "6", "--pool-memory-mb", "48")
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1, what="a pool of 1")
    ids = burst(d, 5)
    try:
        assert d.metric("ci_pool_target") == 3
        wait_for(lambda: d.metric("ci_pool_size") == 3, 120, interval=0.2,
                 what="the pool grown to 3")
    finally:
        delete_all(d, ids)


def test_shrinks_back_when_growth_is_turned_down(make_daemon, tmp_path):
    conf = tmp_path / "ci.conf"
    conf.write_text("pool-size = 1\npool-max = 4\n")
    d = make_daemon("--config", str(conf))
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1, what="a pool of 1")
    ids = burst(d, 4)
    try:
        wait_for(lambda: d.metric("ci_pool_size") == 4, 120, interval=0.2,
                 what="the pool grown to 4")
        conf.write_text("pool-size = 1\npool-max = 0\n")
        mark = d.log_mark()
        d.proc.send_signal(signal.SIGHUP)
        d.wait_log("SIGHUP: configuration", since=mark)
        assert d.metric("ci_pool_target") == 1
        wait_for(lambda: d.metric("ci_pool_size") == 1
                 and len(containers_of(d)) == 1 + len(ids), 60, interval=0.2,
                 what="the pool shrunk to 1, its containers removed")
    finally:
        delete_all(d, ids)
