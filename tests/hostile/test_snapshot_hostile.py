"""Hostile code and hostile store objects against snapshots (issue 13;
docs/snapshots.md). The sandbox's tar is input like any other, and so is
what the store hands back: each case is contained (nothing outside the
workspace is read or written, nothing half-applied), the daemon keeps
serving, and the neighbour's executions are not starved.

The store is the shared daemon's default directory store, under its own
state directory; objects are planted there by this test, by path."""
import hashlib
import io
import json
import os
import tarfile
import time
import uuid


def snapshot(h, sid, **body):
    return h.api.request("POST", "/v1/sessions/%s/snapshots" % sid, body=body, timeout=120)


def store_dir(h, tenant="default"):
    return os.path.join(h.d.state_dir, "store", "snapshots", tenant)


def plant(h, members, tenant="default", lie=None):
    """A snapshot written straight into the store: members is a list of
    (TarInfo, bytes or None); its manifest is consistent with the tar
    (sha256s computed), so only the scanner's rules can refuse it. lie
    edits the manifest before it is written."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    tar = buf.getvalue()
    sid = str(uuid.uuid4())
    entries, content = [], 0
    for info, data in members:
        e = {"path": info.name.rstrip("/"), "type": "dir" if info.isdir() else "file",
             "mode": info.mode & 0o777}
        if not info.isdir():
            e["size"] = len(data or b"")
            e["sha256"] = hashlib.sha256(data or b"").hexdigest()
            content += e["size"]
        entries.append(e)
    man = {"format": 1, "id": sid, "tenant": tenant, "workspace": "planted",
           "session": None, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "size": len(tar), "files": sum(1 for e in entries if e["type"] == "file"),
           "content_bytes": content, "sha256": hashlib.sha256(tar).hexdigest(),
           "entries": entries, "paths": None, "variables": None, "packages": [], "skipped": []}
    if lie:
        lie(man)
    d = os.path.join(store_dir(h, tenant), sid)
    os.makedirs(d)
    with open(os.path.join(d, "workspace.tar"), "wb") as f:
        f.write(tar)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(man, f)
    return sid


def member(name, data=None, kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if data is not None else 0
    return info, data


def sessions_of(h):
    st, doc = h.api.request("GET", "/v1/sessions")
    return {s["id"] for s in doc["sessions"]}


def test_links_fifos_and_devices_in_the_workspace_are_skipped(hostile):
    h = hostile
    sid = h.create()["id"]
    out = h.exec(sid, "import os\n"
                      "os.symlink('/etc/shadow', '/workspace/shadow')\n"
                      "os.symlink('/', '/workspace/root')\n"
                      "os.mkfifo('/workspace/pipe')\n"
                      "open('/workspace/ok.txt', 'w').write('fine')\n")
    assert out["status"] == "ok", out
    st, rec = snapshot(h, sid, variables=False)
    assert st == 201, (st, rec)
    reasons = {s["path"]: s["reason"] for s in rec["skipped"]}
    assert set(reasons) >= {"shadow", "root", "pipe"}, reasons
    with open(os.path.join(store_dir(h), rec["id"], "workspace.tar"), "rb") as f:
        names = tarfile.open(fileobj=f).getnames()
    assert "ok.txt" in names and not {"shadow", "root", "pipe"} & set(names), names
    h.delete(sid)
    h.assert_daemon_fine()


def test_a_planted_tar_that_escapes_is_refused_and_nothing_applied(hostile):
    h = hostile
    cases = {
        "dotdot": [member("ok.txt", b"x"), member("../escape.txt", b"boom")],
        "absolute": [member("/tmp/abs.txt", b"boom")],
        "symlink": [member("link", kind=tarfile.SYMTYPE, linkname="/etc/passwd")],
        "hardlink": [member("a.txt", b"a"), member("h", kind=tarfile.LNKTYPE, linkname="a.txt")],
        "device": [member("dev", kind=tarfile.CHRTYPE)],
    }
    before = sessions_of(h)
    for name, members in cases.items():
        snap = plant(h, members)
        st, doc = h.api.request("POST", "/v1/sessions", body={"restore": snap}, timeout=120)
        assert st == 422 and doc["error"]["code"] == "corrupt", (name, st, doc)
        assert snap in doc["error"]["message"], (name, doc)
    # No session was left behind by a refused restore, and nothing escaped.
    h.wait_for(lambda: sessions_of(h) <= before | {h.neighbour["id"]}, timeout=30,
               what="refused restores leave no session")
    assert not os.path.exists(os.path.join(h.d.state_dir, "store", "escape.txt"))
    assert not os.path.exists("/tmp/abs.txt")
    h.assert_daemon_fine()


def test_a_manifest_that_lies_is_refused(hostile):
    h = hostile
    lies = {
        "another tenant": lambda m: m.update(tenant="someone-else"),
        "a file's hash": lambda m: m["entries"][0].update(sha256="0" * 64),
        "the tar's hash": lambda m: m.update(sha256="f" * 64),
        "a missing entry": lambda m: m["entries"].pop(),
        "a larger size": lambda m: m.update(size=m["size"] + 512),
    }
    for what, lie in lies.items():
        snap = plant(h, [member("a.txt", b"aaa"), member("b.txt", b"bbb")], lie=lie)
        st, doc = h.api.request("POST", "/v1/sessions", body={"restore": snap}, timeout=120)
        assert st == 422 and doc["error"]["code"] == "corrupt", (what, st, doc)
    h.assert_daemon_fine()


def test_a_workspace_past_the_file_cap_is_413_and_the_session_lives_on(make_daemon):
    d = make_daemon("--snapshot-max-files", "200")
    sid = d.api.create()["id"]
    out = d.api.exec(sid, "import os\nos.makedirs('/workspace/many')\n"
                          "for i in range(500):\n"
                          "    open('/workspace/many/%d' % i, 'w').close()\n")
    assert out["status"] == "ok", out
    st, doc = d.api.request("POST", "/v1/sessions/%s/snapshots" % sid, body={}, timeout=120)
    assert st == 413, (st, doc)
    assert "paths" in doc["error"]["message"], doc
    # The session is untouched: its variables and files still there.
    out = d.api.exec(sid, "print(len(os.listdir('/workspace/many')))")
    assert out["stdout"].strip() == "500", out
    st, doc = d.api.request("POST", "/v1/sessions/%s/snapshots" % sid,
                            body={"paths": ["many/1*"], "variables": False}, timeout=120)
    assert st == 201 and doc["files"] == 111, (st, doc)


def test_a_snapshot_during_a_running_execution_keeps_the_files(hostile):
    h = hostile
    sid = h.create()["id"]
    h.exec(sid, "x = 1\nopen('/workspace/f.txt', 'w').write('f')")
    import threading
    t = threading.Thread(target=h.exec, args=(sid, "import time\ntime.sleep(3)"))
    t.start()
    h.wait_for(lambda: h.api.state(sid) == "busy", timeout=10)
    st, rec = snapshot(h, sid)
    t.join()
    assert st == 201, (st, rec)
    assert rec["files"] >= 1
    # The variables could not be saved while the code ran, and it says so.
    assert rec["variables"]["saved"] == [], rec["variables"]
    assert "busy" in json.dumps(rec["variables"]["skipped"]), rec["variables"]
    h.delete(sid)
    h.assert_daemon_fine()
