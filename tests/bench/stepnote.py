"""A step's one-line note for tests/bench/run.sh's closing table: the reason
it failed, or what a passing step wants said beside "ok" (a refused create,
a row measured short). run.sh names the file in $BENCH_STEP_NOTE; run alone,
the note goes to stderr only."""
import os
import sys


def note(text):
    text = " ".join(str(text).split())
    sys.stderr.write("note: %s\n" % text)
    path = os.environ.get("BENCH_STEP_NOTE")
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
