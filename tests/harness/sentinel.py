"""Redis with Sentinel, of the test's own (issue 15, item 6), and a fake
sentinel that lies.

SentinelGroup  a master and a replica redis-server (harness RedisServer, free
               loopback ports) and three redis-sentinel processes watching
               them (quorum 2, down-after-milliseconds 1000, a short
               failover-timeout). .url is the daemon's --redis
               (sentinel://127.0.0.1:P1,.../<name>); .cli() talks to the
               master of the moment (so Daemon.cleanup removes its keys from
               wherever they are now); kill_master() is a SIGKILL by pid;
               failover() is a graceful SENTINEL FAILOVER; wait_master_change()
               waits (bounded) until every sentinel names another master.
               stop() stops everything by pid.
FakeSentinel   a TCP server on loopback that speaks just enough RESP to answer
               SENTINEL get-master-addr-by-name as its .mode says: "garbage",
               "bogus" (an address that is not one), "replica" (the address
               .addr, a real replica), "silent" (reads, never answers), "good"
               (the address .addr), "hangup" (closes at once), "flood" (a bulk
               string that claims 100 MB, then up to 8 MiB of it, until cut off).

Every name the group uses carries the test's prefix ("ci15-sentinel-..."), so
two runs never share a master name; nothing here leaves loopback.
"""
import os
import socket
import subprocess
import threading
import uuid

from .http import free_port
from .procfs import stop_process
from .redis import RedisServer
from .wait import wait_for


def _cli(port, *args, timeout=10):
    out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--raw", *args],
                         capture_output=True, text=True, timeout=timeout)
    return out.stdout.strip()


class Sentinel:
    """One redis-sentinel process of ours, with its own config file (a
    sentinel rewrites its file, so each needs one)."""

    def __init__(self, tmp, name, master_port, quorum=2, down_after_ms=1000,
                 failover_timeout_ms=3000):
        self.port = free_port()
        self.tmp = tmp
        self.conf = os.path.join(tmp, "sentinel-%s-%d.conf" % (name, self.port))
        self.log_path = os.path.join(tmp, "sentinel-%s-%d.log" % (name, self.port))
        with open(self.conf, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"
                    "sentinel monitor %s 127.0.0.1 %d %d\n"
                    "sentinel down-after-milliseconds %s %d\n"
                    "sentinel failover-timeout %s %d\n"
                    "sentinel parallel-syncs %s 1\n"
                    % (self.port, tmp, self.log_path, name, master_port, quorum, name,
                       down_after_ms, name, failover_timeout_ms, name))
        self.proc = subprocess.Popen(["redis-sentinel", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_for(lambda: self.cli("PING") == "PONG", 10, interval=0.02,
                 what="redis-sentinel on port %d to answer" % self.port, ignore=(Exception,))

    def cli(self, *args):
        return _cli(self.port, *args)

    def stop(self):
        stop_process(self.proc)


class SentinelGroup:
    def __init__(self, tmp, sentinels=3, down_after_ms=1000, failover_timeout_ms=3000):
        self.name = "ci15-sentinel-%s" % uuid.uuid4().hex[:8]
        self.tmp = tmp
        self.master = RedisServer(tmp)
        self.replica = RedisServer(tmp, extra_args=["--replicaof", "127.0.0.1",
                                                    str(self.master.port)])
        self.servers = [self.master, self.replica]
        self.sentinels = []
        try:
            wait_for(lambda: "master_link_status:up" in self.replica.cli("INFO", "replication"),
                     20, interval=0.05, what="the replica to sync with the master")
            for _ in range(sentinels):
                self.sentinels.append(Sentinel(tmp, self.name, self.master.port,
                                               down_after_ms=down_after_ms,
                                               failover_timeout_ms=failover_timeout_ms))
            self.wait_settled()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self):
        return "sentinel://%s/%s" % (",".join("127.0.0.1:%d" % s.port for s in self.sentinels),
                                     self.name)

    @property
    def url_by_name(self):
        """The same, the first sentinel named "localhost" (the hosts file's
        name: the daemon resolves it on its loop, no DNS query)."""
        return self.url.replace("sentinel://127.0.0.1:", "sentinel://localhost:", 1)

    def wait_settled(self, timeout=30):
        """Until every sentinel knows the replica and the other sentinels
        (hello messages every 2 s): before that, a failover cannot win a
        quorum."""
        n = len(self.sentinels)

        def settled():
            for s in self.sentinels:
                if "127.0.0.1" not in s.cli("SENTINEL", "replicas", self.name):
                    return False
                if s.cli("SENTINEL", "sentinels", self.name).count("runid") < n - 1:
                    return False
            return True
        wait_for(settled, timeout, interval=0.1, what="the sentinels to know each other and the replica")

    def master_port(self, sentinel=None):
        """The master's port as a sentinel names it (the first by default)."""
        s = sentinel or self.sentinels[0]
        out = s.cli("SENTINEL", "get-master-addr-by-name", self.name).split()
        return int(out[1]) if len(out) == 2 else None

    def current_master(self):
        """The RedisServer that is master now, by the sentinels' word."""
        port = self.master_port()
        return next(r for r in self.servers if r.port == port)

    def cli(self, *args):
        return self.current_master().cli(*args)

    def kill_master(self):
        """SIGKILL the master of the moment (by pid); returns it."""
        m = self.current_master()
        m.kill()
        return m

    def failover(self):
        """A graceful failover (SENTINEL FAILOVER on the first sentinel)."""
        return self.sentinels[0].cli("SENTINEL", "FAILOVER", self.name)

    def wait_master_change(self, old_port, timeout=30):
        """Until every live sentinel names a master other than old_port, and
        that server says it is a master; returns the new master's port."""
        def changed():
            ports = {self.master_port(s) for s in self.sentinels}
            if len(ports) != 1:
                return None
            port = ports.pop()
            if port in (None, old_port):
                return None
            role = _cli(port, "ROLE").split("\n")
            return port if role and role[0] == "master" else None
        return wait_for(changed, timeout, interval=0.05,
                        what="the sentinels to promote a new master")

    def stop(self):
        for s in self.sentinels:
            s.stop()
        for r in self.servers:
            r.stop()


# ---- a sentinel that lies ------------------------------------------------


def _resp_bulk(s):
    b = s.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


class FakeSentinel:
    MODES = ("garbage", "bogus", "replica", "silent", "good", "hangup", "flood")

    def __init__(self, mode="garbage", addr=None):
        self.mode = mode
        self.addr = addr  # (host, port) for "replica" and "good"
        self.asked = 0  # get-master-addr-by-name questions seen
        self.lock = threading.Lock()
        self.conns = []
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.ls.settimeout(0.05)
        self.port = self.ls.getsockname()[1]
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while self.running:
            try:
                c, _ = self.ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _answer(self, cmd):
        """The reply to one command (a list of bytes), or None for none."""
        words = [w.decode(errors="replace").lower() for w in cmd]
        if words[:2] != ["sentinel", "get-master-addr-by-name"]:
            return b"-ERR the fake knows one question\r\n" if self.mode != "silent" else None
        with self.lock:
            self.asked += 1
            n = self.asked
        if self.mode == "silent":
            return None
        if self.mode == "flood":
            return b"*2\r\n$100000000\r\n"
        if self.mode == "garbage":
            # In turn: the wrong shape, a protocol error, an integer, a
            # huge element count that never comes.
            return (b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", b"!!not resp\r\n", b":42\r\n",
                    b"*2\r\n:1\r\n:2\r\n")[n % 4]
        if self.mode == "bogus":
            host, port = (("0.0.0.0", "6379"), ("redis.example", "6379"), ("127.0.0.1", "99999"),
                          ("127.0.0.1", "63x9"))[n % 4]
            return b"*2\r\n" + _resp_bulk(host) + _resp_bulk(port)
        host, port = self.addr
        return b"*2\r\n" + _resp_bulk(host) + _resp_bulk(str(port))

    def _serve(self, c):
        buf = b""
        try:
            if self.mode == "hangup":
                return
            c.settimeout(0.2)
            while self.running:
                try:
                    data = c.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    return
                buf += data
                while True:
                    cmd, buf = _parse_command(buf)
                    if cmd is None:
                        break
                    out = self._answer(cmd)
                    if out is not None:
                        c.sendall(out)
                    if out is not None and self.mode == "flood":
                        chunk = b"x" * 65536
                        for _ in range(128):
                            c.sendall(chunk)
        except OSError:
            pass
        finally:
            c.close()

    def stop(self):
        self.running = False
        self.ls.close()
        self.thread.join(5)
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _parse_command(buf):
    """One RESP array of bulk strings from buf: (words, rest) or (None, buf)."""
    if not buf.startswith(b"*"):
        return (None, buf) if b"\r\n" not in buf else ([buf.split(b"\r\n", 1)[0]],
                                                       buf.split(b"\r\n", 1)[1])
    end = buf.find(b"\r\n")
    if end < 0:
        return None, buf
    n, pos, words = int(buf[1:end]), end + 2, []
    for _ in range(n):
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return None, buf
        ln = int(buf[pos + 1:end])
        start = end + 2
        if len(buf) < start + ln + 2:
            return None, buf
        words.append(buf[start:start + ln])
        pos = start + ln + 2
    return words, buf[pos:]
