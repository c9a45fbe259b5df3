#!/usr/bin/python3
"""The stateless tier's round trip: `1+1` run once per call in bubblewrap
(daemon/stateless.c), ~50 calls one after another through
build/tools/stateless-run (the optimised build unless CITEST_STATELESS_RUN
says otherwise), p50 and p95 of each call as the tool timed it: from
stateless_run to its callback, so sandbox set-up, python's start, the run
and reading the result, without the tool's own start.
    tests/bench/stateless.py [--iterations N] [--json FILE]
Prints one line for make bench's report."""
import argparse
import json
import os
import sys

_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, _TESTS)
os.environ.setdefault("CITEST_STATELESS_RUN",
                      os.path.join(_TESTS, "..", "build", "tools", "stateless-run"))
from harness import percentile  # noqa: E402
from harness.stateless import StatelessTool  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    tool = StatelessTool("--log-level", "warn")
    tool.results("1+1\n", "--runs", "3")                      # warm the page cache
    rs = tool.results("1+1\n", "--runs", str(args.iterations), timeout=600)
    bad = [r for r in rs if r.get("result") != "2"]
    assert not bad, bad[:3]
    ms = [float(r["wall_ms"]) for r in rs]
    res = {"iterations": len(ms), "p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95),
           "max_ms": max(ms), "mean_ms": sum(ms) / len(ms)}
    print("stateless tier round trip, 1+1 in bubblewrap, %d runs: p50 %.1f ms  p95 %.1f ms  "
          "mean %.1f ms  max %.1f ms" % (res["iterations"], res["p50_ms"], res["p95_ms"],
                                         res["mean_ms"], res["max_ms"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
