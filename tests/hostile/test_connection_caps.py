"""One tenant must not lock every client out with connections it holds
after their heads are in (issue 28, finding 1), and a repeated identity
header is refused (finding 9).

Everything runs on loopback. The attacking tenant ("mallory") connects
from 127.0.0.3-127.0.0.11 (the whole of 127.0.0.0/8 is this machine's
loopback), each address under the per-peer cap, together over the global
one; the other tenant ("alice") and the probes connect from 127.0.0.2.
Held connections are plain non-blocking sockets on one epoll, driven by
pump() with bounded waits on what the daemon answers; no fixed sleeps.

Before the fix, 4,500 GET /v1/events streams (a stream may stay silent
for ever) or 4,500 request bodies trickled a byte a second filled the
4,096 connections for as long as they were held, and /healthz, /readyz
and every other tenant's calls got 503. After it: a tenant has at most
max-event-streams-per-tenant streams and max-conns-per-tenant busy
connections (the rest are answered 429 and closed), a body must keep
http-body-min-rate, at the cap an idle stream is closed for a newcomer,
and past the cap a reserve of connections still answers the probes.
"""
import errno
import json
import resource
import select
import socket
import struct
import threading
import time

import pytest

from harness import Client, Daemon, wait_for

VICTIM_SRC = "127.0.0.2"
ATTACKERS = ["127.0.0.%d" % i for i in range(3, 12)]  # nine addresses
ADMIN_KEY = "connection-caps-admin-key-0123456789abcdef"


@pytest.fixture(autouse=True, scope="module")
def _many_descriptors():
    """Room for thousands of sockets in this process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 32768)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _daemon(redis_server, tmpdir_session, *args):
    return Daemon(redis_server, tmpdir_session, ("--pool-size", "0") + tuple(args),
                  admin_key=ADMIN_KEY)


class _Conn:
    __slots__ = ("sock", "src", "state", "t_open", "reply", "status", "sent")

    def __init__(self, sock, src):
        self.sock = sock
        self.src = src
        self.state = "connecting"
        self.t_open = time.monotonic()
        self.reply = b""
        self.status = None
        self.sent = 0


class Crowd:
    """Connections on one epoll that each send `head` as soon as they are
    connected, then `trickle` bytes of body one a tick (a second). A
    connection is "held" once the daemon took its request (a 200 status
    line for a stream; no answer yet for a body); one the daemon answered
    otherwise, or closed, is done and, with reopen, opened again on a later
    tick (at most reopen_per_tick a tick), as an attacker would."""

    def __init__(self, port, head, trickle=0, reopen=False, reopen_per_tick=400, tick=1.0):
        self.port = port
        self.head = head
        self.trickle = trickle
        self.reopen = reopen
        self.reopen_per_tick = reopen_per_tick
        self.tick = tick
        self.ep = select.epoll()
        self.live = {}
        self.done = []
        self.to_reopen = []
        self.opened = 0
        self.next_tick = time.monotonic() + tick

    def open(self, src, n):
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.bind((src, 0))
            rc = s.connect_ex(("127.0.0.1", self.port))
            c = _Conn(s, src)
            self.opened += 1
            if rc not in (0, errno.EINPROGRESS):
                c.state = "failed"
                s.close()
                self.done.append(c)
                continue
            self.live[s.fileno()] = c
            self.ep.register(s.fileno(), select.EPOLLOUT)

    def _close(self, c):
        c.state = "closed"
        fd = c.sock.fileno()
        self.ep.unregister(fd)
        del self.live[fd]
        # A reset, not a FIN: thousands of sockets in TIME_WAIT on ports of
        # the ephemeral range would stand in the way of later tests' servers.
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.sock.close()
        self.done.append(c)
        if self.reopen:
            self.to_reopen.append(c.src)

    def _send(self, c, data):
        try:
            n = c.sock.send(data)
            return n
        except BlockingIOError:
            return 0
        except OSError:
            self._close(c)
            return -1

    def pump(self, seconds, until=None):
        """Drive the connections for up to `seconds`, or until until()."""
        end = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if now >= end or (until is not None and until()):
                return
            for fd, ev in self.ep.poll(min(0.05, end - now)):
                c = self.live.get(fd)
                if c is None:
                    continue
                if c.state == "connecting":
                    if c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        self._close(c)
                        continue
                    c.state = "sent"
                    self.ep.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                    if self._send(c, self.head) != len(self.head):
                        if c.state != "closed":
                            self._close(c)  # a short head: not this test's attack
                        continue
                    if self.trickle:
                        c.state = "held"  # the head is in; the body trickles
                    continue
                try:
                    data = c.sock.recv(65536)
                except (ConnectionResetError, BrokenPipeError):
                    data = b""
                except BlockingIOError:
                    continue
                if not data:
                    self._close(c)  # the daemon closed it (after an answer, or not)
                    continue
                if c.state == "held" and c.status == 200:
                    continue  # a stream's lines: read and dropped
                c.reply += data
                if c.status is None and b"\r\n" in c.reply:
                    line = c.reply.split(b"\r\n", 1)[0].split()
                    c.status = int(line[1]) if len(line) > 1 and line[1].isdigit() else -1
                    if c.status == 200 and not self.trickle:
                        c.state = "held"
                # Any other answer: read on until the daemon closes.
            now = time.monotonic()
            if now >= self.next_tick:
                self.next_tick = now + self.tick
                if self.trickle:
                    for c in list(self.live.values()):
                        if c.state == "held" and c.sent < self.trickle - 1:
                            if self._send(c, b"{"[:1] if c.sent == 0 else b" ") == 1:
                                c.sent += 1
                batch, self.to_reopen = (self.to_reopen[:self.reopen_per_tick],
                                         self.to_reopen[self.reopen_per_tick:])
                for src in batch:
                    self.open(src, 1)

    def held(self):
        """Streams the daemon answered 200; bodies it has not answered."""
        want = None if self.trickle else 200
        return [c for c in self.live.values() if c.state == "held" and c.status == want]

    def answered(self, status):
        return [c for c in self.done if c.status == status]

    def close_all(self):
        self.reopen = False
        for c in list(self.live.values()):
            self._close(c)
        self.ep.close()


def _body_of(reply):
    return json.loads(reply.split(b"\r\n\r\n", 1)[1].decode(errors="replace"))


class Victim:
    """Another tenant's calls and the probes, from 127.0.0.2, in a thread,
    one after the other while the attack runs: each must answer 200."""

    def __init__(self, port, key):
        self.calls = [
            ("/healthz", Client(port, source=VICTIM_SRC)),
            ("/readyz", Client(port, source=VICTIM_SRC)),
            ("/v1/sessions", Client(port, source=VICTIM_SRC, api_key=key)),
            ("/v1/usage", Client(port, source=VICTIM_SRC, api_key=key)),
        ]
        self.results = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for path, client in self.calls:
                t0 = time.monotonic()
                try:
                    st, doc = client.request("GET", path, timeout=30)
                except OSError as e:
                    st, doc = None, repr(e)
                self.results.append((path, st, doc, time.monotonic() - t0))
            self.stop.wait(0.1)  # pacing of the probe, not a wait for the daemon

    def count(self):
        return len(self.results)

    def finish(self):
        self.stop.set()
        self.thread.join(60)
        return self.results


def _assert_victim_fine(results, what):
    bad = [r[:3] for r in results if r[1] != 200]
    by = {}
    for r in results:
        by.setdefault(r[0], 0)
        by[r[0]] += 1
    print("[caps/%s] the other tenant and the probes: %d calls %s, %d not 200" % (
        what, len(results), by, len(bad)))
    assert len(by) == 4 and min(by.values()) >= 2, by
    assert not bad, bad[:5]


def _events_head(key):
    return ("GET /v1/events HTTP/1.1\r\nHost: caps.test\r\nAuthorization: Bearer %s\r\n\r\n"
            % key).encode()


def _body_head(key, length):
    return ("POST /v1/sessions HTTP/1.1\r\nHost: caps.test\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (key, length)).encode()


def _wait_victim_calls(victim, crowd, n, seconds):
    """Pump the attack until the victim has made n more calls (bounded)."""
    goal = victim.count() + n
    crowd.pump(seconds, until=lambda: victim.count() >= goal)
    assert victim.count() >= goal, "the victim made %d calls of %d in %d s" % (
        victim.count(), goal, seconds)


def test_held_streams_and_trickled_bodies_leave_room_for_others(redis_server, tmpdir_session):
    """The defaults: 4,096 connections, 512 a peer. Nine addresses open 500
    event streams each, then 500 trickled bodies each, re-opening what the
    daemon closes; alice's calls and the probes answer 200 throughout."""
    d = _daemon(redis_server, tmpdir_session)
    mallory = d.key("mallory")["key"]
    alice = d.key("alice")["key"]
    streams = Crowd(d.port, _events_head(mallory), reopen=True)
    bodies = Crowd(d.port, _body_head(mallory, 4096), trickle=4096, reopen=True)
    victim = None
    try:
        for a in ATTACKERS:
            streams.open(a, 500)
        # Every stream has been answered (held, or refused and closed).
        streams.pump(60, until=lambda: not any(c.state in ("connecting", "sent")
                                               for c in streams.live.values()))
        victim = Victim(d.port, alice)
        streams.pump(5)  # the hold: the attack goes on, the victim calls
        _wait_victim_calls(victim, streams, 8, 120)
        held_streams = len(streams.held())
        print("\n[caps/streams] %d event streams opened from %d addresses: %d held, %d "
              "answered 429, %d 503" % (streams.opened, len(ATTACKERS), held_streams,
                                        len(streams.answered(429)),
                                        len(streams.answered(503))))
        for a in ATTACKERS:
            bodies.open(a, 500)

        def both(seconds, until=None):
            end = time.monotonic() + seconds
            while time.monotonic() < end and not (until and until()):
                streams.pump(0.1)
                bodies.pump(0.1)

        both(60, until=lambda: not any(c.state in ("connecting", "sent")
                                       for c in bodies.live.values()))
        both(10)  # the hold, with both kinds
        goal = victim.count() + 8
        both(120, until=lambda: victim.count() >= goal)
        # Held by the daemon: not answered after three ticks (a re-opened
        # one may not have had its 429 yet).
        held_bodies = len([c for c in bodies.held() if c.sent >= 3])
        print("[caps/bodies] %d trickled bodies opened: %d held, %d answered 429" % (
            bodies.opened, held_bodies, len(bodies.answered(429))))
        results = victim.finish()
        victim = None
        _assert_victim_fine(results, "streams+bodies")
        assert held_streams <= 32, held_streams  # max-event-streams-per-tenant
        assert held_streams + held_bodies <= 1024 + 16, (held_streams, held_bodies)
        refused = streams.answered(429) + bodies.answered(429)
        assert refused, "the daemon refused none of mallory's requests"
        doc = _body_of(refused[0].reply)
        assert doc["error"]["code"] == "quota_exceeded", doc
        assert b"Connection: close" in refused[0].reply, refused[0].reply[:300]
    finally:
        if victim is not None:
            victim.finish()
        streams.close_all()
        bodies.close_all()
        try:
            wait_for(lambda: d.api.request("GET", "/healthz")[0] == 200, 30,
                     what="/healthz after the attack")
        finally:
            d.finish()


def test_probes_answer_when_every_connection_is_busy(redis_server, tmpdir_session):
    """64 connections in all, every one busy with a trickled body of two
    tenants: /healthz and /readyz still answer 200 (the reserve), another
    call on the reserve gets a clear 503, not a hang."""
    d = _daemon(redis_server, tmpdir_session, "--max-connections", "64")
    keys = [d.key("mallory")["key"], d.key("trudy")["key"]]
    crowds = [Crowd(d.port, _body_head(k, 4096), trickle=4096) for k in keys]
    try:
        for i, cr in enumerate(crowds):
            cr.open(ATTACKERS[i], 40)

        def pump_all(seconds, until=None):
            end = time.monotonic() + seconds
            while time.monotonic() < end and not (until and until()):
                for cr in crowds:
                    cr.pump(0.05)

        # 80 bodies for 64 connections: the daemon has refused the 16 extra.
        pump_all(60, until=lambda: sum(len(cr.done) for cr in crowds) >= 16)
        held = sum(len(cr.held()) for cr in crowds)
        print("\n[caps/reserve] %d trickled bodies held of 64 connections" % held)
        assert held >= 60, held
        for path in ("/healthz", "/readyz", "/healthz"):
            st, doc = Client(d.port, source=VICTIM_SRC).request("GET", path, timeout=30)
            print("[caps/reserve] %s -> %s" % (path, st))
            assert st == 200, (path, st, doc)
            pump_all(0.2)
        st, doc = Client(d.port, source=VICTIM_SRC).request("GET", "/version", timeout=30)
        assert st == 503 and doc["error"]["code"] == "unavailable", (st, doc)
        assert "connections" in doc["error"]["message"], doc
    finally:
        for cr in crowds:
            cr.close_all()
        d.finish()


def test_an_idle_stream_makes_room_at_the_cap(redis_server, tmpdir_session):
    """64 connections in all, filled with event streams of three tenants that
    stay silent: once they have been idle for http-idle-timeout-s, a new
    client's call is served (the idlest stream is closed for it)."""
    d = _daemon(redis_server, tmpdir_session, "--max-connections", "64",
                "--http-idle-timeout-s", "2")
    keys = [d.key(t)["key"] for t in ("mallory", "trudy", "eve")]
    alice = d.key("alice")["key"]
    crowds = [Crowd(d.port, _events_head(k)) for k in keys]
    try:
        for i, cr in enumerate(crowds):
            cr.open(ATTACKERS[i], 22)

        def pump_all(seconds, until=None):
            end = time.monotonic() + seconds
            while time.monotonic() < end and not (until and until()):
                for cr in crowds:
                    cr.pump(0.05)

        pump_all(60, until=lambda: not any(c.state in ("connecting", "sent")
                                           for cr in crowds for c in cr.live.values()))
        held = sum(len(cr.held()) for cr in crowds)
        print("\n[caps/evict] %d event streams held of 64 connections" % held)
        assert held >= 60, held
        t_full = time.monotonic()
        result = {}

        def call():
            result["r"] = Client(d.port, source=VICTIM_SRC, api_key=alice).request(
                "GET", "/v1/sessions", timeout=30)

        # Idle long enough (bounded): the daemon's log says when it evicts.
        pump_all(2.5)
        th = threading.Thread(target=call, daemon=True)
        th.start()
        pump_all(40, until=lambda: not th.is_alive())
        th.join(5)
        st, doc = result.get("r", (None, None))
        print("[caps/evict] alice's call %.1f s after the cap was full: %s" % (
            time.monotonic() - t_full, st))
        assert st == 200, (st, doc)
        assert "closed an idle stream" in d.read_log()
        pump_all(30, until=lambda: sum(len(cr.held()) for cr in crowds) < held)
        assert sum(len(cr.held()) for cr in crowds) < held
    finally:
        for cr in crowds:
            cr.close_all()
        d.finish()


def test_a_trickled_body_is_cut_off(redis_server, tmpdir_session):
    """A body trickled a byte a second misses http-body-min-rate (1024 bytes
    a second past http-body-timeout-s, 30 s by default): the daemon answers
    408 and closes, rather than wait for it as long as bytes keep coming."""
    d = _daemon(redis_server, tmpdir_session)
    mallory = d.key("mallory")["key"]
    cr = Crowd(d.port, _body_head(mallory, 4096), trickle=4096)
    try:
        cr.open(ATTACKERS[0], 20)
        t0 = time.monotonic()
        cr.pump(30, until=lambda: len(cr.held()) == 20)
        assert len(cr.held()) == 20, len(cr.held())
        cr.pump(90, until=lambda: not cr.live)
        cut = cr.answered(408)
        sent = [c.sent for c in cr.done] or [0]
        print("\n[caps/body] 20 trickled bodies: %d answered 408 after %.1f s, after %d..%d "
              "bytes; %d still open" % (len(cut), time.monotonic() - t0, min(sent), max(sent),
                                        len(cr.live)))
        assert len(cut) == 20, [(c.status, c.reply[:60]) for c in cr.done]
        doc = _body_of(cut[0].reply)
        assert "too slow" in doc["error"]["message"], doc
        assert d.metric('ci_http_refused_total{reason="body_timeout"}') >= 20
    finally:
        cr.close_all()
        d.finish()


@pytest.mark.parametrize("name", ["Authorization", "Origin", "Cookie", "X-CI-Tenant",
                                  "x-ci-cluster-token"])
def test_a_repeated_identity_header_is_refused(redis_server, tmpdir_session, name, request):
    d = request.getfixturevalue("_keyed_daemon")
    alice = d.key("alice-%s" % name.lower())["key"]
    values = {"Authorization": ("Bearer " + alice, "Bearer " + ADMIN_KEY),
              "Origin": ("http://a.test", "http://b.test"),
              "Cookie": ("a=1", "b=2"),
              "X-CI-Tenant": ("a", "b"),
              "x-ci-cluster-token": ("a", "a")}[name]
    head = ("GET /v1/sessions HTTP/1.1\r\nHost: caps.test\r\nConnection: close\r\n"
            + ("" if name == "Authorization" else "Authorization: Bearer %s\r\n" % alice)
            + "%s: %s\r\n%s: %s\r\n\r\n" % (name, values[0], name.upper(), values[1]))
    with socket.create_connection(("127.0.0.1", d.port), timeout=30) as s:
        s.sendall(head.encode())
        reply = b""
        while True:  # the daemon closes after a refused head
            more = s.recv(65536)
            if not more:
                break
            reply += more
    print("\n[caps/headers] %s twice -> %s" % (name, reply.split(b"\r\n", 1)[0]))
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    doc = _body_of(reply)
    assert doc["error"]["code"] == "bad_request", doc
    assert "more than once" in doc["error"]["message"], doc
    # Once is fine.
    st, _ = Client(d.port, api_key=alice).request("GET", "/v1/sessions")
    assert st == 200


@pytest.fixture(scope="module")
def _keyed_daemon(redis_server, tmpdir_session):
    d = _daemon(redis_server, tmpdir_session)
    try:
        yield d
    finally:
        d.finish()
