#!/usr/bin/python3
"""What forwarding costs (issue 15), measured in one run on one machine: two
daemons of the same build on one Redis and key prefix with one cluster
secret; one session on B; print(1) sent straight to B and sent to A, which
forwards it to B, interleaved round by round (each going first every other
round) so that drift of the machine hits both alike.

  exec round trip: print(1), HTTP keep-alive from the client, p50 and p99
    per round; forwarded / direct (the ratio) and forwarded - direct (the
    added cost: one more HTTP hop on loopback, curl's connection to B kept
    alive between calls)

Prints a small table and writes build/bench/forward.json and forward.md.
Started by tests/bench/run.sh (`make bench`); alone:
tests/bench/bench_forward.py [DAEMON]. Everything it starts is stopped by
pid and removed by label at the end.
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (puts tests/ on the path: the harness)
from harness import Daemon, RedisServer, percentile, wait_for  # noqa: E402

ROOT = compare.ROOT
ROUNDS = int(os.environ.get("BENCH_FORWARD_ROUNDS", "5"))
EXECS = int(os.environ.get("BENCH_FORWARD_EXECS", "1000"))


def exec_round(client, sid, n):
    """n print(1) round trips on one keep-alive connection, in ms."""
    conn = client.keep_alive()
    path = "/v1/sessions/%s/exec" % sid
    out = []
    try:
        for _ in range(50):  # warm the connection (and A's to B)
            compare.call(conn, "POST", path, {"code": "print(1)"})
        for _ in range(n):
            t0 = time.perf_counter()
            status, data = compare.call(conn, "POST", path, {"code": "print(1)"})
            out.append((time.perf_counter() - t0) * 1000.0)
            assert status == 200 and b'"stdout":"1\\n"' in data, data[:200]
    finally:
        conn.close()
    return out


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "ci-daemon")
    tmp = tempfile.mkdtemp(prefix="cibench-fwd-")
    redis = RedisServer(tmp)
    started = []
    try:
        secret = os.path.join(tmp, "cluster.secret")
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        flags = ("--log-level", "warn", "--pool-size", "0", "--cluster-secret-file", secret)
        a = Daemon(redis, tmp, flags, binary=binary)
        started.append(a)
        b = Daemon(redis, tmp, flags, binary=binary, prefix=a.prefix)
        started.append(b)
        sid = b.api.create()["id"]
        wait_for(lambda: a.api.request("GET", "/v1/sessions/" + sid, timeout=10)[0] == 200, 20,
                 interval=0.1, what="A to answer for B's session")
        clients = {"direct": b.api, "forwarded": a.api}
        res = {n: {"p50_ms": [], "p99_ms": []} for n in clients}
        orders = [["direct", "forwarded"], ["forwarded", "direct"]] * ROUNDS
        for r, order in enumerate(orders[:ROUNDS]):
            for name in order:
                ms = exec_round(clients[name], sid, EXECS)
                res[name]["p50_ms"].append(percentile(ms, 50))
                res[name]["p99_ms"].append(percentile(ms, 99))
            print("forward: round %d/%d: p50 direct %.3f ms, forwarded %.3f ms; p99 direct "
                  "%.3f ms, forwarded %.3f ms" % (
                      r + 1, ROUNDS, res["direct"]["p50_ms"][-1], res["forwarded"]["p50_ms"][-1],
                      res["direct"]["p99_ms"][-1], res["forwarded"]["p99_ms"][-1]), flush=True)
        med = {n: {k: statistics.median(v) for k, v in res[n].items()} for n in res}
        d50, f50 = med["direct"]["p50_ms"], med["forwarded"]["p50_ms"]
        d99, f99 = med["direct"]["p99_ms"], med["forwarded"]["p99_ms"]
        summary = {"rounds": ROUNDS, "execs_per_round": EXECS, "per_round": res, "median": med,
                   "p50": {"direct_ms": d50, "forwarded_ms": f50, "ratio": f50 / d50,
                           "added_ms": f50 - d50},
                   "p99": {"direct_ms": d99, "forwarded_ms": f99, "ratio": f99 / d99,
                           "added_ms": f99 - d99}}
        lines = ["| exec round trip print(1) | direct to the owner | through another node | "
                 "forwarded / direct | added |",
                 "|---|---|---|---|---|",
                 "| p50 | %.3f ms | %.3f ms | %.2f | +%.3f ms |" % (d50, f50, f50 / d50, f50 - d50),
                 "| p99 | %.3f ms | %.3f ms | %.2f | +%.3f ms |" % (d99, f99, f99 / d99, f99 - d99),
                 "",
                 "Median of %d interleaved rounds of %d execs each, one keep-alive client "
                 "connection per round; both nodes of this build on one Redis and this host's "
                 "engine." % (ROUNDS, EXECS)]
        compare.write_results("forward", summary, lines)
        b.api.delete(sid)
    finally:
        compare.stop_all(started, redis, tmp)


if __name__ == "__main__":
    main()
