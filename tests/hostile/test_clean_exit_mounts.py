"""Issue 28, item 10: the IPC tmpfs the daemon mounts on <state-dir>/s
stayed mounted after a clean exit. Now a daemon that exits cleanly with no
sandbox left behind (none was left, or remove-on-exit ended them) unmounts
it: nothing of it is mounted under its state directory. With sessions left
for the next daemon to adopt, the tmpfs stays (their containers hold their
IPC directories in it) and the next daemon adopts them through it.

Mounts are found by the test daemon's own state directory, never by name."""
import os

import pytest


def mounted_under(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == path or p.startswith(path + "/")]


def ipc_tmpfs_in_use(d):
    return os.path.realpath(os.path.join(d.state_dir, "s")) in mounted_under(d.state_dir)


@pytest.mark.parametrize("remove_on_exit", ["false", "true"])
def test_a_clean_exit_leaves_nothing_mounted_under_the_state_dir(make_daemon, remove_on_exit):
    d = make_daemon("--pool-size", "0", "--remove-on-exit", remove_on_exit)
    if not ipc_tmpfs_in_use(d):
        pytest.skip("this node gives the daemon no IPC tmpfs (the engine does not share its "
                    "mount namespace)")
    s = d.api.create(limits={"disk_mb": 16})
    assert d.api.exec(s["id"], "print(6 * 7)")["stdout"] == "42\n"
    if remove_on_exit == "false":
        d.api.delete(s["id"])  # nothing left for a next daemon
    assert d.stop() == 0
    left = mounted_under(d.state_dir)
    assert left == [], "still mounted after a clean exit: %s" % left
    assert "unmounted (no sandbox outlives this daemon)" in d.read_log()


def test_sessions_left_for_the_next_daemon_keep_the_tmpfs_and_are_adopted(make_daemon):
    d = make_daemon("--pool-size", "0")
    if not ipc_tmpfs_in_use(d):
        pytest.skip("this node gives the daemon no IPC tmpfs")
    s = d.api.create()
    assert d.api.exec(s["id"], "x = 5")["status"] == "ok"
    assert d.stop() == 0
    assert ipc_tmpfs_in_use(d), "the IPC tmpfs went while a session still needs it"
    assert "stays mounted: sandboxes outlive this daemon" in d.read_log()
    d.restart()
    r = d.api.exec(s["id"], "print(x * 2)")
    assert r["status"] == "ok" and r["stdout"] == "10\n", r
    d.api.delete(s["id"])
    assert d.stop() == 0
    assert mounted_under(d.state_dir) == []
