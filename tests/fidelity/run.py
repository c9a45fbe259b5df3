#!/usr/bin/python3
"""The fidelity suite (issue 14): the chosen notebooks' code cells (fetch.py)
replayed through ci (one session per notebook, on a daemon of this tree
with its own Redis) and through a Jupyter kernel (replay_jupyter.py, in a
container of the same sandbox image when the image has ipykernel, else on
this host's Debian 12 ipykernel, said in the report), then compared cell by
cell:

  status     ok or error (an error's class too), the same on both sides
  text/plain the execute_result's text/plain (ci: the result) is equal
  MIME       the set of MIME types the cell displayed or returned is equal

What neither side decides is made equal on both (fair.py): every notebook
starts with the same seed cell (not counted), object addresses are masked
in text/plain.

The report (markdown, build/fidelity/report.md, and stdout) names every
notebook and the share of cells that agree on each, and on all three.

    tests/fidelity/run.py [DAEMON_BINARY]   (FIDELITY_IMAGE: another image;
                                             FIDELITY_ONLY: a regex, only the
                                             notebooks it matches;
                                             FIDELITY_REPORT_ONLY=1: the
                                             report of the last run's
                                             cells.json again)"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)

import fair  # noqa: E402
import fetch  # noqa: E402
from harness import Daemon, RedisServer  # noqa: E402

IMAGE = os.environ.get("FIDELITY_IMAGE", "ci/python:latest")
OUT = fetch.OUT


def ci_side(nbs, binary):
    tmp = tempfile.mkdtemp(prefix="cifid-")
    redis = RedisServer(tmp)
    extra = ["--pool-size", "1"]
    if IMAGE != "ci/python:latest":
        extra += ["--images", "python=%s" % IMAGE]
    try:
        d = Daemon(redis, tmp, extra, binary=binary)
    except BaseException:
        redis.stop()  # stopped by its pid, whatever the daemon did
        raise
    results = []
    try:
        for nb in nbs:
            st, s = d.api.request("POST", "/v1/sessions", body={"limits": {"memory_mb": 2048}})
            assert st == 201, (st, s)
            cells = []
            try:
                st, r = d.api.request("POST", "/v1/sessions/%s/exec" % s["id"],
                                      body={"code": fair.SEED_CELL}, timeout=120)
                assert st == 200 and r["status"] == "ok", ("the seed cell failed", st, r)
                for code in nb["cells"]:
                    st, r = d.api.request("POST", "/v1/sessions/%s/exec" % s["id"],
                                          body={"code": code}, timeout=120)
                    if st != 200:
                        cells.append({"status": "http_%d" % st, "text_plain": None, "mimes": []})
                        break
                    mimes = (["text/plain"] if r.get("result") is not None else []) + \
                        [x["mime"] for x in r.get("display") or []]
                    cells.append({"status": r["status"], "text_plain": r.get("result"),
                                  "mimes": mimes,
                                  "ename": (r.get("error") or {}).get("ename")})
                    if r["status"] in ("timeout", "killed"):
                        break
            finally:
                d.api.request("DELETE", "/v1/sessions/%s" % s["id"])
            results.append({"name": nb["name"], "cells": cells})
            print("ci: %s: %d cells" % (nb["name"], len(cells)), file=sys.stderr, flush=True)
    finally:
        d.finish()
        redis.stop()
    return results


def image_has_ipykernel():
    r = subprocess.run(["docker", "run", "--rm", "--network", "none", IMAGE, "python3", "-c",
                        "import ipykernel, jupyter_client"], capture_output=True, timeout=120)
    return r.returncode == 0


def jupyter_side(path):
    if image_has_ipykernel():
        where = "a container of %s" % IMAGE
        cmd = ["docker", "run", "--rm", "-i", "--network", "none", "--user", "1000:1000",
               "-e", "HOME=/tmp", "--tmpfs", "/tmp", "-v", "%s:/fid:ro" % OUT,
               "-v", "%s:/fidsrc:ro" % HERE, "-w", "/tmp", "--label", "ci.fidelity=1",
               IMAGE, "python3", "/fidsrc/replay_jupyter.py", "/fid/" + os.path.basename(path)]
    else:
        where = "this host's Debian 12 ipykernel (the image has none yet)"
        cmd = ["/usr/bin/python3", os.path.join(HERE, "replay_jupyter.py"), path]
    # The notebooks write files (to_excel, savefig): into a scratch directory,
    # never into the tree this runs from.
    with tempfile.TemporaryDirectory(prefix="cifid-jup-") as scratch:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=3600, cwd=scratch)
        r.check_returncode()
    return where, json.loads(r.stdout)


def compare(nbs, ci, jup):
    rows, tot = [], {"cells": 0, "status": 0, "text": 0, "mime": 0, "all": 0, "ok": 0}
    jmap = {n["name"]: n["cells"] for n in jup}
    for nb, c in zip(nbs, ci):
        j = jmap.get(nb["name"], [])
        n = len(nb["cells"])
        row = {"name": nb["name"], "package": nb["package"], "cells": n,
               "status": 0, "text": 0, "mime": 0, "all": 0, "ok": 0}
        for i in range(n):
            a = c["cells"][i] if i < len(c["cells"]) else {"status": "not run"}
            b = j[i] if i < len(j) else {"status": "not run"}
            same_status = a.get("status") == b.get("status") and \
                (a.get("status") != "error" or a.get("ename") == b.get("ename"))
            same_text = fair.mask(a.get("text_plain")) == fair.mask(b.get("text_plain"))
            same_mime = sorted(set(a.get("mimes", []))) == sorted(set(b.get("mimes", [])))
            row["status"] += same_status
            row["text"] += same_text
            row["mime"] += same_mime
            row["all"] += same_status and same_text and same_mime
            # cells that fail alike agree too; how many ran on both is said
            row["ok"] += a.get("status") == b.get("status") == "ok"
        rows.append(row)
        for k in tot:
            tot[k] += row[k] if k != "cells" else n
    return rows, tot


def pct(a, b):
    return "%.1f %%" % (100.0 * a / b) if b else "-"


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "ci-daemon")
    fetch.main()
    path = os.path.join(OUT, "notebooks.json")
    with open(path) as f:
        nbs = json.load(f)
    only = os.environ.get("FIDELITY_ONLY")
    if only:                   # iterating on a few notebooks: the report says so
        nbs = [nb for nb in nbs if re.search(only, nb["name"])]
        path = os.path.join(OUT, "notebooks.only.json")
        with open(path, "w") as f:
            json.dump(nbs, f)
    cells_path = os.path.join(OUT, "cells.json")
    if os.environ.get("FIDELITY_REPORT_ONLY"):     # the report of the last run again
        with open(cells_path) as f:
            last = json.load(f)
        ci, jup, where = last["ci"], last["jupyter"], last.get("where", "?")
        names = {n["name"] for n in ci}
        nbs = [nb for nb in nbs if nb["name"] in names]
    else:
        ci = ci_side(nbs, binary)
        where, jup = jupyter_side(path)
    rows, tot = compare(nbs, ci, jup)
    lines = ["Fidelity: %d notebooks, %d code cells (%d ran without error on both sides), "
             "ci vs a Jupyter kernel in %s." % (len(rows), tot["cells"], tot["ok"], where), "",
        "| notebook | package | cells | same status | same text/plain | same MIME types | all three |",
        "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %d | %s | %s | %s | %s |" % (
            r["name"], r["package"], r["cells"], pct(r["status"], r["cells"]),
            pct(r["text"], r["cells"]), pct(r["mime"], r["cells"]), pct(r["all"], r["cells"])))
    lines.append("| **all** | | %d | %s | %s | %s | %s |" % (
        tot["cells"], pct(tot["status"], tot["cells"]), pct(tot["text"], tot["cells"]),
        pct(tot["mime"], tot["cells"]), pct(tot["all"], tot["cells"])))
    report = "\n".join(lines) + "\n"
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(report)
    with open(cells_path, "w") as f:
        json.dump({"ci": ci, "jupyter": jup, "where": where}, f)
    print(report)


if __name__ == "__main__":
    main()
