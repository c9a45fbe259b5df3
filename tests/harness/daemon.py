"""The daemon under test: the real ci-daemon binary (the ASan build in the
suites, CITEST_DAEMON) on a free loopback port, with a key prefix, a node
name and a state directory of its own, so runs never touch each other.

It is started and stopped by its pid. What it made is found again by its
label (ci.prefix=<prefix>) and its key prefix, and removed by cleanup() even
when a test failed: containers, the sandbox network and its host firewall
chain, Redis keys, the state directory (after unmounting the tmpfs the daemon
mounts there). finish() is the end of every daemon's life in a test: stop it,
fail on a sanitizer report in its log, clean up.
"""
import datetime
import os
import re
import resource
import signal
import subprocess
import tempfile
import time
import uuid

from . import openapi_check, procfs
from .http import Client, free_port
from .images import image_tag
from .wait import wait_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DAEMON_BIN = os.environ.get("CITEST_DAEMON", os.path.join(ROOT, "build", "ci-daemon"))
CTL_BIN = os.environ.get("CITEST_CTL", os.path.join(ROOT, "build", "ci-ctl"))

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def parse_time(text):
    """A timestamp as the daemon writes them (RFC 3339 UTC with milliseconds)
    -> seconds since the epoch."""
    dt = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.replace(tzinfo=datetime.timezone.utc).timestamp()


def remove_state_dir(path):
    """rm -rf a daemon's state directory, after unmounting the tmpfs the
    daemon mounts for its sessions' IPC directories (--ipc-tmpfs)."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for p in sorted((p for p in points if p == path or p.startswith(path + "/")), reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)
    subprocess.run(["rm", "-rf", path])


_KNOWN_OPTIONS = {}


def known_options(binary):
    """The options a ci-daemon binary accepts, as its --help lists them (one
    "  --name  what it does" line each; every version so far prints them so).
    The A/B benchmark's baseline is an older build: it is passed only options
    it knows, found here rather than guessed. Cached per binary file. An
    empty set: the binary (a wrapper script, say) listed none, so nothing is
    known either way."""
    st = os.stat(binary)
    key = (os.path.realpath(binary), st.st_mtime_ns, st.st_size)
    if key not in _KNOWN_OPTIONS:
        try:
            out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
            names = frozenset(re.findall(r"^\s+--([a-z0-9][a-z0-9-]*)", out.stdout, re.M))
        except (OSError, subprocess.SubprocessError):
            names = frozenset()
        _KNOWN_OPTIONS[key] = names
    return _KNOWN_OPTIONS[key]


class Daemon:
    """A started daemon (the constructor waits for /readyz).

    extra_args  more flags
    nofile      (soft, hard): start it with that RLIMIT_NOFILE (as `ulimit -n`
                would), instead of the test's own
    env         variables to set for it (ASAN_OPTIONS, say) over the test's own
    binary      another ci-daemon (the A/B benchmark's baseline); the
                harness's own optional flags (--pool-max 0) are left out
                when its --help does not list them (known_options)
    admin_key   run with API keys: the key is written to a file of its own
                (mode 600) given as --admin-key-file; .admin is then a Client
                sending it, and .key(tenant) issues a tenant's key
    prefix      the Redis key prefix (default: one of its own; two daemons
                given the same one share sessions' registry and keys)
    listen_host the address to listen on (0.0.0.0, say); it is still reached on
                127.0.0.1
    ssl_context an ssl.SSLContext: the daemon speaks TLS (its flags are the
                test's), self.api and ctl() use https
    port        the port to listen on (default: a free one), for a test that
                must name it in another flag first (--advertise-url)
    wait_ready  False: start() waits for /healthz only (a daemon that is not
                meant to become ready, as one whose Redis cannot be found)
    """

    def __init__(self, redis, tmp, extra_args=(), nofile=None, env=None, binary=None,
                 admin_key=None, prefix=None, listen_host="127.0.0.1", ssl_context=None,
                 cacert=None, port=None, wait_ready=True):
        self.wait_ready = wait_ready
        self.run_id = uuid.uuid4().hex[:10]
        self.prefix = prefix or "citest-%s:" % self.run_id
        self.node = "citest-%s" % self.run_id
        self.port = port or free_port()
        openapi_check.DAEMON_PORTS.add(self.port)  # its answers go to the drift check
        self.state_dir = tempfile.mkdtemp(prefix="cit-", dir="/tmp")
        self.log_path = os.path.join(tmp, "daemon-%s.log" % self.run_id)
        self.redis = redis
        self.scheme = "https" if ssl_context is not None else "http"
        self.cacert = cacert  # for ctl() over https
        # a pool that stays at pool-size unless the test asks for growth (or
        # its config file decides): tests count containers and time starts.
        # An older binary (binary=) without an adaptive pool has only that.
        fixed_pool = () if "--pool-max" in extra_args or "--config" in extra_args \
            else ("--pool-max", "0")
        if binary is not None and fixed_pool:
            known = known_options(binary)
            if known and "pool-max" not in known:
                fixed_pool = ()
        self.args = [binary or DAEMON_BIN, "--listen", "%s:%d" % (listen_host, self.port),
                     "--redis", redis.url, "--state-dir", self.state_dir,
                     "--key-prefix", self.prefix, "--node", self.node, "--log-level", "debug",
                     *fixed_pool, *extra_args]
        self.admin_key = admin_key
        self.admin_key_file = None
        if admin_key is not None:
            self.admin_key_file = os.path.join(self.state_dir + ".admin-key")
            fd = os.open(self.admin_key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(admin_key + "\n")
            self.args += ["--admin-key-file", self.admin_key_file]
        self.api = Client(self.port, ssl_context=ssl_context)
        self.admin = Client(self.port, api_key=admin_key, ssl_context=ssl_context) if admin_key is not None else self.api
        self.proc = None
        self.log = None
        self.nofile = nofile
        self.env = dict(env or {})
        try:
            self.start()
        except BaseException:
            # Nobody holds a daemon whose construction failed: stop it here.
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.log is not None:
                self.log.close()
            self.cleanup()
            raise

    # ---------------------------------------------------------- life

    def start(self):
        """Start (or start again, with the same flags) and wait for /readyz."""
        self.log = open(self.log_path, "ab")
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.update(self.env)
        preexec = None
        if self.nofile is not None:
            limits = tuple(self.nofile)

            def preexec():
                resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=preexec)
        if self.wait_ready:
            wait_for(self.ready, 30, interval=0.05, what="the daemon's /readyz")
        else:
            wait_for(self.alive, 30, interval=0.05, what="the daemon's /healthz")

    def restart(self):
        """Start a stopped (or killed) daemon again with the same flags."""
        if self.log is not None and not self.log.closed:
            self.log.close()
        self.start()

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("daemon exited with %s:\n%s" % (self.proc.returncode, self.read_log()))
        try:
            return self.api.request("GET", "/readyz", timeout=2)[0] == 200
        except OSError:
            return False

    def alive(self):
        if self.proc.poll() is not None:
            raise AssertionError("daemon exited with %s:\n%s" % (self.proc.returncode, self.read_log()))
        try:
            return self.api.request("GET", "/healthz", timeout=2)[0] == 200
        except OSError:
            return False

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signal it (by pid) and wait for it to exit; returns the exit status."""
        rc = procfs.stop_process(self.proc, sig, timeout) if self.proc is not None else None
        if self.log is not None:
            self.log.close()
        return rc

    def kill(self):
        """kill -9 (by pid); returns the monotonic time of the kill."""
        t = time.monotonic()
        self.proc.kill()
        self.proc.wait(10)
        self.log.close()
        return t

    def finish(self):
        """Stop, then fail on a sanitizer report; clean up whatever happens."""
        try:
            self.stop()
            errors = self.sanitizer_errors()
            assert not errors, "sanitizer reported %s; log:\n%s" % (errors, self.read_log()[-8000:])
        finally:
            self.cleanup()

    # ---------------------------------------------------------- what it says

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def log_mark(self):
        """A position in the log: log_since(mark) is what came after it."""
        return len(self.read_log())

    def log_since(self, mark):
        return self.read_log()[mark:]

    def wait_log(self, text, timeout=10, since=0, count=1):
        """Wait until the log (after mark `since`) holds text `count` times."""
        return wait_for(lambda: self.log_since(since).count(text) >= count, timeout,
                        what="%r in the daemon's log" % text)

    def sanitizer_errors(self):
        log = self.read_log()
        return [m for m in SANITIZER_MARKS if m in log]

    def metrics(self):
        """/metrics as {series: value} (Client.metrics; with the admin key, if any)."""
        return self.admin.metrics()

    def key(self, tenant, **extra):
        """Issue an API key for tenant (POST /v1/admin/keys): its document,
        {"id", "key", "tenant", "created"}."""
        status, doc = self.admin.request("POST", "/v1/admin/keys", body=dict(tenant=tenant, **extra))
        assert status == 201, (status, doc)
        return doc

    def client(self, api_key):
        """A Client of this daemon that sends api_key."""
        return Client(self.port, api_key=api_key)

    _NO_DEFAULT = object()

    def metric(self, name, default=_NO_DEFAULT):
        m = self.metrics()
        if name in m:
            return m[name]
        if default is not self._NO_DEFAULT:
            return default
        raise AssertionError("no metric %s" % name)

    def wait_state(self, sid, want, timeout=10, client=None):
        """Wait until session sid is in state want (busy: its exec is running)."""
        api = client or self.api
        wait_for(lambda: api.state(sid) == want, timeout,
                 what="session %s to be %s" % (sid, want))

    def wait_orphan_sweep(self, timeout=75):
        """Return right after the daemon's own orphan sweep has run.

        The daemon removes containers of its prefix that no session owns (and
        an unused sandbox network) by itself: 2 s after it starts, then every
        minute. A test of `ci-ctl gc` must not race that sweep: a container
        of ours made to look orphaned (the daemon's labels, no session) is
        what the sweep removes, so its removal is the sweep, seen; the next
        one is a minute away."""
        self.wait_log("recovery:", timeout=30)  # the start-up reconcile is done
        out = subprocess.run(["docker", "create", "--label", "ci.prefix=" + self.prefix,
                              "--label", "ci.node=" + self.node, image_tag(), "true"],
                             capture_output=True, text=True, timeout=60, check=True)
        marker = out.stdout.strip()
        try:
            self.wait_log("gc: removing orphan container %s" % marker[:12], timeout=timeout)
            wait_for(lambda: marker not in self.containers(), 30,
                     what="the sweep to remove container %.12s" % marker)
        finally:
            subprocess.run(["docker", "rm", "-f", marker], capture_output=True, timeout=60)

    def ctl(self, *args, input=None, text=True, timeout=120, env=None):  # noqa: A002
        """ci-ctl against this daemon (env: variables over the test's own,
        CICTL_API_KEY say; a value None removes one)."""
        full = None
        if env is not None:
            full = dict(os.environ)
            for k, v in env.items():
                if v is None:
                    full.pop(k, None)
                else:
                    full[k] = v
        tls = ["--cacert", self.cacert] if self.cacert else []
        return subprocess.run([CTL_BIN, "--server", "%s://127.0.0.1:%d" % (self.scheme, self.port),
                               *tls, *args],
                              capture_output=True, text=text, input=input, timeout=timeout,
                              env=full)

    # ---------------------------------------------------------- the process

    def rss_kb(self):
        return procfs.rss_kb(self.proc.pid)

    def fd_count(self):
        return procfs.fd_count(self.proc.pid)

    def cpu_seconds(self):
        return procfs.cpu_seconds(self.proc.pid)

    def open_api_connections(self):
        """Client connections to the API the daemon has not closed yet."""
        return procfs.open_connections(self.port)

    # ---------------------------------------------------------- what it made

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
        openapi_check.DAEMON_PORTS.discard(self.port)
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
        if self.admin_key_file is not None and os.path.exists(self.admin_key_file):
            os.unlink(self.admin_key_file)
