"""The supervisor: PID 1's child in every session container.

It never runs user code.  It connects to $SANDBOX_IPC as role "supervisor",
forks the kernel (kernel.py, same interpreter, no exec), reports how each
kernel died (`kernel_exit`) and starts a fresh one at once, and serves the
files API under $SANDBOX_WORKSPACE (default /workspace).  See docs/protocol.md.

One thread, one poll loop: the socket is non-blocking, answers are queued
and a file download (or a workspace tar, ci_tar.py) is read chunk by chunk
only as fast as the daemon takes it, so a slow reader never stops the loop
from noticing a dead kernel.
"""

import collections
import errno
import os
import select
import signal
import stat
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:           # run with -I: the script's dir is not on sys.path
    sys.path.insert(0, HERE)

import ci_frame                    # noqa: E402
import ci_tar                      # noqa: E402
import kernel as kernel_mod        # noqa: E402  (imported once, forked many times)

CHUNK = 256 * 1024                 # file_get data frames
LIST_MAX = 10_000                  # file_list entries
OUT_HIGH = 1 << 20                 # stop producing download chunks above this
PENDING_MAX = 64                   # stop reading requests while this many wait
TAR_MAX_BYTES = 1 << 30            # ws_tar caps when the request names none
TAR_MAX_FILES = 50_000
OOM_FILES = ("/sys/fs/cgroup/memory/memory.oom_control",    # cgroup v1
             "/sys/fs/cgroup/memory.events")                 # cgroup v2

_pack = ci_frame.pack


def log(msg):
    try:
        os.write(2, ("ci-supervisor[%d]: %s\n" % (os.getpid(), msg)).encode())
    except OSError:
        pass


def read_oom_kills():
    """The memory cgroup's OOM-kill counter, or None when it cannot be read."""
    for path in OOM_FILES:
        try:
            with open(path, "rb") as f:
                for line in f:
                    if line.startswith(b"oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return None


def rfc3339(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class FileError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def os_error(e):
    """Map an OSError to (code, message) of a file_err."""
    n = e.errno
    msg = e.strerror or str(e)
    if n == errno.ENOENT:
        return "not_found", "no such file or directory"
    if n in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "payload_too_large", "no space left in the workspace"
    if n in (errno.ELOOP, errno.ENAMETOOLONG):
        return "bad_path", msg
    if n in (errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOTEMPTY,
             errno.EACCES, errno.EPERM, errno.EROFS, errno.ENXIO):
        return "bad_request", msg
    return "internal", msg


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Upload:
    """An upload in progress: written to `tmp` beside `target`, both names
    relative to the parent directory's descriptor `pfd`."""
    __slots__ = ("path", "target", "tmp", "fd", "pfd", "size", "failed")

    def __init__(self, path, target=None, tmp=None, fd=-1, pfd=-1):
        self.path, self.target, self.tmp, self.fd, self.pfd = path, target, tmp, fd, pfd
        self.size = 0
        self.failed = fd < 0

    def close_parent(self):
        if self.pfd >= 0:
            try:
                os.close(self.pfd)
            except OSError:
                pass
            self.pfd = -1

    def discard(self):
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1
        if self.tmp and self.pfd >= 0:
            try:
                os.unlink(self.tmp, dir_fd=self.pfd)
            except OSError:
                pass
            self.tmp = None
        self.close_parent()


class Supervisor:
    def __init__(self, ipc, root):
        self.ipc = ipc
        self.root = root
        self.root_real = os.path.realpath(root)
        # connection
        self.sock = None
        self.dec = None
        self.out = bytearray()
        self.pending = collections.deque()
        self.next_connect = 0.0
        self.waiting_logged = False
        self.exits = []                # kernel_exit frames for the next connection
        self.exit_marks = []           # [(frame, end offset)] of those queued in out
        self.appended = 0              # bytes queued / sent on this connection
        self.sent = 0
        # files API
        self.get = None                # [id, fd, bytes left]
        self.uploads = {}
        self.tar = None                # (id, ci_tar.TarWriter) of the ws_tar in progress
        self.untars = {}               # id -> ci_tar.Untar, or None once it failed
        # kernel
        self.kpid = None
        self.kfd = None                # pidfd
        self.koom = None
        self.kstart = 0.0
        self.fast_deaths = 0
        self.next_kernel = 0.0
        self.wake = None               # (r, w) SIGCHLD wakeup pipe, fallback only

    # ----------------------------------------------------------------- setup

    def _setup(self):
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # interrupts are for the kernel
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGHUP, self._on_term)
        home = os.environ.get("HOME")
        if home:
            try:
                os.makedirs(home, 0o700, exist_ok=True)
            except OSError as e:
                log("cannot create HOME %s: %s" % (home, e))
        mpl = os.environ.get("MPLCONFIGDIR")
        src = os.path.join(HERE, "mplcache")
        if mpl and os.path.isdir(src) and not os.path.isdir(mpl):
            try:
                import shutil
                shutil.copytree(src, mpl)
            except OSError as e:
                log("cannot seed %s: %s" % (mpl, e))

    def _on_term(self, signum, frame):
        raise SystemExit(0)

    # ---------------------------------------------------------------- kernel

    def _start_kernel(self):
        self.koom = read_oom_kills()
        pid = os.fork()
        if pid == 0:                   # the kernel
            code = 70
            try:
                self._close_for_child()
                kernel_mod.main(self.ipc, self.root)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                os._exit(code)
        self.kpid = pid
        self.kstart = time.monotonic()
        try:
            self.kfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.kfd = None            # no pidfd (old kernel, gVisor): SIGCHLD
            self._enable_sigchld()

    def _close_for_child(self):
        if self.sock is not None:
            self.sock.close()          # our copy only; no shutdown
        fds = [u.fd for u in self.uploads.values() if u.fd >= 0]
        if self.get is not None:
            fds.append(self.get[1])
        if self.tar is not None:
            fds.extend(self.tar[1].fds())
        for un in self.untars.values():
            if un is not None:
                fds.extend(un.fds())
        if self.wake is not None:
            fds.extend(self.wake)
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def _enable_sigchld(self):
        if self.wake is not None:
            return
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        self.wake = (r, w)
        signal.set_wakeup_fd(w)
        signal.signal(signal.SIGCHLD, lambda s, f: None)

    def _check_kernel(self):
        if self.kpid is None:
            return
        try:
            pid, status = os.waitpid(self.kpid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.kpid, None
        if pid == 0:
            return
        code = sig = None
        if status is not None:
            if os.WIFEXITED(status):
                code = os.WEXITSTATUS(status)
            elif os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
        after = read_oom_kills()
        oom = self.koom is not None and after is not None and after > self.koom
        dead = self.kpid
        try:                           # what the kernel started dies with it
            os.killpg(dead, signal.SIGKILL)
        except OSError:
            pass
        if self.kfd is not None:
            os.close(self.kfd)
            self.kfd = None
        self.kpid = None
        now = time.monotonic()
        self.fast_deaths = self.fast_deaths + 1 if now - self.kstart < 1.0 else 0
        delay = 0.0 if self.fast_deaths <= 1 else min(2.0, 0.1 * 2 ** (self.fast_deaths - 2))
        self.next_kernel = now + delay
        log("kernel %d ended: code=%s signal=%s oom=%s" % (dead, code, sig, oom))
        frame = _pack({"t": "kernel_exit", "pid": dead, "code": code, "signal": sig,
                       "oom": oom})
        if self.sock is not None:
            self._queue_exit(frame)
            self._flush()              # on the wire before the next kernel starts
        else:
            self.exits.append(frame)

    def _queue_exit(self, frame):
        # Remembered until fully written: if the connection dies first (the
        # daemon restarting), it goes out again after the next hello.
        self._reply_raw(frame)
        self.exit_marks.append((frame, self.appended))

    # ------------------------------------------------------------ connection

    def _try_connect(self, now):
        s = ci_frame.try_connect(self.ipc)
        if s is None:
            if not self.waiting_logged:
                log("waiting for the daemon at %s" % self.ipc)
                self.waiting_logged = True
            self.next_connect = now + ci_frame.RETRY_S
            return
        s.setblocking(False)
        self.sock = s
        self.waiting_logged = False
        self.dec = ci_frame.Decoder()
        self.out = bytearray()
        self.appended = self.sent = 0
        self.exit_marks = []
        self._reply_raw(ci_frame.hello("supervisor", os.getpid()))
        exits, self.exits = self.exits, []
        for f in exits:
            self._queue_exit(f)
        log("connected to %s" % self.ipc)
        self._flush()

    def _disconnect(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            log("connection lost")
        self.sock = None
        self.dec = None
        self.out = bytearray()
        self.exits[:0] = [f for f, _ in self.exit_marks]
        self.exit_marks = []
        self.pending.clear()
        if self.get is not None:
            try:
                os.close(self.get[1])
            except OSError:
                pass
            self.get = None
        for u in self.uploads.values():
            u.discard()
        self.uploads.clear()
        self._tar_stop()
        for rid in list(self.untars):
            self._untar_drop(rid)
        self.next_connect = time.monotonic() + ci_frame.RETRY_S

    def _flush(self):
        out = self.out
        while out and self.sock is not None:
            try:
                n = self.sock.send(out)
            except BlockingIOError:
                return
            except OSError:
                self._disconnect()
                return
            del out[:n]
            self.sent += n
            if self.exit_marks:
                self.exit_marks = [m for m in self.exit_marks if m[1] > self.sent]

    def _on_readable(self):
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._disconnect()
            return
        dec = self.dec
        dec.feed(data)
        try:
            while True:
                f = dec.next()
                if f is None:
                    break
                if self._abort_running_get(f):
                    continue
                self.pending.append(f)
        except ci_frame.ProtocolError as e:
            log("protocol error from the daemon: %s" % e)
            self._disconnect()

    # ------------------------------------------------------------- files API

    def _reply_raw(self, frame):
        self.out += frame
        self.appended += len(frame)

    def _reply(self, header, body=b""):
        self._reply_raw(_pack(header, body))

    def _reply_err(self, rid, code, message):
        self._reply({"t": "file_err", "id": rid, "code": code, "message": message[:1000]})

    def _parts(self, path):
        if not isinstance(path, str) or not path:
            raise FileError("bad_path", "path must be a non-empty string")
        if "\0" in path:
            raise FileError("bad_path", "path contains a NUL byte")
        if path.startswith("/"):
            raise FileError("bad_path", "path must be relative to /workspace")
        if len(path) > 4096:
            raise FileError("bad_path", "path is too long")
        parts = []
        for c in path.split("/"):
            if c == "..":
                raise FileError("bad_path", "path contains a '..' component")
            if c and c != ".":
                parts.append(c)
        if not parts:
            raise FileError("bad_path", "path names the workspace itself")
        return parts

    def _open_parent(self, parts, create=False):
        """A descriptor of the directory holding parts[-1], reached one
        component at a time from the workspace without following symlinks.
        Checking a path and then opening it would race: sandboxed code could
        swap a directory for a symlink in between. Walking with O_NOFOLLOW
        from descriptor to descriptor leaves nothing to swap."""
        fd = os.open(self.root_real, _DIR_FLAGS)
        try:
            for name in parts[:-1]:
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(name, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise FileError("bad_path", "a directory on the path is a symlink or "
                                        "not a directory; the files API does not follow "
                                        "symlinks") from None
                    raise
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _put_begin(self, rid, h):
        old = self.uploads.pop(rid, None)
        if old is not None:
            old.discard()
        path = h.get("path")
        pfd = -1
        try:
            parts = self._parts(path)
            name = parts[-1]
            pfd = self._open_parent(parts, create=True)
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise FileError("bad_request", "path is a directory")
            tmp = ".%s.ci-upload-%s" % (name[:100], os.urandom(4).hex())
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644, dir_fd=pfd)
        except (FileError, OSError):
            if pfd >= 0:
                os.close(pfd)
            self.uploads[rid] = Upload(path)      # failed: swallow its data and end
            raise
        self.uploads[rid] = Upload(path, name, tmp, fd, pfd)

    def _put_fail(self, rid, u, e):
        u.discard()
        u.failed = True
        self._reply_err(rid, *os_error(e))

    def _put_data(self, rid, body):
        u = self.uploads.get(rid)
        if u is None or u.failed:
            return
        view = memoryview(body)
        try:
            while view:
                n = os.write(u.fd, view)
                view = view[n:]
                u.size += n
        except OSError as e:
            self._put_fail(rid, u, e)

    def _put_end(self, rid):
        u = self.uploads.pop(rid, None)
        if u is None:
            raise FileError("bad_request", "no upload in progress with this id")
        if u.failed:
            return
        try:
            os.close(u.fd)
            u.fd = -1
            # A symlink at the target is replaced, never written through.
            os.rename(u.tmp, u.target, src_dir_fd=u.pfd, dst_dir_fd=u.pfd)
            u.tmp = None
            u.close_parent()
        except OSError as e:
            self._put_fail(rid, u, e)
            return
        self._reply({"t": "file_ok", "id": rid, "path": u.path, "size": u.size})

    def _abort_running_get(self, frame):
        """A file_abort for the download in progress takes effect at once (the
        daemon's client went away); queued behind it, it would wait for the
        whole file to be sent first."""
        h = frame[0]
        if not isinstance(h, dict) or h.get("t") != "file_abort":
            return False
        if self.tar is not None and h.get("id") == self.tar[0]:
            self._tar_stop()
            return True
        for f in self.pending:         # a ws_tar not started yet: never start it
            if f[0].get("t") == "ws_tar" and f[0].get("id") == h.get("id"):
                self.pending.remove(f)
                return True
        if self.get is None or h.get("id") != self.get[0]:
            return False
        try:
            os.close(self.get[1])
        except OSError:
            pass
        self.get = None
        return True

    def _put_abort(self, rid):
        u = self.uploads.pop(rid, None)
        if u is not None:
            u.discard()
        self._untar_drop(rid)

    def _get_begin(self, rid, h):
        parts = self._parts(h.get("path"))
        pfd = self._open_parent(parts)
        try:
            # O_NOFOLLOW: a symlink is refused (ELOOP → bad_path);
            # O_NONBLOCK: a FIFO must not hang the supervisor.
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         dir_fd=pfd)
        finally:
            os.close(pfd)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise FileError("bad_request", "path is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise FileError("bad_request", "not a regular file")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        self._reply({"t": "file_meta", "id": rid, "size": st.st_size})
        self.get = [rid, fd, st.st_size]
        self._get_step()

    def _get_step(self):
        g = self.get
        rid, fd, left = g
        if left > 0:
            try:
                data = os.read(fd, min(CHUNK, left))
            except OSError as e:
                data = None
                err = os_error(e)
            else:
                err = ("internal", "the file shrank while it was read")
            if not data:
                os.close(fd)
                self.get = None
                self._reply_err(rid, *err)
                return
            self._reply({"t": "file_data", "id": rid}, data)
            g[2] = left = left - len(data)
            if left > 0:
                return
        os.close(fd)
        self.get = None
        self._reply({"t": "file_end", "id": rid})

    # ------------------------------------------------- workspace snapshots
    # The tar format and the file system work are ci_tar's; here only the
    # messages (docs/protocol.md, "Workspace snapshots").

    def _tar_begin(self, rid, h):
        mb = h.get("max_bytes", TAR_MAX_BYTES)
        mf = h.get("max_files", TAR_MAX_FILES)
        for v in (mb, mf):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise FileError("bad_request", "max_bytes and max_files must be positive integers")
        w = ci_tar.TarWriter(self.root_real, h.get("paths"), mb, mf)
        self.tar = (rid, w)
        self._tar_step()

    def _tar_stop(self):
        if self.tar is not None:
            self.tar[1].close()
            self.tar = None

    def _tar_step(self):
        """One chunk of the ws_tar in progress; False when it produced none
        (it looked at entries only), so the loop polls before the next."""
        rid, w = self.tar
        try:
            chunk = w.step()
        except ci_tar.TarError as e:
            self._tar_stop()
            self._reply_err(rid, e.code, e.message)
            return True
        except OSError as e:
            self._tar_stop()
            self._reply_err(rid, *os_error(e))
            return True
        except Exception as e:
            self._tar_stop()
            log("internal error in ws_tar: %r" % e)
            self._reply_err(rid, "internal", "%s: %s" % (type(e).__name__, e))
            return True
        if chunk is None:
            self._tar_stop()
            self._reply({"t": "ws_tar_end", "id": rid, "files": w.files, "bytes": w.bytes,
                         "entries": w.entries, "skipped": w.skipped})
            return True
        if not chunk:
            return False
        self._reply({"t": "file_data", "id": rid}, chunk)
        return True

    def _untar_begin(self, rid, h):
        self._untar_drop(rid)
        self.untars[rid] = None        # failed unless made: its data is swallowed
        self.untars[rid] = ci_tar.Untar(self.root_real, rid)

    def _untar_drop(self, rid):
        if rid in self.untars:
            un = self.untars.pop(rid)
            if un is not None:
                un.discard()

    def _untar_fail(self, rid, code, message):
        """Staging removed now; the id's later frames are swallowed and its
        ws_untar_end gets no second answer."""
        un = self.untars.get(rid)
        if un is not None:
            un.discard()
            self.untars[rid] = None
        self._reply_err(rid, code, message)

    def _untar_data(self, rid, body):
        un = self.untars[rid]
        if un is None:
            return
        try:
            un.feed(body)
        except ci_tar.TarError as e:
            self._untar_fail(rid, e.code, e.message)
        except OSError as e:
            self._untar_fail(rid, *os_error(e))

    def _untar_end(self, rid, h):
        if rid not in self.untars:
            raise FileError("bad_request", "no ws_untar in progress with this id")
        un = self.untars[rid]
        if un is None:
            del self.untars[rid]
            return
        commit = h.get("commit") is True
        try:
            if commit:
                un.finish()
                un.commit()
            else:
                un.discard()
        except ci_tar.TarError as e:
            self._untar_fail(rid, e.code, e.message)
        except OSError as e:
            self._untar_fail(rid, *os_error(e))
        else:
            self._reply({"t": "ws_untar_ok", "id": rid, "files": un.files, "bytes": un.bytes,
                         "applied": commit})
        finally:
            self.untars.pop(rid, None)
            un.discard()

    def _list(self, rid):
        files = []
        budget = ci_frame.MAX_HEADER - 256
        used = 0
        truncated = False
        enc = ci_frame.encode_header
        stack = [(self.root_real, "")]
        while stack and not truncated:
            d, prefix = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            for e in entries:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    kind, size = "dir", 0
                    subdirs.append((e.path, prefix + e.name + "/"))
                elif stat.S_ISLNK(st.st_mode):
                    kind, size = "symlink", st.st_size
                elif stat.S_ISREG(st.st_mode):
                    kind, size = "file", st.st_size
                else:
                    continue               # fifos, sockets, devices
                item = {"path": prefix + e.name, "size": size,
                        "mtime": rfc3339(st.st_mtime), "type": kind}
                cost = len(enc(item)) + 1
                if len(files) >= LIST_MAX or used + cost > budget:
                    truncated = True
                    break
                used += cost
                files.append(item)
            stack.extend(reversed(subdirs))
        self._reply({"t": "file_list", "id": rid, "files": files, "truncated": truncated})

    def _delete(self, rid, h):
        path = h.get("path")
        parts = self._parts(path)
        pfd = self._open_parent(parts)
        try:
            name = parts[-1]
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)  # a symlink is removed itself
            if stat.S_ISDIR(st.st_mode):
                # A directory goes only when asked for by name: a client that
                # meant one file must not lose a whole tree (issue 16).
                if h.get("recursive") is not True:
                    raise FileError("is_a_directory",
                                    "%s is a directory: delete it with recursive" % path[:900])
                import shutil
                shutil.rmtree(name, dir_fd=pfd)   # fd-based: symlink-race safe
            else:
                os.unlink(name, dir_fd=pfd)
        finally:
            os.close(pfd)
        self._reply({"t": "file_ok", "id": rid, "path": path, "size": 0})

    def _handle(self, h, body):
        t = h["t"]
        rid = h.get("id")
        try:
            if t == "file_data":
                if rid in self.untars:
                    self._untar_data(rid, body)
                else:
                    self._put_data(rid, body)
            elif t == "file_put":
                self._put_begin(rid, h)
            elif t == "file_end":
                self._put_end(rid)
            elif t == "file_get":
                self._get_begin(rid, h)
            elif t == "file_list":
                self._list(rid)
            elif t == "file_delete":
                self._delete(rid, h)
            elif t == "file_abort":
                self._put_abort(rid)
            elif t == "ws_tar":
                self._tar_begin(rid, h)
            elif t == "ws_untar":
                self._untar_begin(rid, h)
            elif t == "ws_untar_end":
                self._untar_end(rid, h)
            else:
                raise FileError("bad_request", "unknown message type %r" % t[:100])
        except (FileError, ci_tar.TarError) as e:
            self._reply_err(rid, e.code, e.message)
        except OSError as e:
            self._reply_err(rid, *os_error(e))
        except Exception as e:         # never let a request end the supervisor
            log("internal error on %s: %r" % (t[:100], e))
            self._reply_err(rid, "internal", "%s: %s" % (type(e).__name__, e))

    def _pump(self):
        while self.sock is not None and len(self.out) < OUT_HIGH:
            if self.get is not None:
                self._get_step()
            elif self.tar is not None:
                if not self._tar_step():
                    break              # poll (a dead kernel?) before looking further
            elif self.pending:
                self._handle(*self.pending.popleft())
            else:
                break
        if self.out:
            self._flush()

    # ------------------------------------------------------------------ loop

    def _loop(self):
        POLLIN, POLLOUT = select.POLLIN, select.POLLOUT
        while True:
            now = time.monotonic()
            if self.sock is None and now >= self.next_connect:
                self._try_connect(now)
            if self.kpid is None and now >= self.next_kernel:
                self._start_kernel()
            if self.sock is not None:
                self._pump()

            p = select.poll()
            timeout = None
            if self.kfd is not None:
                p.register(self.kfd, POLLIN)
            elif self.kpid is not None:
                timeout = 1.0          # SIGCHLD fallback: also check now and then
            if self.wake is not None:
                p.register(self.wake[0], POLLIN)
            sock = self.sock
            if sock is not None:
                # A download in progress, or a request waiting behind one that
                # just ended, must wake us when the socket can take more, even
                # when everything queued so far went out at once.
                busy = self.get is not None or self.tar is not None or bool(self.pending)
                ev = POLLOUT if (self.out or busy) else 0
                if len(self.pending) < PENDING_MAX:
                    ev |= POLLIN
                p.register(sock.fileno(), ev)
            else:
                timeout = max(0.0, self.next_connect - now)
            if self.kpid is None:
                t = max(0.0, self.next_kernel - now)
                timeout = t if timeout is None else min(timeout, t)
            events = p.poll(None if timeout is None else timeout * 1000.0 + 1)

            for fd, ev in events:
                if fd == self.kfd or (self.wake is not None and fd == self.wake[0]):
                    if self.wake is not None and fd == self.wake[0]:
                        try:
                            os.read(fd, 4096)
                        except OSError:
                            pass
                    self._check_kernel()
                elif sock is not None and sock is self.sock and fd == sock.fileno():
                    if ev & POLLOUT:
                        self._flush()
                    if self.sock is sock and ev & ~POLLOUT:
                        self._on_readable()
            if self.kfd is None and self.kpid is not None:
                self._check_kernel()

    def run(self):
        self._setup()
        try:
            self._loop()
        finally:
            if self.kpid is not None:
                try:
                    os.killpg(self.kpid, signal.SIGKILL)
                except OSError:
                    pass


def _not_dumpable():
    """Keep sandboxed code (same uid) from ptrace-attaching to the supervisor
    and speaking for it on its connection to the daemon. The kernel, forked
    from here, inherits this; programs it executes do not."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_DUMPABLE = 4
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            log("prctl(PR_SET_DUMPABLE, 0) failed: errno %d" % ctypes.get_errno())
    except Exception as e:           # never fatal: the daemon distrusts the sandbox anyway
        log("cannot make the supervisor non-dumpable: %r" % e)


def main():
    _not_dumpable()
    ipc = os.environ.get("SANDBOX_IPC", "/run/ci/ipc.sock")
    root = os.environ.get("SANDBOX_WORKSPACE", "/workspace")
    Supervisor(ipc, root).run()


if __name__ == "__main__":
    main()
