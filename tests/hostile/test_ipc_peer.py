"""Who may speak for a sandbox on its IPC socket (issue 9, finding 1).

The daemon signals "the kernel" at every deadline: SIGINT, then SIGKILL. It
used to learn the kernel's host pid from SO_PEERCRED at accept and open a pidfd
on that number only at hello, so code in a sandbox could connect from a
short-lived child, let it exit, keep the socket in a detached grandchild, and
say hello as the kernel once the number belonged to a host process. These
cases play that attack for real, with a host process of the test's own placed
on the freed pid, and check the two other doors: a connection that never says
hello, and a peer outside the container. Every process a case starts is
stopped by its pid; a stopped supervisor is always continued.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys

import pytest

from harness import wait_for
from hostile_lib import SMALL

HELLO_TIMEOUT_MS = 5000  # the daemon's default ipc-hello-timeout-ms


# ----------------------------------------------------------------- helpers

def full_container_id(daemon, sid):
    ids = daemon.containers("label=ci.session=%s" % sid)
    assert len(ids) == 1 and len(ids[0]) == 64, ids
    return ids[0]


def in_container(pid, cid):
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            return ("/docker/%s" % cid) in f.read()
    except OSError:
        return False


def host_pid(cid, ns_pid):
    """The host pid of the process that is ns_pid inside container cid."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/status" % name) as f:
                nspid = [line.split()[1:] for line in f if line.startswith("NSpid:")]
        except OSError:
            continue
        if nspid and len(nspid[0]) >= 2 and nspid[0][-1] == str(ns_pid) \
                and in_container(int(name), cid):
            return int(name)
    return None


def log_since(daemon, mark):
    return daemon.log_since(mark)


@contextlib.contextmanager
def stopped(pid, cid):
    """SIGSTOP a process of the container (the supervisor: no new kernel can
    start meanwhile), through a pidfd checked to be that container's; always
    continued."""
    fd = os.pidfd_open(pid)
    try:
        assert in_container(pid, cid), "pid %d is not in the container" % pid
        signal.pidfd_send_signal(fd, signal.SIGSTOP)
        try:
            yield
        finally:
            signal.pidfd_send_signal(fd, signal.SIGCONT)
    finally:
        os.close(fd)


def stop_process(p):
    if p is not None and p.poll() is None:
        p.kill()
        p.wait(10)


# A host process of the test's own: it records every catchable signal it gets
# (SIGKILL shows as its death).
VICTIM = r"""
import os, signal, sys
path = sys.argv[1]
def record(sig, frame):
    with open(path, 'a') as f:
        f.write('signal %d\n' % sig)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
          signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE, signal.SIGABRT):
    signal.signal(s, record)
with open(path, 'a') as f:
    f.write('ready %d\n' % os.getpid())
while True:
    signal.pause()
"""


def place_on_pid(target, argv, attempts=3000):
    """Start argv as host pid target (just freed): ns_last_pid = target - 1,
    then spawn, until the kernel hands out target or something else takes it."""
    for _ in range(attempts):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(target - 1))
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        if p.pid == target:
            return p
        p.kill()
        p.wait()
        if os.path.exists("/proc/%d" % target):
            raise AssertionError("pid %d was taken by another process first" % target)
    raise AssertionError("could not start a process on pid %d in %d tries" % (target, attempts))


# Exec 1 of the attack. P1 (a child of the kernel) connects to the daemon; its
# child G keeps the socket and detaches (a session of its own, so neither the
# supervisor's kill of the kernel's process group reaches it nor does it keep
# P1's pid number in use as a group or session id). P1 waits for `go`; G waits
# until the kernel is gone (EOF on a pipe only the kernel holds open, then
# the kernel a zombie: its supervisor is stopped meanwhile), then
# says hello as the kernel on P1's connection and notes what happened in
# /workspace/.ipc-attack.log.
ATTACK_SETUP = r"""
import json, os, socket, struct, time
IPC = os.environ['SANDBOX_IPC']
LOG = '/workspace/.ipc-attack.log'

def _note(msg):
    with open(LOG, 'a') as f:
        f.write(msg + '\n')

def _state(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return 'gone'

def _attacker(s, dead_r, kpid):
    _note('armed')
    os.read(dead_r, 1)
    # Its descriptors close before it is a zombie: wait for that, so the
    # daemon, too, can tell that the kernel has ended.
    while _state(kpid) not in ('Z', 'X', 'gone'):
        time.sleep(0.005)
    _note('kernel gone')
    h = json.dumps({'t': 'hello', 'role': 'kernel', 'version': 1, 'pid': os.getpid()}).encode()
    s.sendall(struct.pack('>II', len(h), 0) + h)
    _note('hello sent')
    s.settimeout(2)
    try:
        data = s.recv(65536)
    except socket.timeout:
        data = None
    if data == b'':
        _note('closed by the daemon')
        return
    # Trusted as the kernel: hold the role for a while, so that the daemon's
    # interrupt and kill go wherever it thinks the kernel is.
    _note('trusted as the kernel' + (' (got a frame)' if data else ''))
    end = time.monotonic() + 8
    s.settimeout(0.5)
    while time.monotonic() < end:
        try:
            if not s.recv(65536):
                break
        except socket.timeout:
            pass
    s.close()

ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
dead_r, dead_w = os.pipe()
kpid = os.getpid()
p1 = os.fork()
if p1 == 0:
    try:
        null = os.open('/dev/null', os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        for fd in range(3, 1024):
            if fd not in (ready_w, go_r, dead_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(IPC)
        g = os.fork()
        if g == 0:
            try:
                os.setsid()
                os.close(ready_w)
                os.close(go_r)
                _attacker(s, dead_r, kpid)
            finally:
                os._exit(0)
        os.close(dead_r)
        s.close()
        os.write(ready_w, json.dumps({'p1': os.getpid(), 'g': g}).encode())
        os.read(go_r, 1)
    finally:
        os._exit(0)
os.close(ready_w)
os.close(go_r)
os.close(dead_r)
info = json.loads(os.read(ready_r, 4096))
os.close(ready_r)
info.update(kernel=os.getpid(), supervisor=os.getppid())
print(json.dumps(info))
"""

# Sandbox code: ignores SIGINT, sleeping in a loop, until killed.
IGNORES_SIGINT = ("import signal, time\n"
                  "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                  "while True:\n"
                  "    time.sleep(0.05)\n")


@pytest.fixture
def attack_daemon(make_daemon):
    # A hello deadline longer than the case: this case is about who the
    # daemon trusts, not about the deadline (the next case covers that).
    return make_daemon("--ipc-hello-timeout-ms", "120000", "--kill-grace-ms", "1000",
                       "--pool-size", "0")


def test_pid_reuse_never_makes_the_daemon_signal_a_host_process(attack_daemon, tmp_path):
    d = attack_daemon
    api = d.api
    lim = dict(SMALL, exec_timeout_s=30)
    s = api.create(limits=lim)
    sid = s["id"]
    victim = None
    try:
        cid = full_container_id(d, sid)
        r = api.exec(sid, ATTACK_SETUP)
        assert r["status"] == "ok", r
        info = json.loads(r["stdout"])
        hp = host_pid(cid, info["p1"])
        sup_hp = host_pid(cid, info["supervisor"])
        assert hp and sup_hp, (info, hp, sup_hp)
        attack_log = "/proc/%d/root/workspace/.ipc-attack.log" % sup_hp

        def attack_notes():
            try:
                with open(attack_log) as f:
                    return f.read()
            except OSError:
                return ""

        wait_for(lambda: "armed" in attack_notes(), 10, what="the attacker to be armed")

        # P1 exits and is reaped: its host pid is free. A host process of ours
        # takes it.
        r = api.exec(sid, "os.write(go_w, b'x')\nos.waitpid(p1, 0)\nprint('reaped')")
        assert r["status"] == "ok" and r["stdout"] == "reaped\n", r
        wait_for(lambda: not os.path.exists("/proc/%d" % hp), 10, what="pid %d to be freed" % hp)
        record = str(tmp_path / "victim-signals")
        victim = place_on_pid(hp, [sys.executable, "-c", VICTIM, record])
        wait_for(lambda: os.path.exists(record) and "ready" in open(record).read(), 10,
                 what="the host process on pid %d to be ready" % hp)
        print("\n[pid reuse] connector pid %d in the sandbox was host pid %d; "
              "host process %d now holds it" % (info["p1"], hp, victim.pid))

        # The kernel ends while the supervisor is stopped: no new kernel can
        # connect first, so the attacker's hello comes when the daemon has no
        # kernel and would take one.
        mark = len(d.read_log())
        with stopped(sup_hp, cid):
            r_exit = api.exec(sid, "os._exit(0)")
            wait_for(lambda: "hello sent" in attack_notes(), 15,
                     what="the attacker's hello")
            wait_for(lambda: "closed by the daemon" in attack_notes() or
                     "trusted" in attack_notes(), 15, what="the daemon's answer to it")
        notes = attack_notes()
        hello_log = log_since(d, mark)
        print("[pid reuse] attacker: %s" % notes.strip().replace("\n", "; "))

        def assert_victim_untouched():
            got = open(record).read()
            assert victim.poll() is None, "the host process on pid %d died: %s" % (hp, got)
            assert "signal" not in got, "the host process on pid %d was signalled: %s" % (hp, got)

        assert_victim_untouched()
        assert r_exit["status"] == "killed", r_exit

        # A deadline the code ignores: SIGINT, then SIGKILL after the grace,
        # to whatever the daemon takes for the kernel.
        wait_for(lambda: "session %s: kernel connected" % sid in log_since(d, mark), 30,
                 what="a fresh kernel")
        mark = len(d.read_log())
        r = api.exec(sid, IGNORES_SIGINT, timeout_s=1)
        assert_victim_untouched()
        assert r["status"] == "timeout" and r["kernel"] == "restarted", r
        assert "execution ignored the interrupt; killing the kernel" in log_since(d, mark), \
            log_since(d, mark)[-4000:]

        # The attack really happened: the hello on the dead connector's
        # connection reached the daemon while it had no kernel, and was refused.
        refusal = [line for line in hello_log.splitlines()
                   if "refused a kernel hello from pid %d" % hp in line and sid in line]
        assert refusal, "the daemon did not refuse the attacker's hello:\n" + hello_log[-4000:]
        print("[pid reuse] daemon: %s" % refusal[0])
        assert "closed by the daemon" in notes, notes

        # The session still works: a fresh kernel took over.
        r = api.exec(sid, "print('after')")
        assert r["status"] == "ok" and r["stdout"] == "after\n", r
    finally:
        stop_process(victim)
        api.delete(sid)


NEVER_HELLO = r"""
import json, os, socket, struct, time
def wait_closed(s, limit):
    s.settimeout(limit)
    t0 = time.monotonic()
    try:
        data = s.recv(65536)
        what = 'closed' if not data else 'data'
    except socket.timeout:
        what = 'open'
    return {'what': what, 'after_s': round(time.monotonic() - t0, 2)}
silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
silent.connect(os.environ['SANDBOX_IPC'])
partial = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
partial.connect(os.environ['SANDBOX_IPC'])
h = json.dumps({'t': 'hello', 'role': 'kernel', 'version': 1, 'pid': 1}).encode()
partial.sendall(struct.pack('>II', len(h), 0) + h[:5])   # half a hello, then nothing
res = {'silent': wait_closed(silent, 40), 'partial': wait_closed(partial, 40)}
print(json.dumps(res))
"""


def test_a_connection_that_never_says_hello_is_closed(hostile):
    h = hostile
    with h.victim(limits={"exec_timeout_s": 60}) as s:
        sid = s["id"]
        mark = len(h.d.read_log())
        r = h.exec(sid, NEVER_HELLO, timeout_s=60)
        assert r["status"] == "ok", r
        res = json.loads(r["stdout"])
        print("\n[no hello] %s" % res)
        assert res["silent"]["what"] == "closed" and res["partial"]["what"] == "closed", res
        lines = [line for line in log_since(h.d, mark).splitlines()
                 if sid in line and "did not say hello within %d ms" % HELLO_TIMEOUT_MS in line]
        assert len(lines) == 2, log_since(h.d, mark)[-4000:]
        # The runner's own connections were left alone.
        r = h.exec(sid, "print(2)")
        assert r["status"] == "ok" and r["stdout"] == "2\n" and r["kernel"] == "preserved", r
    h.assert_daemon_fine()


# A host process running as the sandbox uid: connect, wait for the word,
# say hello as the kernel, report whether the daemon kept the connection.
HOST_PEER = r"""
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
print('connected', flush=True)
sys.stdin.readline()
h = json.dumps({'t': 'hello', 'role': 'kernel', 'version': 1, 'pid': 1}).encode()
s.sendall(struct.pack('>II', len(h), 0) + h)
s.settimeout(5)
try:
    print('closed' if not s.recv(65536) else 'data', flush=True)
except socket.timeout:
    print('open', flush=True)
"""


def test_a_peer_outside_the_container_is_refused(hostile):
    h = hostile
    with h.victim() as s:
        sid = s["id"]
        # The session's own sandbox uid (each session has one): the only uid
        # the daemon's accept check lets connect at all.
        uid = int(h.inspect(sid)["Config"]["User"].split(":")[0])
        cid = full_container_id(h.d, sid)
        r = h.exec(sid, "import os\nprint(os.getpid(), os.getppid())")
        k_ns, sup_ns = (int(x) for x in r["stdout"].split())
        k_hp, sup_hp = host_pid(cid, k_ns), host_pid(cid, sup_ns)
        assert k_hp and sup_hp, (k_hp, sup_hp)
        sock = os.path.join(h.d.state_dir, "s", sid, "ipc.sock")
        peer = None
        try:
            mark = len(h.d.read_log())
            with stopped(sup_hp, cid):
                peer = subprocess.Popen([sys.executable, "-c", HOST_PEER, sock], user=uid,
                                        group=uid, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
                assert peer.stdout.readline().strip() == "connected"
                # The kernel goes (the supervisor cannot start another while
                # stopped): the daemon would take a kernel now.
                kfd = os.pidfd_open(k_hp)
                try:
                    assert in_container(k_hp, cid)
                    signal.pidfd_send_signal(kfd, signal.SIGKILL)
                finally:
                    os.close(kfd)
                wait_for(lambda: "session %s: kernel connection lost" % sid
                         in log_since(h.d, mark), 15, what="the daemon to lose the kernel")
                peer.stdin.write("go\n")
                peer.stdin.flush()
                verdict = peer.stdout.readline().strip()
                peer.wait(15)
            log = log_since(h.d, mark)
            refusal = [line for line in log.splitlines()
                       if "refused a kernel hello from pid %d" % peer.pid in line and sid in line]
            print("\n[host peer] %s; daemon: %s" % (verdict, refusal))
            assert verdict == "closed", verdict
            assert refusal and "outside the session's container" in refusal[0], log[-4000:]
        finally:
            stop_process(peer)
        # The supervisor, continued, starts a fresh kernel.
        r = h.exec(sid, "print(3)")
        assert r["status"] == "ok" and r["stdout"] == "3\n", r
    h.assert_daemon_fine()
