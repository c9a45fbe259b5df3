"""Workspace snapshots as tar streams, for the supervisor's ws_tar and
ws_untar (docs/protocol.md, "Workspace snapshots").  Stdlib only.

The format is POSIX.1-2001 (pax) as tarfile.PAX_FORMAT writes it, limited
to regular files and directories.  Both directions are incremental: the
writer is stepped one chunk at a time (the supervisor produces only as fast
as the daemon reads), the reader is fed the bytes as they arrive, so neither
ever holds the tar in memory or on disk.

Every file system access goes through directory descriptors with
O_NOFOLLOW: sandboxed code runs meanwhile and may swap a directory for a
symlink at any moment, so a path is never resolved as a whole.
"""

import errno
import os
import re
import shutil
import stat
import tarfile

CHUNK = 256 * 1024            # largest data frame body
BLOCK = 512
RECORD = 20 * BLOCK           # tarfile pads the archive to this
PATH_MAX = 4096               # bytes of an entry's path
DIR_MAX = 1_000_000           # names read from one directory
SKIPPED_MAX = 100             # skipped entries listed
PAX_MAX = 64 * 1024           # bytes of one pax extended header
TICK = 256                    # directory entries looked at per step at most
ALWAYS = (".ci/site/**", ".ci/vars.pkl")
USTAR_MAGIC = b"ustar\x0000"
ZERO_BLOCK = bytes(BLOCK)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class TarError(Exception):
    """Ends the request with file_err `code`."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def _pad(n):
    return -n % BLOCK


def _close(fd):
    if fd is not None and fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


# ------------------------------------------------------------------ globs

def compile_glob(glob):
    """A compiled regex for one persist.paths glob, matched against whole
    relative paths.  `*` and `?` stay within a component, `**` crosses
    them (`**/` at a component start also matches nothing), a glob without
    `/` matches the base name at any depth (gitignore's rule), a trailing
    `/` means everything under that directory.  Anything else is literal."""
    g = glob
    while g.startswith("./"):
        g = g[2:]
    g = g.lstrip("/")
    if g.endswith("/"):
        g += "**"
    out = [] if "/" in g else ["(?:.*/)?"]
    i, n = 0, len(g)
    while i < n:
        if g.startswith("**/", i) and (i == 0 or g[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif g.startswith("**", i):
            out.append(".*")
            i += 2
        elif g[i] == "*":
            out.append("[^/]*")
            i += 1
        elif g[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(g[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def check_globs(paths):
    """paths as the ws_tar request has it: None or a list of strings."""
    if paths is None:
        return None
    if not isinstance(paths, list) or len(paths) > 64:
        raise TarError("bad_request", "paths must be null or a list of at most 64 globs")
    for g in paths:
        if not isinstance(g, str) or not g or len(g.encode("utf-8", "replace")) > 256 or "\0" in g:
            raise TarError("bad_request", "each glob must be a string of 1 to 256 bytes, no NUL")
    return [compile_glob(g) for g in list(paths) + list(ALWAYS)]


# ------------------------------------------------------------------ writer

class TarWriter:
    """ws_tar: the workspace (or the entries the globs select) as a tar.

    step() returns the next chunk (at most CHUNK bytes), b"" when it has
    looked at some entries without producing a chunk yet (call again after
    polling), or None at the end; then files/bytes/entries/skipped hold the
    ws_tar_end numbers.  It raises TarError or OSError (the request ends)."""

    def __init__(self, root, paths, max_bytes, max_files):
        self.root = root
        self.globs = check_globs(paths)
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.files = 0
        self.entries = 0
        self.bytes = 0                 # of the tar, as produced so far
        self.skipped = []               # the first SKIPPED_MAX
        self._buf = bytearray()
        self._pending = []             # directories not yet written: [(path, st)]
        self._fds = set()
        self._gen = self._run()

    def fds(self):
        return list(self._fds)

    def step(self):
        try:
            return next(self._gen)
        except StopIteration:
            return None

    def close(self):
        self._gen.close()              # its finally blocks close the descriptors
        for fd in list(self._fds):
            _close(fd)
        self._fds.clear()

    # -- internals

    def _open(self, name, flags, dir_fd=None):
        fd = os.open(name, flags, dir_fd=dir_fd)
        self._fds.add(fd)
        return fd

    def _release(self, fd):
        self._fds.discard(fd)
        _close(fd)

    def _skip(self, path, reason):
        if len(self.skipped) < SKIPPED_MAX:
            self.skipped.append({"path": path, "reason": reason})

    def _selected(self, path):
        return any(r.fullmatch(path) for r in self.globs)

    def _out(self, data):
        self._buf += data
        self.bytes += len(data)
        while len(self._buf) >= CHUNK:
            chunk = bytes(self._buf[:CHUNK])
            del self._buf[:CHUNK]
            yield chunk

    def _header(self, path, st, size):
        ti = tarfile.TarInfo(path)
        ti.type = tarfile.DIRTYPE if size is None else tarfile.REGTYPE
        ti.size = size or 0
        ti.mode = st.st_mode & 0o777
        ti.mtime = max(0, int(st.st_mtime))
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        hdr = ti.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        # The cap counts the whole archive as it would end after this entry.
        end = self.bytes + len(hdr) + ti.size + _pad(ti.size) + 2 * BLOCK
        end += -end % RECORD
        if end > self.max_bytes:
            raise TarError("payload_too_large",
                           "the snapshot would be larger than %d bytes" % self.max_bytes)
        if self.entries + 1 > self.max_files:
            raise TarError("payload_too_large",
                           "the snapshot would have more than %d entries" % self.max_files)
        self.entries += 1
        return hdr

    def _flush_pending(self):
        """The directories on the way to an entry about to be written."""
        for path, st in self._pending:
            yield from self._out(self._header(path, st, None))
        self._pending.clear()

    def _run(self):
        fd = self._open(self.root, _DIR_FLAGS)
        try:
            yield from self._dir(fd, "", self.globs is None)
        finally:
            self._release(fd)
        end = self.bytes + 2 * BLOCK
        if end + -end % RECORD > self.max_bytes:
            raise TarError("payload_too_large",
                           "the snapshot would be larger than %d bytes" % self.max_bytes)
        yield from self._out(bytes(2 * BLOCK))
        yield from self._out(bytes(-self.bytes % RECORD))
        if self._buf:
            chunk = bytes(self._buf)
            self._buf.clear()
            yield chunk

    def _dir(self, fd, prefix, selected):
        names = []
        with os.scandir(fd) as it:
            for e in it:
                names.append(os.fsencode(e.name))
                if len(names) > DIR_MAX:
                    raise TarError("payload_too_large", "%s has more than %d entries"
                                   % (prefix or "the workspace", DIR_MAX))
        names.sort()                   # bytewise, as the spec orders entries
        for i, bname in enumerate(names):
            if i % TICK == TICK - 1:
                yield b""              # let the poll loop look around
            name = os.fsdecode(bname)
            if not prefix and name.startswith(".ci-restore-"):
                continue               # a restore's staging directory
            if name.startswith(".") and ".ci-upload-" in name:
                continue               # an upload in progress
            path = prefix + name
            sel = selected or self._selected(path)
            try:
                bname.decode("utf-8")
            except UnicodeDecodeError:
                if sel:
                    self._skip(path.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                               "name is not UTF-8")
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue               # removed meanwhile
            except OSError as e:
                if sel:
                    self._skip(path, e.strerror or str(e))
                continue
            if len(path.encode()) + stat.S_ISDIR(st.st_mode) > PATH_MAX:
                if sel:
                    self._skip(path, "path too long")
                continue
            if stat.S_ISDIR(st.st_mode):
                yield from self._subdir(fd, name, path, st, sel)
            elif not sel:
                continue
            elif stat.S_ISREG(st.st_mode):
                yield from self._file(fd, name, path)
            elif stat.S_ISLNK(st.st_mode):
                self._skip(path, "symlink")
            else:
                self._skip(path, "not a regular file")

    def _subdir(self, fd, name, path, st, sel):
        try:
            cfd = self._open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            return
        except OSError as e:
            if sel:
                self._skip(path, "symlink" if e.errno in (errno.ELOOP, errno.ENOTDIR)
                           else e.strerror or str(e))
            return
        try:
            self._pending.append((path, os.fstat(cfd)))
            if sel:
                yield from self._flush_pending()
            yield from self._dir(cfd, path + "/", sel)
        finally:
            self._release(cfd)
        if self._pending and self._pending[-1][0] == path:
            self._pending.pop()        # nothing under it was selected

    def _file(self, fd, name, path):
        try:
            ffd = self._open(name, _FILE_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            return
        except OSError as e:
            self._skip(path, "symlink" if e.errno == errno.ELOOP else e.strerror or str(e))
            return
        try:
            st = os.fstat(ffd)
            if not stat.S_ISREG(st.st_mode):   # swapped since the stat
                self._skip(path, "not a regular file")
                return
            size = st.st_size
            yield from self._flush_pending()
            hdr = self._header(path, st, size)
            self.files += 1
            yield from self._out(hdr)
            left = size
            while left > 0:
                try:
                    data = os.read(ffd, min(CHUNK, left))
                except OSError:
                    data = b""
                if not data:           # it shrank (or cannot be read): keep the size
                    self._skip(path, "changed while read")
                    while left > 0:
                        n = min(CHUNK, left)
                        yield from self._out(bytes(n))
                        left -= n
                    break
                left -= len(data)
                yield from self._out(data)
            yield from self._out(bytes(_pad(size)))
        finally:
            self._release(ffd)


# ------------------------------------------------------------------ reader

def check_path(name, is_dir):
    """The components of an entry's path, by the spec's tar rules."""
    if "\0" in name:
        raise TarError("bad_request", "an entry's path contains a NUL byte")
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        raise TarError("bad_request", "an entry's path is not UTF-8") from None
    shown = name[:200]
    if len(raw) > PATH_MAX + (1 if is_dir else 0):
        raise TarError("bad_request", "%s...: path is longer than %d bytes" % (shown, PATH_MAX))
    if is_dir and name.endswith("/"):
        name = name[:-1]
    if name.startswith("/"):
        raise TarError("bad_request", "%s: absolute path" % shown)
    parts = name.split("/")
    for p in parts:
        if p in ("", ".", ".."):
            raise TarError("bad_request", "%s: empty, '.' or '..' component" % shown)
    if parts[0].startswith(".ci-restore-"):
        raise TarError("bad_request", "%s: reserved name" % shown)
    return parts


def parse_pax(data):
    """{"path": str, "size": int} from a pax extended header's records;
    other keywords are ignored."""
    out = {}
    pos, n = 0, len(data)
    while pos < n:
        if data[pos] == 0:             # tarfile never pads records, but NUL fill is harmless
            if data[pos:].strip(b"\0"):
                raise TarError("bad_request", "pax header: bytes after a NUL")
            break
        sp = data.find(b" ", pos, pos + 20)
        if sp < 0 or not data[pos:sp].isdigit():
            raise TarError("bad_request", "pax header: bad record length")
        length = int(data[pos:sp])
        rec = data[pos:pos + length]
        if length <= sp - pos + 1 or len(rec) != length or not rec.endswith(b"\n"):
            raise TarError("bad_request", "pax header: bad record")
        key, eq, value = rec[sp - pos + 1:-1].partition(b"=")
        if not eq:
            raise TarError("bad_request", "pax header: record without '='")
        if key == b"path":
            if b"\0" in value:
                raise TarError("bad_request", "pax header: path contains a NUL byte")
            try:
                out["path"] = value.decode("utf-8")
            except UnicodeDecodeError:
                raise TarError("bad_request", "pax header: path is not UTF-8") from None
        elif key == b"size":
            if not value.isdigit() or len(value) > 20:
                raise TarError("bad_request", "pax header: bad size")
            out["size"] = int(value)
        pos += length
    return out


class _DirChain:
    """Descriptors of the directories from `base` down to the last one
    asked for, each opened from its parent with O_NOFOLLOW.  Entries come
    depth-first, so the next directory asked for shares most of the chain:
    walking only the part that differs keeps a deep tree linear."""

    def __init__(self, base):
        self.base = base
        self.names = []
        self.fds = []

    def open(self, parts, made=None):
        """The descriptor of base/parts; a missing directory is made (0700)
        and reported to made(parts so far) when made is given, else
        FileNotFoundError.  ELOOP or ENOTDIR: something on the way is not a
        directory (a symlink is never followed)."""
        k = 0
        while k < len(self.names) and k < len(parts) and self.names[k] == parts[k]:
            k += 1
        for fd in self.fds[k:]:
            _close(fd)
        del self.names[k:], self.fds[k:]
        for p in parts[k:]:
            parent = self.fds[-1] if self.fds else self.base
            try:
                fd = os.open(p, _DIR_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if made is None:
                    raise
                os.mkdir(p, 0o700, dir_fd=parent)
                made(tuple(self.names) + (p,))
                fd = os.open(p, _DIR_FLAGS, dir_fd=parent)
            self.names.append(p)
            self.fds.append(fd)
        return self.fds[-1] if self.fds else self.base

    def close(self):
        self.open([])


class Untar:
    """ws_untar: extracts a tar stream into <root>/.ci-restore-<id>/ as it
    arrives; commit() moves it into the workspace, discard() removes it."""

    # what the next bytes are
    HEADER, PAX, GLOBAL, DATA, PAD, END2, TRAILER = range(7)

    def __init__(self, root, rid):
        self.stage = ".ci-restore-%d" % rid
        self.files = 0
        self.bytes = 0                 # of the tar, as received
        self._state = self.HEADER
        self._need = BLOCK             # bytes to collect (HEADER, PAX, END2) or pass
        self._buf = bytearray()
        self._pax = None
        self._pax_size = 0
        self._fd = -1                  # the file being written
        self._entry = None             # (mode, mtime) of that file
        self._pad_after = 0            # its padding to the next block
        self._dirs = {}                # {parts: mode} in creation order, applied at commit
        self._chain = None             # _DirChain under staging
        self._root_fd = os.open(root, _DIR_FLAGS)
        self._stage_fd = -1
        try:
            self._remove_stage()       # left over by a supervisor that died
            os.mkdir(self.stage, 0o700, dir_fd=self._root_fd)
            self._stage_fd = os.open(self.stage, _DIR_FLAGS, dir_fd=self._root_fd)
            self._chain = _DirChain(self._stage_fd)
        except BaseException:
            self.discard()
            raise

    def fds(self):
        chain = self._chain.fds if self._chain is not None else []
        return [fd for fd in (self._root_fd, self._stage_fd, self._fd) if fd >= 0] + chain

    def _remove_stage(self):
        try:
            st = os.stat(self.stage, dir_fd=self._root_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(self.stage, dir_fd=self._root_fd)   # fd-based: never follows a link
        else:                          # a link or file planted under the name
            os.unlink(self.stage, dir_fd=self._root_fd)

    def _close_work(self):
        _close(self._fd)
        self._fd = -1
        if self._chain is not None:
            self._chain.close()

    def discard(self):
        """Staging removed, every descriptor closed; safe to call twice."""
        self._close_work()
        _close(self._stage_fd)
        self._stage_fd = -1
        if self._root_fd >= 0:
            try:
                self._remove_stage()
            except OSError:
                pass
            _close(self._root_fd)
            self._root_fd = -1

    # -- the stream

    def _fail(self, what):
        raise TarError("bad_request", "tar: %s, at byte %d" % (what, self.bytes))

    def feed(self, data):
        mv = memoryview(data)
        i, n = 0, len(mv)
        while i < n:
            st = self._state
            if st == self.DATA:
                k = min(self._need, n - i)
                view = mv[i:i + k]
                while view:
                    w = os.write(self._fd, view)
                    view = view[w:]
                self._need -= k
                i += k
                self.bytes += k
                if self._need == 0:
                    self._end_file()
            elif st in (self.PAD, self.GLOBAL):
                k = min(self._need, n - i)
                self._need -= k
                i += k
                self.bytes += k
                if self._need == 0:
                    self._state = self.HEADER
                    self._need = BLOCK
            elif st == self.TRAILER:
                if bytes(mv[i:]).strip(b"\0"):
                    self._fail("data after the end of the archive")
                self.bytes += n - i
                i = n
            else:                      # collect _need bytes, then act on them
                k = min(self._need - len(self._buf), n - i)
                self._buf += mv[i:i + k]
                i += k
                self.bytes += k
                if len(self._buf) == self._need:
                    blk = bytes(self._buf)
                    self._buf.clear()
                    if st == self.HEADER:
                        self._on_header(blk)
                    elif st == self.PAX:
                        try:
                            self._pax = parse_pax(blk[:self._pax_size])
                        except TarError as e:
                            self._fail(e.message)
                        self._state, self._need = self.HEADER, BLOCK
                    elif st == self.END2:
                        if blk != ZERO_BLOCK:
                            self._fail("a single zero block before more data")
                        self._state = self.TRAILER

    def _on_header(self, blk):
        if blk == ZERO_BLOCK:
            if self._pax is not None:
                self._fail("an extended header without an entry")
            self._state, self._need = self.END2, BLOCK
            return
        try:
            ti = tarfile.TarInfo.frombuf(blk, "utf-8", "surrogateescape")
        except tarfile.HeaderError as e:
            self._fail("bad header (%s)" % e)
        if blk[257:265] != USTAR_MAGIC:
            self._fail("not a POSIX ustar header")
        kind = blk[156:157]
        if ti.size < 0:
            self._fail("negative size")
        if kind == b"x":
            if ti.size > PAX_MAX:
                self._fail("extended header of %d bytes" % ti.size)
            self._pax_size = ti.size
            self._state, self._need = self.PAX, ti.size + _pad(ti.size)
            if self._need == 0:
                self._pax, self._state, self._need = {}, self.HEADER, BLOCK
            return
        if kind == b"g":               # global headers say nothing we use
            self._state, self._need = self.GLOBAL, ti.size + _pad(ti.size)
            if self._need == 0:
                self._state, self._need = self.HEADER, BLOCK
            return
        pax, self._pax = self._pax or {}, None
        name = pax.get("path", ti.name)
        size = pax.get("size", ti.size)
        if kind not in (b"0", b"\0", b"5"):
            self._fail("%s: entry type %r is not allowed (only regular files and "
                       "directories)" % (name[:200], kind.decode("latin-1")))
        is_dir = kind == b"5" or (kind == b"\0" and ti.isdir())
        try:
            parts = check_path(name, is_dir)
        except TarError as e:
            self._fail(e.message)
        mode = ti.mode & 0o777
        pfd = self._parent(parts[:-1], name)
        if is_dir:
            try:
                os.mkdir(parts[-1], 0o700, dir_fd=pfd)
            except FileExistsError:
                try:           # implied earlier by a path under it: fine if a directory
                    _close(os.open(parts[-1], _DIR_FLAGS, dir_fd=pfd))
                except OSError:
                    self._fail("%s: duplicate entry" % name[:200])
            self._dirs[tuple(parts)] = mode
            if size:                   # a directory's data (never written): passed over
                self._state, self._need = self.GLOBAL, size + _pad(size)
            else:
                self._state, self._need = self.HEADER, BLOCK
            return
        try:
            fd = os.open(parts[-1], _CREATE_FLAGS, 0o600, dir_fd=pfd)
        except FileExistsError:
            self._fail("%s: duplicate entry" % name[:200])
        self._fd = fd
        self._entry = (mode, ti.mtime)
        self.files += 1
        self._state, self._need = self.DATA, size
        self._pad_after = _pad(size)
        if size == 0:
            self._end_file()

    def _end_file(self):
        mode, mtime = self._entry
        try:
            os.fchmod(self._fd, mode)
            try:
                os.utime(self._fd, (mtime, mtime))
            except (OverflowError, ValueError, OSError):
                pass           # a time the file system cannot hold: keep now
        finally:
            _close(self._fd)
            self._fd = -1
        if self._pad_after:
            self._state, self._need = self.PAD, self._pad_after
        else:
            self._state, self._need = self.HEADER, BLOCK

    def _parent(self, parts, name):
        """The staging directory holding an entry (made when an archive
        omits it: 0755 at commit), never through a symlink."""
        try:
            return self._chain.open(parts, lambda p: self._dirs.setdefault(p, 0o755))
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                self._fail("%s: a parent is not a directory" % name[:200])
            raise

    def finish(self):
        """The stream is over: was the archive complete?"""
        if self._state != self.TRAILER:
            self._fail("truncated archive (no end of archive)")

    # -- applying it

    def commit(self):
        """Moves staging's entries into the workspace (a directory merges
        into an existing directory, anything else replaces), applies the
        directories' modes, removes staging."""
        self._close_work()
        self._merge(self._stage_fd, self._root_fd)
        chain = _DirChain(self._root_fd)
        try:
            for parts, mode in reversed(list(self._dirs.items())):
                try:
                    os.fchmod(chain.open(parts), mode)
                except OSError:
                    pass       # replaced meanwhile by the session's own code
        finally:
            chain.close()
        self.discard()

    def _merge(self, sfd, dfd):
        for name in sorted(os.listdir(sfd)):
            sst = os.stat(name, dir_fd=sfd, follow_symlinks=False)
            try:
                dst = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                dst = None
            if dst is not None and stat.S_ISDIR(sst.st_mode) and stat.S_ISDIR(dst.st_mode):
                s2 = os.open(name, _DIR_FLAGS, dir_fd=sfd)
                try:
                    d2 = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                    try:
                        self._merge(s2, d2)
                    finally:
                        os.close(d2)
                finally:
                    os.close(s2)
                continue
            if dst is not None and stat.S_ISDIR(dst.st_mode):
                shutil.rmtree(name, dir_fd=dfd)
            elif dst is not None and stat.S_ISDIR(sst.st_mode):
                os.unlink(name, dir_fd=dfd)
            os.rename(name, name, src_dir_fd=sfd, dst_dir_fd=dfd)
