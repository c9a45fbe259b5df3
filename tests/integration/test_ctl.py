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


def test_ctl_gc_lists_and_removes_orphans(daemon):
    # A container that carries this daemon's labels but belongs to no session.
    out = subprocess.run(["docker", "create", "--label", "ci.prefix=" + daemon.prefix,
                          "--label", "ci.node=" + daemon.node, "ci/python:latest", "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    orphan = out.stdout.strip()
    try:
        r = ctl(daemon, "gc")
        assert r.returncode == 0 and orphan[:12] in r.stdout, r.stdout + r.stderr
        r = ctl(daemon, "--json", "gc", "--force")
        assert r.returncode == 0
        assert orphan in [o["container"] for o in json.loads(r.stdout)["orphans"]]
        gone = subprocess.run(["docker", "inspect", orphan], capture_output=True, timeout=30)
        assert gone.returncode != 0  # removed
    finally:
        subprocess.run(["docker", "rm", "-f", orphan], capture_output=True, timeout=60)


def test_ctl_events_and_drain(make_daemon):
    import time
    from conftest import wait_for
    d = make_daemon("--pool-size", "0")
    watcher = subprocess.Popen([CTL_BIN, "--server", "http://127.0.0.1:%d" % d.port, "--json",
                                "events"], stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(watcher.stdout.readline())["type"] == "hello"
        sid = ctl(d, "create").stdout.strip()
        assert ctl(d, "exec", sid, "1").returncode == 0
        assert ctl(d, "rm", sid).returncode == 0
        seen = []
        deadline = time.monotonic() + 10
        while "removed" not in seen and time.monotonic() < deadline:
            ev = json.loads(watcher.stdout.readline())
            if ev.get("session") == sid:
                seen.append(ev["type"])
        assert seen[:2] == ["ready", "exec"] and "removed" in seen, seen
        # drain: the daemon stops taking work and exits by itself, and the
        # event stream ends cleanly (ci-ctl events exits 0).
        r = ctl(d, "drain")
        assert r.returncode == 0 and "draining" in r.stdout
        wait_for(lambda: d.proc.poll() is not None, 30, interval=0.05, what="the daemon to exit")
        assert d.proc.returncode == 0
        assert watcher.wait(10) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
