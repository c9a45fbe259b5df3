"""A redis-server of the test's own, on a free port, stopped by its pid.

Every run gets its own server, so runs never share keys. bind="0.0.0.0"
with protected mode on gives the hostile suite a server that sandboxes would
see on the gateway address (they must not reach it). kill() and start()
make an outage: the server dies (SIGKILL) and comes back empty on the same
port, so a daemon's --redis URL stays valid across it.
"""
import subprocess

from .http import free_port
from .procfs import stop_process
from .wait import wait_for


class PortTaken(Exception):
    """redis-server exited at start: its port was taken in the meantime."""


class RedisServer:
    def __init__(self, tmp, bind="127.0.0.1", protected_mode=None, extra_args=()):
        self.tmp = tmp
        self.bind = bind
        self.protected_mode = protected_mode
        self.extra_args = list(extra_args)  # more flags (--replicaof, say)
        self.proc = None
        # free_port() closes its probe before redis binds: on a machine where
        # other tests hold thousands of ephemeral ports (the slowloris cases),
        # another socket may take the port in between, and redis exits. Then
        # another port, a bounded number of times.
        for attempt in range(5):
            self.port = free_port()
            try:
                self.start()
                return
            except PortTaken:
                if attempt == 4:
                    raise

    def start(self):
        """Start the server (again, empty, on the same port)."""
        assert self.proc is None or self.proc.poll() is not None
        args = ["redis-server", "--bind", self.bind, "--port", str(self.port), "--save", "",
                "--appendonly", "no", "--dir", self.tmp,
                "--dbfilename", "dump-%d.rdb" % self.port]
        if self.protected_mode is not None:
            args += ["--protected-mode", "yes" if self.protected_mode else "no"]
        args += self.extra_args
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up():
            if self.proc.poll() is not None:
                raise PortTaken("redis-server exited with %s at start on port %d"
                                % (self.proc.returncode, self.port))
            return self.ping()
        # 30 s: a liveness bound; a loaded machine starts redis in seconds.
        wait_for(up, 30, interval=0.01, what="redis to answer")

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def cli(self, *args):
        """redis-cli against this server (over loopback); its stdout, stripped."""
        out = subprocess.run(["redis-cli", "-p", str(self.port), "--raw", *args],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip()

    def ping(self):
        try:
            return self.cli("PING") == "PONG"
        except Exception:  # noqa: BLE001 - not up yet
            return False

    def clients(self):
        """CLIENT LIST: one line per connected client (redis-cli itself included)."""
        return self.cli("CLIENT", "LIST")

    def kill(self):
        """A crash: SIGKILL to our own server, by its pid."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self):
        stop_process(self.proc)
