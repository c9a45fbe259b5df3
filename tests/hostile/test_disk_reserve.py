"""Issue 28, item 3: one tenant could fill the file system under the state
directory. The workspace images were sparse and nothing bounded their sum,
so a tenant writing within its own budget took the blocks another tenant had
been promised (ENOSPC at 50 of its 256 MiB).

Now each image is allocated whole at create (fallocate), a create that does
not fit beside the others and --workspace-disk-headroom-mb is refused (503,
with words), and a tenant's disk_mb summed over its live sessions has a
quota (429 quota_exceeded naming disk_mb).

The small file system is the test's own: an ext4 image in a temporary
directory of its own, loop-mounted, with the daemon's --state-dir on it.
Everything mounted under it (the daemon's IPC tmpfs, the sessions'
workspaces) and the file system itself are unmounted at the end, whatever
happened, found by its own path; the image is deleted with the temporary
directory."""
import os
import shutil
import subprocess
import tempfile

import pytest

ADMIN = "admin-" + "d" * 40
MB = 1 << 20


def mounted_under(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == path or p.startswith(path + "/")]


@pytest.fixture
def small_fs():
    """An 800 MiB ext4 file system of the test's own, mounted; its path
    (short: the state directory's path bounds the sessions' socket paths).
    Requested before make_daemon, so it is torn down after the daemon."""
    top = tempfile.mkdtemp(prefix="cid-", dir="/tmp")
    img = os.path.join(top, "fs.img")
    mnt = os.path.join(top, "fs")
    try:
        os.mkdir(mnt)
        subprocess.run(["truncate", "-s", "800M", img], check=True, timeout=30)
        subprocess.run(["mkfs.ext4", "-F", "-q", "-m", "0", img], check=True, timeout=120)
        subprocess.run(["mount", "-o", "loop", img, mnt], check=True, timeout=60)
        yield mnt
    finally:
        # Workspaces and the IPC tmpfs a daemon left, then the file system
        # (mount -o loop set autoclear: its loop device goes with it), then
        # the image.
        for p in sorted(mounted_under(mnt), reverse=True):
            subprocess.run(["umount", "-l", p], capture_output=True, timeout=60)
        shutil.rmtree(top, ignore_errors=True)


def daemon_on(make_daemon, fs, *flags):
    state = os.path.join(fs, "state")
    d = make_daemon("--pool-size", "0", "--state-dir", state, "--remove-on-exit", "true",
                    *flags, admin_key=ADMIN)
    if "loop backend unavailable" in d.read_log():
        pytest.skip("this node has no loop backend (the daemon fell back to tmpfs)")
    return d


def fill(client, sid):
    """Write /workspace/fill until ENOSPC; MiB written."""
    r = client.send("POST", "/v1/sessions/%s/exec" % sid, body={
        "code": "import os\nn = 0\nerr = None\nbuf = b'x' * (1 << 20)\n"
                "try:\n"
                "    with open('/workspace/fill', 'wb') as f:\n"
                "        while n < 4096:\n"
                "            f.write(buf); f.flush(); n += 1\n"
                "        os.fsync(f.fileno())\n"
                "except OSError as e:\n"
                "    err = e.errno\n"
                "print(n, err)\n",
        "timeout_s": 60}, timeout=120)
    assert r.status == 200 and r.doc["status"] == "ok", (r.status, r.doc)
    n, err = r.doc["stdout"].split()
    return int(n), err


def test_one_tenant_filling_its_budget_leaves_anothers_space_writable(small_fs, make_daemon):
    d = daemon_on(make_daemon, small_fs, "--workspace-disk-headroom-mb", "64",
                  "--max-disk-mb", "1024")
    calm = d.client(d.key("calm")["key"])
    hog = d.client(d.key("hog")["key"])
    status, mine = calm.request("POST", "/v1/sessions",
                                body={"limits": {"disk_mb": 200, "memory_mb": 128}})
    assert status == 201, mine
    hogs = []
    status, s = hog.request("POST", "/v1/sessions",
                            body={"limits": {"disk_mb": 320, "memory_mb": 128}})
    assert status == 201, s
    hogs.append(s["id"])
    # 200 + 320 of the 800 MiB are taken: a second 320 does not fit beside
    # them and the 64 MiB headroom. With sparse images it was admitted.
    second = hog.send("POST", "/v1/sessions", body={"limits": {"disk_mb": 320, "memory_mb": 128}})
    if second.status == 201:
        hogs.append(second.doc["id"])
    # The hog writes every session it got to ENOSPC: its own budget.
    for sid in hogs:
        fill(hog, sid)
    # The calm tenant's promised space is all there: 180 of its 200 MiB
    # (ext4's own metadata takes a little of the image).
    n, err = write_mb(calm, mine["id"], 180)
    assert (n, err) == (180, "None"), \
        "the calm tenant got ENOSPC at %d of its 200 MiB (errno %s)" % (n, err)
    # The refusal: 503 unavailable, saying why and what helps.
    assert second.status == 503, (second.status, second.doc)
    err = second.doc["error"]
    assert err["code"] == "unavailable", err
    for word in ("disk", "320 MiB", "workspace-disk-headroom-mb", "retry"):
        assert word in err["message"], err
    # What fits is still admitted: the calm tenant's 200 MiB come back at
    # its delete, and the hog's second create fits then.
    assert calm.send("DELETE", "/v1/sessions/" + mine["id"]).status == 204
    status, s = hog.request("POST", "/v1/sessions",
                            body={"limits": {"disk_mb": 150, "memory_mb": 128}})
    assert status == 201, s
    # Each image holds its whole budget on the host's disk from its create.
    ws = os.path.join(small_fs, "state", "w")
    img = os.path.join(ws, s["id"] + ".img")
    assert os.stat(img).st_blocks * 512 >= 150 * MB


def write_mb(client, sid, mb):
    """Write mb MiB to /workspace/mine and fsync; (MiB written, errno)."""
    r = client.send("POST", "/v1/sessions/%s/exec" % sid, body={
        "code": "import os\nn = 0\nerr = None\nbuf = b'y' * (1 << 20)\n"
                "try:\n"
                "    with open('/workspace/mine', 'wb') as f:\n"
                "        while n < %d:\n"
                "            f.write(buf); f.flush(); n += 1\n"
                "        os.fsync(f.fileno())\n"
                "except OSError as e:\n"
                "    err = e.errno\n"
                "print(n, err)\n" % mb,
        "timeout_s": 60}, timeout=120)
    assert r.status == 200 and r.doc["status"] == "ok", (r.status, r.doc)
    n, err = r.doc["stdout"].split()
    return int(n), err


def test_a_tenant_s_disk_mb_quota_bounds_its_sessions(small_fs, make_daemon):
    d = daemon_on(make_daemon, small_fs, "--workspace-disk-headroom-mb", "16",
                  "--quota-disk-mb", "96")
    a = d.client(d.key("acme")["key"])
    b = d.client(d.key("other")["key"])
    status, doc = d.admin.request("GET", "/v1/admin/tenants/acme/quota")
    assert status == 200 and doc["quota"]["disk_mb"] == 96, doc
    status, s1 = a.request("POST", "/v1/sessions", body={"limits": {"disk_mb": 64}})
    assert status == 201, s1
    r = a.send("POST", "/v1/sessions", body={"limits": {"disk_mb": 64}})
    assert r.status == 429, (r.status, r.doc)
    assert r.doc["error"]["code"] == "quota_exceeded" and r.doc["error"]["quota"] == "disk_mb", r.doc
    assert (r.header("Retry-After") or "").isdigit()
    # Within what is left it is admitted; another tenant's budget is its own.
    status, s2 = a.request("POST", "/v1/sessions", body={"limits": {"disk_mb": 32}})
    assert status == 201, s2
    status, o = b.request("POST", "/v1/sessions", body={"limits": {"disk_mb": 64}})
    assert status == 201, o
    status, u = a.request("GET", "/v1/usage")
    assert status == 200 and u["usage"]["disk_mb"] == 96, u
    # An override per tenant, like every quota; an ended session gives its
    # disk back.
    status, doc = d.admin.request("PUT", "/v1/admin/tenants/acme/quota", body={"disk_mb": 200})
    assert status == 200 and doc["quota"]["disk_mb"] == 200, doc
    assert a.send("DELETE", "/v1/sessions/" + s1["id"]).status == 204
    status, s3 = a.request("POST", "/v1/sessions", body={"limits": {"disk_mb": 160}})
    assert status == 201, s3
    status, u = a.request("GET", "/v1/usage")
    assert status == 200 and u["usage"]["disk_mb"] == 192, u
