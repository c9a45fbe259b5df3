#!/usr/bin/python3
"""Smoke test of the built image with the real engine, no daemon needed.

Plays the daemon: listens on a unix socket in a host directory (dir 0711,
socket owned by the sandbox uid, mode 0600), bind-mounts the directory
read-only at /run/ci in a container hardened roughly like the daemon's, and
checks hello, exec (numpy/pandas/matplotlib), the files API, SIGINT through
the host pid (SO_PEERCRED), and an out-of-memory kill.  Prints timings.
Every container it starts carries the label ci.test=runner-smoke and is
removed at the end, also on failure.

    sudo /usr/bin/python3 images/python/smoke.py [--image ci/python:latest]
"""

import argparse
import os
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "runner"))
import ci_frame  # noqa: E402

LABEL = "ci.test=runner-smoke"
UID = 1000


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.dec = ci_frame.Decoder()
        h, _ = self.recv()
        assert h["t"] == "hello", h
        self.hello = h
        pid, uid, gid = struct.unpack("3i", sock.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        self.host_pid, self.uid = pid, uid

    def send(self, header, body=b""):
        self.sock.sendall(ci_frame.pack(header, body))

    def recv(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            f = self.dec.next()
            if f is not None:
                return f
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame within %.0fs" % timeout)
            if select.select([self.sock], [], [], left)[0]:
                data = self.sock.recv(1 << 20)
                if not data:
                    raise EOFError("connection closed")
                self.dec.feed(data)


class Smoke:
    def __init__(self, image):
        self.image = image
        self.dir = tempfile.mkdtemp(prefix="ci-smoke-", dir="/var/tmp")
        os.chmod(self.dir, 0o711)
        self.path = os.path.join(self.dir, "ipc.sock")
        self.listen()
        self.eid = 0
        self.cid = None

    def listen(self):
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsock.bind(self.path)
        os.chown(self.path, UID, UID)
        os.chmod(self.path, 0o600)
        self.lsock.listen(16)

    def accept(self, timeout=30.0):
        if not select.select([self.lsock], [], [], timeout)[0]:
            raise TimeoutError("nobody connected within %.0fs" % timeout)
        return Conn(self.lsock.accept()[0])

    def run_container(self, memory="256m"):
        cmd = ["docker", "run", "-d", "--rm", "--read-only", "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges", "--network", "none", "--init",
               "--tmpfs", "/workspace:rw,nosuid,nodev,size=64m,uid=1000,gid=1000,mode=0700",
               "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m,mode=1777",
               "-v", "%s:/run/ci:ro" % self.dir,
               "--memory", memory, "--memory-swap", memory, "--pids-limit", "64",
               "--label", LABEL, self.image]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError("docker run failed: %s" % p.stderr.strip())
        self.cid = p.stdout.strip()
        return self.cid

    def exec(self, k, code, timeout=60.0, **caps):
        self.eid += 1
        h = {"t": "exec", "id": self.eid, "stdout_cap": 1 << 20, "stderr_cap": 1 << 20,
             "files_cap": 1000}
        h.update(caps)
        k.send(h, code.encode())
        res = {"stdout": b"", "stderr": b"", "display": []}
        while True:
            f, body = k.recv(timeout)
            if f["t"] == "stream":
                res[f["name"]] += body
            elif f["t"] == "display":
                res["display"].append(body)
            elif f["t"] == "done":
                res.update(f)
                return res

    def close(self):
        ids = subprocess.run(["docker", "ps", "-aq", "--filter", "label=" + LABEL],
                             capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f"] + ids, capture_output=True)
        self.lsock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def check(cond, what):
    print("  %-62s %s" % (what, "ok" if cond else "FAILED"))
    if not cond:
        raise AssertionError(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", default="ci/python:latest")
    ap.add_argument("--iterations", type=int, default=1000)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("smoke.py: run as root (the socket is chowned to uid 1000)")

    s = Smoke(args.image)
    try:
        t0 = time.monotonic()
        cid = s.run_container()
        t_run = time.monotonic() - t0
        conns, at = {}, {}
        while len(conns) < 2:
            c = s.accept()
            conns[c.hello["role"]] = c
            at[c.hello["role"]] = time.monotonic() - t0
        sup, k = conns["supervisor"], conns["kernel"]
        print("container %s" % cid[:12])
        print("  docker run returned after        %7.1f ms" % (t_run * 1000))
        print("  supervisor hello after           %7.1f ms" % (at["supervisor"] * 1000))
        print("  kernel hello after               %7.1f ms" % (at["kernel"] * 1000))
        check(sup.uid == UID and k.uid == UID, "both connect as uid 1000 (SO_PEERCRED)")
        check(k.hello["pid"] != k.host_pid, "hello pid is the container pid (%d), host pid %d"
              % (k.hello["pid"], k.host_pid))

        r = s.exec(k, "import time\nt = time.perf_counter(); import numpy; a = time.perf_counter() - t\n"
                      "t = time.perf_counter(); import pandas; b = time.perf_counter() - t\n"
                      "t = time.perf_counter(); import matplotlib.pyplot; c = time.perf_counter() - t\n"
                      "'%.0f %.0f %.0f' % (a * 1000, b * 1000, c * 1000)")
        check(r["status"] == "ok", "first imports")
        a, b, c = r["result"].strip("'").split()
        print("  first import: numpy %s ms, pandas %s ms, matplotlib.pyplot %s ms" % (a, b, c))

        t = time.monotonic()
        r = s.exec(k, "import numpy, pandas, matplotlib.pyplot as plt; plt.plot([1,2]); 1+1")
        dt = time.monotonic() - t
        check(r["status"] == "ok" and r["result"] == "2", "exec result '2'")
        check(len(r["display"]) == 1 and r["display"][0][:8] == b"\x89PNG\r\n\x1a\n",
              "one PNG display (%d bytes, %.1f ms)" % (len(r["display"][0]) if r["display"] else 0,
                                                       dt * 1000))

        r = s.exec(k, "import os, sys\n(os.getuid(), os.getgid(), os.getcwd(), "
                      "oct(os.stat('/workspace').st_mode & 0o777), os.stat('/workspace').st_uid, "
                      "os.environ['HOME'], os.path.isdir(os.environ['HOME']), "
                      "os.listdir(os.environ['MPLCONFIGDIR']), open('/proc/self/oom_score_adj').read().strip())")
        print("  %s" % r["result"])
        check(r["result"].startswith("(1000, 1000, '/workspace', '0o700', 1000, '/tmp/home', True"),
              "uid/gid 1000, /workspace tmpfs uid=1000 mode 0700, HOME exists")
        check("fontlist" in r["result"] and r["result"].endswith("'1000')"),
              "font cache seeded, kernel oom_score_adj 1000")
        r = s.exec(k, "import scipy, openpyxl, seaborn, sympy, lxml, tabulate, PIL, requests\n"
                      "import numpy as np, pandas as pd, io\n"
                      "df = pd.DataFrame({'a': [1, 2]}); df.to_excel('t.xlsx'); "
                      "print(pd.read_excel('t.xlsx').a.sum(), df.to_markdown() is not None)\n"
                      "print(np.linalg.inv(np.eye(3))[0, 0], scipy.stats.norm.cdf(0))")
        check(r["status"] == "ok" and r["stdout"] == b"3 True\n1.0 0.5\n",
              "scipy/openpyxl/seaborn/sympy/lxml/tabulate/PIL work (%r)" % r["stdout"][:80])
        check(r["files"] == [{"path": "t.xlsx", "size": r["files"][0]["size"],
                              "change": "created"}] if r["files"] else False,
              "files reports t.xlsx created")
        r = s.exec(k, "sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:])")
        check(r["result"] == "['lo']", "network interfaces: %s" % r["result"])

        # files API through the supervisor
        sup.send({"t": "file_put", "id": 1, "path": "up/x.bin"})
        sup.send({"t": "file_data", "id": 1}, b"z" * 300000)
        sup.send({"t": "file_end", "id": 1})
        h, _ = sup.recv()
        check(h["t"] == "file_ok" and h["size"] == 300000, "file_put")
        sup.send({"t": "file_get", "id": 2, "path": "up/x.bin"})
        h, _ = sup.recv()
        got = b""
        while True:
            f, body = sup.recv()
            if f["t"] == "file_end":
                break
            got += body
        check(h["t"] == "file_meta" and got == b"z" * 300000, "file_get")
        sup.send({"t": "file_get", "id": 3, "path": "../etc/passwd"})
        h, _ = sup.recv()
        check(h["t"] == "file_err" and h["code"] == "bad_path", "file_get ../etc/passwd refused")
        sup.send({"t": "file_put", "id": 4, "path": "big.bin"})
        for _ in range(70):
            sup.send({"t": "file_data", "id": 4}, b"\0" * (1 << 20))
        sup.send({"t": "file_end", "id": 4})
        h, _ = sup.recv()
        check(h["t"] == "file_err" and h["code"] == "payload_too_large",
              "70 MiB upload into the 64 MiB tmpfs: payload_too_large")

        # benchmark inside the container
        times = []
        for i in range(args.iterations):
            t = time.perf_counter()
            s.exec(k, "print(1)")
            times.append(time.perf_counter() - t)
        times.sort()
        print("  print(1) round trip over %d: p50 %.3f ms, p99 %.3f ms"
              % (len(times), statistics.median(times) * 1000,
                 times[int(len(times) * 0.99)] * 1000))

        # SIGINT to the host pid, as the daemon does through a pidfd
        s.eid += 1
        k.send({"t": "exec", "id": s.eid}, b"import time\ntime.sleep(30)")
        time.sleep(0.3)
        os.kill(k.host_pid, signal.SIGINT)
        t = time.monotonic()
        h, _ = k.recv()
        check(h["t"] == "done" and h["error"]["ename"] == "KeyboardInterrupt",
              "SIGINT to the host pid -> KeyboardInterrupt (%.1f ms)"
              % ((time.monotonic() - t) * 1000))

        # out of memory: the kernel dies, not the supervisor
        old = k.hello["pid"]
        s.eid += 1
        t = time.monotonic()
        k.send({"t": "exec", "id": s.eid},
               b"a = []\nwhile True:\n    a.append(bytearray(16 << 20))\n")
        h, _ = sup.recv(60)
        print("  kernel_exit after %.0f ms: %s" % ((time.monotonic() - t) * 1000, h))
        check(h["t"] == "kernel_exit" and h["pid"] == old and h["signal"] == 9
              and h["oom"] is True, "memory bomb: kernel_exit signal 9 oom true")
        t = time.monotonic()
        k2 = s.accept()
        check(k2.hello["role"] == "kernel", "new kernel hello after %.1f ms"
              % ((time.monotonic() - t) * 1000))
        r = s.exec(k2, "'a' in globals()")
        check(r["result"] == "False", "fresh namespace")

        # a kernel killed by the daemon (SIGKILL) is not reported as OOM
        os.kill(k2.host_pid, signal.SIGKILL)
        h, _ = sup.recv()
        check(h["t"] == "kernel_exit" and h["signal"] == 9 and h["oom"] is False,
              "SIGKILL: kernel_exit signal 9 oom false")
        k3 = s.accept()
        check(s.exec(k3, "6 * 7")["result"] == "42", "third kernel answers")

        # the daemon restarts: both reconnect, the namespace survives
        s.exec(k3, "kept = 'yes'")
        for c in (sup, k, k2, k3):
            c.sock.close()
        s.lsock.close()
        os.unlink(s.path)
        time.sleep(0.3)
        s.listen()
        t = time.monotonic()
        conns = {}
        while len(conns) < 2:
            c = s.accept()
            conns[c.hello["role"]] = c
        check(set(conns) == {"supervisor", "kernel"},
              "both reconnect %.0f ms after the socket is back" % ((time.monotonic() - t) * 1000))
        check(s.exec(conns["kernel"], "kept")["result"] == "'yes'", "namespace kept across reconnect")

        st = subprocess.run(["docker", "inspect", "-f", "{{.State.Status}}", cid],
                            capture_output=True, text=True).stdout.strip()
        check(st == "running", "container still running")
        t = time.monotonic()
        subprocess.run(["docker", "stop", "-t", "10", cid], capture_output=True)
        dt = time.monotonic() - t
        check(dt < 5, "docker stop takes %.0f ms (SIGTERM ends the supervisor)" % (dt * 1000))
        s.cid = None
        print("smoke test passed")
    finally:
        if s.cid:
            logs = subprocess.run(["docker", "logs", s.cid], capture_output=True, text=True)
            if logs.stdout or logs.stderr:
                print("--- container log ---\n%s%s---" % (logs.stdout, logs.stderr))
        s.close()
        left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=" + LABEL],
                              capture_output=True, text=True).stdout.split()
        print("containers left with label %s: %d" % (LABEL, len(left)))


if __name__ == "__main__":
    main()
