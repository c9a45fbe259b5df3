"""tests/bench/run.sh (`make bench`), the runner itself: a step that fails
is named with its reason in the closing table and makes the run exit
non-zero, without stopping the steps after it; a selection of steps that all
pass exits 0. The steps here are tiny scripts injected through
BENCH_EXTRA_STEPS and selected with BENCH_STEPS, so no daemon, Docker or
build is needed and each run takes well under a second."""
import os
import re
import stat
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN = os.path.join(ROOT, "tests", "bench", "run.sh")


@pytest.fixture
def steps(tmp_path):
    d = tmp_path / "steps"
    d.mkdir()

    def add(name, body):
        p = d / name
        p.write_text("#!/bin/sh\n" + body)
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
        return p
    add.dir = d
    add.out = tmp_path / "out"
    return add


def run(steps, selection, **env):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("BENCH_"):
            del e[k]  # the caller's own bench settings do not leak in
    e.update(BENCH_EXTRA_STEPS=str(steps.dir), BENCH_STEPS=selection, BENCH_OUT=str(steps.out),
             **env)
    return subprocess.run([RUN], cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)


def closing_table(stdout):
    """{step: (status, wall, reason)} from the table after the last
    'bench: the steps' line."""
    lines = stdout[stdout.rindex("bench: the steps"):].splitlines()[3:]
    rows = {}
    for line in lines:
        if line.startswith("bench: "):
            break
        m = re.match(r"(\S+)\s+(ok|FAILED|skipped)\s+(\S+ s)?\s*(.*)$", line)
        assert m, line
        rows[m.group(1)] = (m.group(2), m.group(3), m.group(4))
    return rows


def test_a_failing_step_is_named_with_its_reason_and_the_run_fails(steps):
    # Steps run in the list's order (extra steps in their names' order).
    steps("a-broken.sh", "echo 'measuring...'\n"
          "echo 'RuntimeError: the flux capacitor is missing' >&2\nexit 3\n")
    steps("b-after", "echo 'after ran'\n")
    r = run(steps, "b-after,a-broken")
    assert r.returncode == 1, r.stdout + r.stderr
    rows = closing_table(r.stdout)
    assert list(rows) == ["a-broken", "b-after"], r.stdout
    status, wall, reason = rows["a-broken"]
    assert status == "FAILED"
    assert reason == "exit 3: RuntimeError: the flux capacitor is missing", r.stdout
    assert wall, r.stdout
    # The step after the broken one still ran, and passed.
    assert "after ran" in r.stdout
    assert rows["b-after"][0] == "ok"
    assert "1 of 2 steps FAILED" in r.stdout
    # The table is also written as markdown beside the steps' logs.
    md = (steps.out / "steps.md").read_text()
    assert "| a-broken | FAILED |" in md and "flux capacitor" in md
    assert "flux capacitor" in (steps.out / "steps" / "a-broken.log").read_text()


def test_a_steps_own_note_is_its_reason(steps):
    # A step names its reason in $BENCH_STEP_NOTE (tests/bench/stepnote.py);
    # an ok step's note stands beside its "ok".
    steps("refusing", 'echo "3 of 4 ready, 1 refused: 503 not ready within 30s" >"$BENCH_STEP_NOTE"\n'
          "echo 'Traceback (most recent call last):'\necho 'noise'\nexit 1\n")
    steps("noted", 'echo "all 4 ready" >"$BENCH_STEP_NOTE"\n')
    r = run(steps, "refusing noted")
    assert r.returncode == 1, r.stdout + r.stderr
    rows = closing_table(r.stdout)
    assert rows["refusing"][0] == "FAILED"
    assert rows["refusing"][2] == "exit 1: 3 of 4 ready, 1 refused: 503 not ready within 30s"
    assert rows["noted"] == ("ok", rows["noted"][1], "all 4 ready")


def test_a_step_past_its_limit_is_stopped_and_reported(steps):
    steps("slow", "echo started\nexec sleep 60\n")
    steps("quick", "true\n")
    r = run(steps, "slow,quick", BENCH_EXTRA_STEP_TIMEOUT_S="1")
    assert r.returncode == 1, r.stdout + r.stderr
    rows = closing_table(r.stdout)
    assert rows["slow"][0] == "FAILED"
    assert rows["slow"][2].startswith("stopped at its 1s limit"), rows
    assert rows["quick"][0] == "ok"


def test_an_all_ok_selection_exits_0(steps):
    steps("broken", "exit 1\n")
    steps("one", "echo one\n")
    steps("two.sh", "echo two\n")
    r = run(steps, "one,two")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = closing_table(r.stdout)
    assert {k: v[0] for k, v in rows.items()} == {"one": "ok", "two": "ok"}
    assert "broken" not in r.stdout  # not selected, not run
    assert "all 2 steps ok" in r.stdout


def test_a_skipped_step_is_listed_and_does_not_fail_the_run(steps):
    steps("one", "echo one\n")
    r = run(steps, "keys,one", BENCH_KEYS="0")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = closing_table(r.stdout)
    assert rows["keys"] == ("skipped", None, "BENCH_KEYS=0")
    assert rows["one"][0] == "ok"


def test_an_unknown_step_is_refused_before_anything_runs(steps):
    steps("one", "echo one >&2\n")
    r = run(steps, "one,no-such-step")
    assert r.returncode == 2
    assert "unknown step 'no-such-step'" in r.stderr
    assert "one" not in r.stdout


def test_list_names_every_step(steps):
    steps("extra", "true\n")
    r = subprocess.run([RUN, "--list"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, BENCH_EXTRA_STEPS=str(steps.dir)))
    assert r.returncode == 0
    names = [line.split()[0] for line in r.stdout.splitlines()]
    for want in ("ab", "install", "pool-burst", "headline", "extra"):
        assert want in names, r.stdout
    assert names[-1] == "extra"
