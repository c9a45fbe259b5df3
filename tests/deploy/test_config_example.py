"""deploy/ci-daemon.conf.example (issue 15, item 2): every option of the
daemon is in it, and the daemon loads it and serves with it.

The daemon has no check-only mode; the file is loaded the real way: a
daemon started with --config EXAMPLE (the harness's flags, which beat the
file, give it its own Redis prefix, state dir and port). A broken copy shows
that a bad line stops the start with the line named.
"""
import os
import re
import subprocess

from harness.daemon import DAEMON_BIN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "deploy", "ci-daemon.conf.example")


def daemon_options():
    """The option table, as `ci-daemon --help` prints it (config.c's rows)."""
    out = subprocess.run([DAEMON_BIN, "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    keys = re.findall(r"^  --([a-z0-9-]+)", out.stdout, re.M)
    assert len(keys) > 50, out.stdout
    return keys


def example_keys(text):
    """Keys set (key = value) or shown commented out (# key =)."""
    return set(re.findall(r"^#? ?([a-z0-9-]+) =", text, re.M))


def missing_from(text):
    have = example_keys(text)
    return [k for k in daemon_options() if k not in have]


def test_every_option_is_in_the_example():
    missing = missing_from(open(EXAMPLE).read())
    assert not missing, ("options of ci-daemon (daemon/config.c) missing from "
                         "deploy/ci-daemon.conf.example; document each one there (what, "
                         "default, when to change): %s" % ", ".join(missing))


def test_the_check_names_a_missing_option():
    text = re.sub(r"^max-sessions = .*$", "", open(EXAMPLE).read(), flags=re.M)
    assert missing_from(text) == ["max-sessions"]


def test_every_option_says_its_default_and_reload():
    """Each key's block says its default and what SIGHUP does with it."""
    text = open(EXAMPLE).read()
    for key in daemon_options():
        block = re.search(r"\n# %s: (.*?)\n#? ?%s =" % (re.escape(key), re.escape(key)), text,
                          re.S)
        assert block, "no comment block for %s" % key
        assert "default" in block.group(1) and "on SIGHUP:" in block.group(1), key


def test_the_daemon_loads_the_example_and_serves(make_daemon):
    d = make_daemon("--config", EXAMPLE, "--pool-size", "0")
    assert d.api.request("GET", "/healthz")[0] == 200
    s = d.api.create()
    try:
        assert d.api.exec(s["id"], "print(1 + 1)")["stdout"] == "2\n"
    finally:
        d.api.delete(s["id"])


def test_a_broken_example_stops_the_start(tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text(open(EXAMPLE).read().replace("max-sessions = 1000", "max-sesions = 1000"))
    r = subprocess.run([DAEMON_BIN, "--config", str(bad)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "unknown option 'max-sesions'" in r.stderr, r.stderr
    assert re.search(r"bad\.conf:\d+", r.stderr), r.stderr
