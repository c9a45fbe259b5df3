"""Hostile code and clients against the loop-mounted /workspace (issue 13,
item 6; workspace_disk.h). Each case is contained, the daemon keeps serving,
and the session's image, mount and loop device are gone after it.

Mounts and loop devices are found by the shared daemon's own state
directory, never by name."""
import concurrent.futures
import os
import subprocess

import pytest

MB = 1 << 20


def ws_dir(h):
    return os.path.join(os.path.realpath(h.d.state_dir), "w")


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def loop_of(path):
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if "(" + path + ")" in line]


def assert_gone(h, sid):
    mnt = os.path.join(ws_dir(h), sid)
    assert not mounted(mnt)
    assert not loop_of(mnt + ".img")
    assert not os.path.exists(mnt) and not os.path.exists(mnt + ".img")


@pytest.fixture
def loop_backend(hostile):
    if not os.path.isdir(ws_dir(hostile)) or "loop backend unavailable" in hostile.d.read_log():
        pytest.skip("this node has no loop backend (the daemon fell back to tmpfs)")
    return hostile


def test_running_out_of_inodes_is_enospc_and_contained(loop_backend):
    h = loop_backend
    with h.victim(limits={"disk_mb": 8, "memory_mb": 128, "exec_timeout_s": 30}) as s:
        sid = s["id"]
        r = h.exec(sid, "import os\nn = 0\nerr = None\n"
                        "try:\n"
                        "    while n < 200000:\n"
                        "        open('/workspace/f%d' % n, 'w').close(); n += 1\n"
                        "except OSError as e:\n"
                        "    err = e.errno\n"
                        "print(n, err)", timeout_s=30)
        assert r["status"] == "ok", r
        n, err = r["stdout"].split()
        assert err == "28" and int(n) < 200000, r
        assert h.exec(sid, "print(4)")["stdout"] == "4\n"
    assert_gone(h, sid)
    h.assert_daemon_fine()


def test_the_sandbox_cannot_reach_the_image_or_remount_it(loop_backend):
    h = loop_backend
    with h.victim() as s:
        sid = s["id"]
        r = h.exec(sid, "import glob, os, subprocess\n"
                        "print(sorted(glob.glob('/dev/loop*')))\n"
                        "p = subprocess.run(['mount', '-o', 'remount,suid', '/workspace'],"
                        " capture_output=True)\n"
                        "print(p.returncode != 0)\n"
                        "st = os.statvfs('/workspace')\n"
                        "print(bool(st.f_flag & os.ST_NOSUID), bool(st.f_flag & os.ST_NODEV),"
                        " bool(st.f_flag & os.ST_NOEXEC))")
        assert r["status"] == "ok" and r["stdout"] == "[]\nTrue\nTrue True True\n", r
        # A link in the workspace to a host path means nothing on the host:
        # the daemon never walks the image's files, it unmounts the image.
        r = h.exec(sid, "import os\nos.symlink('/etc', '/workspace/etc')\n"
                        "os.symlink('/', '/workspace/root')\nprint('ok')")
        assert r["stdout"] == "ok\n", r
    assert_gone(h, sid)
    assert os.path.isdir("/etc") and os.path.exists("/etc/passwd")
    h.assert_daemon_fine()


def test_a_writer_left_running_does_not_keep_the_mount(loop_backend):
    # A background process still writing to /workspace when the session is
    # deleted: the container goes first, then the mount and the device.
    h = loop_backend
    with h.victim(limits={"disk_mb": 16}) as s:
        sid = s["id"]
        r = h.exec(sid, "import subprocess\n"
                        "subprocess.Popen(['sh', '-c', 'while :; do echo x >> /workspace/log;"
                        " done'], start_new_session=True)\nprint('started')")
        assert r["stdout"] == "started\n", r
        log = os.path.join(ws_dir(h), sid, "log")
        h.wait_for(lambda: os.path.exists(log) and os.path.getsize(log) > 0, 10,
                   what="the writer to write")
    assert_gone(h, sid)
    h.assert_daemon_fine()


def test_the_largest_disk_is_reserved_and_goes(loop_backend):
    # A client asking for the largest disk gets it reserved on the host's
    # disk at create (issue 28: a sparse image let another tenant's writes
    # take it), no more, and it is given back at the delete.
    h = loop_backend
    with h.victim(limits={"disk_mb": 4096}) as s:
        sid = s["id"]
        img = os.path.join(ws_dir(h), sid + ".img")
        assert os.path.getsize(img) == 4096 * MB
        blocks = os.stat(img).st_blocks * 512
        assert 4096 * MB <= blocks <= 4097 * MB, blocks
        r = h.exec(sid, "import os\nst = os.statvfs('/workspace')\n"
                        "print(st.f_blocks * st.f_frsize >> 20)")
        assert r["status"] == "ok" and 3900 <= int(r["stdout"]) <= 4096, r
    assert_gone(h, sid)
    h.assert_daemon_fine()


def test_concurrent_creates_get_a_device_each(loop_backend):
    h = loop_backend

    def one(i):
        s = h.create({"disk_mb": 8 + i})
        try:
            r = h.exec(s["id"], "open('/workspace/me', 'w').write(%r)\n"
                                "print(open('/workspace/me').read())" % s["id"])
            return s["id"], r
        finally:
            h.delete(s["id"])

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(4)))
    for sid, r in results:
        assert r["status"] == "ok" and r["stdout"] == sid + "\n", r
        assert_gone(h, sid)
    h.assert_daemon_fine()
