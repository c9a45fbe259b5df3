"""The hostile suite's harness (its fixture is in conftest.py): the shared
daemon, our own servers, a neighbour session, and the checks every case ends
with: (1) the attack fails or is contained, (2) the daemon still answers
(/healthz and a trivial exec in the neighbour session), (3) the neighbour's
exec latency stays sane.

Every network destination of this suite is on this machine: loopback, the
gateway (host side) of the daemon's own sandbox network, or our containers.
No IP literal other than loopback appears here; the gateway is read from
`docker network inspect`.
"""
import contextlib
import json
import signal
import subprocess
import threading
import time

from harness import wait_for

# Small limits keep the bombs fast.
SMALL = {"memory_mb": 128, "cpus": 1.0, "pids": 64, "disk_mb": 32, "exec_timeout_s": 5}

# A starvation detector, not a speed claim: the neighbour's print(1) takes
# about 10 ms here; half a second means the daemon's loop was blocked or the
# attack took the machine.
STARVED_MS = 500.0

# The names the shared daemon's --egress-hosts-file maps (private.test is
# added once the sandbox network exists: Hostile.map_private_name).
HOSTS = ("# test names of the hostile suite\n"
         "127.0.0.1 allowed.test later.test rebind.test\n")


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
        teardown is still removing the container, hence the wait."""
        wait_for(lambda: not self.containers_of(sid), timeout, interval=0.1,
                 what="the container of deleted session %s to go" % sid)

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
        mark = self.d.log_mark()
        with open(self.hosts_file, "w") as f:
            f.write(text)
        self.d.proc.send_signal(signal.SIGHUP)
        self.d.wait_log("egress: hosts file reloaded", since=mark)

    def map_private_name(self):
        """private.test -> the gateway of our own sandbox bridge: a private
        address of this very host, which the proxy must refuse before it
        connects. Needs the sandbox network (a networked session exists)."""
        if not self._private_mapped:
            self.reload_hosts(HOSTS + "%s private.test\n" % self.gateway())
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

    def metric(self, name, *default):
        return self.d.metric(name, *default)

    def daemon_rss_kb(self):
        return self.d.rss_kb()

    # the checks every case ends with
    def neighbour_exec(self):
        t0 = time.monotonic()
        r = self.api.exec(self.neighbour["id"], "print(1)")
        ms = (time.monotonic() - t0) * 1000.0
        assert r["status"] == "ok" and r["stdout"] == "1\n", r
        return ms

    def assert_daemon_fine(self, samples=5, bound_ms=STARVED_MS):
        """(2) the daemon answers /healthz and a trivial exec in the neighbour
        session works; (3) the neighbour's exec latency is sane (a starvation
        detector, see STARVED_MS: not a speed claim)."""
        assert self.d.proc.poll() is None, "daemon died:\n" + self.d.read_log()[-4000:]
        status, doc = self.api.request("GET", "/healthz", timeout=10)
        assert status == 200 and doc == {"status": "ok"}, (status, doc)
        lat = [self.neighbour_exec() for _ in range(samples)]
        assert max(lat) < bound_ms, "neighbour exec latencies %s ms" % lat
        return lat

    def measure_neighbour_during(self, attack, busy=None):
        """Run attack() in a thread; meanwhile time the neighbour's print(1)
        over HTTP. busy: the attacking session, whose exec must be running
        before the timing starts. Returns (attack's return value, latencies
        in ms)."""
        out = {}

        def run():
            try:
                out["value"] = attack()
            except BaseException as e:  # re-raised below
                out["error"] = e

        t = threading.Thread(target=run)
        lat = []
        t.start()
        if busy is not None:  # the attack is under way: its exec runs
            wait_for(lambda: not t.is_alive() or self.api.state(busy) == "busy", 10,
                     what="the attack's exec to run")
        while t.is_alive():
            lat.append(self.neighbour_exec())
            # Deliberate pacing of the probe: a sample every 10 ms, so the
            # neighbour measures the attack rather than adding load of its own.
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
