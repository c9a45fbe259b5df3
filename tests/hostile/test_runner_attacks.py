"""Hostile code against the runner and its link to the daemon: forged
connections to the IPC socket, garbage and forged frames on the kernel's own
connection, stopping or killing the supervisor, killing every process in the
sandbox. The daemon treats the sandbox as hostile: whatever the code does, the
daemon and the other sessions carry on, and deleting the session leaves
nothing behind."""
import time

import pytest

from harness import wait_for

FRAMES = r"""
import json, os, socket, struct
def frame(hdr, body=b''):
    h = hdr if isinstance(hdr, bytes) else json.dumps(hdr).encode()
    return struct.pack('>II', len(h), len(body)) + h + body
def talk(data, wait=0.3):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(wait)
    try:
        s.connect(os.environ['SANDBOX_IPC'])
    except OSError as e:
        return 'connect: %s' % e
    try:
        s.sendall(data)
        got = b''
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return 'closed after %d bytes' % len(got)
            got += chunk
    except socket.timeout:
        return 'open'
    except OSError as e:
        return 'error: %s' % e
    finally:
        s.close()
"""


def test_forged_connections_to_the_ipc_socket(hostile):
    h = hostile
    with h.victim() as s:
        sid = s["id"]
        r = h.exec(sid, FRAMES + r"""
res = {}
res['garbage'] = talk(b'\xff' * 4096)
res['huge_hlen'] = talk(struct.pack('>II', 0xffffffff, 0xffffffff) + b'{')
res['zero_hlen'] = talk(struct.pack('>II', 0, 0))
res['not_json'] = talk(frame(b'{"t": "hello", ' + b'x' * 100))
res['deep'] = talk(frame(b'{"t":"hello","x":' + b'[' * 100000 + b']' * 100000 + b'}'))
res['no_t'] = talk(frame({'role': 'kernel', 'version': 1, 'pid': 1}))
res['role_admin'] = talk(frame({'t': 'hello', 'role': 'admin', 'version': 1, 'pid': 1}))
res['dup_kernel'] = talk(frame({'t': 'hello', 'role': 'kernel', 'version': 1, 'pid': 1}) +
                         frame({'t': 'done', 'id': 1, 'status': 'ok'}))
res['dup_supervisor'] = talk(frame({'t': 'hello', 'role': 'supervisor', 'version': 1, 'pid': 1}) +
                             frame({'t': 'kernel_exit', 'pid': 1, 'code': 0, 'oom': True}))
res['version_99'] = talk(frame({'t': 'hello', 'role': 'kernel', 'version': 99, 'pid': 1}))
# many connections held open at once
held = []
for _ in range(200):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(os.environ['SANDBOX_IPC'])
        held.append(c)
    except OSError:
        break
res['held'] = len(held)
for c in held:
    c.close()
print(json.dumps(res))
""")
        assert r["status"] == "ok", r
        print("\n[forged ipc connections] %s" % r["stdout"].strip())
        h.assert_daemon_fine()
        # The session's own kernel and supervisor still work.
        r = h.exec(sid, "x = 7\nprint(x * 6)")
        assert r["status"] == "ok" and r["stdout"] == "42\n" and r["kernel"] == "preserved", r
        st, doc = h.api.request("PUT", "/v1/sessions/%s/files/after.txt" % sid, raw=b"fine")
        assert st == 201, (st, doc)
        st, data = h.api.request("GET", "/v1/sessions/%s/files/after.txt" % sid)
        assert st == 200 and data == b"fine", (st, data)
    h.assert_daemon_fine()


def test_garbage_on_the_kernels_own_connection(hostile):
    h = hostile
    with h.victim() as s:
        sid = s["id"]
        h.exec(sid, "y = 1")
        r = h.exec(sid, "import kernel, struct\n"
                        "k = kernel.current\n"
                        "k.sock.sendall(b'\\xff' * 64 + struct.pack('>II', 0xffffffff, 0))\n"
                        # (the sandbox's sleep: time for the daemon to act on it)
                        "import time; time.sleep(2)\nprint('survived')")
        # A bad frame from the kernel ends that kernel (protocol.md).
        assert r["status"] in ("killed", "ok", "error"), r
        if r["status"] == "killed":
            assert r["kernel"] == "restarted", r
        h.assert_daemon_fine()
        r = h.exec(sid, "print('fresh')")
        assert r["status"] == "ok" and r["stdout"] == "fresh\n", r
    h.assert_daemon_fine()


FORGE = r"""
import json, struct, kernel
k = kernel.current
def frame(hdr, body=b''):
    h = json.dumps(hdr).encode()
    return struct.pack('>II', len(h), len(body)) + h + body
eid = k.cur_id
out = [
    frame({'t': 'stream', 'id': eid, 'name': 'evil'}, b'x'),
    frame({'t': 'stream', 'id': eid, 'name': 'stdout'}, b'\xff\xfe forged \x00 bytes\n'),
    frame({'t': 'stream', 'id': eid, 'name': 'stdout', 'tail': True, 'dropped': -5}, b'T'),
    frame({'t': 'stream', 'id': eid, 'name': 'stdout', 'tail': True,
           'dropped': 2 ** 70}, b'T'),
    frame({'t': 'display', 'id': eid, 'mime': 'text/html'}, b'<script>alert(1)</script>'),
    frame({'t': 'stream', 'id': eid + 1000, 'name': 'stdout'}, b'other exec'),
    frame({'t': 'done', 'id': eid + 1000, 'status': 'ok'}),
    frame({'t': 'unknown_type', 'id': eid}),
    frame({'t': 'done', 'id': eid, 'status': 'weird', 'result': 'R' * 500000,
           'error': {'ename': 1, 'evalue': None, 'traceback': 'not a list'},
           'files': [{'path': '../../etc/passwd', 'size': -1, 'change': 'pwned'}] * 3,
           'files_truncated': 'yes'}),
]
with k.lock:
    for f in out:
        k.sock.sendall(f)
"""


def test_forged_frames_on_the_kernels_own_connection(hostile):
    h = hostile
    with h.victim() as s:
        sid = s["id"]
        st, doc = h.api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": FORGE})
        # Whatever the daemon made of it: one well-formed answer, never a crash.
        assert st == 200, (st, doc)
        assert doc["status"] in ("ok", "error", "killed", "timeout"), doc
        assert isinstance(doc["stdout"], str) and isinstance(doc["files"], list), doc
        for d in doc.get("display") or []:
            assert d["mime"] == "image/png", d
        print("\n[forged frames] status=%s kernel=%s reason=%s result=%s files=%s" % (
            doc["status"], doc["kernel"], doc.get("reason"),
            (doc.get("result") or "")[:20], doc["files"]))
        h.assert_daemon_fine()
        # The session goes on (a fresh kernel if the daemon dropped this one).
        def runs_again():
            st, r = h.api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "print(8)"})
            if st == 200 and r["status"] == "ok" and r["stdout"] == "8\n":
                return True
            assert st in (200, 409), (st, r)
            return False

        wait_for(runs_again, 10, interval=0.2, what="the session to run code again")
    h.assert_daemon_fine()


def test_user_code_stops_its_supervisor(hostile):
    h = hostile
    s = h.create()
    sid = s["id"]
    try:
        # (in the sandbox: wait, bounded, until the stop has taken effect)
        r = h.exec(sid, "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\n"
                        "def st():\n"
                        "    return open('/proc/%d/status' % os.getppid()).read()"
                        ".split('State:')[1].split()[0]\n"
                        "end = time.monotonic() + 3\n"
                        "while st() != 'T' and time.monotonic() < end:\n"
                        "    time.sleep(0.005)\n"
                        "print(st())")
        assert r["status"] == "ok" and r["stdout"].strip() == "T", (r["stdout"], r["stderr"])
        # The kernel still runs code; the daemon is unaffected.
        r = h.exec(sid, "print(9)")
        assert r["status"] == "ok" and r["stdout"] == "9\n", r
        h.assert_daemon_fine()
    finally:
        t0 = time.monotonic()
        h.delete(sid)  # removes the container, stopped supervisor and all
        took = time.monotonic() - t0
    assert took < 15, took  # a hang detector, not a speed claim
    h.assert_daemon_fine()


@pytest.mark.parametrize("how", ["supervisor", "everything"])
def test_user_code_kills_its_runner(hostile, how):
    h = hostile
    s = h.create()
    sid = s["id"]
    # (the sandbox's sleep: what the code would do, were it not killed)
    code = {"supervisor": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
                          "import time; time.sleep(5)",
            "everything": "import os, signal\nos.kill(-1, signal.SIGKILL)\n"
                          "import time; time.sleep(5)"}[how]
    try:
        st, doc = h.api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": code})
        # The container ends with its init's child: the execution is killed
        # (or the session is already gone), and the daemon says so.
        assert (st == 200 and doc["status"] == "killed") or st in (404, 410, 503), (st, doc)
        print("\n[kill %s] exec answered %s %s" % (how, st, doc.get("reason") if st == 200
                                                    else doc["error"]))
        h.assert_daemon_fine()
        # Later calls get an answer, not a hang.
        st, doc = h.api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "1"},
                                timeout=60)
        assert st in (200, 404, 410, 503), (st, doc)
    finally:
        h.delete(sid)
    h.assert_daemon_fine()
