#!/usr/bin/python3
"""The fidelity suite's notebooks (issue 14): real notebooks that Debian's
documentation packages ship, fetched with `apt-get download` at pinned
versions (nothing is installed) into build/fidelity/, and the code cells of
the chosen ones written to build/fidelity/notebooks.json.

Which notebooks: pandas's Styler guide (user_guide/style.ipynb), and the
scikit-learn gallery's notebooks that need no download (no fetch_*, no
URL: the sandbox has no network, and a cell that fails the same way on
both sides says nothing about fidelity), the first FIDELITY_MAX (30) by
name. The choice is a rule over pinned packages, so every run replays the
same cells."""
import glob
import gzip
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.environ.get("FIDELITY_DIR", os.path.join(ROOT, "build", "fidelity"))
PACKAGES = {"python-pandas-doc": "1.5.3+dfsg-2", "python-sklearn-doc": "1.2.1+dfsg-1"}
MAX = int(os.environ.get("FIDELITY_MAX", "30"))
# A notebook that reaches for the network or runs for minutes is left out.
SKIP = re.compile(r"fetch_|urlopen|urllib|requests\.|download|openml|n_jobs=-1|"
                  r"GridSearchCV|RandomizedSearchCV|HalvingGridSearch|n_estimators=\s*[1-9]\d{2,}")


def fetch():
    debs = os.path.join(OUT, "debs")
    os.makedirs(debs, exist_ok=True)
    for pkg, ver in PACKAGES.items():
        tree = os.path.join(OUT, "tree", pkg)
        if os.path.isdir(tree):
            continue
        have = glob.glob(os.path.join(debs, "%s_*.deb" % pkg))
        if not have:
            subprocess.run(["apt-get", "download", "%s=%s" % (pkg, ver)], cwd=debs, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
            have = glob.glob(os.path.join(debs, "%s_*.deb" % pkg))
        os.makedirs(tree + ".tmp", exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", have[0], tree + ".tmp"], check=True, timeout=600)
        os.rename(tree + ".tmp", tree)


def read_nb(path):
    data = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    return json.loads(data)


def code_cells(nb):
    out = []
    for c in nb.get("cells", []):
        if c.get("cell_type") != "code":
            continue
        src = c.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        if src.strip():
            out.append(src)
    return out


def choose():
    chosen = []
    pandas = os.path.join(OUT, "tree", "python-pandas-doc", "usr/share/doc/python-pandas-doc",
                          "html/_sources/user_guide/style.ipynb.txt")
    chosen.append({"name": "pandas/user_guide/style", "package": "python-pandas-doc=%s"
                   % PACKAGES["python-pandas-doc"], "cells": code_cells(read_nb(pandas))})
    base = os.path.join(OUT, "tree", "python-sklearn-doc", "usr/share/doc/python-sklearn-doc",
                        "html/_downloads")
    found = []
    for path in glob.glob(os.path.join(base, "*", "*.ipynb*")):
        name = os.path.basename(path).split(".ipynb")[0]
        cells = code_cells(read_nb(path))
        text = "\n".join(cells)
        if not cells or SKIP.search(text) or len(text) > 6000:
            continue
        found.append((name, cells))
    for name, cells in sorted(found)[:MAX]:
        chosen.append({"name": "sklearn/examples/" + name,
                       "package": "python-sklearn-doc=%s" % PACKAGES["python-sklearn-doc"],
                       "cells": cells})
    return chosen


def main():
    fetch()
    nbs = choose()
    path = os.path.join(OUT, "notebooks.json")
    with open(path + ".tmp", "w") as f:
        json.dump(nbs, f)
    os.rename(path + ".tmp", path)
    print("fidelity: %d notebooks, %d code cells in %s" % (
        len(nbs), sum(len(n["cells"]) for n in nbs), path), file=sys.stderr)


if __name__ == "__main__":
    main()
