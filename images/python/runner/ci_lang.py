"""Languages other than Python: the kernel bridges them to children it keeps.

An exec frame with "language": "bash" or "javascript" is run here instead of
in the Python namespace (kernel.py's _exec calls run()). Each language has one
persistent child, started on first use and again after it exits:

- bash: `bash --norc --noprofile ci_bash.sh IN OUT CELL`; the working
  directory, variables and functions persist; the result is the exit status
  (a non-zero one is status "error", ename "ExitStatus").
- javascript: `node ci_node_repl.js IN OUT`; one vm context persists; the
  result is the last expression's value as util.inspect shows it; errors carry
  their stack, naming the cell as <cell-K> with its line numbers.

The children write to the kernel's fds 1 and 2, so their output goes through
the same capped streams as Python's. They stay in the kernel's process group
(the supervisor kills that group when the kernel dies) and also have
PR_SET_PDEATHSIG. An interrupt (SIGINT to the kernel) is forwarded as SIGINT
to the child and all its descendants; code that ignores it is ended by the
daemon's kill of the kernel (hard timeout). Stdlib only.
"""

import ctypes
import json
import os
import select
import signal
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
LANGUAGES = ("python", "javascript", "bash")
REPLY_MAX = 8 << 20            # bytes of one answer line from a child
READ_CHUNK = 65536
REINTERRUPT_S = 0.1            # after an interrupt: see _Child.interrupt

try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None
_PR_SET_PDEATHSIG = 1


def _child_setup():
    # In the forked child, before exec: die with the kernel. Only a call
    # resolved in the parent runs here.
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _error(ename, evalue, lines=None):
    return {"ename": ename, "evalue": evalue,
            "traceback": lines if lines is not None else ["%s: %s" % (ename, evalue)]}


def _descendants(root):
    """root and every process below it (from /proc; small in a sandbox)."""
    parent = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [root]
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % n, "rb") as f:
                st = f.read()
        except OSError:
            continue
        try:
            ppid = int(st[st.rindex(b")") + 2:].split()[1])
        except (ValueError, IndexError):
            continue
        parent[int(n)] = ppid
    out = [root]
    seen = {root}
    grew = True
    while grew:
        grew = False
        for pid, pp in parent.items():
            if pp in seen and pid not in seen:
                seen.add(pid)
                out.append(pid)
                grew = True
    return out


def _handles_sigint(pid):
    """Whether pid catches or ignores SIGINT (or is gone)."""
    bit = 1 << (signal.SIGINT - 1)
    try:
        with open("/proc/%d/status" % pid, "rb") as f:
            for line in f:
                if line.startswith((b"SigCgt:", b"SigIgn:")) and int(line.split()[1], 16) & bit:
                    return True
    except (OSError, ValueError, IndexError):
        return True
    return False


class _Child:
    name = None
    reinterrupt_s = REINTERRUPT_S  # no answer this long after SIGINT: another

    def __init__(self):
        self.proc = None
        self.to_fd = -1                # the kernel writes requests here
        self.from_fd = -1              # ... and reads answers here
        self.buf = bytearray()

    def argv(self, in_fd, out_fd):
        raise NotImplementedError

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                self.argv(req_r, ans_w), stdin=subprocess.DEVNULL, stdout=None, stderr=None,
                pass_fds=(req_r, ans_w), close_fds=True, preexec_fn=_child_setup,
                cwd=None)
        finally:
            os.close(req_r)
            os.close(ans_w)
        self.to_fd, self.from_fd = req_w, ans_r
        self.buf = bytearray()

    def close(self):
        for fd in (self.to_fd, self.from_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.to_fd = self.from_fd = -1
        p, self.proc = self.proc, None
        if p is not None:
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass
            try:
                p.wait()
            except Exception:
                pass
        return p

    def interrupt(self, signalled):
        """SIGINT to the child and its descendants. Again (on the kernel's
        next tick) to the child itself, which takes any number of them, and
        to a process that neither catches nor ignores SIGINT and is still
        there: it was forked as the signal went out and lost it before its
        exec. A process that catches SIGINT gets only one (signalled: the
        pids already sent one, updated)."""
        if self.proc is None:
            return
        for pid in _descendants(self.proc.pid):
            if pid in signalled and pid != self.proc.pid and _handles_sigint(pid):
                continue
            signalled.add(pid)
            try:
                os.kill(pid, signal.SIGINT)
            except OSError:
                pass

    def send(self, data):
        view = memoryview(data)
        while view:
            n = os.write(self.to_fd, view)
            view = view[n:]

    def line(self):
        """A complete answer line from the buffer, else None."""
        i = self.buf.find(b"\n")
        if i < 0:
            if len(self.buf) > REPLY_MAX:
                raise ValueError("answer line over %d bytes" % REPLY_MAX)
            return None
        line = bytes(self.buf[:i])
        del self.buf[:i + 1]
        return line

    def wait(self, timeout):
        """Whether the answer pipe is readable within timeout (None: no
        bound). The only place an interrupt (KeyboardInterrupt) is taken."""
        r, _, _ = select.select([self.from_fd], [], [], timeout)
        return bool(r)

    def fill(self):
        """Read what the pipe has; False at its end (the child is gone)."""
        data = os.read(self.from_fd, READ_CHUNK)
        self.buf += data
        return bool(data)


class _Bash(_Child):
    name = "bash"

    def argv(self, in_fd, out_fd):
        return ["bash", "--norc", "--noprofile", os.path.join(HERE, "ci_bash.sh"),
                str(in_fd), str(out_fd), os.path.join(HERE, "ci_bash_cell.sh")]

    def request(self, code, cell):
        return code.replace("\0", "").encode("utf-8", "surrogateescape") + b"\0"

    def answer(self, line):
        try:
            st, intr = (int(x) for x in line.split())
        except ValueError:
            return "error", None, _error("ProtocolError", "bad answer from bash")
        if intr:
            return "error", str(st), _error("KeyboardInterrupt", "interrupted (SIGINT)",
                                            ["KeyboardInterrupt: the execution was interrupted"])
        if st == 0:
            return "ok", "0", None
        return "error", str(st), _error("ExitStatus", "exit status %d" % st)


class _Node(_Child):
    name = "node"
    # A second SIGINT while node ends a breakOnSigint run can leave a post on
    # its SIGINT watchdog's semaphore (node_watchdog.cc: the helper thread
    # takes one post, sees it is stopping, and exits; the other stays), and
    # the next cell's watchdog then wakes at once: that cell, which nobody
    # interrupted, ends with KeyboardInterrupt. Seen 1 in 20 under load with
    # the 0.1 s resend. Node takes its first SIGINT reliably now (FdSink), so
    # the resend to it waits a second: only a signal that was really lost.
    reinterrupt_s = 1.0

    def argv(self, in_fd, out_fd):
        return ["node", os.path.join(HERE, "ci_node_repl.js"), str(in_fd), str(out_fd)]

    def request(self, code, cell):
        return json.dumps({"cell": cell, "code": code}).encode() + b"\n"

    def answer(self, line):
        try:
            a = json.loads(line)
            status = a["status"]
            result = a.get("result")
            err = a.get("error")
            if status not in ("ok", "error") or not (result is None or isinstance(result, str)):
                raise ValueError(status)
            if err is not None:
                err = {"ename": str(err.get("ename", "Error")),
                       "evalue": str(err.get("evalue", "")),
                       "traceback": [str(s) for s in err.get("traceback", [])]}
        except (ValueError, KeyError, TypeError, AttributeError):
            return "error", None, _error("ProtocolError", "bad answer from node")
        if status == "error" and err is None:
            err = _error("Error", "")
        return status, result, err


_CLASSES = {"bash": _Bash, "javascript": _Node}
_children = {}


def _exit_error(lang, p):
    code = p.returncode if p is not None else None
    if code is not None and code < 0:
        how = "was killed by signal %d (%s)" % (-code, signal.Signals(-code).name
                                                 if -code in signal.valid_signals() else "?")
    else:
        how = "exited with status %s" % code
    return _error("ChildExited",
                  "the %s process %s; a new one starts with the next execution "
                  "(its variables are lost)" % (_CLASSES[lang].name, how))


def run(kernel, lang, src, cell):
    """Run src in language lang's child. Returns (status, result, error)."""
    cls = _CLASSES.get(lang)
    if cls is None:
        return "error", None, _error(
            "ValueError", "unknown language %r (one of: %s)" % (lang, ", ".join(LANGUAGES)))
    if kernel.pending_int:             # interrupted before it could start
        kernel.pending_int = False
        return "error", None, _error("KeyboardInterrupt", "interrupted (SIGINT)",
                                     ["KeyboardInterrupt: the execution was interrupted"])
    child = _children.get(lang)
    if child is None or not child.alive():
        if child is not None:
            child.close()
        child = cls()
        try:
            child.start()
        except OSError as e:
            return "error", None, _error(
                "LanguageUnavailable", "cannot start %s: %s" % (cls.name, e.strerror or e))
        _children[lang] = child
    line = None
    try:
        try:
            child.send(child.request(src, cell))
        except OSError:
            pass                       # it died: fill() sees the end
        signalled = None               # pids sent SIGINT, once interrupted
        while True:
            # in_user only in wait(): an interrupt never cuts a read short.
            # One that came outside it (kernel.pending_int) counts the same.
            ready = False
            if not kernel.pending_int:
                kernel.in_user = True
                try:
                    ready = child.wait(None if signalled is None else child.reinterrupt_s)
                    kernel.in_user = False
                except KeyboardInterrupt:
                    kernel.in_user = False
                    kernel.pending_int = True
            if kernel.pending_int or (signalled is not None and not ready):
                kernel.pending_int = False
                signalled = signalled if signalled is not None else set()
                child.interrupt(signalled)
            if ready:
                if not child.fill():
                    line = None
                    break
                line = child.line()
                if line is not None:
                    break
    except (OSError, ValueError) as e:
        kernel.in_user = False
        child.close()
        _children.pop(lang, None)
        return "error", None, _error("ProtocolError", "%s: %s" % (cls.name, e))
    finally:
        kernel.in_user = False
    if line is None:
        p = child.close()
        _children.pop(lang, None)
        return "error", None, _exit_error(lang, p)
    return child.answer(line)


def stop_all():
    for child in list(_children.values()):
        child.close()
    _children.clear()
