#!/usr/bin/python3
"""Exec round trip through HTTP: print(1) on one session, p50 and p99.

Starts its own Redis and daemon (the optimised build), like the integration
tests, and removes everything it made. One keep-alive connection, so the
number is the daemon + runner path, not TCP set-up.
    tests/bench/exec_rtt.py [--iterations N] [--json FILE]
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Client, Daemon, RedisServer, percentile  # noqa: E402


def measure(port, sid, n):
    """n round trips of print(1) on one keep-alive connection, in ms."""
    c = Client(port, timeout=60).keep_alive()
    body = json.dumps({"code": "print(1)"}).encode()
    hdrs = {"Content-Type": "application/json"}
    path = "/v1/sessions/%s/exec" % sid
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            r = c.send("POST", path, raw=body, headers=hdrs)
            out.append((time.perf_counter() - t0) * 1000.0)
            assert r.status == 200 and b'"stdout":"1\\n"' in r.body, r.body[:200]
    finally:
        c.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cibench-")
    redis = RedisServer(tmp)
    daemon = None
    try:
        daemon = Daemon(redis, tmp, ("--log-level", "warn"))
        s = daemon.api.create()
        measure(daemon.port, s["id"], 200)  # warm-up
        ms = measure(daemon.port, s["id"], args.iterations)
        res = {"iterations": len(ms), "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
               "mean_ms": sum(ms) / len(ms), "max_ms": max(ms)}
        print("exec round trip, print(1), HTTP keep-alive, %d runs: p50 %.3f ms  p99 %.3f ms  "
              "mean %.3f ms  max %.3f ms" % (res["iterations"], res["p50_ms"], res["p99_ms"],
                                              res["mean_ms"], res["max_ms"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=2)
        daemon.api.delete(s["id"])
    finally:
        if daemon:
            daemon.stop()
            daemon.cleanup()
        redis.stop()


if __name__ == "__main__":
    main()
