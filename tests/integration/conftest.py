"""Fixtures for integration tests against a real dockerd, a real Redis and the
real ci-daemon binary.

Every run gets its own Redis server (on a free loopback port), its own key
prefix, node name and state directory, so runs never touch each other. What a
run creates is found again by its label (ci.prefix=<prefix>) and removed at the
end, even when tests fail. Processes are stopped by their pid.
"""
import json
import os
import resource
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import http.client

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DAEMON_BIN = os.environ.get("CITEST_DAEMON", os.path.join(ROOT, "build", "ci-daemon"))
CTL_BIN = os.environ.get("CITEST_CTL", os.path.join(ROOT, "build", "ci-ctl"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout, interval=0.02, what="condition"):
    """Poll cond() until it returns a truthy value or timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def remove_state_dir(path):
    """rm -rf a daemon's state directory, after unmounting the tmpfs the
    daemon mounts for its sessions' IPC directories (--ipc-tmpfs)."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for p in sorted((p for p in points if p == path or p.startswith(path + "/")), reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)
    subprocess.run(["rm", "-rf", path])


class RedisServer:
    def __init__(self, tmp):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.ping, 10, what="redis to answer")

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def cli(self, *args):
        out = subprocess.run(["redis-cli", "-p", str(self.port), "--raw", *args],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip()

    def ping(self):
        try:
            return self.cli("PING") == "PONG"
        except Exception:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Api:
    """A tiny HTTP client (stdlib only) for the daemon's JSON API."""

    def __init__(self, port):
        self.port = port

    def request(self, method, path, body=None, raw=None, headers=None, timeout=120):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        hdrs = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        try:
            doc = json.loads(payload) if payload else None
        except ValueError:
            doc = payload
        return resp.status, doc

    def create(self, **body):
        status, doc = self.request("POST", "/v1/sessions", body=body)
        assert status == 201, (status, doc)
        return doc

    def exec(self, sid, code, **extra):
        status, doc = self.request("POST", "/v1/sessions/%s/exec" % sid, body=dict(code=code, **extra))
        assert status == 200, (status, doc)
        return doc

    def delete(self, sid):
        return self.request("DELETE", "/v1/sessions/%s" % sid)[0]


class Daemon:
    """The daemon under test. nofile=(soft, hard) starts it with that
    RLIMIT_NOFILE (as `ulimit -n` would), instead of the test's own."""

    def __init__(self, redis, tmp, extra_args=(), nofile=None):
        self.run_id = uuid.uuid4().hex[:10]
        self.prefix = "citest-%s:" % self.run_id
        self.node = "citest-%s" % self.run_id
        self.port = free_port()
        self.state_dir = tempfile.mkdtemp(prefix="cit-", dir="/tmp")
        self.log_path = os.path.join(tmp, "daemon-%s.log" % self.run_id)
        self.redis = redis
        self.args = [DAEMON_BIN, "--listen", "127.0.0.1:%d" % self.port, "--redis", redis.url,
                     "--state-dir", self.state_dir, "--key-prefix", self.prefix,
                     "--node", self.node, "--log-level", "debug", *extra_args]
        self.api = Api(self.port)
        self.proc = None
        self.nofile = nofile
        self.start()

    def start(self):
        self.log = open(self.log_path, "ab")
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        preexec = None
        if self.nofile is not None:
            limits = tuple(self.nofile)

            def preexec():
                resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=preexec)
        wait_for(self.ready, 30, interval=0.05, what="the daemon's /readyz")

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("daemon exited with %s:\n%s" % (self.proc.returncode, self.read_log()))
        try:
            return self.api.request("GET", "/readyz", timeout=2)[0] == 200
        except OSError:
            return False

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def containers(self, *filters, all_states=True):
        args = ["docker", "ps", "-q", "--no-trunc", "--filter", "label=ci.prefix=%s" % self.prefix]
        if all_states:
            args.insert(2, "-a")
        for f in filters:
            args += ["--filter", f]
        out = subprocess.run(args, capture_output=True, text=True, timeout=30)
        return [line for line in out.stdout.split() if line]

    def networks(self):
        out = subprocess.run(["docker", "network", "ls", "-q", "--filter",
                              "label=ci.prefix=%s" % self.prefix], capture_output=True, text=True,
                             timeout=30)
        return out.stdout.split()

    def cleanup(self):
        ids = self.containers()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=120)
        # The sandbox network and its host firewall chain (CI-IN-<hash> for
        # bridge ci<hash>), found by this run's label.
        for net in self.networks():
            out = subprocess.run(["docker", "network", "inspect", net, "--format",
                                  '{{index .Options "com.docker.network.bridge.name"}}'],
                                 capture_output=True, text=True, timeout=30)
            bridge = out.stdout.strip()
            if bridge.startswith("ci"):
                chain = "CI-IN-" + bridge[2:]
                subprocess.run(["iptables", "-w", "-D", "INPUT", "-i", bridge, "-j", chain],
                               capture_output=True)
                subprocess.run(["iptables", "-w", "-F", chain], capture_output=True)
                subprocess.run(["iptables", "-w", "-X", chain], capture_output=True)
            subprocess.run(["docker", "network", "rm", net], capture_output=True, timeout=60)
        keys = self.redis.cli("--scan", "--pattern", self.prefix + "*").split()
        for k in keys:
            self.redis.cli("DEL", k)
        remove_state_dir(self.state_dir)

    def sanitizer_errors(self):
        log = self.read_log()
        marks = ["ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"]
        return [m for m in marks if m in log]


@pytest.fixture(scope="session")
def tmpdir_session():
    d = tempfile.mkdtemp(prefix="citest-")
    yield d


@pytest.fixture(scope="session")
def redis_server(tmpdir_session):
    r = RedisServer(tmpdir_session)
    yield r
    r.stop()


def _start_daemon(redis_server, tmpdir_session, extra=()):
    d = Daemon(redis_server, tmpdir_session, extra)
    return d


def _finish_daemon(d):
    try:
        d.stop()
        errors = d.sanitizer_errors()
        assert not errors, "sanitizer reported %s; log:\n%s" % (errors, d.read_log()[-8000:])
    finally:
        d.cleanup()


@pytest.fixture(scope="session")
def daemon(redis_server, tmpdir_session):
    """One daemon shared by the tests that need no special configuration."""
    d = _start_daemon(redis_server, tmpdir_session)
    yield d
    _finish_daemon(d)


@pytest.fixture
def make_daemon(redis_server, tmpdir_session):
    """A factory for daemons with their own flags, stopped after the test."""
    made = []

    def make(*extra):
        d = _start_daemon(redis_server, tmpdir_session, extra)
        made.append(d)
        return d

    yield make
    for d in made:
        _finish_daemon(d)


@pytest.fixture
def api(daemon):
    return daemon.api


@pytest.fixture
def session(daemon):
    """A fresh session, deleted afterwards."""
    s = daemon.api.create()
    yield s
    daemon.api.delete(s["id"])
