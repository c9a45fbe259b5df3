"""The workspace's change list, at a cost that follows the change, not the tree.

An execution's result lists the files it created, modified and deleted under
/workspace. Walking the whole tree before and after every execution made that
list cost 50 ms at 10,000 files. Instead the kernel keeps an index of the
tree (every regular file's size, mtime and inode, per directory) and an
inotify watch on every directory: an execution's change list is the index
compared with a fresh lstat of only the paths inotify named, and of the new
directories, which are scanned whole (files made in a directory before its
watch existed are found that way).

A thread moves the events from the kernel's queue into our memory while code
runs, so a burst of writes (a git clone) does not overflow the queue. The
events are read and applied only at the edges of an execution, on the main
thread, so the index never changes under the code that reads it.

When inotify cannot tell what changed, the list is made by walking the tree
and comparing it with the index, which is still exact; the result says so
(`files_fallback`):
  overflow        the kernel's queue (or ours) overflowed
  unwatched       a directory could not be watched (the watch limit, EACCES)
  too_many_files  the tree holds more than INDEX_MAX files: the old capped
                  walk, with files_truncated when it is cut
  no_inotify      inotify is not available here
"""

import ctypes
import errno
import os
import select
import struct
import threading
import time

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000

# What changes a file's entry or the tree: a write, a truncate or chmod
# (ATTRIB also covers utime), names coming and going.
WATCH_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO
              | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
              | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

INDEX_MAX = 200_000          # files indexed; beyond, the capped walk (memory)
PENDING_MAX = 64 << 20       # event bytes held between two reads of ours
READ_SIZE = 1 << 18
READ_PAUSE = 0.01            # s between the reader's reads of a burst
_EVENT = struct.Struct("iIII")


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


def _join(d, name):
    return d + "/" + name if d else name


class Watch:
    """The index of the tree under root and the watches that keep it."""

    def __init__(self, root, drain=True, max_watches=None):
        self.root = root
        self.drain = drain               # False: leave events in the kernel's queue
        self.max_watches = max_watches   # a lower watch limit than the kernel's
        self.libc = _libc()
        self.fd = -1
        self.dirs = {}                   # reldir -> {name: (size, mtime_ns, ino)}
        self.subdirs = {}                # reldir -> set of child dir names
        self.wd_dir = {}                 # wd -> reldir
        self.dir_wd = {}
        self.nfiles = 0
        self.unwatched = set()           # dirs with no watch: walked each time
        self.lock = threading.Lock()
        self.pending = []                # raw event bytes the thread read
        self.pending_bytes = 0
        self.overflow = False
        self.too_many = False
        self.thread = None
        self.wake = None
        self.start()

    # ---------------------------------------------------------------- setup

    def start(self):
        """(Re)build everything: the watches, then the index by a walk."""
        self._close()
        if self.libc is not None:
            fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd >= 0:
                self.fd = fd
        self.dirs, self.subdirs, self.wd_dir, self.dir_wd = {}, {}, {}, {}
        self.nfiles = 0
        self.unwatched = set()
        self.overflow = False
        self.too_many = False
        self._scan("", None)
        if self.fd >= 0 and self.drain:
            # The reader waits on the fd and on a pipe that _close writes to:
            # closing an fd does not wake a select on it in another thread.
            self.wake = os.pipe2(os.O_CLOEXEC)
            self.thread = threading.Thread(target=self._reader,
                                           args=(self.fd, self.wake[0]),
                                           name="ci-watch", daemon=True)
            self.thread.start()

    def _close(self):
        if self.thread is not None:
            try:
                os.write(self.wake[1], b"x")
            except OSError:
                pass
            self.thread.join(5)
            for w in self.wake:
                try:
                    os.close(w)
                except OSError:
                    pass
            self.thread = None
        fd, self.fd = self.fd, -1
        if fd >= 0 and self._fd_number_ours(fd):
            try:
                os.close(fd)             # the reader's select or read fails: it ends
            except OSError:
                pass
        with self.lock:
            self.pending = []
            self.pending_bytes = 0

    @staticmethod
    def _fd_number_ours(fd):
        try:
            return os.readlink("/proc/self/fd/%d" % fd) == "anon_inode:inotify"
        except OSError:
            return False

    def _reader(self, fd, wake):
        while True:
            try:
                ready, _, _ = select.select([fd, wake], [], [])
            except (OSError, ValueError):
                return
            if wake in ready:
                return
            # Let events gather before reading them: a thread woken for each
            # one takes the GIL from the code making them on every file
            # (12,000 files took 21 s instead of 0.3 s). 10 ms of the
            # kernel's 16,384-event queue is over a million events a second.
            time.sleep(READ_PAUSE)
            with self.lock:
                if self.fd != fd or not self._read_locked():
                    return

    def _fd_ours(self):
        # User code may close our fd and open a file that gets its number:
        # reading it then would eat the user's data. A cheap check first.
        try:
            return os.readlink("/proc/self/fd/%d" % self.fd) == "anon_inode:inotify"
        except OSError:
            return False

    def _read_locked(self):
        """Move what the kernel's queue holds into ours (the lock held, so
        the two readers keep the events in order). False when the fd broke."""
        if not self._fd_ours():
            self.fd = -2                 # not ours any more: never close it
            self.overflow = True
            return False
        while True:
            try:
                data = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                return True
            except OSError:
                self.overflow = True
                return False
            if self.pending_bytes + len(data) > PENDING_MAX:
                self.overflow = True
                self.pending = []
                self.pending_bytes = 0
            elif not self.overflow:
                self.pending.append(data)
                self.pending_bytes += len(data)

    def _add_watch(self, rel):
        if self.fd < 0:
            self.unwatched.add(rel)
            return
        if self.max_watches is not None and len(self.dir_wd) >= self.max_watches:
            self.unwatched.add(rel)
            return
        path = os.path.join(self.root, rel) if rel else self.root
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), WATCH_MASK)
        if wd < 0:
            e = ctypes.get_errno()
            if e != errno.ENOENT and e != errno.ENOTDIR:
                self.unwatched.add(rel)  # ENOSPC (the limit), EACCES
            return
        old = self.wd_dir.get(wd)       # the same directory reached again
        if old is not None and old != rel:
            self.dir_wd.pop(old, None)
        self.wd_dir[wd] = rel
        self.dir_wd[rel] = wd
        self.unwatched.discard(rel)

    def _scan(self, top, changes):
        """Index the tree under top from the disk, watching each directory
        before listing it (so nothing made meanwhile is missed). With
        changes, each file that differs from the index is recorded there."""
        stack = [top]
        while stack:
            rel = stack.pop()
            if rel not in self.dirs:
                self.dirs[rel] = {}
                self.subdirs[rel] = set()
                parent, _, name = rel.rpartition("/")
                if rel:
                    self.subdirs.setdefault(parent, set()).add(name)
            if self.fd >= 0 and rel not in self.dir_wd:
                self._add_watch(rel)
            elif self.fd < 0:
                self.unwatched.add(rel)
            seen_files = set()
            seen_dirs = set()
            try:
                it = os.scandir(os.path.join(self.root, rel) if rel else self.root)
            except OSError:
                it = None
            if it is not None:
                with it:
                    for e in it:
                        try:
                            if e.is_dir(follow_symlinks=False):
                                seen_dirs.add(e.name)
                                stack.append(_join(rel, e.name))
                            elif e.is_file(follow_symlinks=False):
                                st = e.stat(follow_symlinks=False)
                                seen_files.add(e.name)
                                self._set(rel, e.name,
                                          (st.st_size, st.st_mtime_ns, st.st_ino), changes)
                        except OSError:
                            pass
            files = self.dirs[rel]
            for name in [n for n in files if n not in seen_files]:
                self._set(rel, name, None, changes)
            for name in [n for n in self.subdirs[rel] if n not in seen_dirs]:
                self._forget_tree(_join(rel, name), changes)
        if self.nfiles > INDEX_MAX:
            self.too_many = True

    def _set(self, rel, name, st, changes):
        """Set (st) or remove (None) a file's entry. With changes, the
        entry's value before the first change of this execution is kept
        there, so the list compares the start with the end, as a walk before
        and after would (made and removed again: no change)."""
        files = self.dirs.get(rel)
        if files is None:
            if st is None:
                return
            self._ensure_dir(rel)
            files = self.dirs[rel]
        old = files.get(name)
        if old == st:
            return
        if changes is not None:
            changes.setdefault(_join(rel, name), old)
        if st is None:
            del files[name]
            self.nfiles -= 1
        else:
            files[name] = st
            if old is None:
                self.nfiles += 1

    def _ensure_dir(self, rel):
        parts = rel.split("/") if rel else []
        cur = ""
        for p in [""] + parts:
            cur = _join(cur, p) if p else cur
            if cur not in self.dirs:
                self.dirs[cur] = {}
                self.subdirs[cur] = set()
                if cur:
                    parent, _, name = cur.rpartition("/")
                    self.subdirs.setdefault(parent, set()).add(name)

    def _forget_tree(self, top, changes):
        """A directory that is gone: every file under it is deleted."""
        stack = [top]
        while stack:
            rel = stack.pop()
            for name in list(self.dirs.get(rel, ())):
                self._set(rel, name, None, changes)
            for name in self.subdirs.pop(rel, ()):
                stack.append(_join(rel, name))
            self.dirs.pop(rel, None)
            self.unwatched.discard(rel)
            wd = self.dir_wd.pop(rel, None)
            if wd is not None:
                self.wd_dir.pop(wd, None)
                if self.fd >= 0:
                    self.libc.inotify_rm_watch(self.fd, wd)
        parent, _, name = top.rpartition("/")
        if top and parent in self.subdirs:
            self.subdirs[parent].discard(name)

    # ---------------------------------------------------------------- events

    def _take_events(self):
        with self.lock:
            if self.fd >= 0:
                self._read_locked()
            chunks, self.pending, self.pending_bytes = self.pending, [], 0
        return b"".join(chunks)

    def _apply(self, changes):
        """Apply what inotify said since the last call. Returns the reason
        a walk had to stand in, or None."""
        data = self._take_events()
        if self.overflow:
            return "overflow"
        files, trees, gone = set(), set(), set()
        off, n = 0, len(data)
        while off + 16 <= n:
            wd, mask, _cookie, length = _EVENT.unpack_from(data, off)
            name = data[off + 16:off + 16 + length].rstrip(b"\0")
            off += 16 + length
            if mask & IN_Q_OVERFLOW:
                self.overflow = True
                return "overflow"
            rel = self.wd_dir.get(wd)
            if rel is None:
                continue
            if mask & IN_IGNORED:
                self.wd_dir.pop(wd, None)
                if self.dir_wd.get(rel) == wd:
                    self.dir_wd.pop(rel, None)
                    if rel == "":
                        return "overflow"   # the root itself: start over
                continue
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                continue                    # the parent's event says it
            path = _join(rel, os.fsdecode(name))
            if mask & IN_ISDIR:
                if mask & (IN_CREATE | IN_MOVED_TO):
                    trees.add(path)
                elif mask & (IN_DELETE | IN_MOVED_FROM):
                    gone.add(path)
                    trees.discard(path)
            else:
                files.add(path)
        for path in gone:
            if os.path.isdir(os.path.join(self.root, path)) and not os.path.islink(
                    os.path.join(self.root, path)):
                trees.add(path)             # moved away and another put back
            self._forget_tree(path, changes)
        for path in files:
            rel, _, name = path.rpartition("/")
            try:
                st = os.lstat(os.path.join(self.root, path))
            except OSError:
                st = None
            if st is not None and (st.st_mode & 0o170000) == 0o100000:
                self._set(rel, name, (st.st_size, st.st_mtime_ns, st.st_ino), changes)
            else:
                self._set(rel, name, None, changes)
                if st is not None and (st.st_mode & 0o170000) == 0o040000:
                    trees.add(path)         # a dir event seen without IN_ISDIR
        for path in sorted(trees):
            self._scan(path, changes)
        return None

    def _walk_unwatched(self, changes):
        for rel in sorted(self.unwatched):
            if rel in self.dirs:
                self._scan(rel, changes)

    # ---------------------------------------------------------------- the API

    def mark(self):
        """At an execution's start: take in what changed since the last
        execution (an upload, a restore), without reporting it. Returns the
        reason a walk stood in, or None."""
        return self._refresh(None)

    def changes(self):
        """At an execution's end: what changed since mark(), as
        ([{"path","size","change"}] sorted by path, fallback reason or None)."""
        orig = {}
        reason = self._refresh(orig)
        out = []
        for path, old in orig.items():
            rel, _, name = path.rpartition("/")
            new = self.dirs.get(rel, {}).get(name)
            if new == old:
                continue
            if old is None:
                out.append({"path": path, "size": new[0], "change": "created"})
            elif new is None:
                out.append({"path": path, "size": 0, "change": "deleted"})
            else:
                out.append({"path": path, "size": new[0], "change": "modified"})
        out.sort(key=lambda f: f["path"])
        return out, reason

    def close(self):
        self._close()

    def _refresh(self, changes):
        if self.fd == -2:
            self.overflow = True            # our fd was taken: start over
        elif self.fd < 0:
            self._scan("", changes)         # no inotify: a full walk, exact
            return "no_inotify"
        reason = "overflow" if self.fd == -2 else self._apply(changes)
        if reason == "overflow":
            # What changed is unknown: walk afresh and compare with the
            # index, which was right at mark(), so the list is exact too.
            old_dirs = self.dirs
            self.start()
            if changes is not None:
                self._diff_index(old_dirs, changes)
            return "overflow"
        if self.unwatched:
            self._walk_unwatched(changes)
            return "unwatched"
        return None

    def _diff_index(self, old_dirs, changes):
        for rel, files in self.dirs.items():
            old = old_dirs.get(rel, {})
            for name, st in files.items():
                if old.get(name) != st:
                    changes.setdefault(_join(rel, name), old.get(name))
        for rel, files in old_dirs.items():
            new = self.dirs.get(rel, {})
            for name, st in files.items():
                if name not in new:
                    changes.setdefault(_join(rel, name), st)
