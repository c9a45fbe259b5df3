"""Issue 15: a peer node that answers badly (daemon/forward.c). Node B
advertises the URL of a small fake peer this test runs on loopback, so A
forwards B's session calls to it: garbage, an endless head, a head of too
many lines, a huge body to a caller that does not read, an owner that says
nothing. Each ends with a clear error (or a cut stream), no crash, and A
serving on; a caller that leaves ends the transfer to the peer at once."""
import os
import socket
import threading

import pytest

from harness import procfs, wait_for


class FakePeer:
    """A TCP server on 127.0.0.1 that reads a request head and then does
    what `mode` says. Records per connection: bytes sent, whether a send
    blocked (the reader stopped reading), whether the other side closed."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.mode = "garbage"
        self.conns = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _accept(self):
        while not self.stopping.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            rec = {"sent": 0, "blocked": False, "closed": False, "head": b""}
            with self.lock:
                self.conns.append(rec)
            threading.Thread(target=self._serve, args=(c, rec, self.mode), daemon=True).start()

    def _read_head(self, c, rec):
        while b"\r\n\r\n" not in rec["head"] and len(rec["head"]) < 65536:
            b = c.recv(4096)
            if not b:
                return False
            rec["head"] += b
        return True

    def _send(self, c, rec, data):
        try:
            c.sendall(data)
            rec["sent"] += len(data)
            return True
        except socket.timeout:
            rec["blocked"] = True
            return False
        except OSError:
            rec["closed"] = True
            return False

    def _serve(self, c, rec, mode):
        c.settimeout(10)
        try:
            if not self._read_head(c, rec):
                return
            if mode == "garbage":
                self._send(c, rec, b"\x00\x01 this is not HTTP at all\r\n\r\n")
            elif mode == "endless_header":
                self._send(c, rec, b"HTTP/1.1 200 OK\r\nX-Endless: ")
                while not self.stopping.is_set() and self._send(c, rec, b"a" * 4096):
                    pass
            elif mode == "many_headers":
                self._send(c, rec, b"HTTP/1.1 200 OK\r\n")
                i = 0
                while not self.stopping.is_set() and self._send(c, rec, b"X-H%d: v\r\n" % i):
                    i += 1
            elif mode == "huge_body":
                self._send(c, rec, b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                                   b"Content-Length: 107374182400\r\n\r\n")
                block = os.urandom(1 << 16)
                c.settimeout(2)  # a send that waits this long: the reader stopped
                while not self.stopping.is_set():
                    if not self._send(c, rec, block):
                        if rec["blocked"]:
                            rec["blocked_at"] = rec["sent"]
                            rec["blocked"] = True
                            # Wait for the other side to close (the caller left).
                            c.settimeout(30)
                            try:
                                while c.recv(4096):
                                    pass
                            except OSError:
                                pass
                            rec["closed"] = True
                        break
            elif mode == "silent":
                c.settimeout(60)
                try:
                    while c.recv(4096):
                        pass
                except OSError:
                    pass
                rec["closed"] = True
        finally:
            c.close()

    def stop(self):
        self.stopping.set()
        self.sock.close()


@pytest.fixture
def fake_pair(make_daemon, tmp_path):
    peer = FakePeer()
    sec = os.path.join(str(tmp_path), "cluster.secret")
    fd = os.open(sec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    common = ("--pool-size", "0", "--heartbeat-ms", "200", "--node-lost-ms", "10000",
              "--cluster-secret-file", sec)
    a = make_daemon(*common, "--forward-stall-timeout-s", "2")
    b = make_daemon(*common, "--advertise-url", peer.url, prefix=a.prefix)
    sid = b.api.create()["id"]
    # Until A routes B's session to the fake peer: the peer got a connection
    # from A. (Any answer but 404 was not enough: A may know the session's
    # node before that node's address, and answers 503 "retry shortly".)
    def routed():
        a.api.request("GET", "/v1/sessions/%s/files" % sid, timeout=10)
        return len(peer.conns) > 0
    wait_for(routed, 30, interval=0.1, what="A routing to B's advertised URL")
    try:
        yield a, b, peer, sid
    finally:
        peer.stop()
        b.api.delete(sid)


def still_serving(a):
    assert a.api.request("GET", "/healthz")[0] == 200
    assert not a.sanitizer_errors()


@pytest.mark.parametrize("mode,words", [
    ("garbage", ("not HTTP", "HTTP/0.9", "Weird", "weird", "nsupported")),
    ("endless_header", ("head is larger",)),
    ("many_headers", ("head is larger", "lines")),
])
def test_forward_bad_peer_answers_are_503(fake_pair, mode, words):
    a, b, peer, sid = fake_pair
    peer.mode = mode
    r = a.api.send("GET", "/v1/sessions/%s/files" % sid, timeout=30)
    assert r.status == 503, (r.status, r.body[:300])
    msg = r.doc["error"]["message"]
    assert b.node in msg and any(w in msg for w in words), msg
    print("%s: %s" % (mode, msg))
    still_serving(a)


def test_forward_huge_body_is_paced_by_the_caller_and_ends_with_it(fake_pair):
    """A caller that reads nothing holds the peer back (A queues a bounded
    amount, then stops reading the peer), and when it leaves, the transfer to
    the peer ends at once."""
    a, b, peer, sid = fake_pair
    peer.mode = "huge_body"
    n0 = len(peer.conns)
    base = procfs.rss_kb(a.proc.pid)
    with a.api.stream("GET", "/v1/sessions/%s/files/x" % sid, timeout=30) as st:
        assert st.status == 200
        st.read(1 << 16)  # one piece, then nothing
        rec = wait_for(lambda: len(peer.conns) > n0 and peer.conns[-1].get("blocked_at")
                       and peer.conns[-1], 30, interval=0.05, what="the peer's send to block")
        held_mb = rec["blocked_at"] / (1 << 20)
        grew_mb = (procfs.rss_kb(a.proc.pid) - base) / 1024
        print("the peer got %.1f MiB out before A stopped reading it; A's RSS +%.1f MiB"
              % (held_mb, grew_mb))
        assert held_mb < 64, held_mb
    # The caller has gone: the peer sees its connection closed.
    wait_for(lambda: rec["closed"], 15, interval=0.05, what="A to close the peer's connection")
    still_serving(a)


def test_forward_silent_peer_ends_with_the_stall_limit(fake_pair):
    a, b, peer, sid = fake_pair
    peer.mode = "silent"
    r = a.api.send("GET", "/v1/sessions/%s/files" % sid, timeout=30)
    assert r.status == 503, (r.status, r.body[:300])
    msg = r.doc["error"]["message"]
    assert b.node in msg and "sent nothing for 2 s" in msg, msg
    still_serving(a)
