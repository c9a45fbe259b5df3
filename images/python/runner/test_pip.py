"""`%pip install` in a cell: the kernel's side of the frame flow (ci_pip.py,
docs/protocol.md "%pip install"), with the test as the daemon.  No network:
the pip the kernel runs is given arguments that need none (`--version`),
or an index the test serves itself (one that never answers)."""

import os
import shutil
import signal
import socket
import tempfile
import threading

import pytest

from test_runner import T, Sandbox, sb  # noqa: F401 (sb: a fixture)


@pytest.fixture(scope="module")
def k():
    tmp = tempfile.mkdtemp(prefix="cirt-pip-")
    s = Sandbox(tmp)
    try:
        yield s
    finally:
        s.close()
        shutil.rmtree(tmp, ignore_errors=True)


def start(box, code):
    eid = box.nid()
    box.kern.send({"t": "exec", "id": eid, "stdout_cap": 1 << 20, "stderr_cap": 1 << 20,
                   "files_cap": 1000}, code.encode())
    return eid


def until(box, eid, kinds, res=None, timeout=T):
    """Frames of execution eid until one of kinds; returns (header, res)."""
    res = res if res is not None else {"stdout": b"", "stderr": b"", "frames": []}
    while True:
        h, body = box.kern.recv(timeout)
        assert h.get("id") == eid, h
        res["frames"].append(h)
        if h["t"] == "stream":
            res[h["name"]] += body
        if h["t"] in kinds:
            return h, res
        assert h["t"] in ("stream", "display"), h


def window(box, eid, args, window_ms=10000):
    box.kern.send({"t": "pip_window", "id": eid, "ok": True, "window_ms": window_ms,
                  "index": "pypi.test:1", "site": os.path.join(box.ws, ".ci", "site"),
                  "args": args})


def test_install_asks_the_daemon_then_runs_pip_and_says_when_it_ended(k):
    eid = start(k, "%pip install -q Tiny_Pkg==1.0 'other>=2'\n1 + 1")
    h, res = until(k, eid, {"pip_open", "done"})
    assert h == {"t": "pip_open", "id": eid, "specs": ["Tiny_Pkg==1.0", "other>=2"]}
    window(k, eid, ["--version"])
    h, res = until(k, eid, {"pip_close", "done"}, res)
    assert h == {"t": "pip_close", "id": eid, "rc": 0}
    h, res = until(k, eid, {"done"}, res)
    assert h["status"] == "ok" and h["result"] == "2", h
    assert res["stdout"].startswith(b"pip "), res   # pip's output is the cell's
    assert os.path.isdir(os.path.join(k.ws, ".ci", "site"))


def test_refused_install_is_a_pip_error_with_the_daemons_words(k):
    eid = start(k, "%pip install requests")
    h, _ = until(k, eid, {"pip_open"})
    k.kern.send({"t": "pip_window", "id": eid, "ok": False, "code": "unavailable",
                 "message": "package installs are off on this node: no package index "
                            "is configured (start ci-daemon with --pip-index-url URL)"})
    h, res = until(k, eid, {"done"})
    assert h["status"] == "error" and h["error"]["ename"] == "PipError", h
    assert "no package index is configured" in h["error"]["evalue"]
    assert [f for f in res["frames"] if f["t"] == "pip_close"] == []   # nothing opened
    tb = "\n".join(h["error"]["traceback"])
    assert "ci_pip" not in tb and "ci_magics" not in tb, tb
    assert h["error"]["traceback"][-1].startswith("PipError: package installs are off")


def test_options_are_refused_before_the_daemon_hears(k):
    eid = start(k, "%pip install --index-url http://evil.test/simple six")
    h, res = until(k, eid, {"done", "pip_open"})
    assert h["t"] == "done" and h["error"]["ename"] == "PipError", h
    assert "--index-url: options are not accepted" in h["error"]["evalue"]
    eid = start(k, "%pip install")
    h, _ = until(k, eid, {"done", "pip_open"})
    assert h["t"] == "done" and "no requirement given" in h["error"]["evalue"], h
    eid = start(k, "%pip uninstall six")
    h, _ = until(k, eid, {"done", "pip_open"})
    assert h["t"] == "done" and "pip uninstall is not available" in h["error"]["evalue"]


def test_shell_pip_install_goes_through_the_window_too(k):
    for line, specs in (("!pip install six", ["six"]),
                        ("!python3 -m pip install -U six==1.16.0", ["six==1.16.0"]),
                        ("!pip3 install --quiet a b", ["a", "b"])):
        eid = start(k, line)
        h, _ = until(k, eid, {"pip_open", "done"})
        assert h == {"t": "pip_open", "id": eid, "specs": specs}, (line, h)
        k.kern.send({"t": "pip_window", "id": eid, "ok": False, "code": "bad_request",
                     "message": "no"})
        h, _ = until(k, eid, {"done"})
        assert h["error"]["ename"] == "PipError", h
    # Shell syntax: the shell runs it as written.
    eid = start(k, "!echo pip install six; true")
    h, res = until(k, eid, {"pip_open", "done"})
    assert h["t"] == "done" and h["status"] == "ok", h
    assert res["stdout"] == b"pip install six\n"


def test_window_ending_kills_pip_and_says_so(k):
    # An index that accepts and never answers: pip waits until killed.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    conns = []

    def accept():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            conns.append(c)

    threading.Thread(target=accept, daemon=True).start()
    try:
        eid = start(k, "%pip install tiny")
        until(k, eid, {"pip_open"})
        window(k, eid, ["install", "--no-cache-dir", "--target",
                        os.path.join(k.ws, ".ci", "site"), "--index-url",
                        "http://127.0.0.1:%d/simple" % port, "--", "tiny"], window_ms=1200)
        h, res = until(k, eid, {"pip_close"}, timeout=30)
        assert h == {"t": "pip_close", "id": eid, "rc": -1}
        h, res = until(k, eid, {"done"}, res)
        assert h["error"]["ename"] == "PipError", h
        assert h["error"]["evalue"].startswith(
            "timeout: the install window of 1 s ended before pip finished; egress to "
            "pypi.test:1 is closed again"), h["error"]
    finally:
        srv.close()
        for c in conns:
            c.close()


def test_interrupt_stops_pip_and_still_says_it_ended(sb):
    # A pip that hangs (its index never answers), interrupted as the daemon
    # does it: the frame, then SIGINT.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    try:
        eid = start(sb, "%pip install tiny")
        until(sb, eid, {"pip_open"})
        window(sb, eid, ["install", "--target", os.path.join(sb.ws, ".ci", "site"),
                         "--index-url", "http://127.0.0.1:%d/simple" % srv.getsockname()[1],
                         "--", "tiny"], window_ms=60000)
        mark = sb.log_mark()
        # pip is running once the kernel has a child that connected to us.
        srv.settimeout(60)          # pip starts slowly on a loaded machine
        c, _ = srv.accept()
        sb.kern.send({"t": "interrupt", "id": eid})
        os.kill(sb.kern.hello["pid"], signal.SIGINT)
        h, res = until(sb, eid, {"pip_close"})
        assert h == {"t": "pip_close", "id": eid, "rc": -1}
        h, res = until(sb, eid, {"done"}, res)
        assert h["error"]["ename"] == "KeyboardInterrupt", h
        c.close()
        assert "protocol error" not in sb.log_since(mark)
    finally:
        srv.close()
    # The kernel goes on.
    r = sb.exec("40 + 2")
    assert r["result"] == "42"


def test_late_and_foreign_frames_are_ignored(k):
    # A pip_window for an execution that is over, or that nobody asked for:
    # the kernel drops it and the next execution runs.
    k.kern.send({"t": "pip_window", "id": 999999, "ok": True})
    r = k.exec("'still here'")
    assert r["status"] == "ok" and r["result"] == "'still here'", r


def test_pip_list_runs_here_with_the_site_on_its_path(k):
    r = k.exec("%pip list --disable-pip-version-check\n_exit_code")
    assert r["status"] == "ok" and r["result"] == "0", r
    assert b"Package" in r["stdout"], r["stdout"][:300]
