"""Fixtures for the hostile-code suite (issue 4).

The integration conftest (tests/integration/conftest.py) is loaded under
another module name, so its classes and fixtures can be re-exported here
without clashing with this file's own module name `conftest`.

One daemon serves the whole suite. It is started with the egress flags the
network cases need:
  --egress-resolver    hosts-only: no DNS query is ever sent, whatever a case
                       asks for (test_egress_dns.py checks that it is so)
  --egress-hosts-file  names of our own: allowed.test/later.test/rebind.test ->
                       127.0.0.1; private.test -> the gateway (host side) of the
                       suite's own sandbox bridge, added once that network
                       exists (Hostile.map_private_name: the file is rewritten
                       and re-read on SIGHUP), refused as private before any
                       connect
  --egress-trusted     127.0.0.1:<port> of our HTTP server and of our recording
                       TCP server only
Servers of our own run on the host for the whole suite and are stopped at the
end: an HTTP server on 127.0.0.1 (the positive case), a recording TCP server
on 127.0.0.1 (it keeps every byte each connection brought, and when each
closed), a TCP and a UDP listener on 0.0.0.0 and a redis-server on 0.0.0.0
(the firewall cases: they record every peer, so a test can tell that nothing
from a sandbox reached them).
Every network destination of this suite is on this machine: loopback, the
gateway (host side) of the daemon's own sandbox network, or our containers.
No IP literal other than loopback appears here; the gateway is read from
`docker network inspect`.
"""
import contextlib
import http.server
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

_INTEGRATION = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "integration"))
_spec = importlib.util.spec_from_file_location("ci_integration_conftest",
                                               os.path.join(_INTEGRATION, "conftest.py"))
base = importlib.util.module_from_spec(_spec)
sys.modules["ci_integration_conftest"] = base
_spec.loader.exec_module(base)

# Re-exported classes, helpers and fixtures of the integration suite.
ROOT = base.ROOT
DAEMON_BIN = base.DAEMON_BIN
CTL_BIN = base.CTL_BIN
Daemon = base.Daemon
RedisServer = base.RedisServer
Api = base.Api
wait_for = base.wait_for
free_port = base.free_port
tmpdir_session = base.tmpdir_session
redis_server = base.redis_server
daemon = base.daemon
make_daemon = base.make_daemon
api = base.api
session = base.session

# Small limits keep the bombs fast.
SMALL = {"memory_mb": 128, "cpus": 1.0, "pids": 64, "disk_mb": 32, "exec_timeout_s": 5}


# --------------------------------------------------------------- host servers

class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""
    seen = None

    def do_GET(self):
        self.seen.append((self.client_address[0], self.path, self.headers.get("Host")))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


class HttpServer:
    """Our own HTTP server on 127.0.0.1 (the proxy reaches it as allowed.test)."""

    def __init__(self):
        self.body = ("hello from the hostile suite's own server %s\n" % uuid.uuid4().hex).encode()
        self.seen = []
        handler = type("H", (_Handler,), {"body": self.body, "seen": self.seen})
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


class RecordingServer:
    """A TCP server of ours on 127.0.0.1 that keeps, per connection, every
    byte received and whether the peer closed. On the first request head of a
    connection it answers a small keep-alive response (whatever the request
    said about closing; no answer to a path with /hold, nor to tunnel data
    starting with TUNNEL) and then keeps reading: so a second request that
    reaches it is recorded, and a connection stays open until the other side
    closes it."""

    RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: keep-alive\r\n\r\nrecorded\n"

    def __init__(self):
        self.srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(256)
        self.port = self.srv.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []  # dicts: data (bytes), closed (bool), answered (bool)
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            rec = {"data": b"", "closed": False, "answered": False, "sock": c}
            with self.lock:
                self.conns.append(rec)
            threading.Thread(target=self._serve, args=(c, rec), daemon=True).start()

    def _serve(self, c, rec):
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                with self.lock:
                    rec["data"] += chunk
                    answer = not rec["answered"] and b"\r\n\r\n" in rec["data"] \
                        and not rec["data"].startswith(b"TUNNEL") \
                        and b"/hold" not in rec["data"].split(b"\r\n")[0]
                    if answer:
                        rec["answered"] = True
                if answer:
                    c.sendall(self.RESPONSE)
        except OSError:
            pass
        finally:
            with self.lock:
                rec["closed"] = True
            c.close()

    def count(self):
        with self.lock:
            return len(self.conns)

    def since(self, n):
        """Snapshots of the connections accepted after the first n."""
        with self.lock:
            return [dict(data=r["data"], closed=r["closed"]) for r in self.conns[n:]]

    def stop(self):
        self.stopping = True
        try:
            self.srv.close()
        except OSError:
            pass
        with self.lock:
            socks = [r["sock"] for r in self.conns if not r["closed"]]
        for c in socks:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Listeners:
    """A TCP and a UDP listener on 0.0.0.0 that record every peer."""

    def __init__(self):
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("0.0.0.0", 0))
        self.tcp.listen(64)
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.udp.bind(("0.0.0.0", self.port))
        except OSError:
            self.udp.bind(("0.0.0.0", 0))
        self.udp_port = self.udp.getsockname()[1]
        self.tcp_peers = []
        self.udp_peers = []
        self.stopping = False
        self.threads = [threading.Thread(target=self._tcp_loop, daemon=True),
                        threading.Thread(target=self._udp_loop, daemon=True)]
        for t in self.threads:
            t.start()

    def _tcp_loop(self):
        while not self.stopping:
            try:
                c, peer = self.tcp.accept()
            except OSError:
                return
            self.tcp_peers.append(peer[0])
            try:
                c.sendall(b"HOST-LISTENER-REACHED\n")
            except OSError:
                pass
            c.close()

    def _udp_loop(self):
        while not self.stopping:
            try:
                _, peer = self.udp.recvfrom(65536)
            except OSError:
                return
            if peer is None or self.stopping:
                return
            self.udp_peers.append(peer[0])

    def stop(self):
        self.stopping = True
        for s in (self.tcp, self.udp):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class OpenRedis:
    """A redis-server of our own bound to 0.0.0.0 (protected mode on)."""

    def __init__(self, tmp):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "0.0.0.0", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--protected-mode", "yes", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.ping, 10, what="the open redis to answer")

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def clients(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(b"CLIENT LIST\r\n")
            time.sleep(0.1)
            return s.recv(65536).decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ------------------------------------------------------------- the harness

def percentile(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


class Hostile:
    """The shared daemon, its servers, a neighbour session and the checks every
    case ends with."""

    wait_for = staticmethod(wait_for)

    def __init__(self, daemon, http, recorder, listeners, open_redis, hosts_file):
        self.d = daemon
        self.api = daemon.api
        self.http = http
        self.recorder = recorder
        self.listeners = listeners
        self.open_redis = open_redis
        self.hosts_file = hosts_file
        self.created = []
        self.neighbour = self.create()
        self._gateway = None
        self._private_mapped = False

    # sessions
    def create(self, limits=None, **body):
        lim = dict(SMALL)
        lim.update(limits or {})
        s = self.api.create(limits=lim, **body)
        self.created.append(s["id"])
        return s

    @contextlib.contextmanager
    def victim(self, limits=None, **body):
        """A session for one case; deleted, and checked gone, however it ends."""
        s = self.create(limits, **body)
        try:
            yield s
        finally:
            self.delete(s["id"])

    def delete(self, sid):
        status = self.api.delete(sid)
        assert status in (204, 404, 410), status
        self.assert_gone(sid)

    def exec(self, sid, code, **extra):
        return self.api.exec(sid, code, **extra)

    def containers_of(self, sid):
        out = subprocess.run(["docker", "ps", "-a", "-q", "--filter", "label=ci.session=%s" % sid],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.split()

    def assert_gone(self, sid, timeout=15.0):
        """No container of the session remains. A DELETE of a session that
        already ended (410: the sandbox died) may answer while the daemon's own
        teardown is still removing the container, hence the short wait."""
        deadline = time.monotonic() + timeout
        while self.containers_of(sid):
            assert time.monotonic() < deadline, \
                "container of deleted session %s remains after %.0fs" % (sid, timeout)
            time.sleep(0.2)

    def container_id(self, sid):
        ids = self.containers_of(sid)
        assert len(ids) == 1, ids
        return ids[0]

    def inspect(self, sid):
        out = subprocess.run(["docker", "inspect", self.container_id(sid)], capture_output=True,
                             text=True, timeout=30, check=True)
        return json.loads(out.stdout)[0]

    def container_ip(self, sid):
        nets = self.inspect(sid)["NetworkSettings"]["Networks"]
        for name, n in nets.items():
            if name.startswith("ci-egress-") and n.get("IPAddress"):
                return n["IPAddress"]
        raise AssertionError("session %s has no sandbox-network address: %s" % (sid, nets))

    def gateway(self):
        """The host side of the daemon's sandbox network (exists once a session
        with network.allow was created)."""
        if self._gateway is None:
            nets = self.d.networks()
            assert len(nets) == 1, nets
            out = subprocess.run(["docker", "network", "inspect", nets[0]], capture_output=True,
                                 text=True, timeout=30, check=True)
            doc = json.loads(out.stdout)[0]
            assert doc["Internal"] is True, doc
            self._gateway = doc["IPAM"]["Config"][0]["Gateway"]
        return self._gateway

    def reload_hosts(self, text):
        """Rewrite the daemon's hosts file and have it re-read (SIGHUP);
        returns once the daemon logged the reload."""
        before = self.d.read_log().count("egress: hosts file reloaded")
        with open(self.hosts_file, "w") as f:
            f.write(text)
        self.d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: self.d.read_log().count("egress: hosts file reloaded") > before, 10,
                 what="the daemon to re-read its egress hosts file")

    def map_private_name(self):
        """private.test -> the gateway of our own sandbox bridge: a private
        address of this very host, which the proxy must refuse before it
        connects. Needs the sandbox network (a networked session exists)."""
        if not self._private_mapped:
            self.reload_hosts(_HOSTS + "%s private.test\n" % self.gateway())
            self._private_mapped = True

    def run_json(self, s, code):
        """Run code in session s; its last line of stdout is JSON."""
        r = self.exec(s["id"], code)
        assert r["status"] == "ok", r
        return json.loads(r["stdout"].strip().splitlines()[-1])

    def proxy_raw(self, s, raws, timeout=15):
        """From inside session s: send each of raws (bytes) on a connection of
        its own to the proxy (HTTP_PROXY) and read until the proxy closes;
        returns the answers as text."""
        return self.run_json(s, r"""
import json, os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
def ask(raw):
    c = socket.create_connection((p.hostname, p.port), timeout=%d)
    try:
        c.sendall(raw)
        data = b''
        while True:
            try:
                chunk = c.recv(65536)
            except OSError as e:
                data += ('<%%s>' %% type(e).__name__).encode()
                break
            if not chunk:
                break
            data += chunk
            # one whole response (they all carry a Content-Length): done,
            # even when the server would keep the connection open
            if b'\r\n\r\n' in data:
                head, body = data.split(b'\r\n\r\n', 1)
                for line in head.split(b'\r\n')[1:]:
                    k, _, v = line.partition(b':')
                    if k.strip().lower() == b'content-length' and len(body) >= int(v):
                        return data.decode(errors='replace')
        return data.decode(errors='replace')
    finally:
        c.close()
print(json.dumps([ask(r) for r in %r]))
""" % (timeout, list(raws)))

    _NO_DEFAULT = object()

    def metric(self, name, default=_NO_DEFAULT):
        status, text = self.api.request("GET", "/metrics", timeout=10)
        assert status == 200, status
        text = text.decode() if isinstance(text, bytes) else str(text)
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        if default is not self._NO_DEFAULT:
            return default
        raise AssertionError("no metric %s" % name)

    def daemon_rss_kb(self):
        with open("/proc/%d/status" % self.d.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    # the checks every case ends with
    def neighbour_exec(self):
        t0 = time.monotonic()
        r = self.api.exec(self.neighbour["id"], "print(1)")
        ms = (time.monotonic() - t0) * 1000.0
        assert r["status"] == "ok" and r["stdout"] == "1\n", r
        return ms

    def assert_daemon_fine(self, samples=5, bound_ms=500.0):
        """(2) the daemon answers /healthz and a trivial exec in the neighbour
        session works; (3) the neighbour's exec latency is sane."""
        assert self.d.proc.poll() is None, "daemon died:\n" + self.d.read_log()[-4000:]
        status, doc = self.api.request("GET", "/healthz", timeout=10)
        assert status == 200 and doc == {"status": "ok"}, (status, doc)
        lat = [self.neighbour_exec() for _ in range(samples)]
        assert max(lat) < bound_ms, "neighbour exec latencies %s ms" % lat
        return lat

    def measure_neighbour_during(self, attack):
        """Run attack() in a thread; meanwhile time the neighbour's print(1)
        over HTTP. Returns (attack's return value, latencies in ms)."""
        out = {}

        def run():
            try:
                out["value"] = attack()
            except BaseException as e:  # re-raised below
                out["error"] = e

        t = threading.Thread(target=run)
        lat = []
        t.start()
        time.sleep(0.3)  # let the attack get going
        while t.is_alive():
            lat.append(self.neighbour_exec())
            time.sleep(0.01)
        t.join()
        if "error" in out:
            raise out["error"]
        return out["value"], lat

    def close(self):
        """Delete the neighbour; then no container of any session this suite
        made may remain (every case deleted its own)."""
        self.delete(self.neighbour["id"])
        left = [sid for sid in self.created if self.containers_of(sid)]
        for sid in left:
            self.api.delete(sid)
        assert left == [], "sessions whose containers were left behind: %s" % left


_HOSTS = ("# test names of the hostile suite\n"
          "127.0.0.1 allowed.test later.test rebind.test\n")


def _hosts_file(tmp):
    path = os.path.join(tmp, "hostile-hosts")
    with open(path, "w") as f:
        f.write(_HOSTS)
    return path


@pytest.fixture(scope="session")
def hostile(redis_server, tmpdir_session):
    http = HttpServer()
    recorder = RecordingServer()
    listeners = Listeners()
    open_redis = OpenRedis(tmpdir_session)
    hosts = _hosts_file(tmpdir_session)
    d = None
    h = None
    try:
        # A small ASan quarantine, so the daemon's RSS (checked by the output
        # flood case) reflects what it holds rather than freed memory parked
        # by the sanitizer. Harmless for a build without ASan.
        saved = os.environ.get("ASAN_OPTIONS")
        os.environ["ASAN_OPTIONS"] = (saved or "detect_leaks=1:abort_on_error=0") + \
            ":quarantine_size_mb=16"
        try:
            d = base.Daemon(redis_server, tmpdir_session,
                            ("--egress-resolver", "hosts-only",
                             "--egress-hosts-file", hosts,
                             "--egress-trusted", "127.0.0.1:%d,127.0.0.1:%d"
                             % (http.port, recorder.port),
                             "--kill-grace-ms", "1000",
                             # Cases count containers; a refilling pool would blur that.
                             "--pool-size", "0"))
        finally:
            if saved is None:
                del os.environ["ASAN_OPTIONS"]
            else:
                os.environ["ASAN_OPTIONS"] = saved
        h = Hostile(d, http, recorder, listeners, open_redis, hosts)
        yield h
        h.close()
    finally:
        try:
            if d is not None:
                # stop, sanitizer check, then remove what carries this run's
                # label (containers, the sandbox network and its firewall
                # chain), even when a case failed
                base._finish_daemon(d)
        finally:
            open_redis.stop()
            listeners.stop()
            recorder.stop()
            http.stop()
