#!/usr/bin/python3
"""Exec round trip against the number of files in /workspace (issue 17).

The change list of an execution used to cost two walks of the tree (52 ms
at 10,000 files); the runner now keeps an inotify index (ci_watch.py). For
each tree size this starts a session, fills its workspace with that many
files (100 to a directory, as a data set or a checkout would be), then
measures `x=1` on one keep-alive connection: p50 and p99, each against the
empty workspace's figure measured in the same run, and whether the runner
had to fall back to a walk (files_fallback) in any of them.

    tests/bench/workspace_files.py [--sizes 0,1000,10000,100000] [--iterations N]
                                   [--json FILE]

Targets: 10,000 files within 1.2x of empty, 100,000 within 1.5x. It starts
its own Redis and daemon (CITEST_DAEMON, default build/ci-daemon; the image as
the daemon's default or CID_IMAGES) and removes everything it made."""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import Client, Daemon, RedisServer, percentile  # noqa: E402

FILL = ("import os\n"
        "n = %d\n"
        "for i in range(0, n, 100):\n"
        "    d = 'data/%%05d' %% (i // 100)\n"
        "    os.makedirs(d, exist_ok=True)\n"
        "    for j in range(i, min(n, i + 100)):\n"
        "        with open('%%s/%%d.csv' %% (d, j), 'w') as f:\n"
        "            f.write('a,b\\n')\n"
        "len(os.listdir('data')) if n else 0\n")


def measure(client, sid, n):
    body = json.dumps({"code": "x = 1"}).encode()
    hdrs = {"Content-Type": "application/json"}
    path = "/v1/sessions/%s/exec" % sid
    out, fallbacks = [], set()
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.send("POST", path, raw=body, headers=hdrs)
        out.append((time.perf_counter() - t0) * 1000.0)
        assert r.status == 200, r.body[:300]
        fb = json.loads(r.body).get("files_fallback")
        if fb:
            fallbacks.add(fb)
    return out, sorted(fallbacks)


def one_size(daemon, files, iterations):
    s = daemon.api.create(limits={"disk_mb": 2048, "memory_mb": 1024})
    sid = s["id"]
    c = Client(daemon.port, timeout=600).keep_alive()
    try:
        t0 = time.perf_counter()
        r = c.send("POST", "/v1/sessions/%s/exec" % sid,
                   raw=json.dumps({"code": FILL % files, "timeout_s": 60}).encode(),
                   headers={"Content-Type": "application/json"})
        fill_s = time.perf_counter() - t0
        res = json.loads(r.body)
        assert r.status == 200 and res["status"] == "ok", r.body[:500]
        measure(c, sid, 50)                       # warm-up
        ms, fallbacks = measure(c, sid, iterations)
    finally:
        c.close()
        daemon.api.delete(sid)
    return {"files": files, "iterations": len(ms), "p50_ms": percentile(ms, 50),
            "p99_ms": percentile(ms, 99), "fill_s": fill_s, "fallbacks": fallbacks}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="0,1000,10000,100000")
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if sizes[0] != 0:
        sizes.insert(0, 0)                        # the baseline of the run
    tmp = tempfile.mkdtemp(prefix="cibench-")
    redis = RedisServer(tmp)
    daemon = None
    rows = []
    try:
        daemon = Daemon(redis, tmp, ("--log-level", "warn"),
                        binary=os.environ.get("CITEST_DAEMON", "build/ci-daemon"))
        for n in sizes:
            rows.append(one_size(daemon, n, args.iterations))
    finally:
        if daemon:
            daemon.stop()
            daemon.cleanup()
        redis.stop()
    base = rows[0]
    print("exec x=1 against files in /workspace (%d runs each, keep-alive):" % args.iterations)
    print("%10s %10s %10s %9s %9s %8s  %s" % ("files", "p50 ms", "p99 ms", "p50 x", "p99 x",
                                             "fill s", "fallback"))
    for r in rows:
        r["p50_ratio"] = r["p50_ms"] / base["p50_ms"]
        r["p99_ratio"] = r["p99_ms"] / base["p99_ms"]
        print("%10d %10.3f %10.3f %9.2f %9.2f %8.1f  %s" % (
            r["files"], r["p50_ms"], r["p99_ms"], r["p50_ratio"], r["p99_ratio"], r["fill_s"],
            ",".join(r["fallbacks"]) or "-"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
