#!/usr/bin/python3
"""Snapshot and restore times (issue 13, item 4) for 10 MB and 100 MB
workspaces, to the directory store and to s3rver (tests/s3/, on 127.0.0.1),
each beside baselines measured on the same daemon in the same run:

  snapshot        POST /v1/sessions/{id}/snapshots (variables off), until
                  its 201 (the objects are in the store)
  restore         restore-to-first-result: POST /v1/sessions with
                  "restore" (a warm pool's container, then the restore), then
                  one exec of 1+1
  create+first    the same without a restore: POST /v1/sessions, exec 1+1
  upload/download the same bytes through the files API
                  (PUT/GET /v1/sessions/{id}/files/...), one file

Ratios: snapshot / files-API download of the same bytes (both read the
workspace out of the sandbox; the snapshot also stores it), restore /
create+first (what a restore adds to a session's first result), and restore
/ (create+first + files-API upload) (restoring against putting the bytes
back by hand).

The workspace: 90% in one file, the rest in 100 files, random bytes (they do
not compress). Prints a table, writes build/bench/snapshots.json and .md.
Started by tests/bench/run.sh (`make bench`); alone:
    tests/bench/snapshots.py [DAEMON]
BENCH_SNAP_N sets the iterations (default 3; BENCH_QUICK: 1), BENCH_SNAP_SIZES
the sizes in MB (default "10 100"), BENCH_SNAP_STORES "dir s3".
Everything it starts is stopped by pid, containers removed by label, stores
and s3rver data removed by path, even on failure.
"""
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import Client, Daemon, RedisServer, wait_for  # noqa: E402
from test_snapshots import DirStore, S3Store  # noqa: E402

QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")
N = int(os.environ.get("BENCH_SNAP_N") or (1 if QUICK else 3))
SIZES = [int(x) for x in os.environ.get("BENCH_SNAP_SIZES", "10 100").split()]
STORES = os.environ.get("BENCH_SNAP_STORES", "dir s3").split()
POOL = 2
MB = 1024 * 1024
OUT_DIR = os.environ.get("BENCH_OUT", os.path.join(ROOT, "build", "bench"))
TIMEOUT = 900
# BENCH_IMAGE: another sandbox image than the daemon's default
IMAGE_ARGS = ["--images", "python=%s" % os.environ["BENCH_IMAGE"]] if os.environ.get(
    "BENCH_IMAGE") else []


def log(msg):
    sys.stderr.write("[snapshots %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def ms_since(t0):
    return (time.perf_counter() - t0) * 1000.0


def check(status, doc, want, what):
    if status != want:
        raise RuntimeError("%s: HTTP %s %s" % (what, status, json.dumps(doc)[:400]))
    return doc


def wait_pool(d):
    wait_for(lambda: (d.api.metrics().get("ci_pool_size") or 0) >= POOL, 120, interval=0.05,
             what="the warm pool to refill")


def first_result(c, sid):
    r = c.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "1+1"}, timeout=TIMEOUT)
    doc = check(*r, 200, "exec 1+1")
    if doc.get("status") != "ok":
        raise RuntimeError("exec 1+1: %s" % json.dumps(doc)[:400])


FILL = r"""
import os
size = %d
big = size * 9 // 10
with open('/workspace/big.bin', 'wb') as f:
    left = big
    while left:
        n = min(left, 1 << 20); f.write(os.urandom(n)); left -= n
os.makedirs('/workspace/many', exist_ok=True)
small = (size - big) // 100
for i in range(100):
    with open('/workspace/many/f%%03d.bin' %% i, 'wb') as f:
        f.write(os.urandom(small))
print('ok')
"""


def measure(d, c, size_mb):
    """{"snapshot": [...], "restore": [...], "create_first": [...],
    "upload": [...], "download": [...]} in ms, N each, interleaved."""
    size = size_mb * MB
    src = check(*c.request("POST", "/v1/sessions", body={"limits": {"disk_mb": 1024}}), 201,
                "create")["id"]
    scratch = check(*c.request("POST", "/v1/sessions", body={"limits": {"disk_mb": 1024}}), 201,
                    "create")["id"]
    made = []
    out = {k: [] for k in ("snapshot", "restore", "create_first", "upload", "download")}
    try:
        r = c.request("POST", "/v1/sessions/%s/exec" % src, body={"code": FILL % size},
                      timeout=TIMEOUT)
        check(*r, 200, "fill")
        payload = os.urandom(size)
        snaps = []
        for i in range(N + 1):  # the first of each warms the page cache, not counted
            keep = i > 0
            # files API: upload then download of the same bytes
            t0 = time.perf_counter()
            st, doc, _, _ = c.upload("PUT", "/v1/sessions/%s/files/blob.bin" % scratch,
                                     [payload[j:j + MB] for j in range(0, size, MB)],
                                     length=size, timeout=TIMEOUT)
            t = ms_since(t0)
            check(st, doc, 201, "files-API upload")
            keep and out["upload"].append(t)
            t0 = time.perf_counter()
            got = c.send("GET", "/v1/sessions/%s/files/blob.bin" % scratch, timeout=TIMEOUT)
            t = ms_since(t0)
            if got.status != 200 or len(got.body) != size:
                raise RuntimeError("files-API download: %s" % got.status)
            keep and out["download"].append(t)
            # snapshot
            t0 = time.perf_counter()
            rec = check(*c.request("POST", "/v1/sessions/%s/snapshots" % src,
                                   body={"variables": False}, timeout=TIMEOUT), 201, "snapshot")
            t = ms_since(t0)
            snaps.append(rec["id"])
            keep and out["snapshot"].append(t)
            # restore to first result, from a full pool
            wait_pool(d)
            t0 = time.perf_counter()
            new = check(*c.request("POST", "/v1/sessions", body={"restore": rec["id"]},
                                   timeout=TIMEOUT), 201, "restore")
            first_result(c, new["id"])
            t = ms_since(t0)
            made.append(new["id"])
            if (new.get("restored") or {}).get("size") != rec["size"]:
                raise RuntimeError("restore: %s" % json.dumps(new)[:400])
            keep and out["restore"].append(t)
            c.request("DELETE", "/v1/sessions/%s" % new["id"], timeout=TIMEOUT)
            # the baseline: a plain create and its first result, from a full pool
            wait_pool(d)
            t0 = time.perf_counter()
            new = check(*c.request("POST", "/v1/sessions", body={}, timeout=TIMEOUT), 201,
                        "create")
            first_result(c, new["id"])
            t = ms_since(t0)
            made.append(new["id"])
            keep and out["create_first"].append(t)
            c.request("DELETE", "/v1/sessions/%s" % new["id"], timeout=TIMEOUT)
        for sid in snaps:
            c.request("DELETE", "/v1/snapshots/%s" % sid, timeout=TIMEOUT)
    finally:
        for sid in [src, scratch] + made:
            try:
                c.request("DELETE", "/v1/sessions/%s" % sid, timeout=TIMEOUT)
            except OSError:
                pass
    return out


def main():
    # run.sh's time limit sends SIGTERM: leave through the finally blocks
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "ci-daemon")
    tmp = tempfile.mkdtemp(prefix="cibench-snap-")
    redis = RedisServer(tmp)
    rows, failed = [], []
    try:
        for kind in STORES:
            store = DirStore() if kind == "dir" else S3Store(signed=False)
            d = None
            try:
                d = Daemon(redis, tmp, ("--log-level", "warn", "--pool-size", str(POOL),
                                        "--max-disk-mb", "2048", *store.arg, *IMAGE_ARGS),
                           binary=binary)
                c = Client(d.port, timeout=TIMEOUT)
                for size_mb in SIZES:
                    log("%s store, %d MB: %d iterations" % (kind, size_mb, N))
                    try:
                        m = measure(d, c, size_mb)
                    except Exception as e:  # noqa: BLE001 - the row says so
                        failed.append("%s %d MB: %s" % (kind, size_mb, e))
                        log("failed: %s" % e)
                        continue
                    med = {k: statistics.median(v) for k, v in m.items()}
                    med.update(store=kind, size_mb=size_mb, n=N)
                    rows.append(med)
            finally:
                try:
                    if d is not None:
                        d.stop()
                        d.cleanup()
                finally:
                    store.remove()
    finally:
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    head = ("store", "size", "snapshot", "files-API download", "ratio", "restore-to-first",
            "create+first", "ratio", "+upload", "ratio")
    lines = []
    for r in rows:
        base2 = r["create_first"] + r["upload"]
        lines.append((r["store"], "%d MB" % r["size_mb"], "%.0f ms" % r["snapshot"],
                      "%.0f ms" % r["download"], "%.2fx" % (r["snapshot"] / r["download"]),
                      "%.0f ms" % r["restore"], "%.0f ms" % r["create_first"],
                      "%.2fx" % (r["restore"] / r["create_first"]), "%.0f ms" % base2,
                      "%.2fx" % (r["restore"] / base2)))
    widths = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()  # noqa
    title = ("snapshots: medians of %d (variables off; restore and create from a warm pool of "
             "%d; '+upload' = create+first + files-API upload of the same bytes)" % (N, POOL))
    text = "\n".join([title, fmt(head), fmt(["-" * w for w in widths])] +
                     [fmt(x) for x in lines] + ["failed: " + f for f in failed])
    print(text)
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "snapshots.json"), "w") as f:
        json.dump({"n": N, "pool": POOL, "rows": rows, "failed": failed}, f, indent=2)
    with open(os.path.join(OUT_DIR, "snapshots.md"), "w") as f:
        f.write("```\n%s\n```\n" % text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
