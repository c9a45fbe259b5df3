"""ci-ctl end to end against the real daemon."""
import json
import subprocess

from conftest import CTL_BIN


def ctl(daemon, *args, input=None):
    return subprocess.run([CTL_BIN, "--server", "http://127.0.0.1:%d" % daemon.port, *args],
                          capture_output=True, text=True, input=input, timeout=120)


def test_ctl_session_workflow(daemon):
    r = ctl(daemon, "create")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip().splitlines()[0]
    try:
        assert ctl(daemon, "exec", sid, "x=41").returncode == 0
        r = ctl(daemon, "exec", sid, "print(x+1)")
        assert r.returncode == 0 and r.stdout == "42\n", (r.stdout, r.stderr)
        r = ctl(daemon, "exec", sid, input="x * 2\n")  # code from stdin
        assert r.returncode == 0 and r.stdout.strip() == "82"
        r = ctl(daemon, "exec", sid, "1/0")
        assert r.returncode == 1 and "ZeroDivisionError" in r.stderr
        r = ctl(daemon, "--json", "exec", sid, "1/0")
        assert json.loads(r.stdout)["error"]["ename"] == "ZeroDivisionError"
        r = ctl(daemon, "ls")
        assert r.returncode == 0 and sid in r.stdout
        r = ctl(daemon, "show", sid)
        assert r.returncode == 0 and "ready" in r.stdout
        r = ctl(daemon, "--json", "show", sid)
        assert json.loads(r.stdout)["id"] == sid
        r = ctl(daemon, "health")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        r = ctl(daemon, "rm", sid)
    assert r.returncode == 0, r.stderr
    assert daemon.containers("label=ci.session=" + sid) == []
    r = ctl(daemon, "show", sid)
    assert r.returncode == 5 and "expired" in r.stderr


def test_ctl_errors(daemon):
    r = ctl(daemon, "show", "00000000-0000-4000-8000-000000000000")
    assert r.returncode == 5 and "not_found" in r.stderr
    r = subprocess.run([CTL_BIN, "--server", "http://127.0.0.1:1", "ls"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 5 and "cannot reach" in r.stderr
    r = ctl(daemon, "frobnicate")
    assert r.returncode == 2
