#!/usr/bin/env python3
"""What the drift check costs the integration suite: runs the given test
files (default: three that are mostly API calls) with the check off and on,
alternately, ROUNDS times each, and prints the wall time of each run, the
median ratios on/off of the wall and CPU times (the CPU time of everything
the runs started: less noisy on a shared machine), and the check's own time as it counted it (the end of
an integration run prints it). Not a test: a measurement for docs and
reports (the machine's noise is in the wall times; the self-time is not).

usage: tests/openapi/measure_overhead.py [ROUNDS] [FILE...]
  (with CITEST_DAEMON/CITEST_CTL set as for the integration suite)
"""
import os
import re
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT = ["tests/integration/test_foundation.py", "tests/integration/test_tenants.py",
           "tests/integration/test_audit.py"]


def run(files, on):
    env = dict(os.environ, CITEST_OPENAPI="1" if on else "0")
    t0 = time.monotonic()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    m = re.search(r"(\d+) answers and (\d+) NDJSON lines checked .* in ([0-9.]+) s", out.stdout)
    tail = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-300:]
    return wall, cpu, (int(m.group(1)), float(m.group(3))) if m else None, tail


def main():
    args = sys.argv[1:]
    rounds = int(args.pop(0)) if args and args[0].isdigit() else 3
    files = args or DEFAULT
    off, on, selftimes, cpu_off, cpu_on = [], [], [], [], []
    for i in range(rounds):
        for flag in (False, True) if i % 2 == 0 else (True, False):
            wall, cpu, counted, tail = run(files, flag)
            (on if flag else off).append(wall)
            (cpu_on if flag else cpu_off).append(cpu)
            if counted:
                selftimes.append(counted)
            print("round %d check %-3s %7.2f s wall %7.2f s cpu  %s" % (
                i + 1, "on" if flag else "off", wall, cpu, tail))
    ratio = statistics.median(on) / statistics.median(off)
    print("median wall: off %.2f s, on %.2f s, ratio %.3f" % (
        statistics.median(off), statistics.median(on), ratio))
    print("median cpu (pytest, the daemons, ci-ctl, docker cli): off %.2f s, on %.2f s, "
          "ratio %.3f" % (statistics.median(cpu_off), statistics.median(cpu_on),
                          statistics.median(cpu_on) / statistics.median(cpu_off)))
    if selftimes:
        answers, secs = selftimes[-1]
        print("the check's own time: %.3f s for %d answers (%.0f us each), %.2f%% of the median "
              "wall time" % (secs, answers, 1e6 * secs / max(answers, 1),
                             100 * secs / statistics.median(on)))


if __name__ == "__main__":
    main()
