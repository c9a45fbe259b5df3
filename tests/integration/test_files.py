"""Issue 3: the files API (PUT/GET/DELETE /v1/sessions/{id}/files/{path},
GET /v1/sessions/{id}/files) and ci-ctl put/get/files/rmfile."""
import hashlib
import json
import os
import tempfile
import threading

from harness.procfs import rss_kb
from helpers_exec import (RFC3339, download_digest, error_of, files_url, first_bad_block, get_bytes,
                          new_session, pattern_chunks, put_bytes, quote_path, upload_stream)

BINARY = bytes(range(256)) * 64 + b"\x00\x00\xff\x00" + b"tail\x00"


def listing(api, sid):
    status, doc = api.request("GET", files_url(sid))
    assert status == 200, (status, doc)
    assert set(doc) >= {"files"}, doc
    return {f["path"]: f for f in doc["files"]}


def test_put_get_list_delete_round_trip(daemon, api, session):
    sid = session["id"]
    status, doc = put_bytes(daemon.port, sid, "dir/sub/x.bin", BINARY)
    assert status == 201, (status, doc)
    assert doc == {"path": "dir/sub/x.bin", "size": len(BINARY)}, doc

    status, resp, data = get_bytes(daemon.port, sid, "dir/sub/x.bin")
    assert status == 200 and data == BINARY, (status, data[:64])
    assert int(resp.getheader("Content-Length", len(data))) == len(BINARY)

    files = listing(api, sid)
    f = files["dir/sub/x.bin"]
    assert set(f) == {"path", "size", "mtime", "type"}, f
    assert f["size"] == len(BINARY) and f["type"] == "file" and RFC3339.match(f["mtime"]), f
    # The parents were created, and are listed as directories.
    assert files["dir"]["type"] == "dir" and files["dir/sub"]["type"] == "dir", files

    # The kernel sees the uploaded bytes.
    r = api.exec(sid, "import hashlib\n"
                      "hashlib.sha256(open('/workspace/dir/sub/x.bin', 'rb').read()).hexdigest()")
    assert r["result"] == repr(hashlib.sha256(BINARY).hexdigest()), r

    # Overwrite: the new content replaces the old one whole.
    status, doc = put_bytes(daemon.port, sid, "dir/sub/x.bin", b"short")
    assert status == 201 and doc["size"] == 5, doc
    assert get_bytes(daemon.port, sid, "dir/sub/x.bin")[2] == b"short"

    # An empty file is a file.
    status, doc = put_bytes(daemon.port, sid, "empty", b"")
    assert status == 201 and doc == {"path": "empty", "size": 0}, doc
    status, _, data = get_bytes(daemon.port, sid, "empty")
    assert status == 200 and data == b""

    assert api.request("DELETE", files_url(sid, "dir/sub/x.bin"))[0] == 204
    status, _, data = get_bytes(daemon.port, sid, "dir/sub/x.bin")
    assert status == 404, (status, data)
    assert error_of(api.request("GET", files_url(sid, "dir/sub/x.bin"))) == (404, "not_found")
    assert error_of(api.request("DELETE", files_url(sid, "dir/sub/x.bin"))) == (404, "not_found")
    assert "dir/sub/x.bin" not in listing(api, sid)
    r = api.exec(sid, "import os; os.path.exists('/workspace/dir/sub/x.bin')")
    assert r["result"] == "False"


def test_files_written_by_code_can_be_read_and_names_are_encoded(daemon, api, session):
    sid = session["id"]
    r = api.exec(sid, "import os\nos.makedirs('out', exist_ok=True)\n"
                      "open('out/r e?p#o%rt.txt', 'w').write('hello from the kernel')\nNone")
    assert r["status"] == "ok"
    status, _, data = get_bytes(daemon.port, sid, quote_path("out/r e?p#o%rt.txt"))
    assert status == 200 and data == b"hello from the kernel", (status, data)
    assert "out/r e?p#o%rt.txt" in listing(api, sid)
    status, doc = put_bytes(daemon.port, sid, quote_path("up load/ü.txt"), "é".encode())
    assert status == 201 and doc["path"] == "up load/ü.txt", doc
    r = api.exec(sid, "open('up load/ü.txt', encoding='utf-8').read()")
    assert r["result"] == "'é'", r


BAD_PATHS = ["%2Fetc%2Fpasswd", "/etc/passwd", "../x", "a/../../x", "%2e%2e/x", "%2E%2E%2Fx",
             "..", "a/..", "a%00b", "%00"]


def test_bad_paths_are_refused(daemon, api, session):
    sid = session["id"]
    for p in BAD_PATHS:
        url = files_url(sid, p)
        assert error_of(api.request("GET", url)) == (400, "bad_path"), p
        assert error_of(api.request("PUT", url, raw=b"evil")) == (400, "bad_path"), p
        assert error_of(api.request("DELETE", url)) == (400, "bad_path"), p
    # Nothing was written anywhere, and the session still works.
    r = api.exec(sid, "import os\n(sorted(os.listdir('/workspace')), os.path.exists('/x'))")
    assert r["result"] == "([], False)", r


def test_symlinks_out_of_the_workspace_are_refused(daemon, api, session):
    sid = session["id"]
    r = api.exec(sid, "import os\nos.symlink('/etc/passwd', '/workspace/link')\n"
                      "os.symlink('/etc', '/workspace/etcdir')\n"
                      "os.symlink('/workspace/inside.txt', '/workspace/ok_link')\n"
                      "open('/workspace/inside.txt', 'w').write('in')\nNone")
    assert r["status"] == "ok", r
    for p in ("link", "etcdir/passwd", "etcdir/hostname"):
        status, _, data = get_bytes(daemon.port, sid, p)
        assert 400 <= status < 500, (p, status, data[:100])
        assert b"root:" not in data and b"/bin/" not in data, data[:200]
        error_of((status, json.loads(data)))
    status, doc = put_bytes(daemon.port, sid, "etcdir/evil", b"x")
    assert 400 <= status < 500, (status, doc)
    files = listing(api, sid)
    assert files["link"]["type"] == "symlink" and files["etcdir"]["type"] == "symlink", files
    assert "etcdir/passwd" not in files  # the listing does not follow links out
    r = api.exec(sid, "import os; os.path.exists('/etc/evil')")
    assert r["result"] == "False"


# Code that runs until the test releases it (the file appears): whatever the
# test does meanwhile happens while the session is provably busy.
UNTIL_RELEASED = ("import os, time\n"
                  "while not os.path.exists('/workspace/release'):\n"
                  "    time.sleep(0.01)\n"
                  "'done'")


def test_files_work_while_code_runs(daemon, api, session):
    sid = session["id"]
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", api.exec(sid, UNTIL_RELEASED)))
    t.start()
    try:
        daemon.wait_state(sid, "busy")
        # The files API does not wait for the running code: these answer
        # while it still runs (it ends only once released, below).
        status, doc = put_bytes(daemon.port, sid, "during.txt", b"while busy")
        assert status == 201, (status, doc)
        status, _, data = get_bytes(daemon.port, sid, "during.txt")
        assert status == 200 and data == b"while busy"
        assert "during.txt" in listing(api, sid)
        assert api.request("GET", "/v1/sessions/" + sid)[1]["state"] == "busy"
    finally:
        put_bytes(daemon.port, sid, "release", b"")
        t.join(30)
    assert out["r"]["result"] == "'done'"


def test_files_of_unknown_and_ended_sessions(api):
    unknown = "00000000-0000-4000-8000-000000000000"
    assert error_of(api.request("GET", files_url(unknown, "x"))) == (404, "not_found")
    assert error_of(api.request("GET", files_url(unknown))) == (404, "not_found")
    assert error_of(api.request("PUT", files_url(unknown, "x"), raw=b"1")) == (404, "not_found")
    s = api.create()
    api.delete(s["id"])
    assert error_of(api.request("GET", files_url(s["id"], "x"))) == (410, "expired")
    assert error_of(api.request("PUT", files_url(s["id"], "x"), raw=b"1")) == (410, "expired")


KERNEL_SHA = ("import hashlib\nh = hashlib.sha256()\nwith open(%r, 'rb') as f:\n"
              "    for b in iter(lambda: f.read(1 << 20), b''):\n        h.update(b)\n"
              "h.hexdigest()")


def check_download(port, url, total, digest, gen, **kw):
    got = download_digest(port, url, **kw)
    assert got["status"] == 200 and not got["stalled"] and got["size"] == total, (
        "download: status %s, %d of %d bytes, stalled=%s %s"
        % (got["status"], got["size"], total, got["stalled"], got.get("error", "")))
    if got["sha256"] != digest:
        raise AssertionError("downloaded bytes differ from MiB %s on"
                             % first_bad_block(got["blocks"], gen))
    return got


def test_large_upload_streams_without_buffering(make_daemon):
    # A daemon of its own, so its RSS is not shared with other tests' work. An
    # ASan build keeps freed memory in a quarantine (256 MB by default, about
    # 25 MB of RSS over this test at 16 MB), which is the sanitizer's, not the
    # daemon's: keep it small for this daemon (non-ASan builds ignore this).
    d = make_daemon(env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:quarantine_size_mb=4"})
    total = 100 * 1024 * 1024
    gen, digest = pattern_chunks(total)
    with new_session(d.api) as s:
        sid = s["id"]
        url = files_url(sid, "big/blob.bin")
        pid = d.proc.pid
        before = rss_kb(pid)
        peak = [before]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_kb(pid))
                stop.wait(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            status, doc, sent, up_s = upload_stream(d.port, url, gen(), length=total)
            up_peak = max(peak[0], rss_kb(pid))
            print("\n[measure] 100 MB upload %.2f s (%.0f MB/s); daemon RSS before %d kB, "
                  "peak during the upload %d kB: growth %.1f MB"
                  % (up_s, 100 / up_s, before, up_peak, (up_peak - before) / 1024))
            assert status == 201, (status, doc)
            assert sent == total and doc == {"path": "big/blob.bin", "size": total}, doc
            assert (up_peak - before) / 1024 < 40, "the daemon buffered the upload"
            # What the sandbox stored is what was sent.
            r = d.api.exec(sid, KERNEL_SHA % "big/blob.bin")
            assert r["result"] == repr(digest), ("upload stored other bytes", r)
            got = check_download(d.port, url, total, digest, gen)
        finally:
            stop.set()
            sampler.join()
        after = rss_kb(pid)
        growth_mb = (max(peak[0], after) - before) / 1024
        print("[measure] 100 MB download %.2f s; daemon RSS peak overall %d kB, after %d kB: "
              "growth %.1f MB" % (got["seconds"], peak[0], after, growth_mb))
        assert growth_mb < 40, growth_mb
        # Chunked upload (no Content-Length) too.
        gen2, digest2 = pattern_chunks(5 * 1024 * 1024 + 123, chunk=100_000, seed=b"chunked")
        status, doc, _, _ = upload_stream(d.port, files_url(sid, "chunked.bin"), gen2())
        assert status == 201 and doc["size"] == 5 * 1024 * 1024 + 123, (status, doc)
        check_download(d.port, files_url(sid, "chunked.bin"), 5 * 1024 * 1024 + 123, digest2,
                       gen2)


def test_download_to_a_slow_reader(daemon, api, session):
    """The daemon holds back the sandbox while the client is slow, then
    resumes: every byte arrives, in order."""
    sid = session["id"]
    total = 24 * 1024 * 1024
    gen, digest = pattern_chunks(total, seed=b"slow")
    status, doc, _, _ = upload_stream(daemon.port, files_url(sid, "slow.bin"), gen(),
                                      length=total)
    assert status == 201, (status, doc)
    got = check_download(daemon.port, files_url(sid, "slow.bin"), total, digest, gen,
                         piece=256 * 1024, pace_s=0.01)
    print("\n[measure] 24 MB download to a client reading 256 KiB per 10 ms: %.2f s"
          % got["seconds"])
    # The files API still answers afterwards.
    status, doc = api.request("GET", files_url(sid), timeout=15)
    assert status == 200 and "slow.bin" in {f["path"] for f in doc["files"]}, (status, doc)


def test_upload_larger_than_the_disk_is_413(daemon, api):
    with new_session(api, limits={"disk_mb": 8}) as s:
        sid = s["id"]
        total = 20 * 1024 * 1024
        gen, _ = pattern_chunks(total)
        for length in (total, None):      # with Content-Length, then chunked
            status, doc, sent, _ = upload_stream(daemon.port, files_url(sid, "huge.bin"), gen(),
                                                 length=length)
            assert status == 413, (length, status, doc)
            assert doc["error"]["code"] == "payload_too_large", doc
            # No partial file is left behind, and the space is free again.
            assert "huge.bin" not in listing(api, sid)
            r = api.exec(sid, "import os, shutil\n"
                              "(sorted(os.listdir('/workspace')), shutil.disk_usage('/workspace').used < (1 << 20))")
            assert r["status"] == "ok" and r["result"] == "([], True)", r
        status, doc = put_bytes(daemon.port, sid, "small.bin", b"s" * 4096)
        assert status == 201, (status, doc)
        assert api.exec(sid, "len(open('small.bin', 'rb').read())")["result"] == "4096"


def test_ctl_put_get_files_rmfile(daemon, session):
    sid = session["id"]
    with tempfile.TemporaryDirectory(prefix="citest-ctl-") as tmp:
        local = os.path.join(tmp, "data.bin")
        with open(local, "wb") as f:
            f.write(BINARY)
        r = daemon.ctl("put", sid, local)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["data.bin", str(len(BINARY))], r.stdout
        r = daemon.ctl("put", sid, local, "in/copy.bin")
        assert r.returncode == 0 and r.stdout.split() == ["in/copy.bin", str(len(BINARY))], r
        r = daemon.ctl("put", sid, "-", "from-stdin.txt", input="piped text\n")
        assert r.returncode == 0 and r.stdout.split() == ["from-stdin.txt", "11"], r

        r = daemon.ctl("files", sid)
        assert r.returncode == 0, r.stderr
        for name in ("data.bin", "in/copy.bin", "from-stdin.txt"):
            assert name in r.stdout, r.stdout
        r = daemon.ctl("--json", "files", sid)
        paths = {f["path"]: f for f in json.loads(r.stdout)["files"]}
        assert paths["in/copy.bin"]["size"] == len(BINARY)

        dest = os.path.join(tmp, "back.bin")
        r = daemon.ctl("get", sid, "in/copy.bin", dest)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [dest, str(len(BINARY))], r.stdout
        with open(dest, "rb") as f:
            assert f.read() == BINARY
        r = daemon.ctl("get", sid, "from-stdin.txt", "-", text=False)
        assert r.returncode == 0 and r.stdout == b"piped text\n", r

        r = daemon.ctl("rmfile", sid, "in/copy.bin")
        assert r.returncode == 0 and r.stdout.strip() == "in/copy.bin", r
        r = daemon.ctl("get", sid, "in/copy.bin", os.path.join(tmp, "gone.bin"))
        assert r.returncode == 5 and "not_found" in r.stderr, r
        assert not os.path.exists(os.path.join(tmp, "gone.bin"))
        r = daemon.ctl("get", sid, "../etc/passwd", os.path.join(tmp, "p"))
        assert r.returncode == 5 and "bad_path" in r.stderr, r
