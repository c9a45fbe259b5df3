"""Issue 14: a hostile kernel and the %pip install window
(docs/protocol.md "%pip install", daemon/manager_pip.c).

The cell's code plays a kernel that misbehaves: it writes pip_open frames
itself on the kernel's own connection (sys.modules["kernel"].current) and
reads the daemon's answers: it never says pip ended, asks twice, sends junk
or a stale execution id, asks from a thread between executions, floods, and
dies with the window open. Whatever it does, the window closes (at the
latest with the execution), the proxy refuses the index again, and the
daemon keeps serving with no sanitizer report.

The index is our own HTTP server on 127.0.0.1, reached as the made-up
pypi.test through the daemon's proxy (hosts-only resolver); the session's
own allowlist names another made-up host. This module runs a daemon of its
own: the suite's shared one has no package index.
"""

import pytest

from harness.packages import index_daemon
from harness.servers import HttpServer

ADMIN = "admin-" + "h" * 40

# Cell prelude: the kernel's connection, as a hostile cell can reach it.
PRELUDE = r"""
import os, select, socket, sys, time, urllib.parse
import ci_frame
_k = sys.modules['kernel'].current
eid = _k.cur_id
def send(h):
    with _k.lock:
        _k._send(ci_frame.pack(h))
def reply(timeout=10):
    end = time.monotonic() + timeout
    while True:
        f = _k.dec.next()
        if f is not None:
            if f[0].get('t') == 'pip_window':
                return f[0]
            continue
        left = end - time.monotonic()
        if left <= 0 or not select.select([_k.sock], [], [], left)[0]:
            return None
        d = _k.sock.recv(65536)
        if not d:
            return None
        _k.dec.feed(d)
def probe():
    p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
    c = socket.create_connection((p.hostname, p.port), timeout=15)
    c.sendall(b'GET http://pypi.test:PORT/simple/x/ HTTP/1.1\r\nHost: pypi.test:PORT\r\n'
              b'Connection: close\r\n\r\n')
    got = b''
    while b'\r\n' not in got:
        chunk = c.recv(4096)
        if not chunk:
            break
        got += chunk
    c.close()
    return got.split(b'\r\n')[0].decode()
"""


@pytest.fixture(scope="module")
def index():
    srv = HttpServer(b"an index of ours\n")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def pipd(redis_server, tmpdir_session, index):
    d = index_daemon(redis_server, tmpdir_session, index, ADMIN)
    try:
        yield d
    finally:
        d.finish()


@pytest.fixture(scope="module")
def tenant(pipd):
    return pipd.client(pipd.key("pip-hostile")["key"])


@pytest.fixture
def session(tenant):
    s = tenant.create(network={"allow": ["other.test:1"]})
    yield s
    tenant.delete(s["id"])


def run(tenant, sid, index, code, timeout_s=30):
    r = tenant.exec(sid, PRELUDE.replace("PORT", str(index.port)) + code, timeout_s=timeout_s)
    return r


def closed_afterwards(pipd, tenant, sid, index, mark, why):
    """The window was closed (with why) and the proxy refuses the index."""
    pipd.wait_log("session %s: install window closed (%s)" % (sid, why), since=mark)
    r = run(tenant, sid, index, "print(probe())")
    assert r["status"] == "ok" and r["stdout"].startswith("HTTP/1.1 403"), r


def test_never_saying_pip_ended_closes_with_the_execution(pipd, tenant, session, index):
    sid = session["id"]
    mark = pipd.log_mark()
    r = run(tenant, sid, index,
            "print(probe())\n"
            "send({'t': 'pip_open', 'id': eid, 'specs': ['tinypkg']})\n"
            "h = reply()\n"
            "print(h['ok'], h['index'], h['args'][0], h['window_ms'] > 0)\n"
            "print(probe())\n")   # and no pip_close: the cell just ends
    assert r["status"] == "ok", r
    lines = r["stdout"].splitlines()
    assert lines[0].startswith("HTTP/1.1 403"), lines          # before: refused
    assert lines[1] == "True pypi.test:%d install True" % index.port, lines
    assert lines[2].split()[1] == "200", lines                   # open in the window
    closed_afterwards(pipd, tenant, sid, index, mark, "the execution ended")


def test_twice_junk_and_stale_ids(pipd, tenant, session, index):
    sid = session["id"]
    mark = pipd.log_mark()
    r = run(tenant, sid, index,
            "send({'t': 'pip_open', 'id': eid, 'specs': ['a']})\n"
            "print(reply()['ok'])\n"
            "send({'t': 'pip_open', 'id': eid, 'specs': ['b']})\n"     # while open
            "h = reply(); print(h['ok'], h['code'], h['message'])\n"
            "send({'t': 'pip_close', 'id': eid + 1, 'rc': 0})\n"        # not its window
            "send({'t': 'pip_close', 'id': eid, 'rc': 0})\n"
            "send({'t': 'pip_open', 'id': eid + 7, 'specs': ['c']})\n"  # stale: no answer
            "for specs in (['x @ http://evil.test/x.whl'], ['--index-url=http://e.test/'],\n"
            "              'a', [1], [], ['a'] * 40, ['a;b']):\n"
            "    send({'t': 'pip_open', 'id': eid, 'specs': specs})\n"
            "    h = reply(); print(h['id'] == eid, h['ok'], h['code'])\n"
            "send({'t': 'pip_open', 'id': eid, 'specs': ['a']})\n"     # after the close: again
            "h = reply(); print(h['ok'])\n"
            "send({'t': 'pip_close', 'id': eid, 'rc': 'junk'})\n")
    assert r["status"] == "ok", r
    lines = r["stdout"].splitlines()
    assert lines[0] == "True", lines
    assert lines[1].startswith("False busy a package install is already running"), lines
    # The stale pip_open got no answer: the next answer is the next request's.
    assert lines[2:9] == ["True False bad_request"] * 7, lines
    assert lines[9] == "True", lines
    pipd.wait_log("session %s: install window closed (pip finished, exit 0)" % sid, since=mark)
    pipd.wait_log("session %s: install window closed (pip finished, exit -1)" % sid, since=mark)
    log = pipd.log_since(mark)
    assert log.count("session %s: install window opened" % sid) == 2, log[-4000:]
    closed_afterwards(pipd, tenant, sid, index, mark, "pip finished, exit -1")


def test_asking_between_executions_opens_nothing(pipd, tenant, session, index):
    sid = session["id"]
    r = run(tenant, sid, index,
            "import threading\n"
            "def pester(my_id=eid):\n"
            "    for _ in range(60):\n"
            "        send({'t': 'pip_open', 'id': my_id, 'specs': ['a']})\n"
            "        time.sleep(0.05)\n"
            "t = threading.Thread(target=pester, daemon=True); t.start()\n")
    assert r["status"] == "ok", r
    mark = pipd.log_mark()
    # The next cell waits for the thread: its frames came between the two
    # executions and during this one, always with the old id.
    r = run(tenant, sid, index, "t.join(); print(probe())")
    assert r["status"] == "ok" and r["stdout"].startswith("HTTP/1.1 403"), r
    assert "install window opened" not in pipd.log_since(mark)


def test_a_flood_gets_a_bounded_number_of_answers(pipd, tenant, session, index):
    sid = session["id"]
    mark = pipd.log_mark()
    r = run(tenant, sid, index,
            "for _ in range(200):\n"
            "    send({'t': 'pip_open', 'id': eid, 'specs': [1]})\n"
            "n = 0\n"
            "while reply(2) is not None:\n"
            "    n += 1\n"
            "print(n)\n")
    assert r["status"] == "ok" and r["stdout"].strip() == "16", r
    pipd.wait_log("session %s: more than 16 pip_open frames in one execution" % sid, since=mark)


def test_a_kernel_that_dies_with_the_window_open(pipd, tenant, session, index):
    sid = session["id"]
    mark = pipd.log_mark()
    r = run(tenant, sid, index,
            "send({'t': 'pip_open', 'id': eid, 'specs': ['a']})\n"
            "assert reply()['ok']\n"
            "os._exit(3)\n")
    assert r["status"] == "killed", r
    closed_afterwards(pipd, tenant, sid, index, mark, "the kernel went away")
    assert pipd.api.request("GET", "/healthz")[0] == 200
