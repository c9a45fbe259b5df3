"""What the fidelity suite does the same way on both sides so that a cell is
compared on what ci decides (status, text/plain, MIME types), not on what no
two runs of one kernel share:

  SEED_CELL  run first in every notebook's kernel, ci's and Jupyter's, and not
             counted: Python's and NumPy's global random generators start from
             one seed, so an unseeded np.random.rand() (and the estimators
             that draw their seed from it, LinearSVC's liblinear) gives the
             same numbers on both sides.
  mask()     object addresses in a text/plain (`<Styler at 0x7f...>`,
             `<Line2D at 0x7f...>`): where CPython put an object, the same
             in neither run.

Imported by run.py (the host) and replay_jupyter.py (in the container)."""
import re

SEED_CELL = (
    "import random as _ci_fid_random\n"
    "_ci_fid_random.seed(0)\n"
    "try:\n"
    "    import numpy as _ci_fid_np\n"
    "    _ci_fid_np.random.seed(0)\n"
    "    del _ci_fid_np\n"
    "except ImportError:\n"
    "    pass\n"
    "del _ci_fid_random\n")

_ADDR = re.compile(r"\b0x[0-9a-fA-F]{6,16}\b")


def mask(text):
    """text with object addresses replaced by 0x…"""
    return _ADDR.sub("0x\u2026", text) if isinstance(text, str) else text
