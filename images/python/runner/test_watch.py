"""The change list kept by inotify (ci_watch.py) against a walk of the tree.

Every test changes a real directory tree, then compares what the watch says
with the exact answer: a walk before and a walk after, diffed. Run:
    /usr/bin/python3 -m pytest images/python/runner/test_watch.py -q
"""

import os
import shutil
import tempfile

import pytest

import ci_watch
from test_runner import sandbox


def walk(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            if (st.st_mode & 0o170000) == 0o100000:
                out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def expected(before, after):
    out = []
    for p, v in after.items():
        o = before.get(p)
        if o is None:
            out.append({"path": p, "size": v[0], "change": "created"})
        elif o != v:
            out.append({"path": p, "size": v[0], "change": "modified"})
    for p in before:
        if p not in after:
            out.append({"path": p, "size": 0, "change": "deleted"})
    return sorted(out, key=lambda f: f["path"])


@pytest.fixture
def root():
    d = tempfile.mkdtemp(prefix="ciwatch-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def write(root, rel, data="x"):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(data)


def check(w, root, change, want_fallback=None):
    """Mark, change the tree, and compare the watch's list with the walks'."""
    w.mark()
    before = walk(root)
    change()
    got, fallback = w.changes()
    assert got == expected(before, walk(root))
    assert fallback == want_fallback
    return got


def test_burst_of_a_clone(root):
    """A git clone's shape: 20,000 files in 400 nested directories, with no
    read of the events in between (the reader thread keeps the queue short)."""
    write(root, "old/keep.txt")
    w = ci_watch.Watch(root)

    def clone():
        for i in range(400):
            d = os.path.join(root, "repo", "pkg%d" % (i % 20), "mod%d" % i)
            os.makedirs(d)
            for j in range(50):
                with open(os.path.join(d, "f%d.py" % j), "w") as f:
                    f.write("#" * j)
    got = check(w, root, clone)
    assert len(got) == 20_000 and {f["change"] for f in got} == {"created"}
    w.close()


def test_deletes_of_whole_trees_and_moves(root):
    for i in range(30):
        write(root, "a/b%d/c/f%d.txt" % (i, i), "y" * i)
        write(root, "m/n%d.txt" % i)
    write(root, "top.txt")
    w = ci_watch.Watch(root)
    got = check(w, root, lambda: shutil.rmtree(os.path.join(root, "a")))
    assert len(got) == 30 and {f["change"] for f in got} == {"deleted"}
    # a directory renamed: its files leave one path and appear at another
    got = check(w, root, lambda: os.rename(os.path.join(root, "m"), os.path.join(root, "moved")))
    assert len(got) == 60
    # and what is written into the moved directory afterwards is seen too
    check(w, root, lambda: write(root, "moved/later.txt", "late"))

    def swap():                      # a directory replaced by a file and back
        shutil.rmtree(os.path.join(root, "moved"))
        write(root, "moved", "now a file")
    check(w, root, swap)

    def swap_back():
        os.remove(os.path.join(root, "moved"))
        write(root, "moved/inner.txt", "dir again")
    check(w, root, swap_back)
    w.close()


def test_modify_truncate_touch_and_no_change(root):
    write(root, "d/x.txt", "12345")
    write(root, "d/y.txt", "y")
    write(root, "d/z.txt", "z")
    w = ci_watch.Watch(root)

    def edits():
        with open(os.path.join(root, "d/x.txt"), "r+") as f:
            f.truncate(2)
        os.utime(os.path.join(root, "d/y.txt"), ns=(1, 1))
        write(root, "tmp.txt")           # made and removed: no change
        os.remove(os.path.join(root, "tmp.txt"))
        os.symlink("d/z.txt", os.path.join(root, "link"))   # not a regular file
    got = check(w, root, edits)
    assert [f["path"] for f in got] == ["d/x.txt", "d/y.txt"]

    def replace():                   # rewritten through a rename, as editors do
        write(root, "d/z.new", "zz")
        os.rename(os.path.join(root, "d/z.new"), os.path.join(root, "d/z.txt"))
    got = check(w, root, replace)
    assert got == [{"path": "d/z.txt", "size": 2, "change": "modified"}]
    check(w, root, lambda: None)
    w.close()


def test_open_file_written_without_close(root):
    w = ci_watch.Watch(root)
    f = open(os.path.join(root, "log.txt"), "w")
    check(w, root, lambda: (f.write("a" * 100), f.flush()))
    check(w, root, lambda: (f.write("b"), f.flush()))
    f.close()
    w.close()


def test_overflow_falls_back_to_a_walk_and_stays_exact(root):
    """No reader thread: 20,000 creations overflow the kernel's queue (16,384
    events by default); the list is then made by a walk, and says so."""
    if int(open("/proc/sys/fs/inotify/max_queued_events").read()) > 60_000:
        pytest.skip("this kernel's inotify queue is too long to overflow here")
    for i in range(10):
        write(root, "keep/k%d" % i)
    write(root, "many/first")
    w = ci_watch.Watch(root, drain=False)

    def burst():                     # into a watched directory: 2 events a file
        shutil.rmtree(os.path.join(root, "keep"))
        d = os.path.join(root, "many")
        for i in range(20_000):
            open(os.path.join(d, "f%d" % i), "w").close()
    got = check(w, root, burst, want_fallback="overflow")
    assert len(got) == 20_010 and got[-1]["path"] == "many/f9999"
    # watched afresh afterwards: the next change is back on inotify
    check(w, root, lambda: write(root, "after.txt"))
    w.close()


def test_a_directory_it_cannot_watch_is_walked(root):
    for i in range(6):
        write(root, "d%d/f.txt" % i)
    w = ci_watch.Watch(root, max_watches=3)
    assert w.unwatched

    def edits():
        for i in range(6):
            write(root, "d%d/f.txt" % i, "changed %d" % i)
        write(root, "d5/new/deeper.txt")
    got = check(w, root, edits, want_fallback="unwatched")
    assert len(got) == 7
    w.close()


def test_a_stolen_fd_is_never_read(root):
    """User code closes the watch's fd and opens a file on its number: the
    watch must not read the file, and starts over with a walk."""
    w = ci_watch.Watch(root)
    fd = w.fd
    w.mark()
    # what user code can do: close it and get the number back for a file
    os.close(fd)
    path = os.path.join(root, "victim.txt")
    with open(path, "w") as f:
        f.write("user data")
    nfd = os.open(path, os.O_RDONLY)
    try:
        if nfd != fd:
            os.dup2(nfd, fd)
        got, fallback = w.changes()
        assert fallback == "overflow"
        assert got == [{"path": "victim.txt", "size": 9, "change": "created"}]
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0     # nothing of it was read
    finally:
        os.close(nfd)
        if nfd != fd:
            os.close(fd)
        w.close()


# ----------------------------------------------------- through the runner

def test_exec_change_list_over_a_large_tree():
    """The kernel's change list with 12,000 files present (over the old walk's
    10,000 cap): exact, not truncated, and made by the watch."""
    with sandbox("ciwatchk-") as k:
        r = k.exec("import os\nfor i in range(120):\n"
                   "    os.makedirs('data/%d' % i)\n"
                   "    for j in range(100):\n"
                   "        open('data/%d/%d.csv' % (i, j), 'w').write('a,b\\n')\n",
                   files_cap=20_000, timeout=120)  # 12,000 files: minutes on a busy machine
        assert r["status"] == "ok", r["error"]
        assert len(r["files"]) == 12_000 and not r["files_truncated"]
        assert r["done"]["files_fallback"] is None
        r = k.exec("open('data/7/3.csv', 'a').write('1,2\\n')\nimport shutil\n"
                   "shutil.rmtree('data/9')")
        assert r["done"]["files_fallback"] is None
        assert r["files"][0] == {"path": "data/7/3.csv", "size": 8, "change": "modified"}
        assert len(r["files"]) == 101
        assert {f["change"] for f in r["files"][1:]} == {"deleted"}
        # a file put there between executions (an upload) is not this one's
        with open(os.path.join(k.ws, "uploaded.txt"), "w") as f:
            f.write("u")
        r = k.exec("x = 1")
        assert r["files"] == [] and r["done"]["files_fallback"] is None
