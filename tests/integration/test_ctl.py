"""ci-ctl end to end against the real daemon."""
import json
import subprocess
import time

from harness import CTL_BIN, image_tag, wait_for


def test_ctl_session_workflow(daemon):
    r = daemon.ctl("create")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip().splitlines()[0]
    try:
        assert daemon.ctl("exec", sid, "x=41").returncode == 0
        r = daemon.ctl("exec", sid, "print(x+1)")
        assert r.returncode == 0 and r.stdout == "42\n", (r.stdout, r.stderr)
        r = daemon.ctl("exec", sid, input="x * 2\n")  # code from stdin
        assert r.returncode == 0 and r.stdout.strip() == "82"
        r = daemon.ctl("exec", sid, "1/0")
        assert r.returncode == 1 and "ZeroDivisionError" in r.stderr
        r = daemon.ctl("--json", "exec", sid, "1/0")
        assert json.loads(r.stdout)["error"]["ename"] == "ZeroDivisionError"
        r = daemon.ctl("ls")
        assert r.returncode == 0 and sid in r.stdout
        r = daemon.ctl("show", sid)
        assert r.returncode == 0 and "ready" in r.stdout
        r = daemon.ctl("--json", "show", sid)
        assert json.loads(r.stdout)["id"] == sid
        r = daemon.ctl("health")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        r = daemon.ctl("rm", sid)
    assert r.returncode == 0, r.stderr
    assert daemon.containers("label=ci.session=" + sid) == []
    r = daemon.ctl("show", sid)
    assert r.returncode == 5 and "expired" in r.stderr


def test_ctl_errors(daemon):
    r = daemon.ctl("show", "00000000-0000-4000-8000-000000000000")
    assert r.returncode == 5 and "not_found" in r.stderr
    r = subprocess.run([CTL_BIN, "--server", "http://127.0.0.1:1", "ls"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 5 and "cannot reach" in r.stderr
    r = daemon.ctl("frobnicate")
    assert r.returncode == 2


def test_ctl_gc_lists_and_removes_orphans(make_daemon):
    # A daemon of its own, just after its own orphan sweep (which would
    # otherwise remove the orphan first, if it came in between).
    daemon = make_daemon()
    daemon.wait_orphan_sweep()
    # A container that carries this daemon's labels but belongs to no session.
    out = subprocess.run(["docker", "create", "--label", "ci.prefix=" + daemon.prefix,
                          "--label", "ci.node=" + daemon.node, image_tag(), "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    orphan = out.stdout.strip()
    try:
        r = daemon.ctl("gc")
        assert r.returncode == 0 and orphan[:12] in r.stdout, r.stdout + r.stderr
        r = daemon.ctl("--json", "gc", "--force")
        assert r.returncode == 0
        assert orphan in [o["container"] for o in json.loads(r.stdout)["orphans"]]
        gone = subprocess.run(["docker", "inspect", orphan], capture_output=True, timeout=30)
        assert gone.returncode != 0  # removed
    finally:
        subprocess.run(["docker", "rm", "-f", orphan], capture_output=True, timeout=60)


def test_ctl_events_and_drain(make_daemon):
    d = make_daemon("--pool-size", "0")
    watcher = subprocess.Popen([CTL_BIN, "--server", "http://127.0.0.1:%d" % d.port, "--json",
                                "events"], stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(watcher.stdout.readline())["type"] == "hello"
        sid = d.ctl("create").stdout.strip()
        assert d.ctl("exec", sid, "1").returncode == 0
        assert d.ctl("rm", sid).returncode == 0
        seen = []
        deadline = time.monotonic() + 10
        while "removed" not in seen and time.monotonic() < deadline:
            ev = json.loads(watcher.stdout.readline())
            if ev.get("session") == sid:
                seen.append(ev["type"])
        assert seen[:2] == ["ready", "exec"] and "removed" in seen, seen
        # drain: the daemon stops taking work and exits by itself, and the
        # event stream ends cleanly (ci-ctl events exits 0).
        r = d.ctl("drain")
        assert r.returncode == 0 and "draining" in r.stdout
        wait_for(lambda: d.proc.poll() is not None, 30, interval=0.05, what="the daemon to exit")
        assert d.proc.returncode == 0
        assert watcher.wait(10) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
