"""Helpers of the chaos suite (issue 5: lifecycle, recovery, outages), over
the test harness (tests/harness/: Daemon, RedisServer, Client, wait_for).
This module has a name of its own, so tests can import it whichever suites
pytest collects together.

  DockerForwarder   a unix-socket forwarder to /var/run/docker.sock that the
                    daemon is pointed at with --docker; "the engine goes down"
                    is the forwarder closing its listener and every forwarded
                    connection. The real dockerd is never touched.
  orphan_report     what is wrong between a daemon's containers (by label) and
                    its live sessions
  request           one request through the daemon's client that also returns
                    the headers, with a short timeout, so a hang is seen as a
                    timeout
  record(name, v)   measured numbers, printed at once and again in pytest's
                    closing summary (conftest.py)

A Redis outage is the harness's RedisServer killed and started again (empty,
on the same port). Every process this suite starts is stopped by its pid;
every network peer is on loopback or a unix socket of our own.
"""
import os
import re
import socket
import subprocess
import threading

from harness import wait_for

# Every prefix a daemon of this run used, checked once more at the very end.
PREFIXES = []
# name -> text, for the closing summary.
MEASURED = {}


def record(name, value):
    """Print a measured number now (visible with -s) and keep it for the summary."""
    MEASURED[name] = value
    print("\n[chaos] %s: %s" % (name, value))


# ---- a service we can break ------------------------------------------------


class DockerForwarder:
    """Forwards each connection on a unix socket of ours to the real engine.

    down() closes the listener (and unlinks its path) and every forwarded
    connection, so to the daemon the engine is gone; up() listens again."""

    def __init__(self, path, target="/var/run/docker.sock"):
        self.path = path
        self.target = target
        self.lock = threading.Lock()
        self.conns = set()
        self.listener = None
        self.thread = None
        self.up()

    def up(self):
        assert self.listener is None
        if os.path.exists(self.path):
            os.unlink(self.path)
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(self.path)
        ls.listen(64)
        ls.settimeout(0.05)
        self.listener = ls
        self.thread = threading.Thread(target=self._accept, args=(ls,), daemon=True)
        self.thread.start()

    def down(self):
        ls, self.listener = self.listener, None
        if ls is not None:
            ls.close()
            self.thread.join(5)
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        with self.lock:
            conns, self.conns = self.conns, set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def close(self):
        self.down()

    def _accept(self, ls):
        while self.listener is ls:
            try:
                client, _ = ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.target)
            except OSError:
                client.close()
                upstream.close()
                continue
            with self.lock:
                if self.listener is not ls:
                    client.close()
                    upstream.close()
                    return
                self.conns.update((client, upstream))
            pair = {"open": 2}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b, pair), daemon=True).start()

    def _pump(self, src, dst, pair):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        with self.lock:
            pair["open"] -= 1
            done = pair["open"] == 0
            if done:
                self.conns.discard(src)
                self.conns.discard(dst)
        if done:  # both directions ended: the pair is ours to close
            src.close()
            dst.close()


# ---- looking at what a daemon left behind ----------------------------------


def docker_containers(prefix):
    """{container id: (session label, state)} of every container of prefix."""
    out = subprocess.run(["docker", "ps", "-a", "--no-trunc", "--filter",
                          "label=ci.prefix=%s" % prefix, "--format",
                          '{{.ID}}\t{{.Label "ci.session"}}\t{{.State}}'],
                         capture_output=True, text=True, timeout=30)
    found = {}
    for line in out.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            found[parts[0]] = (parts[1], parts[2])
    return found


def container_of(d, sid):
    ids = d.containers("label=ci.session=%s" % sid)
    assert len(ids) == 1, (sid, ids)
    return ids[0]


def live_ids(d):
    status, doc = d.api.request("GET", "/v1/sessions", timeout=10)
    assert status == 200, (status, doc)
    return {s["id"] for s in doc["sessions"]}


def pool_ready(d):
    """Warm sandboxes the daemon keeps (ci_pool_size in /metrics; 0 without a pool)."""
    return int(d.metric("ci_pool_size", 0))


def orphan_report(d):
    """'' when every container of the daemon's prefix runs for a live session
    (or is one of its warm pool's, which have no session yet) and every live
    session has its container; else what is wrong."""
    live = live_ids(d)
    found = docker_containers(d.prefix)
    problems = []
    by_session = {}
    spare = []
    for cid, (sid, state) in found.items():
        if sid not in live:
            spare.append("container %.12s (session %s, %s)" % (cid, sid or "?", state))
            if state != "running":
                problems.append("container %.12s (session %s) is %s and has no live session"
                                % (cid, sid or "?", state))
        elif state != "running":
            problems.append("container %.12s of live session %s is %s" % (cid, sid, state))
        by_session.setdefault(sid, []).append(cid)
    pool = pool_ready(d) if spare else 0
    if len(spare) > pool:
        problems.append("%d containers without a live session, the warm pool has %d: %s"
                        % (len(spare), pool, ", ".join(spare)))
    for sid in live:
        n = len(by_session.get(sid, []))
        if n != 1:
            problems.append("live session %s has %d containers" % (sid, n))
    return "; ".join(problems)


def session_containers(d):
    """Containers of d's prefix that belong to a live session."""
    live = live_ids(d)
    return [cid for cid, (sid, _) in docker_containers(d.prefix).items() if sid in live]


def recovery_counts(d):
    """(adopted, removed, tombstoned) of the daemon's last recovery log line."""
    found = re.findall(r"recovery: (\d+) adopted, (\d+) containers removed, "
                       r"(\d+) sessions tombstoned", d.read_log())
    assert found, "no recovery line in the log"
    return tuple(int(v) for v in found[-1])


def assert_nothing_orphaned(d, timeout=10):
    """Orphans are removed asynchronously (recovery, teardown): allow a bound."""
    last = {}

    def clean():
        last["report"] = orphan_report(d)
        return last["report"] == ""

    try:
        wait_for(clean, timeout, interval=0.1, what="no orphaned container")
    except AssertionError:
        raise AssertionError("orphaned after %ss: %s" % (timeout, last.get("report")))


def request(d, method, path, body=None, timeout=10):
    """(status, document, headers) of one request to daemon d."""
    r = d.api.send(method, path, body=body, timeout=timeout)
    return r.status, r.doc, r.headers


def exec_code(d, sid, code, timeout=10, **extra):
    return request(d, "POST", "/v1/sessions/%s/exec" % sid, dict(code=code, **extra),
                   timeout=timeout)


def exec_value(d, sid, code, timeout=10):
    """The result of code that must run fine, with the kernel preserved."""
    status, doc, _ = exec_code(d, sid, code, timeout=timeout)
    assert status == 200 and doc["status"] == "ok", (sid, status, doc)
    assert doc["kernel"] == "preserved", doc
    return doc["result"]


def create_many(d, n, timeout=60, **body):
    """n sessions created concurrently; returns their documents."""
    docs = [None] * n
    errors = []

    def one(i):
        try:
            status, doc, _ = request(d, "POST", "/v1/sessions", body, timeout=timeout)
            if status != 201:
                errors.append((status, doc))
            docs[i] = doc
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    assert not errors, errors
    return docs


def assert_unavailable(status, doc, headers, what):
    assert status == 503, (what, status, doc)
    assert doc["error"]["code"] == "unavailable", (what, doc)
    assert "retry-after" in headers, (what, headers)

