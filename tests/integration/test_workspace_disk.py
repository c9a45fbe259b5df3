"""Issue 13, item 6: the disk budget apart from the memory budget.

With --workspace-backend loop (the default where the node can) a session's
/workspace is an ext4 image of disk_mb on the host's disk, loop-mounted under
<state-dir>/w/<id> and bind-mounted into the container: filling it is ENOSPC
inside the sandbox, and the memory limit counts memory only. The image and
its mount go with the session on every end path (delete, expiry, a restart
that finds it orphaned); an adopted session keeps its files.

Every mount and loop device these tests look at is found by the test
daemon's own state directory; the harness unmounts what is left under it
even when a test fails (remove_state_dir)."""
import os
import subprocess

from harness import wait_for

MB = 1 << 20


def mounts_under(path):
    """Mount points in the host's mount table at or under path."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == path or p.startswith(path + "/")]


def loops_under(path):
    """Loop devices whose backing file is under path."""
    path = os.path.realpath(path)
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if path + "/" in line]


def ws_dir(d):
    return os.path.join(d.state_dir, "w")


def ws_entries(d):
    return sorted(os.listdir(ws_dir(d)))


def assert_workspace_gone(d, sid, loop_wait_s=10):
    """The workspace of sid is unmounted and its image and mount point are
    gone (at once: the teardown waited for them), and its loop device is
    released. The last one is the kernel's: autoclear frees the device on
    its last close, which the kernel may finish a moment after umount
    returned (seen under load, listed as "(deleted)"), so it is waited for."""
    wdir = ws_dir(d)
    assert not mounts_under(os.path.join(wdir, sid)), mounts_under(wdir)
    assert not os.path.exists(os.path.join(wdir, sid + ".img"))
    assert not os.path.exists(os.path.join(wdir, sid))
    if loop_wait_s:
        wait_for(lambda: not any(sid in line for line in loops_under(wdir)), loop_wait_s,
                 interval=0.05, what="the loop device of %s to be released" % sid)
    else:
        assert not any(sid in line for line in loops_under(wdir)), loops_under(wdir)


def workspace_gone(d, sid):
    try:
        assert_workspace_gone(d, sid, loop_wait_s=0)
        return True
    except AssertionError:
        return False


FILL_THEN_ALLOCATE = """
import os
st = os.statvfs('/workspace')
free = st.f_bavail * st.f_frsize
n = 0
with open('/workspace/upload.bin', 'wb') as f:
    while n < free - %d:
        f.write(b'u' * (1 << 20))
        n += 1 << 20
b = bytearray(50 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
print(n >> 20, len(b) >> 20)
"""


def test_a_full_workspace_leaves_the_memory_alone(make_daemon):
    # The newcomer: /workspace filled to a little under disk_mb,
    # then a 50 MB allocation. With a 256 MB memory limit and 240 MB on
    # disk, a tmpfs workspace (charged to memory) leaves no room for it.
    d = make_daemon("--pool-size", "0")
    api = d.api
    s = api.create(limits={"memory_mb": 256, "disk_mb": 256, "exec_timeout_s": 60})
    try:
        r = api.exec(s["id"], FILL_THEN_ALLOCATE % (8 * MB), timeout_s=60)
        assert r["status"] == "ok", r
        written, allocated = (int(x) for x in r["stdout"].split())
        assert written >= 256 - 32 and allocated == 50, r
        # And the kernel kept its state: the next execution sees the buffer.
        assert api.exec(s["id"], "len(b) >> 20")["result"] == "50"
    finally:
        api.delete(s["id"])


def test_the_same_fill_is_killed_on_a_tmpfs_workspace(make_daemon):
    # The contrast (and the old behaviour): --workspace-backend tmpfs charges
    # the files to the memory cgroup, so the same steps are an OOM kill.
    d = make_daemon("--pool-size", "0", "--workspace-backend", "tmpfs")
    api = d.api
    assert not os.listdir(ws_dir(d))
    s = api.create(limits={"memory_mb": 256, "disk_mb": 256, "exec_timeout_s": 60})
    try:
        r = api.exec(s["id"], "import subprocess\n"
                              "print(subprocess.run(['stat', '-f', '-c', '%T', '/workspace'],"
                              " capture_output=True, text=True).stdout)")
        assert r["stdout"].strip() == "tmpfs", r
        assert not mounts_under(ws_dir(d))
        # The files cannot be reclaimed, so the kill takes the container.
        r = api.exec(s["id"], FILL_THEN_ALLOCATE % (8 * MB), timeout_s=60)
        assert r["status"] == "killed" and "out of memory" in r["reason"], r
    finally:
        api.send("DELETE", "/v1/sessions/" + s["id"])


def test_writing_past_disk_mb_is_enospc_and_the_session_keeps_working(make_daemon):
    d = make_daemon("--pool-size", "0")
    api = d.api
    s = api.create(limits={"memory_mb": 128, "disk_mb": 64})
    sid = s["id"]
    try:
        code = ("import errno\nn = 0\nerr = None\n"
                "try:\n"
                "    with open('/workspace/fill', 'wb') as f:\n"
                "        for _ in range(100):\n"
                "            f.write(b'z' * (1 << 20)); f.flush(); n += 1\n"
                "except OSError as e:\n"
                "    err = e\n"
                "print(n, err.errno, errno.errorcode[err.errno])")
        r = api.exec(sid, code)
        assert r["status"] == "ok", r
        n, code_, name = r["stdout"].split()
        assert name == "ENOSPC" and code_ == "28", r
        assert 50 <= int(n) <= 64, r
        # Still alive, and the space comes back when the file goes.
        assert api.exec(sid, "1 + 1")["result"] == "2"
        r = api.exec(sid, "import os\nos.remove('/workspace/fill')\n"
                          "open('/workspace/after', 'wb').write(b'a' * (32 << 20))\n"
                          "print(os.path.getsize('/workspace/after') >> 20)")
        assert r["status"] == "ok" and r["stdout"] == "32\n", r
        # The host sees one image of disk_mb, allocated whole at create
        # (issue 28: the budget is reserved), and no more than that (an
        # extent block or two of the host's file system).
        img = os.path.join(ws_dir(d), sid + ".img")
        assert os.path.getsize(img) == 64 * MB
        assert 64 * MB <= os.stat(img).st_blocks * 512 <= 65 * MB
    finally:
        api.delete(sid)
    assert_workspace_gone(d, sid)


def test_the_memory_limit_still_kills_a_memory_bomb(make_daemon):
    d = make_daemon("--pool-size", "0")
    api = d.api
    s = api.create(limits={"memory_mb": 128, "disk_mb": 512})
    try:
        r = api.exec(s["id"], "b = bytearray(400 * 1024 * 1024)")
        assert r["status"] == "killed" and "out of memory" in r["reason"], r
        assert api.exec(s["id"], "print(3)")["stdout"] == "3\n"
    finally:
        api.delete(s["id"])


def test_files_survive_executions_and_the_mount_goes_with_delete(make_daemon):
    d = make_daemon("--pool-size", "0")
    api = d.api
    s = api.create(limits={"disk_mb": 32})
    sid = s["id"]
    wdir = ws_dir(d)
    try:
        mnt = os.path.join(wdir, sid)
        assert mounts_under(wdir) == [mnt]
        (loop,) = loops_under(wdir)
        assert sid + ".img" in loop
        # Owned by the session's uid, mode 0700, nothing else in it.
        st = os.stat(mnt)
        (cid,) = d.containers("label=ci.session=" + sid)
        user = subprocess.run(["docker", "inspect", "-f", "{{.Config.User}}", cid],
                              capture_output=True, text=True, timeout=30).stdout.strip()
        assert "%d:%d" % (st.st_uid, st.st_gid) == user
        assert st.st_mode & 0o777 == 0o700
        r = api.exec(sid, "import os\nopen('/workspace/keep.txt', 'w').write('kept')\n"
                          "print(sorted(os.listdir('/workspace')))")
        assert r["stdout"] == "['keep.txt']\n", r
        r = api.exec(sid, "print(open('/workspace/keep.txt').read())")
        assert r["stdout"] == "kept\n", r
        # The files API sees the same file system.
        resp = api.send("GET", "/v1/sessions/%s/files/keep.txt" % sid)
        assert resp.status == 200 and resp.body == b"kept", resp.status
        # Inside, /workspace is the image (ext4 on a loop device), and the
        # host's path of it is not shown.
        r = api.exec(sid, "print(open('/proc/self/mountinfo').read())")
        line = [x for x in r["stdout"].splitlines() if " /workspace " in x]
        assert len(line) == 1 and " ext4 /dev/loop" in line[0], r["stdout"]
        assert d.state_dir not in r["stdout"]
    finally:
        api.delete(sid)
    # The delete is answered after the teardown: the mount is gone already.
    assert_workspace_gone(d, sid)
    assert not mounts_under(wdir) and not loops_under(wdir)


def test_an_expired_session_loses_its_image(make_daemon):
    d = make_daemon("--pool-size", "0")
    api = d.api
    s = api.create(limits={"disk_mb": 16}, idle_timeout_s=1)
    sid = s["id"]
    assert mounts_under(os.path.join(ws_dir(d), sid))
    d.wait_log("session %s: removed" % sid, timeout=30)
    assert_workspace_gone(d, sid)
    assert not loops_under(ws_dir(d))


def test_the_pool_serves_creates_with_their_disk_ready(make_daemon):
    d = make_daemon("--pool-size", "1")
    api = d.api
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1, what="a full pool")
    # The warm sandbox's image is made and mounted before any claim.
    (warm,) = mounts_under(ws_dir(d))
    hits = d.metric("ci_pool_hits_total")
    s = api.create()
    sid = s["id"]
    try:
        assert d.metric("ci_pool_hits_total") == hits + 1
        assert warm == os.path.join(ws_dir(d), sid)
        r = api.exec(sid, "import os\nopen('/workspace/a', 'wb').write(b'x' * (100 << 20))\n"
                          "st = os.stat('/workspace'); print(st.st_uid == os.getuid())")
        assert r["status"] == "ok" and r["stdout"] == "True\n", r
        # The refill brings its own image: one per sandbox.
        wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1,
                 what="the pool to refill")
        assert len(mounts_under(ws_dir(d))) == 2
    finally:
        api.delete(sid)
    assert_workspace_gone(d, sid)
    # A disk_mb other than the pool's is created cold, with its own size.
    s = api.create(limits={"disk_mb": 40})
    try:
        assert d.metric("ci_pool_hits_total") == hits + 1
        assert os.path.getsize(os.path.join(ws_dir(d), s["id"] + ".img")) == 40 * MB
    finally:
        api.delete(s["id"])


def test_a_restart_keeps_adopted_workspaces_and_sweeps_orphans(make_daemon):
    d = make_daemon("--pool-size", "1")
    api = d.api
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1, what="a full pool")
    kept = api.create(limits={"disk_mb": 24})
    lost = api.create(limits={"disk_mb": 24})
    assert api.exec(kept["id"], "open('/workspace/k', 'w').write('still here')")["status"] == "ok"
    # The warm sandbox's id is only on the disk.
    names = {n for n in ws_entries(d) if not n.endswith(".img")}
    (pooled,) = names - {kept["id"], lost["id"]}
    # SIGKILL: nothing is torn down. Then the second session's container
    # goes behind the daemon's back, so the restart finds its record alone.
    d.kill()
    (cid,) = d.containers("label=ci.session=" + lost["id"])
    subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=60, check=True)
    mark = d.log_mark()
    d.restart()
    d.wait_log("recovery: 1 adopted", since=mark, timeout=60)
    try:
        # The orphans' images go (the warm sandbox's container was an orphan,
        # the lost session's record had no container).
        wait_for(lambda: workspace_gone(d, pooled) and workspace_gone(d, lost["id"]), 30,
                 interval=0.1, what="the orphaned workspaces to be removed")
        # The adopted one keeps its mount and its files.
        assert mounts_under(os.path.join(ws_dir(d), kept["id"]))
        r = api.exec(kept["id"], "print(open('/workspace/k').read())")
        assert r["stdout"] == "still here\n", r
    finally:
        api.delete(kept["id"])
    assert_workspace_gone(d, kept["id"])
    # And after a clean stop (SIGTERM: the warm pool is released) only the
    # sessions that live on hold an image; with none, nothing is left.
    d.stop()
    assert not loops_under(ws_dir(d)) and not mounts_under(ws_dir(d)), mounts_under(ws_dir(d))
    d.restart()


def test_gc_lists_and_removes_a_leftover_workspace(make_daemon):
    # A workspace no session owns (what a daemon killed between its mount
    # and its record would leave), made by the test under the daemon's own
    # state directory: the orphans listing names it, gc unmounts and deletes
    # it before it answers. The test's own mount: it removes it if gc fails.
    d = make_daemon("--pool-size", "0")
    d.wait_orphan_sweep()
    fake = "0badc0de-0000-4000-8000-000000000000"
    img = os.path.join(ws_dir(d), fake + ".img")
    mnt = os.path.join(ws_dir(d), fake)
    subprocess.run(["truncate", "-s", "8M", img], check=True, timeout=30)
    subprocess.run(["mkfs.ext4", "-F", "-q", img], check=True, timeout=60)
    os.mkdir(mnt)
    subprocess.run(["mount", "-o", "loop", img, mnt], check=True, timeout=60)
    try:
        status, doc = d.api.request("GET", "/v1/admin/orphans")
        assert status == 200 and doc["workspaces"] == [fake], doc
        assert mounts_under(mnt)  # listing removes nothing
        r = d.ctl("gc")
        assert r.returncode == 0 and "found 1 stale workspace image: " + fake in r.stdout, r
        assert mounts_under(mnt)
        status, doc = d.api.request("POST", "/v1/admin/gc")
        assert status == 200 and doc["workspaces"] == [fake], doc
        assert_workspace_gone(d, fake)
        assert d.api.request("GET", "/v1/admin/orphans")[1]["workspaces"] == []
    finally:
        if mounts_under(mnt):
            subprocess.run(["umount", mnt], capture_output=True, timeout=60)


def test_a_node_that_cannot_loop_mount_falls_back_to_tmpfs(make_daemon):
    # No mkfs.ext4 on the daemon's PATH (it is in /usr/sbin): the start-up
    # probe fails, the daemon says why and serves tmpfs workspaces; the
    # probe leaves nothing behind.
    d = make_daemon("--pool-size", "0", env={"PATH": "/usr/bin:/bin"})
    d.wait_log("workspace: loop backend unavailable: a probe image could not be made")
    assert ws_entries(d) == [] and not mounts_under(ws_dir(d))
    s = d.api.create(limits={"disk_mb": 16})
    try:
        r = d.api.exec(s["id"], "import subprocess\n"
                                "print(subprocess.run(['stat', '-f', '-c', '%T', '/workspace'],"
                                " capture_output=True, text=True).stdout)")
        assert r["stdout"].strip() == "tmpfs", r
        assert ws_entries(d) == []
    finally:
        d.api.delete(s["id"])
