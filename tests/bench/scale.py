#!/usr/bin/python3
"""1,000 real idle sessions on one node (issue 17, item 3): measured, not
extrapolated.

  1. baseline, one live session: exec round trip (print(1), keep-alive, p50
     and p99 of EXECS) and create latency (p50/p99 of PROBE creates, each
     deleted again)
  2. ramp: creates, PARALLEL at a time, up to TARGET live sessions; it stops
     early at the first refusal, or when MemAvailable falls under
     MIN_FREE_GB (the machine is shared), and says which
  3. at the top: host memory per session (MemAvailable's fall over the ramp,
     divided by the sessions; and the cgroup + containerd shim of 20 of them,
     median), the daemon's RSS and descriptors, the exec round trip and the
     create latency again, each with its ratio to step 1
  4. teardown: every session deleted (PARALLEL at a time), the time until the
     last delete answered and until the last container was gone

  make bench-scale            (or: CITEST_DAEMON=build/ci-daemon tests/bench/scale.py)
  BENCH_SCALE_TARGET=1000 BENCH_SCALE_MIN_FREE_GB=2 BENCH_SCALE_PARALLEL=8

It starts its own Redis and daemon and removes everything it made (by its
daemon's prefix label), also on failure. Writes build/bench/scale.json."""
import concurrent.futures as cf
import json
import os
import resource
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (memory probes)
from harness import Client, Daemon, RedisServer, percentile, wait_for  # noqa: E402

TARGET = int(os.environ.get("BENCH_SCALE_TARGET", "1000"))
PARALLEL = int(os.environ.get("BENCH_SCALE_PARALLEL", "8"))
MIN_FREE_KB = float(os.environ.get("BENCH_SCALE_MIN_FREE_GB", "2")) * 1048576
EXECS = int(os.environ.get("BENCH_SCALE_EXECS", "500"))
PROBE = int(os.environ.get("BENCH_SCALE_PROBE", "20"))
# as many descriptors as this shell may give (the systemd unit gives 262144)
NOFILE = min(262144, resource.getrlimit(resource.RLIMIT_NOFILE)[1])


def log(msg):
    sys.stderr.write("[scale %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def create(port):
    t0 = time.perf_counter()
    status, doc = Client(port, timeout=180).request("POST", "/v1/sessions", body={})
    ms = (time.perf_counter() - t0) * 1000.0
    if status != 201:
        raise RuntimeError("create: %s %s" % (status, str(doc)[:200]))
    return doc["id"], ms


def exec_rtt(port, sid, n):
    c = Client(port, timeout=60).keep_alive()
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            r = c.exec(sid, "print(1)")
            out.append((time.perf_counter() - t0) * 1000.0)
            assert r["stdout"] == "1\n", r
    finally:
        c.close()
    return {"p50_ms": percentile(out, 50), "p99_ms": percentile(out, 99)}


def create_latency(d, n):
    times = []
    for _ in range(n):
        sid, ms = create(d.port)
        times.append(ms)
        d.api.delete(sid)
    return {"p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99)}


def host_memory_sample(d, ids):
    per = []
    for sid in ids[:20]:
        (cid,) = d.containers("label=ci.session=" + sid) or (None,)
        if cid is None:
            continue
        cg, shim = bench.cgroup_memory(cid), bench.shim_pss_kb(cid)
        if cg:
            per.append(cg[0] / 1024.0 + (shim or 0))
    return statistics.median(per) / 1024.0 if per else None


def main():
    os.makedirs(bench.OUT_DIR, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="cibench-")
    redis = RedisServer(tmp)
    d = None
    ids = []
    out = {"target": TARGET, "parallel": PARALLEL}
    try:
        d = Daemon(redis, tmp, ("--log-level", "warn", "--pool-size", "4",
                                "--max-sessions", str(TARGET + 100)),
                   binary=os.environ.get("CITEST_DAEMON", "build/ci-daemon"),
                   nofile=(NOFILE, NOFILE))
        wait_for(lambda: d.metric("ci_pool_size") == 4, 120, interval=0.1, what="a pool of 4")
        first, _ = create(d.port)
        ids.append(first)
        exec_rtt(d.port, first, 50)  # warm-up
        out["base_exec"] = exec_rtt(d.port, first, EXECS)
        out["base_create"] = create_latency(d, PROBE)
        out["base_rss_kb"], out["base_fds"] = d.rss_kb(), d.fd_count()
        mem0 = bench.meminfo_available_kb()
        log("baseline: exec %s, create %s" % (out["base_exec"], out["base_create"]))

        stop, t0 = None, time.monotonic()
        ramp = []
        with cf.ThreadPoolExecutor(PARALLEL) as ex:
            while len(ids) < TARGET and stop is None:
                k = min(PARALLEL, TARGET - len(ids))
                for f in [ex.submit(create, d.port) for _ in range(k)]:
                    try:
                        sid, ms = f.result()
                        ids.append(sid)
                        ramp.append(ms)
                    except Exception as e:  # noqa: BLE001 - the stop is reported
                        stop = "a create failed at %d live: %s" % (len(ids), e)
                free = bench.meminfo_available_kb()
                if stop is None and free < MIN_FREE_KB:
                    stop = "MemAvailable %.1f GB at %d live (limit %.1f GB)" % (
                        free / 1048576, len(ids), MIN_FREE_KB / 1048576)
                if len(ids) % 100 < PARALLEL:
                    log("%d live, MemAvailable %.1f GB, last creates p50 %.0f ms" % (
                        len(ids), free / 1048576, percentile(ramp[-100:], 50)))
        out["held"] = len(ids)
        out["stop"] = stop or "reached the target"
        out["ramp_s"] = time.monotonic() - t0
        out["ramp_create"] = {"p50_ms": percentile(ramp, 50), "p99_ms": percentile(ramp, 99)}
        time.sleep(5)  # deliberate: the last containers' start-up memory settles
        mem1 = bench.meminfo_available_kb()
        out["host_mem_per_session_mib"] = (mem0 - mem1) / 1024.0 / max(1, len(ids) - 1)
        out["cgroup_shim_median_mib"] = host_memory_sample(d, ids)
        out["mem_available_gb_at_top"] = mem1 / 1048576
        out["rss_kb"], out["fds"] = d.rss_kb(), d.fd_count()
        out["top_exec"] = exec_rtt(d.port, ids[-1], EXECS)
        out["top_create"] = create_latency(d, PROBE)
        log("at %d live: exec %s, create %s" % (len(ids), out["top_exec"], out["top_create"]))

        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(PARALLEL) as ex:
            list(ex.map(lambda sid: d.api.delete(sid), ids))
        out["teardown_answered_s"] = time.monotonic() - t0
        held = len(ids)
        ids = []
        wait_for(lambda: len(d.containers()) <= 4, 600, interval=0.5,
                 what="every session's container removed")
        out["teardown_gone_s"] = time.monotonic() - t0
        out["teardown_per_session_ms"] = out["teardown_gone_s"] * 1000.0 / held
    finally:
        if d is not None:
            with cf.ThreadPoolExecutor(PARALLEL) as ex:
                list(ex.map(lambda sid: d.api.request("DELETE", "/v1/sessions/" + sid), ids))
            d.stop()
            d.cleanup()
        redis.stop()
        with open(os.path.join(bench.OUT_DIR, "scale.json"), "w") as f:
            json.dump(out, f, indent=1)
    print_table(out)


def print_table(o):
    be, te, bc, tc = o["base_exec"], o["top_exec"], o["base_create"], o["top_create"]
    rows = [
        ("sessions held", "%d of %d (%s)" % (o["held"], o["target"], o["stop"])),
        ("ramp: time, create p50 / p99", "%.0f s, %.0f / %.0f ms" % (
            o["ramp_s"], o["ramp_create"]["p50_ms"], o["ramp_create"]["p99_ms"])),
        ("host memory per session (MemAvailable's fall)", "%.1f MiB" % o["host_mem_per_session_mib"]),
        ("  a session's cgroup + shim, median of 20", "%.1f MiB" % (o["cgroup_shim_median_mib"] or 0)),
        ("daemon RSS: 1 live / at the top", "%.1f / %.1f MiB" % (o["base_rss_kb"] / 1024,
                                                               o["rss_kb"] / 1024)),
        ("daemon descriptors: 1 live / at the top", "%d / %d" % (o["base_fds"], o["fds"])),
        ("exec print(1) p50 / p99: 1 live", "%.3f / %.3f ms" % (be["p50_ms"], be["p99_ms"])),
        ("  at the top (ratio)", "%.3f / %.3f ms (%.2fx / %.2fx)" % (
            te["p50_ms"], te["p99_ms"], te["p50_ms"] / be["p50_ms"], te["p99_ms"] / be["p99_ms"])),
        ("create from the pool p50 / p99: 1 live", "%.1f / %.1f ms" % (bc["p50_ms"], bc["p99_ms"])),
        ("  at the top (ratio)", "%.1f / %.1f ms (%.2fx / %.2fx)" % (
            tc["p50_ms"], tc["p99_ms"], tc["p50_ms"] / bc["p50_ms"], tc["p99_ms"] / bc["p99_ms"])),
        ("teardown: deletes answered / containers gone", "%.0f s / %.0f s (%.0f ms a session)" % (
            o["teardown_answered_s"], o["teardown_gone_s"], o["teardown_per_session_ms"])),
    ]
    w = max(len(r[0]) for r in rows)
    print("\n| %-*s | value |" % (w, "1,000 sessions on one node"))
    print("|%s|-------|" % ("-" * (w + 2)))
    for name, v in rows:
        print("| %-*s | %s |" % (w, name, v))


if __name__ == "__main__":
    main()
