"""The kernel: holds the session's global namespace and runs submitted code.

Forked by the supervisor (see docs/protocol.md).  It connects to $SANDBOX_IPC,
says hello as role "kernel", then answers every `exec` frame with `stream`,
`display` and a final `done` frame.  Stdlib only at start; matplotlib is
used only when the user's code imports it, and two files of IPython (its
pretty printer, its input transformer: ci_format.py, ci_magics.py) only when
a value is not a builtin scalar or a line starts with `!` or `%`.

Threads: the main thread runs the protocol and the user's code; one reader
thread, started once, forwards what is written to fds 1 and 2 (pipes).  Every
frame is sent under one lock, so frames never interleave; at the end of an
execution the main thread drains the pipes itself under that lock before it
sends `done`, so no output is lost or reordered after `done`.
"""

import ast
import base64
import builtins
import ctypes
import io
import linecache
import os
import re
import select
import signal
import sys
import threading
import time
import traceback
import types

import ci_frame

# ci_format (display) and ci_magics (magics, shell escapes) are imported on
# first use: plain code and simple values never load them.
ci_format = ci_magics = None

current = None                 # the running Kernel; ci_display looks it up

RESULT_CAP = 100_000           # characters of the last expression's text/plain
DISPLAY_MAX = 40               # display frames per execution (the daemon keeps 40)
DISPLAY_BYTES_MAX = 20 << 20   # their data per execution (the daemon's bound too)
WALK_MAX = 10_000              # entries visited by the /workspace walk
DEFAULT_STREAM_CAP = 1 << 20   # when the exec header carries no cap
DEFAULT_FILES_CAP = 1000
HALF_MAX = ci_frame.MAX_BODY   # a head or tail never exceeds one frame body
READ_CHUNK = 65536
# a traceback keeps its first and last lines, a marker between: the daemon's
# cap (EXEC_MAX_TRACEBACK, daemon/exec_result.h) is these plus one
TRACEBACK_HEAD = 100
TRACEBACK_TAIL = 99
DRAIN_LIMIT = 2 << 20          # bytes read per pipe by the final drain

_THIS_FILE = (lambda: 0).__code__.co_filename
_RUNNER_DIR = os.path.dirname(_THIS_FILE)
_RUNNER_FILES = frozenset(os.path.join(_RUNNER_DIR, n)
                          for n in ("kernel.py", "ci_display.py", "supervisor.py", "ci_frame.py",
                                    "ci_format.py", "ci_magics.py", "ci_lang.py", "ci_pip.py"))
try:
    _c_fflush = ctypes.CDLL(None).fflush      # C stdio buffers (printf in extensions)
    _c_fflush.argtypes = (ctypes.c_void_p,)
except (OSError, AttributeError):
    _c_fflush = None
_pack = ci_frame.pack
_BINARY_MIMES = frozenset(("image/png", "image/jpeg", "application/pdf"))
# Exactly these types: repr() is IPython's text/plain, and nothing else applies.
_SIMPLE = frozenset((int, float, str, bool, bytes, complex, type(None)))
# a line starting with ! or %, or `names = !cmd` / `names = %magic`: only then
# does a cell go through IPython's input transformer
_ESCAPE = re.compile(r"^[ \t]*(?:[!%]|[\w., \t\[\]()*]+=[ \t]*[!%])", re.M)


def _fmt():
    global ci_format
    if ci_format is None:
        import ci_format as m
        ci_format = m
    return ci_format


def _magics():
    global ci_magics
    if ci_magics is None:
        import ci_magics as m
        ci_magics = m
    return ci_magics


def _get_ipython():
    """get_ipython(), a builtin as in IPython: the kernel's small shell."""
    return _magics().get_ipython()



def _raise_oom_score():
    """Make this kernel the memory cgroup's first OOM victim, whatever its
    RSS: memory held outside any process's RSS (socket buffers, pipe pages:
    kernel memory charged to the cgroup) must cost the kernel, not the
    supervisor, whose RSS may be the larger (issue 28, item 10).

    The supervisor is not dumpable (supervisor.py, _not_dumpable) and the
    kernel inherits that, which makes /proc/self/* root's: the write below
    failed with EACCES and the kernel kept oom_score_adj 0. So the kernel is
    dumpable only for the write, before any code of the session runs, and
    not dumpable again after it (ptrace is denied by seccomp anyway)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
    except (OSError, ImportError):
        libc = None
    PR_SET_DUMPABLE = 4
    if libc is not None:
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    finally:
        if libc is not None:
            libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)

class _Stream:
    __slots__ = ("name", "head_left", "tail", "tail_cap", "dropped", "spilled")

    def __init__(self, name):
        self.name = name
        self.tail = bytearray()
        self.reset(DEFAULT_STREAM_CAP)

    def reset(self, cap):
        self.head_left = min(cap // 2, HALF_MAX)
        self.tail_cap = min(cap - cap // 2, HALF_MAX)
        del self.tail[:]
        self.dropped = 0
        self.spilled = False


def _cap(value, default):
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default


def _env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


class _OrderedText(io.TextIOWrapper):
    """sys.stdout or sys.stderr. The two are separate pipes, read by one
    thread: bytes written to one just before bytes to the other could reach
    the daemon after them. So when the code switches streams, what the
    previous stream holds is flushed and forwarded first; the daemon's
    "output" list is then in the order written (for this process's writes;
    a child's own writes to both pipes are ordered as they are read)."""

    def write(self, s):
        k = current
        if k is not None and k.last_stream != self.index:
            k.switch_stream(self.index)
        return super().write(s)


def _text_stream(fd):
    raw = io.FileIO(fd, "w", closefd=False)
    t = _OrderedText(io.BufferedWriter(raw, 8192), encoding="utf-8",
                     errors="backslashreplace", line_buffering=True)
    t.index = fd - 1                   # 0: stdout, 1: stderr
    return t


def _one_line_each(items, head=TRACEBACK_HEAD, tail=TRACEBACK_TAIL):
    """A traceback as one line per item (an item of TracebackException.format()
    may hold a frame and its source line), its middle cut to a marker when it
    is longer than head + tail: a deep recursion stays small."""
    lines = []
    for item in items:
        if item.endswith("\n"):
            item = item[:-1]
        lines.extend(item.split("\n"))
    if len(lines) > head + tail:
        cut = len(lines) - head - tail
        lines = lines[:head] + ["[... %d traceback lines omitted ...]" % cut] + lines[-tail:]
    return lines


class _IPythonDisplayHook:
    """IPython.display.display() prints its arguments when no IPython shell
    runs; once the user's code imports it, this hook points it (and
    publish_display_data, clear_output) at the kernel before IPython.display
    re-exports the names."""

    NAME = "IPython.core.display_functions"

    def __init__(self, kern):
        self.kern = kern

    def find_spec(self, name, path=None, target=None):
        if name != self.NAME:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, kern = spec.loader, self.kern

        class Loader:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                module.display = kern.display
                module.publish_display_data = (
                    lambda data, metadata=None, source=None, **kw: kern.display_raw(data))
                module.clear_output = lambda wait=False: None
                module.update_display = lambda obj, **kw: kern.display(obj)

        spec.loader = Loader()
        return spec


class Kernel:
    def __init__(self, ipc, root):
        self.ipc = ipc
        self.root = root
        self.watch = None              # ci_watch.Watch of root, once started
        self.watch_off = None          # why there is none: the fallback's name
        self.mark_fallback = None
        self.sock = None
        self.broken = False
        self.dec = ci_frame.Decoder()
        self.lock = threading.Lock()
        self.cur_id = None             # id of the running exec, else None
        self.in_user = False           # SIGINT raises KeyboardInterrupt only then
        self.pending_int = False
        self.idle_int = False          # a SIGINT came while no execution ran
        self.early_frames = []         # frames decoded while looking for an interrupt
        self.count = 0
        self.streams = (_Stream("stdout"), _Stream("stderr"))
        self.displays = 0              # display frames sent in this execution
        self.display_bytes = 0         # and their data
        self.groups = 0                # bundles sent in this execution
        self.display_full = False
        self.displayed = {}            # id(fig) -> fig shown during this exec
        self.capturing = None          # %%capture: displays go into this list
        self.main_ident = threading.get_ident()
        self.log_fd = 2
        self.connected_once = False
        self.last_connect = 0.0
        self.last_stream = 0           # the stream written last (_OrderedText)

    # ----------------------------------------------------------------- setup

    def _log(self, msg):
        try:
            os.write(self.log_fd, ("ci-kernel[%d]: %s\n" % (os.getpid(), msg)).encode())
        except OSError:
            pass

    def _setup(self):
        global current
        current = self
        sys.modules.setdefault("kernel", sys.modules[__name__])   # for ci_display
        self.pid = os.getpid()
        try:
            os.setpgid(0, 0)           # the supervisor kills the group on exit
        except OSError:
            pass
        _raise_oom_score()
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, self._on_sigint)

        self.log_fd = os.dup(2)        # diagnostics keep going to the container log
        fd = os.open(os.devnull, os.O_RDONLY)
        if fd != 0:
            os.dup2(fd, 0)
            os.close(fd)
        rfds, wfds, inos = [], [], []
        for target in (1, 2):
            # default 64 KiB pipes: every sandbox runs as uid 1000, and the
            # kernel limits pipe buffers per user (fs.pipe-user-pages-soft)
            r, w = os.pipe()
            os.set_blocking(r, False)
            os.dup2(w, target)         # inheritable: child processes write here
            rfds.append(r)
            wfds.append(w)             # spare write end: no HUP, restores fd 1/2
            inos.append(os.fstat(w).st_ino)
        self.rfds, self.wfds, self.pipe_inos = tuple(rfds), tuple(wfds), tuple(inos)
        self.out = _text_stream(1)
        self.err = _text_stream(2)
        sys.stdout = sys.__stdout__ = self.out
        sys.stderr = sys.__stderr__ = self.err

        try:
            os.chdir(self.root)
        except OSError as e:
            self._log("cannot chdir to %s: %s" % (self.root, e))
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.insert(0, here)
        self._start_watch()            # index the tree now, not at the first exec
        at = sys.path.index(here) + 1
        # Packages installed by POST /v1/sessions/{id}/packages (pip
        # --target) live under the workspace, so a snapshot carries them
        # and a restored session imports them without reinstalling.
        site = os.path.join(self.root, ".ci", "site")
        extra = ([self.root, site]
                 + os.environ.get("PYTHONPATH", "").split(os.pathsep))
        for p in extra:                # -I ignores PYTHONPATH; honour it here
            if p and p not in sys.path:
                sys.path.insert(at, p)
                at += 1
        sys.argv = [""]

        main = types.ModuleType("__main__")
        main.__builtins__ = builtins
        sys.modules["__main__"] = main
        self.ns = main.__dict__
        builtins.display = self.display
        builtins.get_ipython = _get_ipython
        sys.meta_path.insert(0, _IPythonDisplayHook(self))
        os.register_at_fork(after_in_child=self._after_fork_child)

    def _after_fork_child(self):
        # os.fork() in user code: the child must never talk to the daemon.
        self.lock = threading.Lock()
        s, self.sock = self.sock, None
        self.broken = True
        if s is not None:              # close only this process's copy
            try:
                os.close(s.detach())
            except OSError:
                pass
        self.cur_id = None

    def _forked_exit(self, status, error):
        # The user's code called os.fork() and the child ran off the end of
        # the cell: it must not go on as a second kernel.
        if error is not None:
            try:
                sys.stderr.write("\n".join(error["traceback"]) + "\n")
            except Exception:
                pass
        self._flush_std()
        os._exit(0 if status == "ok" else 1)

    def _on_sigint(self, signum, frame):
        if self.in_user:
            raise KeyboardInterrupt
        if self.cur_id is not None:
            self.pending_int = True
        else:
            # Between executions: a late one (for an execution already
            # done), or an early one (for an execution whose frame is on
            # its way in). The daemon sends an interrupt frame naming the
            # execution before the signal; _exec decides with it.
            self.idle_int = True

    def _interrupt_frame_for(self, eid):
        """Whether an interrupt frame for eid is here (decoded or waiting
        on the socket). While an execution runs, interrupt frames are the
        only ones the daemon sends the kernel; all are taken."""
        s = self.sock
        found = False
        if s is not None:
            try:
                s.setblocking(False)
                while True:
                    data = s.recv(262144)
                    if not data:
                        break
                    self.dec.feed(data)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                pass
            finally:
                try:
                    s.setblocking(True)
                except OSError:
                    pass
        kept = []
        while True:
            try:
                f = self.dec.next()
            except ci_frame.ProtocolError:
                break
            if f is None:
                break
            h, body = f
            if h.get("t") == "interrupt":
                found = found or h.get("id") == eid
            else:
                kept.append(f)
        self.early_frames.extend(kept)
        return found

    # ------------------------------------------------------------ connection

    def _connect(self):
        # However the last connection ended (refused at hello, closed by the
        # daemon), never try again sooner than RETRY_S: a daemon that keeps
        # refusing must not be met with a reconnection storm.
        wait = self.last_connect + ci_frame.RETRY_S - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self.last_connect = time.monotonic()
        s = ci_frame.connect_forever(self.ipc)
        try:
            s.sendall(ci_frame.hello("kernel", os.getpid()))
        except OSError:
            s.close()
            time.sleep(ci_frame.RETRY_S)
            return
        with self.lock:
            self.sock = s
            self.broken = False
        self.dec = ci_frame.Decoder()
        if self.connected_once:
            self._log("reconnected")
        self.connected_once = True

    def _disconnect(self):
        with self.lock:
            s, self.sock = self.sock, None
            self.broken = False
        self.early_frames = []
        if s is not None:
            try:
                s.close()
            except OSError:
                pass

    def _send(self, data):
        """Send one frame; the caller holds self.lock."""
        s = self.sock
        if s is None or self.broken:
            return
        try:
            s.sendall(data)
        except OSError:
            self.broken = True
            try:
                s.shutdown(2)          # wakes the main thread's recv
            except OSError:
                pass

    def _recv(self):
        if self.early_frames:
            return self.early_frames.pop(0)
        dec = self.dec
        while True:
            f = dec.next()
            if f is not None:
                return f
            data = self.sock.recv(262144)
            if not data:
                raise EOFError
            dec.feed(data)

    # ---------------------------------------------------------------- output

    def _reader(self):
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM,
                                                      signal.SIGCHLD})
        except (OSError, ValueError):
            pass
        p = select.poll()
        for fd in self.rfds:
            p.register(fd, select.POLLIN)
        r0 = self.rfds[0]
        while True:
            events = p.poll()
            with self.lock:
                for fd, _ in events:
                    self._drain(0 if fd == r0 else 1, DRAIN_LIMIT // 2)

    def _drain(self, i, limit):
        """Read pipe i (non-blocking) and forward; the caller holds self.lock."""
        fd = self.rfds[i]
        n = 0
        while n < limit:
            try:
                data = os.read(fd, READ_CHUNK)
            except OSError:            # EAGAIN: empty
                return
            if not data:
                return
            n += len(data)
            if self.cur_id is not None:
                self._output(self.streams[i], data)

    def _output(self, st, data):
        if st.head_left:
            if len(data) <= st.head_left:
                st.head_left -= len(data)
                self._send(_pack({"t": "stream", "id": self.cur_id, "name": st.name}, data))
                return
            n = st.head_left
            k = n                      # cut on a UTF-8 character boundary
            while k > 0 and k > n - 3 and (data[k] & 0xC0) == 0x80:
                k -= 1
            if (data[k] & 0xC0) == 0x80:
                k = n
            if k:
                self._send(_pack({"t": "stream", "id": self.cur_id, "name": st.name},
                                 data[:k]))
            st.head_left = 0
            data = data[k:]
        st.spilled = True
        t = st.tail
        if len(data) >= st.tail_cap:
            st.dropped += len(t) + len(data) - st.tail_cap
            t[:] = data[len(data) - st.tail_cap:]
        else:
            t += data
            over = len(t) - st.tail_cap
            if over > 0:
                del t[:over]
                st.dropped += over

    def switch_stream(self, index):
        """The code writes to stream index after the other one: the other's
        bytes go to the daemon first (_OrderedText)."""
        prev = 1 - index
        self.last_stream = index
        if self.cur_id is None or threading.get_ident() != self.main_ident:
            return
        try:
            (self.out, self.err)[prev].flush()
        except Exception:
            return
        # A SIGINT must not raise in the middle of a frame on the socket:
        # while forwarding it is only noted, and raised once done.
        was, self.in_user = self.in_user, False
        try:
            with self.lock:
                self._drain(prev, DRAIN_LIMIT)
        finally:
            self.in_user = was
        if was and self.pending_int:
            self.pending_int = False
            raise KeyboardInterrupt

    def _flush_std(self):
        for s in (sys.stdout, sys.stderr, self.out, self.err):
            try:
                s.flush()
            except Exception:
                pass
        if _c_fflush is not None:
            _c_fflush(None)

    def _send_tails(self, eid):
        for st in self.streams:
            if not st.spilled:
                continue
            t = st.tail
            k = 0
            if st.dropped:
                while k < 3 and k < len(t) and (t[k] & 0xC0) == 0x80:
                    k += 1
            self._send(_pack({"t": "stream", "id": eid, "name": st.name, "tail": True,
                              "dropped": st.dropped + k}, bytes(t[k:])))

    def _check_fds(self):
        # Put our pipes back on fds 1 and 2 if user code closed or moved them.
        for fd, w, ino in ((1, self.wfds[0], self.pipe_inos[0]),
                           (2, self.wfds[1], self.pipe_inos[1])):
            try:
                if os.fstat(fd).st_ino == ino:
                    continue
            except OSError:
                pass
            os.dup2(w, fd)

    # --------------------------------------------------------------- display

    def _note(self, msg):
        try:
            os.write(2, ("[ci] %s\n" % msg).encode())
        except OSError:
            pass

    def _send_displays(self, items, extra=None):
        """Send [(mime, bytes)] as display frames of the running execution,
        all or none of them (a bundle is not cut in half by the limit)."""
        if self.cur_id is None or not items:
            return
        if self.capturing is not None:           # inside %%capture
            self.capturing.append({m: (d if m in _BINARY_MIMES else
                                       d.decode("utf-8", "replace")) for m, d in items})
            return
        kept = []
        for mime, data in items:
            if len(data) > ci_frame.MAX_BODY:
                self._note("%s display of %d bytes exceeds the 1 MiB display limit; "
                           "not sent" % (mime, len(data)))
            else:
                kept.append((mime, data))
        if not kept:
            return
        size = sum(len(d) for _, d in kept)
        if self.displays + len(kept) > DISPLAY_MAX or \
                self.display_bytes + size > DISPLAY_BYTES_MAX:
            if not self.display_full:
                self.display_full = True
                self._note("display limit of %d per execution (%d MiB in all) reached; "
                           "further displays are dropped" % (DISPLAY_MAX, DISPLAY_BYTES_MAX >> 20))
            return
        self.displays += len(kept)
        self.display_bytes += size
        group = self.groups
        self.groups += 1
        main = threading.get_ident() == self.main_ident
        prev = self.in_user
        if main:
            self.in_user = False       # no KeyboardInterrupt in the middle of a frame
        try:
            self._flush_std()
            with self.lock:
                eid = self.cur_id
                if eid is not None:
                    self._drain(0, DRAIN_LIMIT)
                    self._drain(1, DRAIN_LIMIT)
                    for mime, data in kept:
                        h = {"t": "display", "id": eid, "mime": mime, "group": group}
                        if extra:
                            h.update(extra)
                        self._send(_pack(h, data))
        finally:
            if main:
                self.in_user = prev
                if prev and self.pending_int:
                    self.pending_int = False
                    raise KeyboardInterrupt

    def display_png(self, data):
        """Send a PNG as a display frame of the running execution."""
        self._send_displays([("image/png", data)])

    @staticmethod
    def _figure_empty(fig):
        # IPython's print_figure draws nothing for a figure without axes or
        # lines (plt.figure() in a cell that failed before plotting)
        return not fig.axes and not fig.lines

    def display_figure(self, fig):
        """Send a matplotlib figure as Jupyter's inline backend does: one
        bundle, its text/plain (`<Figure size 640x480 with 1 Axes>`) and its
        image/png (none for an empty figure, as IPython)."""
        items = [("text/plain", _fmt().plain(fig).encode("utf-8", "replace"))]
        if self._figure_empty(fig):
            self.displayed[id(fig)] = fig
            fig.stale = False
        else:
            items.append(("image/png", self._figure_png(fig)))
        self._send_displays(items)

    def _figure_png(self, fig):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        fig.stale = False              # any later change sets it again
        self.displayed[id(fig)] = fig
        return buf.getvalue()

    def _figure(self, obj):
        fm = sys.modules.get("matplotlib.figure")
        return fm is not None and isinstance(obj, fm.Figure)

    def display(self, *objs, include=None, exclude=None, metadata=None, transient=None,
                display_id=None, raw=False, clear=False, **kwargs):
        """display(obj, ...): each object's MIME bundle as display frames, as
        Jupyter's display() (a matplotlib figure: its PNG)."""
        for obj in objs:
            if raw:
                if isinstance(obj, dict):
                    self.display_raw(obj)
                continue
            if self._figure(obj):
                self.display_figure(obj)
                continue
            own = _fmt().displays_itself(obj)
            if own is not None:
                own()
                continue
            items = _fmt().bundle(obj)
            if include:
                items = [(m, d) for m, d in items if m in include]
            if exclude:
                items = [(m, d) for m, d in items if m not in exclude]
            self._send_displays(items)

    def display_raw(self, data, metadata=None, **kwargs):
        """A MIME bundle given as {mime: data} (IPython's publish_display_data)."""
        items = []
        for mime, v in data.items():
            if isinstance(mime, str):
                b = _fmt()._encode(mime, v)
                if b is not None:
                    items.append((mime, b))
        items.sort(key=lambda it: it[0] != "text/plain")
        self._send_displays(items)

    def show_figures(self):
        """Send every open matplotlib figure as a display and close it (plt.show())."""
        from matplotlib._pylab_helpers import Gcf
        plt = sys.modules.get("matplotlib.pyplot")
        for m in list(Gcf.get_all_fig_managers()):
            fig = m.canvas.figure
            if not (self.displayed.get(id(fig)) is fig and not fig.stale):
                self.display_figure(fig)
            if plt is not None:
                plt.close(fig)
            else:
                Gcf.destroy(m)

    def show_figure(self, fig):
        self.display_figure(fig)

    # ------------------------------------------------------------- execution

    @staticmethod
    def _strip_runner(te, seen):
        # Remove the runner's frames (the exec call, the SIGINT handler, the
        # display plumbing) from an exception and everything chained to it.
        while te is not None and id(te) not in seen:
            seen.add(id(te))
            frames = [f for f in te.stack if f.filename not in _RUNNER_FILES]
            if len(frames) != len(te.stack):
                te.stack = traceback.StackSummary.from_list(frames)
            for sub in getattr(te, "exceptions", None) or ():
                Kernel._strip_runner(sub, seen)
            Kernel._strip_runner(te.__cause__, seen)
            te = te.__context__

    def _error(self, e):
        try:
            evalue = str(e)
        except BaseException:
            evalue = "<exception str() failed>"
        try:
            te = traceback.TracebackException(type(e), e, e.__traceback__, compact=True)
            self._strip_runner(te, set())
            lines = _one_line_each(te.format())
        except BaseException:
            lines = ["%s: %s" % (type(e).__name__, evalue)]
        return {"ename": type(e).__name__, "evalue": evalue[:RESULT_CAP],
                "traceback": lines}

    @staticmethod
    def compile_cell(src, fname):
        """(code of all but a last expression, code of that expression)."""
        tree = compile(src, fname, "exec", ast.PyCF_ONLY_AST, True)
        last = None
        body = tree.body
        if body and isinstance(body[-1], ast.Expr):
            last = ast.Expression(body.pop().value)
        code = compile(tree, fname, "exec", 0, True) if body else None
        ecode = compile(last, fname, "eval", 0, True) if last is not None else None
        return code, ecode

    def _result_text(self, value):
        """text/plain of the last expression's value, as IPython shows it; its
        other MIME types go out as display frames marked "result" (Jupyter's
        execute_result). None when the object displayed itself."""
        if type(value) in _SIMPLE:
            return repr(value)
        if self._figure(value):
            if self._figure_empty(value):
                self.displayed[id(value)] = value
                value.stale = False
            else:
                self._send_displays([("image/png", self._figure_png(value))], {"result": True})
            return _fmt().plain(value)
        own = _fmt().displays_itself(value)
        if own is not None:
            own()
            return None
        items = _fmt().bundle(value)
        self._send_displays(items[1:], {"result": True})
        return items[0][1].decode("utf-8", "replace")

    def _run(self, src, fname):
        """Returns (status, result, error)."""
        try:
            code, ecode = self.compile_cell(src, fname)
        except BaseException as e:     # SyntaxError, ValueError, MemoryError...
            return "error", None, self._error(e)
        value = None
        ns = self.ns
        self.in_user = True
        try:
            if self.pending_int:
                self.pending_int = False
                raise KeyboardInterrupt
            if code is not None:
                exec(code, ns)
            if ecode is not None:
                value = eval(ecode, ns)
            self.in_user = False
        except SystemExit as e:
            self.in_user = False
            if e.code is None or e.code == 0:
                return "ok", None, None
            return "error", None, self._error(e)
        except BaseException as e:
            self.in_user = False
            return "error", None, self._error(e)
        if value is None:
            return "ok", None, None
        self.in_user = True
        try:
            r = self._result_text(value)
            self.in_user = False
        except BaseException as e:
            self.in_user = False
            return "error", None, self._error(e)
        ns["_"] = value
        if r is None:
            return "ok", None, None
        if len(r) > RESULT_CAP:
            r = r[:RESULT_CAP]
        return "ok", r, None

    # The change list: inotify keeps an index of the tree (ci_watch.py), so
    # an execution costs what it changed, not what /workspace holds. The
    # capped walk below stands in while the tree is over ci_watch.INDEX_MAX.

    def _start_watch(self):
        import ci_watch
        try:
            self.watch = ci_watch.Watch(
                self.root, drain=os.environ.get("CI_WATCH_DRAIN") != "0",
                max_watches=_env_int("CI_WATCH_MAX_DIRS"))
        except Exception as e:          # never worse than the walk
            self._log("no workspace watch: %r" % (e,))
            self.watch = None
            self.watch_off = "no_inotify"
            return
        if self.watch.too_many:
            self.watch.close()
            self.watch = None
            self.watch_off = "too_many_files"

    def _files_mark(self):
        if self.watch is None and self.watch_off == "too_many_files":
            before = self._walk()
            if not before[1]:           # the tree is small again: watch it
                self._start_watch()
            if self.watch is None:
                return before
        if self.watch is None:
            self._start_watch()
            if self.watch is None:
                return self._walk()
        self.mark_fallback = self.watch.mark()
        return None

    def _files_changes(self, before, cap):
        if before is not None:          # walked at the start: walk again
            files, trunc = self._diff(before, self._walk(), cap)
            return files, trunc, self.watch_off
        w = self.watch
        files, fallback = w.changes()
        fallback = fallback or self.mark_fallback
        trunc = False
        if len(files) > cap:
            del files[cap:]
            trunc = True
        if w.too_many:                   # exact this time; the walk from now
            w.close()
            self.watch = None
            self.watch_off = "too_many_files"
        return files, trunc, fallback

    def _walk(self):
        """{relative path: (size, mtime_ns, ino)} of regular files, truncated?"""
        files = {}
        n = 0
        stack = [(self.root, "")]
        while stack:
            d, prefix = stack.pop()
            try:
                it = os.scandir(d)
            except OSError:
                continue
            with it:
                for e in it:
                    n += 1
                    if n > WALK_MAX:
                        return files, True
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append((e.path, prefix + e.name + "/"))
                        elif e.is_file(follow_symlinks=False):
                            st = e.stat(follow_symlinks=False)
                            files[prefix + e.name] = (st.st_size, st.st_mtime_ns, st.st_ino)
                    except OSError:
                        pass
        return files, False

    @staticmethod
    def _diff(before, after, cap):
        b, btrunc = before
        a, atrunc = after
        if not a and not b:
            return [], btrunc or atrunc
        out = []
        for p, v in a.items():
            o = b.get(p)
            if o is None:
                if not btrunc:
                    out.append({"path": p, "size": v[0], "change": "created"})
            elif o != v:
                out.append({"path": p, "size": v[0], "change": "modified"})
        if not atrunc:
            for p in b:
                if p not in a:
                    out.append({"path": p, "size": 0, "change": "deleted"})
        out.sort(key=lambda f: f["path"])
        trunc = btrunc or atrunc
        if len(out) > cap:
            del out[cap:]
            trunc = True
        return out, trunc

    def _done_frame(self, hdr):
        try:
            return _pack(hdr)
        except ValueError:
            pass
        # Too big for one header: shrink what can be large, in steps.
        hdr["files_truncated"] = True if hdr["files"] else hdr["files_truncated"]
        err = hdr.get("error")
        if err:
            tb = err["traceback"]
            if len(tb) > 40:
                tb = tb[:20] + ["... %d entries omitted ..." % (len(tb) - 40)] + tb[-20:]
            err["traceback"] = [s[:4000] for s in tb]
            err["evalue"] = err["evalue"][:10000]
        if hdr.get("result"):
            hdr["result"] = hdr["result"][:10000]
        files = hdr["files"]
        while True:
            try:
                return _pack(hdr)
            except ValueError:
                if not files:
                    break
                files = files[:len(files) // 2]
                hdr["files"] = files
        hdr["error"] = err and {"ename": err["ename"], "evalue": err["evalue"][:1000],
                                "traceback": []}
        return _pack(hdr)

    def _exec(self, h, body):
        eid = h.get("id")
        so = _cap(h.get("stdout_cap"), DEFAULT_STREAM_CAP)
        se = _cap(h.get("stderr_cap"), DEFAULT_STREAM_CAP)
        fcap = _cap(h.get("files_cap"), DEFAULT_FILES_CAP)
        self._check_fds()
        with self.lock:
            self.cur_id = eid
            self.streams[0].reset(so)
            self.streams[1].reset(se)
        self.displays = 0
        self.display_bytes = 0
        self.groups = 0
        self.display_full = False
        self.displayed.clear()
        self.capturing = None
        # pending_int is not reset here: a SIGINT since cur_id was set is
        # for this execution (it is reset when the last one ended).
        if self.idle_int:
            self.idle_int = False
            if self._interrupt_frame_for(eid):
                self.pending_int = True
        before = self._files_mark()

        self.count += 1
        fname = "<cell-%d>" % self.count
        try:
            src = body.decode("utf-8")
        except UnicodeDecodeError:
            src = body.decode("utf-8", "replace")
        lang = h.get("language")
        if lang is None or lang == "python":
            linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
            if ("%" in src or "!" in src) and _ESCAPE.search(src) is not None:
                try:
                    src = _magics().transform(src)
                except Exception:      # left as is: compile says what is wrong
                    pass
            status, result, error = self._run(src, fname)
        else:                          # another language: a child of ours runs it
            import ci_lang
            status, result, error = ci_lang.run(self, lang, src, fname)
        if os.getpid() != self.pid:
            self._forked_exit(status, error)

        if "matplotlib.pyplot" in sys.modules:
            self.in_user = True
            try:
                self.show_figures()
                self.in_user = False
            except BaseException as e:
                self.in_user = False
                try:
                    sys.modules["matplotlib.pyplot"].close("all")
                except Exception:
                    pass
                if error is None:
                    status, error = "error", self._error(e)

        files, ftrunc, fallback = self._files_changes(before, fcap)
        data = self._done_frame({"t": "done", "id": eid, "status": status,
                                 "result": result, "error": error, "files": files,
                                 "files_truncated": ftrunc,
                                 "files_fallback": fallback})
        self._check_fds()
        self._flush_std()
        with self.lock:
            self._drain(0, DRAIN_LIMIT)
            self._drain(1, DRAIN_LIMIT)
            self._send_tails(eid)
            # Done before the frame says so: a SIGINT from now on is not
            # for this execution (a late one, or the next one's).
            self.cur_id = None
            self.pending_int = False
            self._send(data)
        self.displayed.clear()

    # ------------------------------------------------------------------ main

    def run(self):
        self._setup()
        self._connect()
        t = threading.Thread(target=self._reader, name="ci-output", daemon=True)
        t.start()
        while True:
            if self.sock is None:
                self._connect()
                continue
            try:
                h, body = self._recv()
            except (OSError, EOFError, ci_frame.ProtocolError) as e:
                if isinstance(e, ci_frame.ProtocolError):
                    self._log("protocol error: %s" % e)
                self._disconnect()
                continue
            if h["t"] == "exec":
                self._exec(h, body)
            # "interrupt" for an execution already done: nothing to do.


def main(ipc=None, root=None):
    ipc = ipc or os.environ.get("SANDBOX_IPC", "/run/ci/ipc.sock")
    root = root or os.environ.get("SANDBOX_WORKSPACE", "/workspace")
    Kernel(ipc, root).run()


if __name__ == "__main__":
    main()
