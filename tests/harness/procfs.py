"""What /proc says about a process or a socket: the observable state tests
wait on instead of sleeping (is the kernel blocked in its sleep yet, has a
signal been taken, has the daemon closed the connections a client dropped).
Every function reads, but stop_process: it ends a process the test started,
by its pid."""
import os
import signal
import socket
import struct
import subprocess

# /proc/net/tcp states (include/net/tcp_states.h)
TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def stop_process(proc, sig=signal.SIGTERM, timeout=10):
    """Signal a subprocess.Popen of ours and wait for it; SIGKILL if it
    outlives the timeout. Returns its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def _status_field(pid, name, tid=None):
    path = "/proc/%d/status" % pid if tid is None else "/proc/%d/task/%d/status" % (pid, tid)
    with open(path) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(None, 1)[1].strip()
    raise AssertionError("no %s in %s" % (name, path))


def rss_kb(pid):
    """Resident set size of a process, in KiB."""
    return int(_status_field(pid, "VmRSS").split()[0])


def cpu_seconds(pid):
    """User + system CPU time a process has used."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fd_count(pid):
    """How many descriptors a process holds."""
    return len(os.listdir("/proc/%d/fd" % pid))


def state(pid, tid=None):
    """The one-letter state (R, S, D, T, Z, ...) of a process or one of its
    threads; 'gone' once it has been reaped."""
    path = "/proc/%d/stat" % pid if tid is None else "/proc/%d/task/%d/stat" % (pid, tid)
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def alive(pid):
    """True while the process exists and is not a zombie."""
    return state(pid) not in ("Z", "X", "gone")


def in_sleep_call(pid, tid=None):
    """True while the thread (the main one by default) is blocked in
    nanosleep/clock_nanosleep (time.sleep): where it waits, from wchan."""
    tid = pid if tid is None else tid
    try:
        with open("/proc/%d/task/%d/wchan" % (pid, tid)) as f:
            return "nanosleep" in f.read()
    except OSError:
        return False


def signal_pending(pid, signo):
    """True while signal signo is pending for the process (shared) or its
    main thread: sent but not yet taken."""
    bit = 1 << (signo - 1)
    try:
        return bool((int(_status_field(pid, "ShdPnd"), 16) |
                     int(_status_field(pid, "SigPnd"), 16)) & bit)
    except (OSError, AssertionError):
        return False


def _addr(hexaddr):
    ip, port = hexaddr.split(":")
    if len(ip) == 8:
        text = socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(ip, 16)))
    else:
        raw = bytes.fromhex(ip)
        text = socket.inet_ntop(socket.AF_INET6, b"".join(
            raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    return text, int(port, 16)


def tcp_sockets(local_port=None, remote_ip=None):
    """The host's TCP sockets (this network namespace) as dicts: local,
    remote ((ip, port)), state (a name of TCP_STATES), rx_queue (for a
    listener: connections waiting in its accept backlog)."""
    found = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, remote = _addr(f[1]), _addr(f[2])
            if local_port is not None and local[1] != local_port:
                continue
            if remote_ip is not None and remote[0] not in (remote_ip, "::ffff:" + remote_ip):
                continue
            tx, rx = f[4].split(":")
            found.append({"local": local, "remote": remote, "state": TCP_STATES.get(f[3], f[3]),
                          "tx_queue": int(tx, 16), "rx_queue": int(rx, 16)})
    return found


def open_connections(local_port, remote_ip=None):
    """Connections to local_port (optionally from remote_ip) that the local
    side has not closed yet: ESTABLISHED, or CLOSE_WAIT (the peer hung up,
    the server has not noticed)."""
    return [s for s in tcp_sockets(local_port, remote_ip)
            if s["state"] in ("ESTABLISHED", "CLOSE_WAIT", "SYN_RECV")]
