#!/usr/bin/python3
"""What a run costs over a plain exec when its first attempt succeeds
(issue 12), measured in one run on one daemon: rounds of print(1) through
POST /v1/sessions/{id}/exec and through POST /v1/sessions/{id}/runs on the
same session and keep-alive connection, interleaved so that drift of the
machine hits both alike; and the stateless tier's round trip (the ladder's
weak tier, through build/tools/stateless-run when it is built).

Prints a small table and writes build/bench/runs.json and runs.md. Started
by tests/bench/run.sh (`make bench`); alone: tests/bench/runs.py [DAEMON].
Everything it starts is stopped by pid and removed by label at the end.
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
from harness import Daemon, RedisServer  # noqa: E402

ROOT = compare.ROOT
ROUNDS = int(os.environ.get("BENCH_RUNS_ROUNDS", "5"))
PER_ROUND = int(os.environ.get("BENCH_RUNS_PER_ROUND", "300"))
STATELESS_RUNS = int(os.environ.get("BENCH_STATELESS_RUNS", "40"))
STATELESS_TOOL = os.path.join(ROOT, "build", "tools", "stateless-run")


def round_p50(conn, path, check):
    out = []
    for _ in range(PER_ROUND):
        t0 = time.perf_counter()
        status, data = compare.call(conn, "POST", path, {"code": "print(1)"})
        out.append((time.perf_counter() - t0) * 1000.0)
        assert status == 200 and check in data, data[:300]
    return compare.pct(out, 50)


def stateless_round_trips():
    """The tier's round trip as the tool times it (stateless_run to its
    callback: sandbox set-up, python's start, the run, the result), over
    STATELESS_RUNS calls one after another; None when the tool is not built."""
    if not os.access(STATELESS_TOOL, os.X_OK):
        return None
    os.environ.setdefault("CITEST_STATELESS_RUN", STATELESS_TOOL)
    from harness.stateless import StatelessTool
    tool = StatelessTool("--log-level", "warn")
    tool.results("1+1\n", "--runs", "3")  # warm the page cache
    rs = tool.results("1+1\n", "--runs", str(STATELESS_RUNS), timeout=600)
    assert all(r.get("result") == "2" for r in rs), rs[:3]
    out = [float(r["wall_ms"]) for r in rs]
    return {"p50_ms": compare.pct(out, 50), "p95_ms": compare.pct(out, 95), "n": len(out)}


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "ci-daemon")
    tmp = tempfile.mkdtemp(prefix="cibench-runs-")
    redis = RedisServer(tmp)
    started = []
    try:
        d = Daemon(redis, tmp, ("--log-level", "warn", "--pool-size", "0"), binary=binary)
        started.append(d)
        sid = d.api.create()["id"]
        conn = d.api.keep_alive()
        paths = {"exec": ("/v1/sessions/%s/exec" % sid, b'"stdout":"1\\n"'),
                 "run": ("/v1/sessions/%s/runs" % sid, b'"status":"ok"')}
        res = {"exec": [], "run": []}
        try:
            for name, (path, check) in paths.items():  # warm-up, not counted
                round_p50(conn, path, check)
            orders = [["exec", "run"], ["run", "exec"]] * ROUNDS
            for r, order in enumerate(orders[:ROUNDS]):
                for name in order:
                    res[name].append(round_p50(conn, *paths[name]))
                print("runs: round %d/%d: exec p50 %.3f ms, run p50 %.3f ms" % (
                    r + 1, ROUNDS, res["exec"][-1], res["run"][-1]), flush=True)
        finally:
            conn.close()
        e, rn = statistics.median(res["exec"]), statistics.median(res["run"])
        sl = stateless_round_trips()
        summary = {"rounds": ROUNDS, "per_round": PER_ROUND, "p50_ms_by_round": res,
                   "exec_p50_ms": e, "run_p50_ms": rn, "run_over_exec": rn / e,
                   "stateless": sl}
        lines = ["| measurement | value |", "|---|---|",
                 "| exec round trip print(1), p50 | %.3f ms |" % e,
                 "| run round trip print(1), first attempt ok, p50 | %.3f ms |" % rn,
                 "| run / exec | %.3f |" % (rn / e)]
        if sl:
            lines.append("| stateless tier round trip `1 + 1` (bubblewrap: sandbox and python start "
                         "included), p50 / p95 | %.1f / %.1f ms |" % (sl["p50_ms"], sl["p95_ms"]))
            lines.append("| stateless p50 / exec p50 | %.1f |" % (sl["p50_ms"] / e))
        else:
            lines.append("| stateless tier round trip | n/a (build/tools/stateless-run not built) |")
        compare.write_results("runs", summary, lines)
        d.api.delete(sid)
    finally:
        compare.stop_all(started, redis, tmp)


if __name__ == "__main__":
    main()
