#!/usr/bin/python3
"""Install-window overhead (issue 13): POST /v1/sessions/{id}/packages of one
tiny hand-made wheel from a local PEP 503 index (tests/integration/
test_packages.py's Index and wheel maker; no network beyond loopback), N
times in one session. For each: the client's round trip, the window the
daemon held open, and pip's own run as the sandbox timed it (the pip
subprocess alone). The overhead is round trip minus pip's run: the window's
set-up and close, the script around pip, the execution's frames and the
HTTP call. Then the same install as `%pip install` in a cell (issue 14:
the kernel asks for the window, docs/protocol.md): the execution's round
trip, against the API's.
    tests/bench/install.py [DAEMON] [--iterations N] [--image TAG]
Needs pip in the image (see test_packages.py: a throwaway image is built on
top of ci/python:latest when it has none, and removed)."""
import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import Daemon, RedisServer  # noqa: E402
import test_packages as tp  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stepnote import note  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("daemon", nargs="?", default=os.path.join(ROOT, "build", "ci-daemon"))
    ap.add_argument("--iterations", type=int, default=7)
    ap.add_argument("--image", help="a sandbox image with pip (default: as test_packages.py)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cibench-install-")
    fn, data = tp.make_wheel("tinydep", "0.3", {"tinydep/__init__.py": "ANSWER = 42\n"})
    index = tp.Index([("tinydep", fn, data)])
    redis = RedisServer(tmp)
    image_gen = iter((args.image,)) if args.image else tp.pip_image.__wrapped__()
    image = next(image_gen)
    d = None
    try:
        hosts = os.path.join(tmp, "hosts")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 pypi.test other.test\n")
        d = Daemon(redis, tmp, ("--log-level", "warn", "--pool-size", "0",
                                "--images", "python=%s" % image,
                                "--egress-resolver", "hosts-only", "--egress-hosts-file", hosts,
                                "--egress-trusted", "127.0.0.1:%d" % index.port,
                                "--pip-index-url", "http://pypi.test:%d/simple/" % index.port),
                   binary=args.daemon)
        made = d.api.create(network={"allow": ["other.test:1"]})
        sid = made["id"]
        # The cell's timeout: the session's own execution limit (the node's
        # --exec-timeout-s, 60 s by default; asking for more is refused).
        cell_timeout_s = made.get("limits", {}).get("exec_timeout_s", 60)
        rows = []
        for i in range(args.iterations + 1):
            t0 = time.monotonic()
            st, doc = tp.install(d.api, sid, ["tinydep==0.3"], timeout_s=120)
            wall = (time.monotonic() - t0) * 1000
            assert st == 200, (st, doc)
            if i > 0:  # the first warms the page cache
                rows.append((wall, doc["window_ms"], doc["pip_ms"]))
        wall = statistics.median(r[0] for r in rows)
        window = statistics.median(r[1] for r in rows)
        pip = statistics.median(r[2] for r in rows)
        print("install window, one tiny wheel, %d installs (medians): round trip %.0f ms, "
              "window open %.0f ms, pip itself %.0f ms; overhead %.0f ms (%.2fx pip)"
              % (len(rows), wall, window, pip, wall - pip, wall / pip))
        cells = []
        for i in range(args.iterations + 1):
            t0 = time.monotonic()
            r = d.api.exec(sid, "%pip install -q tinydep==0.3\n_exit_code",
                           timeout_s=cell_timeout_s)
            ms = (time.monotonic() - t0) * 1000
            assert r["status"] == "ok" and r["result"] == "0", r
            if i > 0:
                cells.append(ms)
        print("%%pip install in a cell, the same wheel, %d installs (median): round trip "
              "%.0f ms (the API's %.0f ms)" % (len(cells), statistics.median(cells), wall))
        note("install round trip %.0f ms, pip %.0f ms, overhead %.0f ms; %%pip cell %.0f ms"
             % (wall, pip, wall - pip, statistics.median(cells)))
        d.api.delete(sid)
    finally:
        if d is not None:
            d.finish()
        redis.stop()
        index.stop()
        try:
            next(image_gen)
        except StopIteration:
            pass


if __name__ == "__main__":
    main()
