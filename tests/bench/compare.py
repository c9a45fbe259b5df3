#!/usr/bin/python3
"""A/B: the daemon built from this tree against one built from a baseline
commit (tests/bench/baseline-ref, or BENCH_BASE), measured in the same run on
the same machine, interleaved round by round so that drift of the machine
hits both alike.

  exec round trip: print(1), one session, HTTP keep-alive (p50 of each round)
  create from the warm pool: POST /v1/sessions with the pool full (p50)

BENCH_BASE_IMAGE=TAG adds a third variant, this tree's daemon on another
sandbox image (the kernel is in the image: main's image against this tree's
measures a runner change), and its exec row.

Prints a small table and writes build/bench/compare.json and compare.md.
Started by tests/bench/run.sh (`make bench`) after tests/bench/build-base.sh
built the baseline; alone: tests/bench/compare.py BASE_DAEMON [CURRENT_DAEMON].
Everything it starts is stopped by pid and removed by label at the end.
"""
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from harness import (Client, Daemon, RedisServer, known_options, percentile,  # noqa: E402
                     remove_state_dir, wait_for)
sys.path.insert(0, HERE)
from stepnote import note  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_COMPARE_ROUNDS", "5"))
EXECS = int(os.environ.get("BENCH_COMPARE_EXECS", "1500"))
CREATES = int(os.environ.get("BENCH_COMPARE_CREATES", "15"))
POOL = 2


def pct(xs, p):
    return percentile(xs, p)


STARTED = []  # every daemon started, even one whose start then failed

# The flags each variant is given, each with whether the A/B needs it: a
# flag the binary's --help does not list (an older baseline) is left out when
# it is optional, and ends the A/B with that reason when it is needed.
FLAGS = (
    (("--log-level", "warn"), False),       # quieter logs, not measured
    (("--pool-size", str(POOL)), True),     # the create-from-pool row
)


def flags_for(name, binary, extra=()):
    known = known_options(binary)
    if not known:
        raise SystemExit("%s (%s): its --help lists no options" % (name, binary))
    args = []
    for flag, needed in FLAGS:
        if flag[0][2:] in known:
            args += flag
        elif needed:
            raise SystemExit("%s (%s) does not know %s, which the A/B needs" % (
                name, binary, flag[0]))
        else:
            print("compare: %s does not know %s; left out" % (name, flag[0]), flush=True)
    return tuple(args) + tuple(extra)


class Variant(Daemon):
    def __init__(self, name, binary, redis, tmp, extra=()):
        self.name = name
        super().__init__(redis, tmp, flags_for(name, binary, extra), binary=binary)

    def start(self):
        STARTED.append(self)
        super().start()


def call(conn, method, path, body=None):
    r = conn.send(method, path, body=body)
    return r.status, r.body


def pool_ready(port):
    return Client(port, timeout=10).metrics().get("ci_pool_size", 0)


def exec_round(v, sid):
    conn = v.api.keep_alive()
    path = "/v1/sessions/%s/exec" % sid
    out = []
    try:
        for _ in range(100):  # warm the connection and the caches
            call(conn, "POST", path, {"code": "print(1)"})
        for _ in range(EXECS):
            t0 = time.perf_counter()
            status, data = call(conn, "POST", path, {"code": "print(1)"})
            out.append((time.perf_counter() - t0) * 1000.0)
            assert status == 200 and b'"stdout":"1\\n"' in data, data[:200]
    finally:
        conn.close()
    return pct(out, 50)


def create_round(v):
    times = []
    conn = v.api.keep_alive()
    try:
        for _ in range(CREATES):
            wait_for(lambda: pool_ready(v.port) >= POOL, 60, interval=0.02,
                     what="%s's warm pool to refill" % v.name)
            t0 = time.perf_counter()
            status, data = call(conn, "POST", "/v1/sessions", {})
            times.append((time.perf_counter() - t0) * 1000.0)
            assert status == 201, data[:300]
            call(conn, "DELETE", "/v1/sessions/%s" % json.loads(data)["id"])
    finally:
        conn.close()
    return pct(times, 50)


def write_results(name, summary, lines):
    """build/bench/NAME.json (summary) and NAME.md (the table lines), and
    the table on stdout."""
    out = os.path.join(ROOT, "build", "bench")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(summary, f, indent=2)
    with open(os.path.join(out, name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))


def stop_all(daemons, redis, tmp):
    """Stop and clean up every daemon (each even if another fails), then
    Redis and the run's directory."""
    try:
        for d in daemons:
            try:
                d.stop()
            finally:
                d.cleanup()
    finally:
        redis.stop()
        remove_state_dir(tmp)


def main():
    try:
        run()
    except SystemExit as e:
        if e.code not in (None, 0):
            note(e.code if isinstance(e.code, str) else "exit %s" % e.code)
        raise
    except BaseException as e:
        note("%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else ""))
        raise


def run():
    if len(sys.argv) < 2:
        sys.exit("usage: compare.py BASE_DAEMON [CURRENT_DAEMON]")
    base_bin = sys.argv[1]
    cur_bin = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "ci-daemon")
    base_ref = os.environ.get("BENCH_BASE_REF", "?")
    base_image = os.environ.get("BENCH_BASE_IMAGE", "")
    tmp = tempfile.mkdtemp(prefix="cibench-cmp-")
    redis = RedisServer(tmp)
    variants = []
    try:
        variants = [Variant("baseline", base_bin, redis, tmp),
                    Variant("current", cur_bin, redis, tmp)]
        if base_image:
            variants.append(Variant("base-image", cur_bin, redis, tmp,
                                    ("--images", "python=%s" % base_image)))
        sids = {}
        for v in variants:
            sids[v.name] = v.api.create(limits={"memory_mb": 256})["id"]
        res = {v.name: {"exec_p50_ms": [], "pool_create_p50_ms": []} for v in variants}
        # One round not counted: both warm up (caches, the pools' first refill).
        for v in variants:
            exec_round(v, sids[v.name])
            create_round(v)
        for r in range(ROUNDS):
            order = variants if r % 2 == 0 else variants[::-1]
            for v in order:
                res[v.name]["exec_p50_ms"].append(exec_round(v, sids[v.name]))
            for v in order:
                res[v.name]["pool_create_p50_ms"].append(create_round(v))
            print("compare: round %d/%d: exec p50 %s; pool create p50 %s" % (
                r + 1, ROUNDS,
                ", ".join("%s %.3f ms" % (v.name, res[v.name]["exec_p50_ms"][-1])
                          for v in variants),
                ", ".join("%s %.2f ms" % (v.name, res[v.name]["pool_create_p50_ms"][-1])
                          for v in variants)), flush=True)
        summary = {"baseline_ref": base_ref, "rounds": ROUNDS, "execs_per_round": EXECS,
                   "creates_per_round": CREATES, "rows": []}
        lines = ["| measurement | baseline (%s) | current | current / baseline |" % base_ref,
                 "|---|---|---|---|"]
        for key, label in (("exec_p50_ms", "exec round trip print(1), p50"),
                           ("pool_create_p50_ms", "create from the warm pool, p50")):
            b = statistics.median(res["baseline"][key])
            c = statistics.median(res["current"][key])
            summary["rows"].append({"measurement": key, "baseline": b, "current": c,
                                    "ratio": c / b, "rounds": res})
            lines.append("| %s | %.3f ms | %.3f ms | %.2f |" % (label, b, c, c / b))
        if base_image:
            b = statistics.median(res["base-image"]["exec_p50_ms"])
            c = statistics.median(res["current"]["exec_p50_ms"])
            summary["rows"].append({"measurement": "exec_p50_ms_vs_image", "image": base_image,
                                    "baseline": b, "current": c, "ratio": c / b})
            lines.append("| exec round trip print(1), p50, this daemon on image %s "
                         "against this tree's image | %.3f ms | %.3f ms | %.2f |" % (
                             base_image, b, c, c / b))
        write_results("compare", summary, lines)
        note("current / baseline %s: exec p50 %.2f, pool create p50 %.2f" % (
            base_ref, summary["rows"][0]["ratio"], summary["rows"][1]["ratio"]))
        for v in variants:
            v.api.delete(sids[v.name])
    finally:
        stop_all(STARTED, redis, tmp)


if __name__ == "__main__":
    main()
