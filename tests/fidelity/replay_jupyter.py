#!/usr/bin/python3
"""Replay the fidelity notebooks through a Jupyter kernel (ipykernel, the one
Debian packages): one fresh kernel per notebook, its code cells in order,
each until the kernel is idle again (or CELL_TIMEOUT_S). For each cell: the
reply's status, the execute_result's text/plain, and the MIME types of
everything the cell displayed. Reads notebooks.json (fetch.py) from argv[1],
writes JSON to stdout.

Run inside a container of the sandbox image (run.py does), so both sides
see the same Python and the same packages; MPLBACKEND is the inline one,
as in a notebook. fair.SEED_CELL runs first (not counted), as on ci's side."""
import json
import os
import queue
import sys

from jupyter_client.manager import start_new_kernel

import fair

CELL_TIMEOUT_S = float(os.environ.get("FIDELITY_CELL_TIMEOUT_S", "60"))


def run_cell(kc, code):
    # stop_on_error=False: ipykernel otherwise aborts the requests that reach
    # it shortly after a failed cell ("Run All" semantics), so the next cell
    # of the replay would not run at all; ci runs every cell, and so does a
    # user running cells one by one.
    msg_id = kc.execute(code, store_history=True, stop_on_error=False)
    out = {"status": None, "text_plain": None, "mimes": []}
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=CELL_TIMEOUT_S)
        except queue.Empty:
            out["status"] = "timeout"
            return out
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        t, c = msg["msg_type"], msg["content"]
        if t == "execute_result":
            out["text_plain"] = c["data"].get("text/plain")
            out["mimes"] += sorted(c["data"])
        elif t == "display_data":
            out["mimes"] += sorted(c["data"])
        elif t == "error":
            out["status"] = "error"
            out["ename"] = c.get("ename")
        elif t == "status" and c.get("execution_state") == "idle":
            break
    # The status is this cell's execute_reply (matched by its parent's id:
    # a reply left unread would be taken for the next cell's).
    while True:
        try:
            reply = kc.get_shell_msg(timeout=CELL_TIMEOUT_S)
        except queue.Empty:
            out["status"] = out["status"] or "timeout"
            return out
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            break
    out["status"] = reply["content"].get("status", "ok")
    if out["status"] == "error":
        out["ename"] = reply["content"].get("ename") or out.get("ename")
    return out


def main():
    with open(sys.argv[1]) as f:
        nbs = json.load(f)
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    results = []
    for nb in nbs:
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            seeded = run_cell(kc, fair.SEED_CELL)
            if seeded["status"] != "ok":
                raise RuntimeError("the seed cell failed: %r" % seeded)
            cells = []
            for code in nb["cells"]:
                r = run_cell(kc, code)
                cells.append(r)
                if r["status"] == "timeout":
                    break
            results.append({"name": nb["name"], "cells": cells})
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        print("jupyter: %s: %d cells" % (nb["name"], len(cells)), file=sys.stderr, flush=True)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
