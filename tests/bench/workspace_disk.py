#!/usr/bin/python3
"""What the loop-mounted /workspace (workspace_disk.h) costs at create and
delete, A/B in the same run, interleaved round by round:

  baseline       a daemon built from a baseline commit (a tmpfs /workspace)
  loop           this tree, --workspace-backend loop
  tmpfs          this tree, --workspace-backend tmpfs

For each: POST /v1/sessions from a full warm pool (p50), a cold create (a
disk_mb the pool does not serve, so the image is made inside the create;
p50) and its DELETE (p50: the teardown unmounts). Then the helper itself,
outside any daemon: truncate + mkfs.ext4 + mount -o loop of 256 MiB and
1 GiB images, and their unmount, in a directory of its own (p50 of 5).

Usage: tests/bench/workspace_disk.py BASE_DAEMON [CURRENT_DAEMON]
(BASE_DAEMON from `BENCH_BASE=<ref> tests/bench/build-base.sh`). Writes
build/bench/workspace_disk.json and .md. Everything it starts is stopped by
pid and removed by label; its mounts are found by its own directory."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)
from compare import call, pool_ready, stop_all, write_results  # noqa: E402
from harness import Daemon, RedisServer, percentile, remove_state_dir, wait_for  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_WS_ROUNDS", "3"))
CREATES = int(os.environ.get("BENCH_WS_CREATES", "8"))
POOL = 2
STARTED = []


class Variant(Daemon):
    def __init__(self, name, binary, redis, tmp, extra=()):
        self.name = name
        super().__init__(redis, tmp, ("--log-level", "warn", "--pool-size", str(POOL), *extra),
                         binary=binary)

    def start(self):
        STARTED.append(self)
        super().start()


def pool_round(v):
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
    return percentile(times, 50)


def cold_round(v):
    creates, deletes = [], []
    conn = v.api.keep_alive()
    try:
        for _ in range(CREATES):
            wait_for(lambda: pool_ready(v.port) >= POOL, 60, interval=0.02,
                     what="%s's warm pool to refill" % v.name)
            t0 = time.perf_counter()
            status, data = call(conn, "POST", "/v1/sessions", {"limits": {"disk_mb": 511}})
            creates.append((time.perf_counter() - t0) * 1000.0)
            assert status == 201, data[:300]
            t0 = time.perf_counter()
            status, _ = call(conn, "DELETE", "/v1/sessions/%s" % json.loads(data)["id"])
            deletes.append((time.perf_counter() - t0) * 1000.0)
            assert status == 204, status
    finally:
        conn.close()
    return percentile(creates, 50), percentile(deletes, 50)


MAKE = ("set -e; truncate -s \"$3\"M \"$1\"; "
        "mkfs.ext4 -F -q -m 0 -O ^has_journal -E nodiscard,root_owner=\"$4:$4\" \"$1\"; "
        "mkdir -p \"$2\"; mount -t ext4 -o loop,nosuid,nodev,noexec,discard \"$1\" \"$2\"; "
        "rmdir \"$2/lost+found\"; chmod 0700 \"$2\"")
REMOVE = ("if ! umount \"$2\" 2>/dev/null && mountpoint -q \"$2\"; then exit 1; fi\n"
          "rm -f -d -- \"$1\" \"$2\"\n")


def helper_times(mb, reps=5):
    """The daemon's make and remove scripts (workspace_disk.c), timed alone."""
    d = tempfile.mkdtemp(prefix="cibench-ws-", dir="/tmp")
    made, removed = [], []
    try:
        for i in range(reps):
            img, mnt = os.path.join(d, "i%d.img" % i), os.path.join(d, "m%d" % i)
            t0 = time.perf_counter()
            subprocess.run(["/bin/sh", "-c", MAKE, "ws", img, mnt, str(mb), "200999"],
                           check=True, timeout=60)
            made.append((time.perf_counter() - t0) * 1000.0)
            t0 = time.perf_counter()
            subprocess.run(["/bin/sh", "-c", REMOVE, "ws", img, mnt], check=True, timeout=60)
            removed.append((time.perf_counter() - t0) * 1000.0)
    finally:
        remove_state_dir(d)  # unmounts whatever is left under it
    return percentile(made, 50), percentile(removed, 50)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: workspace_disk.py BASE_DAEMON [CURRENT_DAEMON]")
    base_bin = sys.argv[1]
    cur_bin = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "ci-daemon")
    base_ref = os.environ.get("BENCH_BASE_REF", "?")
    tmp = tempfile.mkdtemp(prefix="cibench-ws-")
    redis = RedisServer(tmp)
    try:
        variants = [Variant("baseline", base_bin, redis, tmp),
                    Variant("loop", cur_bin, redis, tmp, ("--workspace-backend", "loop")),
                    Variant("tmpfs", cur_bin, redis, tmp, ("--workspace-backend", "tmpfs"))]
        keys = ("pool_create_p50_ms", "cold_create_p50_ms", "cold_delete_p50_ms")
        res = {v.name: {k: [] for k in keys} for v in variants}
        for v in variants:  # a round not counted: warm-up
            pool_round(v)
            cold_round(v)
        for r in range(ROUNDS):
            order = variants if r % 2 == 0 else variants[::-1]
            for v in order:
                res[v.name]["pool_create_p50_ms"].append(pool_round(v))
                c, dl = cold_round(v)
                res[v.name]["cold_create_p50_ms"].append(c)
                res[v.name]["cold_delete_p50_ms"].append(dl)
            print("workspace_disk: round %d/%d: %s" % (r + 1, ROUNDS, "; ".join(
                "%s pool %.1f cold %.1f delete %.1f ms" % (
                    v.name, *(res[v.name][k][-1] for k in keys)) for v in variants)), flush=True)
        helpers = {mb: helper_times(mb) for mb in (256, 1024)}
        lines = ["| measurement | baseline (%s) | loop | tmpfs | loop / baseline |" % base_ref,
                 "|---|---|---|---|---|"]
        summary = {"baseline_ref": base_ref, "rounds": ROUNDS, "creates_per_round": CREATES,
                   "rows": [], "raw": res, "helpers_ms": helpers}
        for k, label in zip(keys, ("create from the warm pool, p50", "cold create, p50",
                                   "delete of a cold session, p50")):
            b, lo, t = (statistics.median(res[n][k]) for n in ("baseline", "loop", "tmpfs"))
            summary["rows"].append({"measurement": k, "baseline": b, "loop": lo, "tmpfs": t})
            lines.append("| %s | %.1f ms | %.1f ms | %.1f ms | %.2f |" % (label, b, lo, t, lo / b))
        for mb, (mk, rm) in helpers.items():
            lines.append("| helper alone: make + mount %d MiB, p50 | | %.1f ms | | |" % (mb, mk))
            lines.append("| helper alone: unmount + delete %d MiB, p50 | | %.1f ms | | |" % (mb, rm))
        write_results("workspace_disk", summary, lines)
    finally:
        stop_all(STARTED, redis, tmp)


if __name__ == "__main__":
    main()
