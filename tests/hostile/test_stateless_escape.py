"""Hostile code against the stateless tier (daemon/stateless.c): it runs on
the host, in bubblewrap, with no container around it, so each guard is
attacked here directly: the network, the read-only system, host secrets,
/proc, process and memory and disk exhaustion, the refused syscalls,
setuid binaries, escapes through /proc and symlinks, and signals to the
daemon. Driven through build/tools/stateless-run (the daemon's objects);
every run has host uids of its own (harness/stateless.py), so "nothing is
left" and "the host is fine" are read from /proc.

How each case was checked to fail without its guard: docs/security.md's
stateless section lists, per guard, the bwrap flag or rlimit removed and
the case that then failed."""
import json
import os
import socket
import threading

import pytest

from harness import wait_for
from harness.stateless import StatelessTool, host_uid_procs

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"),
                                reason="bubblewrap is not installed (deploy/setup.sh)")


@pytest.fixture
def tool():
    t = StatelessTool()
    yield t
    wait_for(lambda: not host_uid_procs(t.uids), 10, what="no process of the tier's uids left")


def value(tool, code, *args):
    """Run code whose last line is json.dumps(...) of a dict; that dict."""
    r = tool.run("import json, os\n" + code, *args)
    assert r["status"] == "ok", r
    return json.loads(eval(r["result"]))  # pylint: disable=eval-used  (a repr of a str)


class _TcpServer:
    """A TCP server of the test's own on 127.0.0.1 that records every
    connection it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                c, peer = self.sock.accept()
            except OSError:
                return
            self.accepted.append(peer)
            c.close()

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)


def test_no_network_our_own_server_is_unreachable(tool):
    srv = _TcpServer()
    try:
        # The check that the server answers at all, from the host.
        socket.create_connection(("127.0.0.1", srv.port), timeout=5).close()
        wait_for(lambda: len(srv.accepted) == 1, 5, what="the host's own connection")
        v = value(tool, (
            "import socket\n"
            "res = {}\n"
            "for fam, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n"
            "    try:\n"
            "        s = socket.socket(fam); s.settimeout(3); s.connect((host, %d)); res[host] = 'connected'\n"
            "    except OSError as e:\n"
            "        res[host] = e.__class__.__name__\n"
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "try:\n"
            "    u.sendto(b'x', ('127.0.0.1', %d)); res['udp'] = 'sent'\n"
            "except OSError as e:\n"
            "    res['udp'] = e.__class__.__name__\n"
            "res['ifaces'] = [n for i, n in socket.if_nameindex()]\n"
            "res['dev'] = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:])\n"
            "json.dumps(res)\n") % (srv.port, srv.port))
        assert v["127.0.0.1"] != "connected" and v["::1"] != "connected", v
        assert v["ifaces"] == ["lo"] and v["dev"] == ["lo"], v
        assert len(srv.accepted) == 1, srv.accepted   # nothing from the sandbox
    finally:
        srv.close()


def test_the_system_is_read_only(tool):
    v = value(tool, (
        "res = {}\n"
        "for p in ('/usr/bin/evil', '/usr/lib/evil', '/etc/passwd', '/evil', '/dev/evil', '/bin/evil', '/proc/evil'):\n"
        "    try:\n"
        "        open(p, 'w').write('x'); res[p] = 'written'\n"
        "    except OSError as e:\n"
        "        res[p] = e.errno\n"
        "try:\n"
        "    os.chmod('/usr/bin/python3', 0o777); res['chmod'] = 'done'\n"
        "except OSError as e:\n"
        "    res['chmod'] = e.errno\n"
        "json.dumps(res)\n"))
    assert "written" not in v.values() and v["chmod"] != "done", v
    assert not os.path.exists("/usr/bin/evil") and not os.path.exists("/evil")


def test_host_secrets_are_invisible(tool, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "secret").write_text("s3cret")
    paths = ["/etc/shadow", "/etc/passwd", "/root", "/var/run/docker.sock", "/run/docker.sock",
             "/var/lib/ci", "/var/lib/docker", "/run/redis", "/var/run/redis", "/home", "/var",
             "/sys", "/etc", str(state), str(state / "secret"), "/proc/1/root/etc/shadow"]
    v = value(tool, (
        "paths = %r\n"
        "res = {p: os.path.exists(p) for p in paths}\n"
        "res['/'] = sorted(os.listdir('/'))\n"
        "res['/proc/1/root'] = sorted(os.listdir('/proc/1/root'))\n"
        "res['environ'] = sorted(os.environ)\n"
        "json.dumps(res)\n") % paths)
    for p in paths:
        assert v[p] is False, (p, v)
    assert v["/"] == ["bin", "dev", "lib", "lib64", "proc", "tmp", "usr", "workspace"], v["/"]
    assert v["/proc/1/root"] == v["/"]
    assert set(v["environ"]) <= {"PATH", "HOME", "LANG", "TMPDIR", "PWD"}, v["environ"]


def test_proc_shows_only_the_sandbox(tool):
    v = value(tool, (
        "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "cmds = [open('/proc/%d/cmdline' % p, 'rb').read().split(b'\\0')[0].decode() for p in pids]\n"
        "json.dumps({'pids': pids, 'cmds': cmds, 'me': os.getpid(), 'uid': os.getuid()})\n"))
    assert v["pids"] == [1] and v["me"] == 1, v  # the code is the namespace's init
    assert v["cmds"][0] == "/usr/bin/python3"
    assert v["uid"] == 1000


def test_a_fork_bomb_is_contained_and_the_host_is_fine(tool):
    code = ("import os, time\n"
            "n = 0\n"
            "try:\n"
            "    while n < 100000:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(60)\n"
            "            os._exit(0)\n"
            "        n += 1\n"
            "except OSError as e:\n"
            "    err = e.errno\n"
            "json.dumps({'forked': n, 'errno': err})\n")
    v = value(tool, code)
    assert v["forked"] < 100, v                  # RLIMIT_NPROC on the run's own host uid
    assert v["errno"] == 11, v                   # EAGAIN
    # The host: its processes can still fork, and the next run works.
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert tool.run("1 + 1\n")["result"] == "2"


def test_a_memory_bomb_is_contained(tool):
    r = tool.run("x = bytearray(1 << 30)\n")
    assert r["status"] == "error" and r["error"]["ename"] == "MemoryError", r
    r = tool.run("chunks = []\nwhile True:\n    chunks.append(b'x' * (1 << 20))\n")
    assert r["status"] in ("error", "killed"), r
    if r["status"] == "error":
        assert r["error"]["ename"] == "MemoryError"
    assert tool.run("1 + 1\n")["result"] == "2"


def test_a_huge_file_is_stopped_by_the_size_caps(tool):
    r = tool.run("f = open('/workspace/big', 'wb')\nfor i in range(1024):\n    f.write(b'x' * (1 << 20))\n")
    assert r["status"] == "error" and r["error"]["evalue"].startswith("[Errno 27]"), r  # EFBIG
    r = tool.run("for i in range(64):\n    open('/workspace/f%d' % i, 'wb').write(b'x' * (16 << 20))\n")
    assert r["status"] == "error" and r["error"]["evalue"].startswith("[Errno 28]"), r  # ENOSPC
    r = tool.run("for i in range(64):\n    open('/dev/shm/f%d' % i, 'wb').write(b'x' * (16 << 20))\n")
    assert r["status"] == "error" and r["error"]["evalue"].startswith("[Errno 28]"), r


SYSCALLS = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def call(*args):
    ctypes.set_errno(0)
    rc = libc.syscall(*[ctypes.c_long(a) for a in args])
    return errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()) if rc == -1 else 'rc=%d' % rc
res = {
    'ptrace': call(101, 16, 1, 0, 0),            # PTRACE_ATTACH to the init
    'mount': call(165, 0, 0, 0, 0, 0),
    'umount2': call(166, 0, 0),
    'unshare_user': call(272, 0x10000000),
    'unshare_net': call(272, 0x40000000),
    'clone_newuser': call(56, 0x10000000 | 17, 0, 0, 0, 0),
    'setns': call(308, 0, 0),
    'keyctl': call(250, 0, 0, 0, 0),
    'add_key': call(248, 0, 0, 0, 0, 0),
    'bpf': call(321, 0, 0, 0),
    'perf_event_open': call(298, 0, 0, -1, -1, 0),
    'userfaultfd': call(323, 0),
    'io_uring_setup': call(425, 1, 0),
    'kexec_load': call(246, 0, 0, 0, 0),
    'init_module': call(175, 0, 0, 0),
    'open_by_handle_at': call(304, 0, 0, 0),
    'process_vm_readv': call(310, 1, 0, 0, 0, 0, 0),
    'chroot': call(161, 0),
    'pivot_root': call(155, 0, 0),
    'socket_packet': call(41, 17, 3, 0),
    'clone3': call(435, 0, 0),
    'shmget': call(29, 0, 1 << 28, 0o1000 | 0o600),   # IPC_PRIVATE, 256 MiB, IPC_CREAT
    'msgget': call(68, 0, 0o1000 | 0o600),
    'memfd_create': call(319, 0, 0),
}
res['nnp'] = open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0]
res['seccomp'] = open('/proc/self/status').read().split('Seccomp:')[1].split()[0]
res['capeff'] = open('/proc/self/status').read().split('CapEff:')[1].split()[0]
"""


def test_dangerous_syscalls_are_refused(tool):
    import platform
    if platform.machine() != "x86_64":
        pytest.skip("syscall numbers of x86-64")
    v = value(tool, SYSCALLS + "json.dumps(res)\n")
    for name in ("ptrace", "mount", "umount2", "unshare_user", "unshare_net", "clone_newuser",
                 "setns", "keyctl", "add_key", "bpf", "perf_event_open", "userfaultfd",
                 "io_uring_setup", "kexec_load", "init_module", "open_by_handle_at",
                 "process_vm_readv", "chroot", "pivot_root", "socket_packet",
                 # memory RLIMIT_AS would not see
                 "shmget", "msgget", "memfd_create"):
        assert v[name] == "EPERM", (name, v)
    assert v["clone3"] == "ENOSYS", v            # so libc falls back to clone (checked)
    assert v["nnp"] == "1" and v["seccomp"] == "2", v
    assert int(v["capeff"], 16) == 0, v


def test_threads_and_subprocesses_still_work(tool):
    # The clone rule refuses namespaces only: plain threads and fork/exec work.
    r = tool.run("import threading, subprocess\n"
                 "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
                 "subprocess.run(['/usr/bin/true'], check=True).returncode\n")
    assert r["status"] == "ok" and r["result"] == "0", r


def test_setuid_binaries_are_useless(tool):
    v = value(tool, (
        "import subprocess, stat\n"
        "res = {'suid_bit': bool(os.stat('/usr/bin/mount').st_mode & stat.S_ISUID)}\n"
        "mounts = [l.split() for l in open('/proc/self/mountinfo')]\n"
        "res['usr_opts'] = [m[5] for m in mounts if m[4] == '/usr'][0]\n"
        "p = subprocess.run(['/usr/bin/mount', '-t', 'tmpfs', 'none', '/workspace'], capture_output=True)\n"
        "res['mount_rc'] = p.returncode\n"
        "p = subprocess.run(['/usr/bin/newgrp', 'root'], capture_output=True, stdin=subprocess.DEVNULL)\n"
        "res['newgrp_rc'] = p.returncode\n"
        "res['nnp'] = open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0]\n"
        "res['ids'] = os.getresuid()\n"
        "json.dumps(res)\n"))
    assert v["suid_bit"] is True                # there to try, and:
    assert "nosuid" in v["usr_opts"].split(","), v
    assert v["nnp"] == "1" and v["mount_rc"] != 0 and v["newgrp_rc"] != 0, v
    assert v["ids"] == [1000, 1000, 1000], v


def test_escapes_through_proc_and_symlinks_fail(tool):
    v = value(tool, (
        "res = {}\n"
        "os.symlink('/etc/shadow', '/workspace/s1')\n"
        "os.symlink('../../../../../../root', '/workspace/s2')\n"
        "for p in ('/workspace/s1', '/workspace/s2', '/proc/self/root/etc/shadow', '/proc/1/root/root',\n"
        "          '/proc/1/cwd/../../etc/shadow', '/proc/self/cwd/../../../var/lib'):\n"
        "    try:\n"
        "        open(p).read(); res[p] = 'read'\n"
        "    except OSError as e:\n"
        "        res[p] = e.errno\n"
        "res['root'] = os.readlink('/proc/self/root')\n"
        "res['fds'] = []\n"
        "for f in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        res['fds'].append((int(f), os.readlink('/proc/self/fd/' + f)))\n"
        "    except OSError:\n"
        "        pass   # the listing's own descriptor, closed by now\n"
        "try:\n"
        "    res['exe1'] = os.readlink('/proc/1/exe')\n"
        "except OSError as e:\n"
        "    res['exe1'] = e.errno\n"
        "json.dumps(res)\n"))
    for k, got in v.items():
        assert got != "read", (k, v)
    assert v["root"] == "/"
    # Only what the runner was given: stdin, stdout, stderr, the result pipe
    # (the listing's own descriptor is gone by the readlink): no socket,
    # no host file, not the code's memfd (closed once read).
    kinds = {fd: target.split(":")[0] for fd, target in v["fds"]}
    assert set(kinds) <= {0, 1, 2, 4}, v["fds"]
    for fd, target in v["fds"]:
        assert target == "/dev/null" or target.startswith("pipe:") or \
            target.startswith("/proc/"), (fd, target)


def test_the_daemon_cannot_be_signalled(tool):
    p = tool.popen_with_pid(lambda pid: (
        "import os, signal\n"
        "res = {}\n"
        "for target in (%d, %d, 1):\n"
        "    try:\n"
        "        os.kill(target, signal.SIGKILL if target != 1 else signal.SIGTERM); res[target] = 'sent'\n"
        "    except OSError as e:\n"
        "        res[target] = e.errno\n"
        "import json\n"
        "json.dumps(res)\n") % (pid, os.getpid()))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err                # the tool (the daemon's objects) is alive
    r = json.loads(out.decode().splitlines()[0])
    assert r["status"] == "ok", r
    v = json.loads(eval(r["result"]))  # pylint: disable=eval-used
    # The host pids do not exist in the sandbox's pid namespace.
    assert v[str(p.pid)] == 3 and v[str(os.getpid())] == 3, v  # ESRCH


def test_kill_everything_inside_ends_only_the_run(tool):
    r = tool.run("import os, signal\nos.kill(-1, signal.SIGKILL)\nimport time\ntime.sleep(5)\n")
    assert r["status"] in ("killed", "ok", "error"), r
    assert tool.run("1 + 1\n")["result"] == "2"


def test_the_tier_uids_are_unprivileged_on_the_host(tool):
    p = tool.popen("import time\ntime.sleep(30)\n", "--stateless-timeout-s", "3")
    try:
        # bwrap and python of the run, once python runs (during bwrap's
        # set-up its child holds the new user namespace's capabilities, as
        # it must to build the sandbox, and drops them before the exec; the
        # start check, under a uid of its own, comes and goes meanwhile).
        def cmdline(pid):
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return f.read().split(b"\0")[0]

        def settled():
            ps = [x for x in host_uid_procs(tool.slot_uids) if x[2][0] != "Z"]
            names = sorted(cmdline(x[0]) for x in ps)
            return ps if names == [b"/usr/bin/bwrap", b"/usr/bin/python3"] else None
        procs = wait_for(settled, 20, what="the run's bwrap and python", ignore=(OSError,))
        for pid, uid, _ in procs:
            assert uid != 0 and uid in tool.slot_uids
            with open("/proc/%d/status" % pid) as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
            # No capability (CapEff is of the process's own user namespace:
            # bwrap in the host's, python in the sandbox's) and no way to
            # gain one.
            assert int(st["CapEff"].strip(), 16) == 0, (pid, st["CapEff"])
            assert st["NoNewPrivs"].strip() == "1"
    finally:
        p.communicate(timeout=60)
    assert p.returncode == 0


def test_memory_outside_the_address_space_limit_is_refused(tool):
    # SysV segments outlive their mapping and memfds are written without
    # one: either would hold memory that RLIMIT_AS never counts.
    v = value(tool, (
        "res = {}\n"
        "try:\n"
        "    os.memfd_create('x'); res['memfd'] = 'made'\n"
        "except OSError as e:\n"
        "    res['memfd'] = e.errno\n"
        "import multiprocessing.shared_memory as sm\n"
        "try:\n"
        "    m = sm.SharedMemory(create=True, size=64 << 20)\n"
        "    m.buf[-1] = 1\n"
        "    res['posix_shm'] = 'made'\n"
        "except OSError as e:\n"
        "    res['posix_shm'] = e.errno\n"
        "json.dumps(res)\n"))
    assert v["memfd"] == 1, v                     # EPERM
    # POSIX shared memory lives on /dev/shm, a tmpfs of 16 MiB, and a
    # segment is a file there, so RLIMIT_FSIZE (32 MiB) refuses a 64 MiB one.
    assert v["posix_shm"] == 27, v                # EFBIG


def test_a_forged_result_header_claims_no_files(tool):
    forged = json.dumps({"t": "done", "status": "ok", "result": "'forged'", "error": None,
                         "files": [{"path": "../../etc/shadow", "size": 1, "change": "created"}],
                         "files_truncated": True})
    r = tool.run("import os\nos.write(4, %r)\nos._exit(0)\n" % forged.encode())
    assert r["status"] == "ok" and r["result"] == "'forged'"   # its own result, as it says
    assert r["files"] == [] and r["files_truncated"] is False, r


def test_garbage_on_the_result_pipe_is_a_clear_error(tool):
    r = tool.run("import os\nos.write(4, b'{not json' * 1000)\nos._exit(0)\n")
    assert r["status"] == "killed" and "bad result" in r["reason"], r
    r = tool.run("import os\nfor i in range(300):\n    os.write(4, b'x' * 10000)\nos._exit(0)\n")
    assert r["status"] == "killed" and "without a result" in r["reason"], r


def test_host_wide_proc_entries_are_masked(tool):
    # What Docker's MaskedPaths hide, where this kernel has them: kernel
    # timers of every process on the host (with their pids and functions),
    # the key list.
    present = [p for p in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/timer_stats",
                           "/proc/sched_debug", "/proc/latency_stats") if os.path.exists(p)]
    if not present:
        pytest.skip("none of the masked entries exists on this kernel")
    v = value(tool, (
        "res = {}\n"
        "for p in %r:\n"
        "    try:\n"
        "        with open(p, 'rb') as f:\n"
        "            res[p] = len(f.read(4096))\n"
        "    except OSError as e:\n"
        "        res[p] = 'refused'\n"
        "json.dumps(res)\n") % present)
    for p in present:
        assert v[p] in ("refused", 0), (p, v)
