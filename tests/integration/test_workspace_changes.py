"""Issue 17: an execution's change list (`files`) from the runner's inotify
index, through the real daemon and sandbox: exact after a checkout-sized
burst of writes, after deletes of whole trees and renames, beyond the old
walk's 10,000-entry cap, and blind to changes made between executions."""
import json

from helpers_exec import files_url, put_bytes


def exec_ok(api, sid, code, timeout_s=60):
    r = api.exec(sid, code, timeout_s=timeout_s)
    assert r["status"] == "ok", r
    return r


def changes(r):
    return {f["path"]: (f["change"], f["size"]) for f in r["files"]}


BURST = """
import io, os, tarfile
# a checkout: 6,000 files in 240 directories, written by tarfile as an
# unpacked archive would be, plus a few edits of files already there
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    for i in range(240):
        for j in range(25):
            data = ("# module %d.%d\\n" % (i, j)).encode()
            info = tarfile.TarInfo("repo/pkg%d/sub%d/m%d.py" % (i % 12, i, j))
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
buf.seek(0)
with tarfile.open(fileobj=buf) as t:
    t.extractall(".", filter="data")
open("notes.txt", "a").write("more\\n")
"""


def test_checkout_sized_burst_then_tree_deletes(api, session):
    sid = session["id"]
    exec_ok(api, sid, "open('notes.txt', 'w').write('n\\n')\n"
                      "import os\nos.makedirs('old/a/b')\n"
                      "for i in range(40): open('old/a/b/%d' % i, 'w').write('x')")
    r = exec_ok(api, sid, BURST)
    got = changes(r)
    assert r["files_fallback"] is None, r["files_fallback"]
    # the daemon keeps at most 1000 entries; the count and the kinds are exact
    assert r["files_truncated"] is True and len(r["files"]) == 1000
    listed = [f["path"] for f in r["files"]]
    assert listed == sorted(listed)
    assert "notes.txt" in got and got["notes.txt"] == ("modified", 7)
    assert {c for c, _ in got.values()} == {"created", "modified"}
    sample = got["repo/pkg0/sub0/m0.py"]
    assert sample == ("created", len("# module 0.0\n")), sample

    # the burst is all there: a count from inside agrees
    r = exec_ok(api, sid, "import os\nsum(len(f) for _, _, f in os.walk('repo'))")
    assert r["result"] == "6000" and r["files"] == [], r

    # a whole tree deleted, another renamed, in one execution
    r = exec_ok(api, sid, "import shutil, os\nshutil.rmtree('old')\n"
                          "os.rename('repo/pkg3/sub15', 'moved')\n")
    got = changes(r)
    assert r["files_fallback"] is None and not r["files_truncated"]
    deleted = sorted(p for p, (c, _) in got.items() if c == "deleted")
    created = sorted(p for p, (c, _) in got.items() if c == "created")
    assert deleted[:40] == sorted("old/a/b/%d" % i for i in range(40))
    assert deleted[40:] == sorted("repo/pkg3/sub15/m%d.py" % j for j in range(25))
    assert created == sorted("moved/m%d.py" % j for j in range(25))
    assert {s for p, (c, s) in got.items() if c == "deleted"} == {0}

    # and the renamed directory is watched at its new place
    r = exec_ok(api, sid, "open('moved/m0.py', 'a').write('# edited\\n')")
    assert changes(r) == {"moved/m0.py": ("modified", len("# module 15.0\n# edited\n"))}


def test_beyond_ten_thousand_files_and_uploads_between(daemon, api, session):
    sid = session["id"]
    r = exec_ok(api, sid, "import os\nfor i in range(110):\n"
                          "    os.makedirs('data/%d' % i)\n"
                          "    for j in range(100):\n"
                          "        open('data/%d/%d.csv' % (i, j), 'w').write('a,b\\n')\n")
    assert r["files_fallback"] is None
    # The walk of old stopped at 10,000 entries and said files_truncated on
    # every execution from then on; the index holds the 11,000 files.
    r = exec_ok(api, sid, "open('data/5/5.csv', 'a').write('1,2\\n')")
    assert r["files"] == [{"path": "data/5/5.csv", "size": 8, "change": "modified"}], r
    assert r["files_truncated"] is False and r["files_fallback"] is None

    # An upload between executions belongs to no execution; the next one
    # reports only its own change, and sees the upload's later edit.
    status, doc = put_bytes(daemon.port, sid, "data/up.bin", b"uploaded")
    assert status == 201, doc
    r = exec_ok(api, sid, "x = 1")
    assert r["files"] == [] and r["files_fallback"] is None, r
    r = exec_ok(api, sid, "open('data/up.bin', 'ab').write(b'+')")
    assert r["files"] == [{"path": "data/up.bin", "size": 9, "change": "modified"}], r
    # a delete through the API, then a file of the same name made by code
    assert api.request("DELETE", files_url(sid, "data/up.bin"))[0] == 204
    r = exec_ok(api, sid, "open('data/up.bin', 'w').write('new')")
    assert r["files"] == [{"path": "data/up.bin", "size": 3, "change": "created"}], r


def test_result_carries_files_fallback(api, session):
    r = exec_ok(api, session["id"], "1")
    assert "files_fallback" in r and r["files_fallback"] is None
    assert json.dumps(r)  # the field is plain JSON
