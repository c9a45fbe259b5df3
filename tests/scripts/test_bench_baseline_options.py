"""make bench's A/B (tests/bench/compare.py) passes the baseline binary only
options its --help lists (harness.known_options): a newer flag is left out
when the A/B can do without it, and ends the A/B with a reason when it is
needed. Fake binaries stand in for old and new ci-daemon builds: no build,
no Docker."""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import compare  # noqa: E402
from harness import known_options  # noqa: E402


def fake_daemon(path, options):
    """An executable whose --help prints a usage like ci-daemon's."""
    lines = ["usage: ci-daemon [--OPTION VALUE]...", "",
             "Every option is also a config-file key (listen = ...)", ""]
    lines += ["  --%-20s what it does [1]" % o for o in options]
    path.write_text("#!/bin/sh\ncat <<'END'\n%s\nEND\nexit 1\n" % "\n".join(lines))
    path.chmod(0o755)
    return str(path)


def test_known_options_reads_the_usage(tmp_path):
    b = fake_daemon(tmp_path / "old", ["listen", "redis", "pool-size", "log-level"])
    assert known_options(b) == {"listen", "redis", "pool-size", "log-level"}


def test_a_binary_that_lists_nothing_knows_nothing(tmp_path):
    p = tmp_path / "wrapper"
    p.write_text("#!/bin/sh\necho 'no usage here'\n")
    p.chmod(0o755)
    assert known_options(str(p)) == frozenset()


def test_an_option_the_baseline_lacks_is_left_out_when_optional(tmp_path, capsys):
    b = fake_daemon(tmp_path / "older", ["listen", "pool-size"])
    args = compare.flags_for("baseline", b)
    assert args == ("--pool-size", str(compare.POOL))
    assert "baseline does not know --log-level; left out" in capsys.readouterr().out


def test_every_known_option_is_passed(tmp_path):
    b = fake_daemon(tmp_path / "newer", ["listen", "pool-size", "log-level", "pool-max"])
    assert compare.flags_for("current", b, ("--images", "python=x")) == (
        "--log-level", "warn", "--pool-size", str(compare.POOL), "--images", "python=x")


def test_an_option_the_ab_needs_ends_it_with_a_reason(tmp_path):
    b = fake_daemon(tmp_path / "ancient", ["listen", "log-level"])
    with pytest.raises(SystemExit) as e:
        compare.flags_for("baseline", b)
    assert "does not know --pool-size, which the A/B needs" in str(e.value)
