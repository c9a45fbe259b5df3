"""POST /v1/sessions/{id}/interrupt (issue 12's Ctrl-C): the running
execution is interrupted, its own request gets the KeyboardInterrupt and the
session keeps its variables; code that ignores the interrupt is killed after
the grace; ci-ctl exec sends it on Ctrl-C."""
import os
import signal
import subprocess
import threading

import pytest

from harness import CTL_BIN, wait_for

LOOP = "import time\nfor i in range(600):\n    time.sleep(0.1)\n"


@pytest.fixture(scope="module")
def idaemon(redis_server, tmpdir_session):
    """A daemon whose kill grace is long: a kernel that takes the interrupt
    answers well within it even on a loaded machine, so these tests see the
    KeyboardInterrupt, never the kill that follows an ignored interrupt
    (tested on its own below, with a short grace)."""
    from harness import Daemon
    d = Daemon(redis_server, tmpdir_session, ("--kill-grace-ms", "20000"))
    yield d
    d.finish()


def run_in_thread(api, sid, code):
    out = {}

    def go():
        out["doc"] = api.exec(sid, code)
    t = threading.Thread(target=go)
    t.start()
    return t, out


def busy(api, sid):
    return api.request("GET", "/v1/sessions/" + sid)[1]["state"] == "busy"


def test_interrupt_stops_the_running_code_and_keeps_the_session(idaemon):
    api = idaemon.api
    s = api.create()
    sid = s["id"]
    assert api.exec(sid, "x = 41")["status"] == "ok"
    # Nothing runs: nothing to interrupt, and nothing happens.
    assert api.request("POST", "/v1/sessions/%s/interrupt" % sid) == (200, {"interrupted": False})
    t, out = run_in_thread(api, sid, LOOP)
    try:
        wait_for(lambda: busy(api, sid), 10, interval=0.02, what="the execution running")
        assert api.request("POST", "/v1/sessions/%s/interrupt" % sid) == \
            (200, {"interrupted": True})
    finally:
        t.join(30)
    doc = out["doc"]
    assert doc["status"] == "error" and doc["error"]["ename"] == "KeyboardInterrupt", doc
    # The kernel and its variables are kept; the session is ready again.
    assert api.exec(sid, "x + 1")["result"] == "42"
    assert api.delete(sid) == 204


def test_code_that_ignores_the_interrupt_is_killed_after_the_grace(make_daemon):
    d = make_daemon("--kill-grace-ms", "300")
    api = d.api
    sid = api.create()["id"]
    code = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "open('/workspace/ignoring', 'w').close()\n" + LOOP)
    t, out = run_in_thread(api, sid, code)
    try:
        # Interrupted only once it ignores SIGINT (the file says so).
        wait_for(lambda: api.request("GET", "/v1/sessions/%s/files/ignoring" % sid)[0] == 200,
                 10, interval=0.02, what="the code ignoring SIGINT")
        assert api.request("POST", "/v1/sessions/%s/interrupt" % sid)[1] == {"interrupted": True}
    finally:
        t.join(30)
    doc = out["doc"]
    assert doc["status"] == "killed" and doc["kernel"] == "restarted", doc
    assert "ignored the interrupt" in doc["reason"], doc
    # A new kernel: the session still runs code.
    assert api.exec(sid, "1 + 1")["result"] == "2"
    assert api.delete(sid) == 204


def test_interrupt_of_an_unknown_or_ended_session(daemon):
    api = daemon.api
    r = api.send("POST", "/v1/sessions/00000000-0000-4000-8000-00000000beef/interrupt")
    assert r.status == 404 and r.doc["error"]["code"] == "not_found"
    sid = api.create()["id"]
    assert api.delete(sid) == 204
    r = api.send("POST", "/v1/sessions/%s/interrupt" % sid)
    assert r.status == 410 and r.doc["error"]["code"] == "expired"


def test_ctl_exec_sends_the_interrupt_on_ctrl_c(idaemon):
    daemon = idaemon
    api = daemon.api
    sid = api.create()["id"]
    assert api.exec(sid, "x = 7")["status"] == "ok"
    p = subprocess.Popen([CTL_BIN, "--server", "http://127.0.0.1:%d" % daemon.port,
                          "exec", sid, LOOP], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        wait_for(lambda: busy(api, sid), 10, interval=0.02, what="the execution running")
        p.send_signal(signal.SIGINT)  # by pid, as a terminal's Ctrl-C would
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "KeyboardInterrupt" in out + err, (out, err)
    assert p.returncode != 0
    # The session is not left busy, and keeps its variables.
    wait_for(lambda: not busy(api, sid), 10, interval=0.02, what="the session ready again")
    assert api.exec(sid, "x")["result"] == "7"
    assert api.delete(sid) == 204


def test_ctl_exec_on_a_terminal_ctrl_c_interrupts(idaemon):
    """The real thing: ci-ctl on a pseudo-terminal as its controlling
    terminal; ^C typed on it reaches ci-ctl as SIGINT from the line
    discipline (not from us), and the interrupt reaches the code."""
    import pty
    import select
    import termios
    import fcntl
    daemon = idaemon
    api = daemon.api
    sid = api.create()["id"]
    assert api.exec(sid, "x = 8")["status"] == "ok"
    master, slave = pty.openpty()

    def as_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    p = subprocess.Popen([CTL_BIN, "--server", "http://127.0.0.1:%d" % daemon.port,
                          "exec", sid, "print('started', flush=True)\n" + LOOP],
                         stdin=slave, stdout=slave, stderr=slave, preexec_fn=as_terminal,
                         close_fds=True)
    os.close(slave)
    seen = b""
    try:
        def read_some():
            nonlocal seen
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    pass
            return seen
        # Streamed, because stdout is a terminal: the code has started.
        wait_for(lambda: b"started" in read_some(), 15, interval=0.01, what="the code's output")
        os.write(master, b"\x03")  # ^C, as typed
        wait_for(lambda: read_some() is not None and p.poll() is not None, 30,
                 interval=0.02, what="ci-ctl to end after ^C")
        for _ in range(20):
            if not select.select([master], [], [], 0.05)[0]:
                break
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
    assert b"KeyboardInterrupt" in seen, seen
    assert p.returncode != 0
    wait_for(lambda: not busy(api, sid), 10, interval=0.02, what="the session ready again")
    assert api.exec(sid, "x")["result"] == "8"
    assert api.delete(sid) == 204
