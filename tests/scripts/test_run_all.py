"""tests/run-all.sh itself: its closing line, its counts, its busy loops.

Runs the runner on the format suite only (seconds, no Docker, no build) and
checks what a CI log reader relies on."""
import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_all(**env):
    e = dict(os.environ, CITEST_BUILD="0", TEST_SUITES="format")
    e.update(env)
    return subprocess.run([os.path.join(ROOT, "tests", "run-all.sh")], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=300)


def test_closing_line_counts_passed_failed_and_skipped():
    r = run_all()
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"all suites: 1 passed, 0 failed, 0 skipped", last), last
    assert re.search(r"^\s+format\s+1 passed\s+0 failed\s+0 skipped", r.stdout, re.M), r.stdout


def test_citest_load_busy_loops_are_stopped_by_pid():
    r = run_all(CITEST_LOAD="2")
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"CITEST_LOAD=2: busy loops (\d+) (\d+)", r.stdout)
    assert m, r.stdout
    for pid in map(int, m.groups()):
        # Gone, or at most a zombie of a reaped parent: never still spinning.
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        assert state == "Z", "busy loop %d still running (%s)" % (pid, state)
    assert "under CITEST_LOAD=2" in r.stdout


def test_an_unknown_suite_fails_the_run():
    r = run_all(TEST_SUITES="no-such-suite")
    assert r.returncode != 0
    assert "all suites: 0 passed, 1 failed" in r.stdout, r.stdout
