#!/usr/bin/python3
"""Exec round trip under concurrency (issue 17, item 5): N sessions each
executing back to back on its own keep-alive connection, against the same
figure for 1 session, in one run, on one daemon.

The load comes from the C load generator (tests/bench/loadgen.c: one libevent
loop, so the client is not what saturates); the code is `x = 1`. Each phase
runs DURATION seconds. It reports p50, p99 and execs/s per phase, their
ratios to the 1-session phase, the daemon's CPU and the machine's.

    tests/bench/exec_concurrency.py [--sessions 50] [--duration 10] [--json FILE]

It starts its own Redis and daemon (CITEST_DAEMON, default build/ci-daemon)
and removes everything it made."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (create_many, cpu_busy_ticks, LOADGEN)
from harness import Daemon, RedisServer  # noqa: E402


def phase(d, ids, duration):
    cpu0, t0 = d.cpu_seconds(), time.monotonic()
    busy0, total0 = bench.cpu_busy_ticks()
    out = subprocess.run([bench.LOADGEN, "--port", str(d.port), "--duration", str(duration),
                          "--code", "x = 1", *ids],
                         capture_output=True, text=True, timeout=duration + 120)
    wall = time.monotonic() - t0
    busy1, total1 = bench.cpu_busy_ticks()
    if not out.stdout.strip():
        raise RuntimeError("loadgen: rc %d %s" % (out.returncode, out.stderr[:300]))
    lg = json.loads(out.stdout)
    lg["daemon_cpu_pct"] = 100.0 * (d.cpu_seconds() - cpu0) / wall
    lg["machine_cpu_pct"] = 100.0 * (busy1 - busy0) / max(1, total1 - total0)
    lg["sessions"] = len(ids)
    return lg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    if not os.path.exists(bench.LOADGEN):
        sys.exit("%s missing: tests/bench/run.sh builds it" % bench.LOADGEN)
    tmp = tempfile.mkdtemp(prefix="cibench-")
    redis = RedisServer(tmp)
    d = None
    rows = []
    try:
        d = Daemon(redis, tmp, ("--log-level", "warn"),
                   binary=os.environ.get("CITEST_DAEMON", "build/ci-daemon"))
        ids, errors = bench.create_many(d.port, args.sessions)
        if errors:
            raise RuntimeError("%d creates failed: %s" % (len(errors), errors[0]))
        c = bench.connect(d.port)
        for sid in ids:  # each kernel has run once
            bench.exec_print1(c, sid)
        c.close()
        rows.append(phase(d, ids[:1], args.duration))
        rows.append(phase(d, ids, args.duration))
        rows.append(phase(d, ids[:1], args.duration))  # the baseline again, after
    finally:
        if d:
            d.stop()
            d.cleanup()
        redis.stop()
    base = rows[0]
    print("exec x = 1, back to back on keep-alive connections, %g s a phase:" % args.duration)
    print("%-22s %9s %9s %8s %8s %11s %10s %10s" % ("phase", "p50 ms", "p99 ms", "p50 x",
                                                  "p99 x", "execs/s", "daemon %", "machine %"))
    for name, r in zip(("1 session", "%d sessions" % args.sessions, "1 session, again"), rows):
        r["p50_ratio"] = r["p50_ms"] / base["p50_ms"]
        r["p99_ratio"] = r["p99_ms"] / base["p99_ms"]
        print("%-22s %9.3f %9.3f %8.1f %8.1f %11.0f %10.0f %10.0f" % (
            name, r["p50_ms"], r["p99_ms"], r["p50_ratio"], r["p99_ratio"], r["execs_per_s"],
            r["daemon_cpu_pct"], r["machine_cpu_pct"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
