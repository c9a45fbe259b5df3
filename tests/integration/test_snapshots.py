"""Issue 13, items 1-4 and 7: snapshots of a session's workspace, kept in a
store, restored into new sessions (the shared spec: SNAPSHOT_SPEC.md,
docs/api.md "Snapshots").

Everything is real: the daemon, its containers, a directory store in a
temporary directory of the test's own, and an S3 store that is s3rver from
npm (tests/s3/) behind the SigV4 checker of test_blobstore.py, read and
written by the official AWS SDK for JavaScript (tests/s3/sdk_interop.mjs).
The package index is test_packages.py's (a PEP 503 index on 127.0.0.1
serving wheels that test writes itself), reached by the made-up name
pypi.test through a hosts-only resolver.

What each test made is removed by id even when it fails: sessions (deleted
by the test's Sessions list), daemons (finish(): containers by label, Redis
keys by prefix), s3rver by pid, stores and data directories by path.
"""
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
import uuid

import pytest

from harness import Daemon, free_port, wait_for
from harness.procfs import stop_process

# The S3 peers and the package index are the other modules' (one copy of
# each): s3rver started behind the SigV4 checker, the SDK driver, the
# hand-written wheels and the PEP 503 index.
from test_blobstore import BUCKET, S3DIR, S3rver, SigV4Front, creds_file
from test_packages import Index, make_wheel, pip_image  # noqa: F401 (a fixture)

ADMIN = "admin-" + "s" * 40
MB = 1024 * 1024
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
SNAP_TIMEOUT = 600  # a request that snapshots or restores 100 MB on a loaded host
# The sandbox image, when it is not the daemon's default (one built from
# this tree's images/python with the ws_tar runner, before ci/python:latest is).
IMAGE = os.environ.get("CITEST_SNAP_IMAGE")


def sha_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MB), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- requests

def snapshot(client, sid, body=None, timeout=SNAP_TIMEOUT):
    """POST /v1/sessions/{sid}/snapshots -> (status, doc)."""
    return client.request("POST", "/v1/sessions/%s/snapshots" % sid, body=body, timeout=timeout)


def snapshot_ok(client, sid, body=None):
    st, doc = snapshot(client, sid, body)
    assert st == 201, (st, doc)
    assert doc["state"] == "stored", doc
    assert UUID_RE.match(doc["id"]), doc
    return doc


def restore(client, timeout=SNAP_TIMEOUT, **body):
    """POST /v1/sessions with restore/workspace -> (status, doc)."""
    return client.request("POST", "/v1/sessions", body=body, timeout=timeout)


def put_file(client, sid, path, data):
    st, doc = client.request("PUT", "/v1/sessions/%s/files/%s" % (sid, urllib.parse.quote(path)),
                             raw=data,
                             headers={"Content-Type": "application/octet-stream"}, timeout=300)
    assert st == 201, (st, doc)


def get_file(client, sid, path):
    """The file's bytes, or None when the session has no such file."""
    r = client.send("GET", "/v1/sessions/%s/files/%s" % (sid, urllib.parse.quote(path)),
                    timeout=300)
    if r.status == 404:
        return None
    assert r.status == 200, (r.status, r.body[:300])
    return r.body


def list_files(client, sid):
    """{path: type} of every entry under /workspace (the files API)."""
    st, doc = client.request("GET", "/v1/sessions/%s/files" % sid)
    assert st == 200, (st, doc)
    return {f["path"]: f["type"] for f in doc["files"]}


def run(client, sid, code):
    r = client.exec(sid, code)
    assert r["status"] == "ok", r
    return r["stdout"]


def get_snap(client, snap_id):
    return client.request("GET", "/v1/snapshots/%s" % snap_id)


def list_snaps(client, workspace=None):
    path = "/v1/snapshots" + ("?workspace=%s" % workspace if workspace else "")
    st, doc = client.request("GET", path)
    assert st == 200, (st, doc)
    return doc["snapshots"]


def wait_stored(client, snap_id, timeout=180):
    """The snapshot's record once its state is stored (a pending one is
    being retried in the background)."""
    got = {}

    def stored():
        st, doc = get_snap(client, snap_id)
        assert st == 200, (st, doc)
        got["doc"] = doc
        return doc["state"] == "stored"
    wait_for(stored, timeout, interval=0.5, what="snapshot %s to be stored" % snap_id)
    return got["doc"]


class Sessions:
    """Sessions a test made, deleted at its end whatever happens."""

    def __init__(self, client):
        self.client = client
        self.ids = []

    def create(self, client=None, **body):
        c = client or self.client
        s = c.create(**body)
        self.ids.append((c, s["id"]))
        return s

    def adopt(self, client, doc):
        self.ids.append((client, doc["id"]))
        return doc

    def close(self):
        for c, sid in self.ids:
            try:
                c.delete(sid)
            except OSError:
                pass


# ---------------------------------------------------------------- the stores

class DirStore:
    """The directory store (--store dir:PATH), a temporary directory of the
    test's own: objects are files at PATH/<key>."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="cit-snapstore-")
        self.arg = ["--store", "dir:%s" % self.root]

    def path(self, tenant, snap_id, name):
        p = os.path.join(self.root, "snapshots", tenant, snap_id, name)
        assert os.path.exists(p), "no %s in the dir store (it holds %s)" % (
            p, [os.path.join(d, f) for d, _, fs in os.walk(self.root) for f in fs][:20])
        return p

    def read(self, tenant, snap_id, name):
        with open(self.path(tenant, snap_id, name), "rb") as f:
            return f.read()

    def write(self, tenant, snap_id, name, data):
        d = os.path.join(self.root, "snapshots", tenant, snap_id)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    def exists(self, tenant, snap_id, name):
        return os.path.exists(os.path.join(self.root, "snapshots", tenant, snap_id, name))

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


class S3Store:
    """s3rver on a port of its own (data in a temporary directory, kept
    across a stop and start on the same port), optionally behind the SigV4
    checker; the daemon's flags point at the checker when there is one."""

    PREFIX = "ci"

    def __init__(self, signed=True):
        self.tmp = tempfile.mkdtemp(prefix="cit-s3snap-")
        self.port = free_port()
        self.front = None
        try:
            self.srv = self._start()
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)  # nobody holds a store that did not start
            raise
        try:
            self.front = SigV4Front(self.port) if signed else None
        except BaseException:
            self.remove()
            raise
        self.creds = creds_file(_Path(self.tmp))
        endpoint = self.front.endpoint if self.front else self.srv.endpoint
        self.endpoint = endpoint
        self.arg = ["--store", "s3://%s/%s" % (BUCKET, self.PREFIX), "--store-endpoint",
                    endpoint, "--store-credentials-file", self.creds]

    def _start(self):
        return S3rver(_Path(self.tmp), port=self.port)

    def kill(self):
        self.srv.stop(signal.SIGKILL)

    def start_again(self):
        self.srv = self._start()

    def key(self, tenant, snap_id, name):
        return "%s/snapshots/%s/%s/%s" % (self.PREFIX, tenant, snap_id, name)

    def sdk(self, *args):
        """The official SDK (tests/s3/sdk_interop.mjs), through the checker
        when there is one (its signatures pass it: test_blobstore.py)."""
        env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")
        p = subprocess.run(["node", os.path.join(S3DIR, "sdk_interop.mjs"), self.endpoint,
                            BUCKET, *args], capture_output=True, text=True, env=env, timeout=300,
                           cwd=S3DIR)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def remove(self):
        try:
            if self.front is not None:
                self.front.stop()
        finally:
            try:
                if self.srv.proc.poll() is None:
                    self.srv.stop()
            finally:
                shutil.rmtree(self.tmp, ignore_errors=True)


class _Path(str):
    """The few pathlib operations test_blobstore's S3rver and creds_file use
    (`/`, mkdir, write_text), on a plain directory name."""

    def __truediv__(self, other):
        return _Path(os.path.join(self, other))

    def mkdir(self, exist_ok=False):
        os.makedirs(self, exist_ok=exist_ok)

    def write_text(self, text):
        with open(self, "w") as f:
            f.write(text)


# ---------------------------------------------------------------- the daemons

@pytest.fixture(scope="module")
def index():
    wheels = []
    fn, data = make_wheel("tinypkg", "1.2", {"tinypkg/__init__.py":
                                             "VERSION = '1.2'\nfrom tinydep import ANSWER\n"},
                          requires=["tinydep"])
    wheels.append(("tinypkg", fn, data))
    fn, data = make_wheel("tinydep", "0.3", {"tinydep/__init__.py": "ANSWER = 42\n"})
    wheels.append(("tinydep", fn, data))
    ix = Index(wheels)
    yield ix
    ix.stop()


def _daemon(redis_server, tmpdir_session, store, *extra, image=None, index=None):
    args = ["--pool-size", "0", "--kill-grace-ms", "1000", *store.arg]
    image = IMAGE or image
    if image is not None:
        args += ["--images", "python=%s" % image]
    if index is not None:
        hosts = os.path.join(tmpdir_session, "snap-hosts-%s" % uuid.uuid4().hex[:8])
        with open(hosts, "w") as f:
            f.write("127.0.0.1 pypi.test other.test\n")
        args += ["--egress-resolver", "hosts-only", "--egress-hosts-file", hosts,
                 "--egress-trusted", "127.0.0.1:%d" % index.port,
                 "--pip-index-url", "http://pypi.test:%d/simple/" % index.port,
                 "--install-max-timeout-s", "60"]
    return Daemon(redis_server, tmpdir_session, tuple(args) + extra, admin_key=ADMIN)


@pytest.fixture(scope="module")
def dirstore():
    s = DirStore()
    yield s
    s.remove()


@pytest.fixture(scope="module")
def dird(redis_server, tmpdir_session, dirstore, pip_image, index):  # noqa: F811
    """The daemon on the directory store, with the package index."""
    d = _daemon(redis_server, tmpdir_session, dirstore, image=pip_image, index=index)
    try:
        yield d
    finally:
        d.finish()


@pytest.fixture(scope="module")
def s3store():
    s = S3Store(signed=True)
    yield s
    s.remove()


@pytest.fixture(scope="module")
def s3d(redis_server, tmpdir_session, s3store):
    d = _daemon(redis_server, tmpdir_session, s3store)
    try:
        yield d
    finally:
        d.finish()


def _tenant(d, name):
    key = d.key(name)["key"]
    return d.client(key), key


@pytest.fixture(scope="module")
def dir_a(dird):
    return _tenant(dird, "snap-a")


@pytest.fixture(scope="module")
def dir_b(dird):
    return _tenant(dird, "snap-b")


@pytest.fixture
def sessions(dir_a):
    s = Sessions(dir_a[0])
    yield s
    s.close()


# ---------------------------------------------------------------- workspaces

# Files of a small workspace: nested directories, a binary file that does
# not compress, names sorted in an order the tar must keep (bytewise).
SMALL = {
    "a.csv": b"x,y\n1,2\n",
    "B.txt": b"upper case sorts first\n",
    "data/raw.bin": os.urandom(300000),
    "data/z/deep.txt": b"deep\n",
    "out/report.csv": b"r\n" * 1000,
    "unicode-\u00e9.txt": "caf\u00e9\n".encode(),
}

VARS_CODE = r"""
import math as m
import json as _private_module
x = 41
data = {"a": [1, 2, 3], "b": ("t", 2.5)}
blob = bytes(range(256)) * 10
f = lambda: 1
def g():
    return 2
class K:
    pass
gen = (i for i in range(3))
print("set")
"""

VARS_CHECK = r"""
print(repr((x, data, blob == bytes(range(256)) * 10, m.pi > 3,
            [n for n in ('f', 'g', 'K', 'gen', '_private_module') if n in globals()])))
"""
VARS_WANT = "(41, {'a': [1, 2, 3], 'b': ('t', 2.5)}, True, True, [])"


def fill(client, sid, files):
    for path, data in files.items():
        put_file(client, sid, path, data)


def check_files(client, sid, files):
    for path, data in files.items():
        got = get_file(client, sid, path)
        assert got is not None, "%s is missing after the restore" % path
        assert sha_bytes(got) == sha_bytes(data), "%s differs after the restore" % path


def check_record(doc, files_min=None):
    for k in ("id", "workspace", "session", "size", "files", "sha256", "created_at", "state",
              "content_bytes", "variables", "skipped", "paths"):
        assert k in doc, (k, doc)
    assert re.match(r"^[0-9a-f]{64}$", doc["sha256"]), doc
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", doc["created_at"]), doc
    if files_min is not None:
        assert doc["files"] >= files_min, doc


def check_manifest(man, rec, tenant):
    """The manifest as stored matches the record and the spec's format 1."""
    assert man["format"] == 1, man
    assert man["id"] == rec["id"] and man["tenant"] == tenant, man
    assert man["workspace"] == rec["workspace"], man
    assert man["sha256"] == rec["sha256"] and man["size"] == rec["size"], (man, rec)
    assert man["files"] == rec["files"] and man["content_bytes"] == rec["content_bytes"]
    files = [e for e in man["entries"] if e["type"] == "file"]
    assert len(files) == man["files"], man
    assert sum(e["size"] for e in files) == man["content_bytes"]
    paths = [e["path"].rstrip("/") for e in man["entries"]]
    # depth-first, names bytewise, a directory before its contents
    assert paths == sorted(paths, key=lambda p: [c.encode() for c in p.split("/")]), paths
    for e in man["entries"]:
        assert e["type"] in ("file", "dir"), e
        assert not e["path"].startswith("/") and ".." not in e["path"].split("/"), e
        assert e["mode"] & ~0o777 == 0, e
    return {e["path"]: e for e in files}


def tar_entries(data):
    """[(name, type, size, sha256|None)] of a tar object."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        for m in t:
            h = None
            if m.isfile():
                h = sha_bytes(t.extractfile(m).read())
            out.append((m.name.rstrip("/"), "file" if m.isfile() else "dir" if m.isdir()
                        else m.type, m.size if m.isfile() else 0, h))
    return out


# ---------------------------------------------------------------- the cases

def test_snapshot_and_restore_dir_store(dird, dirstore, dir_a, sessions):
    """Files, variables and the record: the tar object in the store is what
    the record and the manifest say (sha256, size, one entry per file with
    its sha256), and a restore brings back exactly those bytes."""
    tenant, _ = dir_a
    s = sessions.create(workspace="dir-%s" % uuid.uuid4().hex[:8])
    sid = s["id"]
    assert s["workspace"].startswith("dir-") and s.get("restored") is None, s
    fill(tenant, sid, SMALL)
    assert run(tenant, sid, VARS_CODE).strip() == "set"
    rec = snapshot_ok(tenant, sid)
    check_record(rec, files_min=len(SMALL))
    assert rec["workspace"] == s["workspace"] and rec["session"] == sid, rec
    assert rec["paths"] is None, rec
    v = rec["variables"]
    assert {"x", "data", "blob"} <= set(v["saved"]), v
    assert v["modules"].get("m") == "math", v
    skipped = {i["name"] for i in v["skipped"]}
    assert {"f", "g", "K", "gen"} <= skipped, v
    assert "_private_module" not in v["saved"] and "_private_module" not in skipped, v
    assert all(i["reason"] for i in v["skipped"]), v
    # the objects
    tar = dirstore.read("snap-a", rec["id"], "workspace.tar")
    assert sha_bytes(tar) == rec["sha256"] and len(tar) == rec["size"], rec
    man = json.loads(dirstore.read("snap-a", rec["id"], "manifest.json"))
    files = check_manifest(man, rec, "snap-a")
    for path, data in SMALL.items():
        assert files[path]["sha256"] == sha_bytes(data) and files[path]["size"] == len(data)
    assert ".ci/vars.pkl" in files, sorted(files)
    ents = tar_entries(tar)
    assert [(e["path"].rstrip("/"), e["type"]) for e in man["entries"]] == \
        [(n, t) for n, t, _, _ in ents]
    assert all(files[n]["sha256"] == h for n, t, _, h in ents if t == "file")
    # GET, and the list
    st, doc = get_snap(tenant, rec["id"])
    assert st == 200 and doc["id"] == rec["id"] and doc["sha256"] == rec["sha256"], doc
    assert rec["id"] in [r["id"] for r in list_snaps(tenant)]
    # restore into a new session
    st, r = restore(tenant, restore=rec["id"])
    assert st == 201, (st, r)
    sessions.adopt(tenant, r)
    got = r["restored"]
    assert got["snapshot"] == rec["id"] and got["workspace"] == rec["workspace"], r
    assert got["files"] == rec["files"] and got["size"] == rec["size"], r
    assert got["ms"] >= 0, r
    assert {"x", "data", "blob"} <= set(got["variables"]["loaded"]), r
    assert got["variables"]["modules"].get("m") == "math", r
    check_files(tenant, r["id"], SMALL)
    assert run(tenant, r["id"], VARS_CHECK).strip() == VARS_WANT
    # vars.pkl is consumed by the load: not left in the workspace
    assert get_file(tenant, r["id"], ".ci/vars.pkl") is None


def test_snapshot_and_restore_s3_store(s3d, s3store):
    """The same through s3rver behind the SigV4 checker: every request the
    daemon signed passed it; the objects are where the spec says."""
    tenant, _ = _tenant(s3d, "s3-a")
    ss = Sessions(tenant)
    try:
        s = ss.create()
        sid = s["id"]
        fill(tenant, sid, SMALL)
        run(tenant, sid, VARS_CODE)
        refused = s3store.front.refused
        rec = snapshot_ok(tenant, sid)
        check_record(rec, files_min=len(SMALL))
        assert rec["workspace"] == sid, rec  # the default name: the session id
        assert s3store.front.refused == refused and s3store.front.checked > 0
        st, r = restore(tenant, restore=rec["id"])
        assert st == 201, (st, r)
        ss.adopt(tenant, r)
        assert r["restored"]["snapshot"] == rec["id"], r
        check_files(tenant, r["id"], SMALL)
        assert run(tenant, r["id"], VARS_CHECK).strip() == VARS_WANT
        assert s3store.front.refused == refused
    finally:
        ss.close()


def test_interop_with_the_aws_sdk(s3d, s3store, tmp_path):
    """Objects ci wrote are listed and read back by @aws-sdk/client-s3; a
    snapshot the SDK uploads in ci's format (a tar made by Python's tarfile,
    a manifest made here by the spec) restores."""
    tenant, _ = _tenant(s3d, "s3-sdk")
    ss = Sessions(tenant)
    try:
        s = ss.create()
        fill(tenant, s["id"], SMALL)
        rec = snapshot_ok(tenant, s["id"], {"variables": False})
        assert rec["variables"] is None, rec
        prefix = "%s/snapshots/s3-sdk/%s/" % (S3Store.PREFIX, rec["id"])
        listed = s3store.sdk("list", prefix)
        assert sorted(o["key"] for o in listed) == [prefix + "manifest.json",
                                                    prefix + "workspace.tar"], listed
        assert {o["key"]: o["size"] for o in listed}[prefix + "workspace.tar"] == rec["size"]
        tar_out, man_out = str(tmp_path / "ci.tar"), str(tmp_path / "ci.json")
        assert s3store.sdk("get", prefix + "workspace.tar", tar_out) == {"size": rec["size"]}
        assert sha_file(tar_out) == rec["sha256"]
        s3store.sdk("get", prefix + "manifest.json", man_out)
        with open(man_out) as f:
            files = check_manifest(json.load(f), rec, "s3-sdk")
        with open(tar_out, "rb") as f:
            ents = tar_entries(f.read())
        assert {n: h for n, t, _, h in ents if t == "file"} == \
            {p: e["sha256"] for p, e in files.items()}

        # The other way: a snapshot made outside ci, uploaded by the SDK.
        snap_id = str(uuid.uuid4())
        content = {"notes/readme.md": b"# from the SDK\n", "notes/sub/n.bin": os.urandom(70000),
                   "top.txt": b"top\n"}
        tar_bytes, manifest = build_snapshot(snap_id, "s3-sdk", "sdk-made", content)
        key = "%s/snapshots/s3-sdk/%s/" % (S3Store.PREFIX, snap_id)
        (tmp_path / "sdk.tar").write_bytes(tar_bytes)
        (tmp_path / "sdk.json").write_bytes(manifest)
        s3store.sdk("put", key + "workspace.tar", str(tmp_path / "sdk.tar"))
        s3store.sdk("put", key + "manifest.json", str(tmp_path / "sdk.json"))  # last: commits
        st, r = restore(tenant, restore=snap_id)
        assert st == 201, (st, r)
        ss.adopt(tenant, r)
        assert r["restored"]["snapshot"] == snap_id and r["restored"]["files"] == 3, r
        check_files(tenant, r["id"], content)
        assert run(tenant, r["id"], "print(1+1)").strip() == "2"
    finally:
        ss.close()


def build_snapshot(snap_id, tenant, workspace, content):
    """(tar bytes, manifest bytes) in ci's format (SNAPSHOT_SPEC.md): pax,
    depth-first, names sorted bytewise, a directory before its contents,
    regular files and directories only."""
    dirs = set()
    for p in content:
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    names = sorted(list(dirs) + list(content), key=lambda p: [c.encode() for c in p.split("/")])
    buf = io.BytesIO()
    entries = []
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for n in names:
            info = tarfile.TarInfo(n)
            info.mtime = int(time.time())
            if n in dirs:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                t.addfile(info)
                entries.append({"path": n, "type": "dir", "mode": 0o755})
            else:
                data = content[n]
                info.size = len(data)
                info.mode = 0o644
                t.addfile(info, io.BytesIO(data))
                entries.append({"path": n, "type": "file", "size": len(data), "mode": 0o644,
                                "sha256": sha_bytes(data)})
    tar_bytes = buf.getvalue()
    manifest = {"format": 1, "id": snap_id, "tenant": tenant, "workspace": workspace,
                "session": None, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "size": len(tar_bytes), "files": len(content), "sha256": sha_bytes(tar_bytes),
                "content_bytes": sum(len(d) for d in content.values()), "entries": entries,
                "paths": None, "variables": None, "packages": [], "skipped": []}
    return tar_bytes, json.dumps(manifest).encode()


def test_restore_after_expiry_brings_back_files_packages_and_variables(dird, dirstore, dir_a,
                                                                         sessions, index):
    """A session with persist.on_end and a short idle timeout installs a
    package, writes files and sets variables, then expires: its exit
    snapshot restores all three into a new session, and the package
    imports there without a request to the index (not reinstalled)."""
    tenant, _ = dir_a
    name = "exp-%s" % uuid.uuid4().hex[:8]
    s = sessions.create(workspace=name, idle_timeout_s=10, network={"allow": ["other.test:1"]},
                        persist={"paths": None, "variables": True, "on_end": True})
    sid = s["id"]
    assert s["persist"]["on_end"] is True, s
    st, doc = tenant.request("POST", "/v1/sessions/%s/packages" % sid,
                             body={"pip": ["tinypkg==1.2"], "timeout_s": 60}, timeout=120)
    assert st == 200, (st, doc)
    run(tenant, sid, VARS_CODE + "\nopen('/workspace/kept.txt', 'w').write('kept\\n')\n")
    seen = len(index.requests)
    # The reaper ends it, and snapshots it first.
    wait_for(lambda: tenant.request("GET", "/v1/sessions/%s" % sid, timeout=10)[0] == 410, 120,
             interval=0.5, what="session %s to expire" % sid)
    wait_for(lambda: list_snaps(tenant, name), 120, interval=0.5,
             what="the exit snapshot of %s to be listed" % name)
    snaps = list_snaps(tenant, name)
    assert len(snaps) == 1, snaps
    rec = wait_stored(tenant, snaps[0]["id"])
    assert rec["session"] == sid and rec["workspace"] == name, rec
    man = json.loads(dirstore.read("snap-a", rec["id"], "manifest.json"))
    assert {(p["name"], p["version"]) for p in man["packages"]} >= {("tinypkg", "1.2"),
                                                                     ("tinydep", "0.3")}, man
    skipped = {i["name"] for i in rec["variables"]["skipped"]}
    assert {"f", "g", "K", "gen"} <= skipped, rec  # the ones it could not save are listed
    # Restored by the workspace name: its latest snapshot.
    st, r = restore(tenant, workspace=name)
    assert st == 201, (st, r)
    sessions.adopt(tenant, r)
    assert r["restored"]["snapshot"] == rec["id"] and r["workspace"] == name, r
    assert get_file(tenant, r["id"], "kept.txt") == b"kept\n"
    assert run(tenant, r["id"], VARS_CHECK).strip() == VARS_WANT
    out = run(tenant, r["id"], "import tinypkg\nprint(tinypkg.VERSION, tinypkg.ANSWER, "
                               "tinypkg.__file__)")
    assert out.split()[:2] == ["1.2", "42"], out
    assert out.split()[2].startswith("/workspace/.ci/site/"), out
    assert index.requests[seen:] == [], "the restore reached the index: %s" % index.requests[seen:]


def test_exit_snapshot_on_delete(dird, dir_a, sessions):
    """DELETE of a session with persist.on_end answers without waiting for
    the upload; the snapshot is then listed, and has the persist globs."""
    tenant, _ = dir_a
    name = "del-%s" % uuid.uuid4().hex[:8]
    s = sessions.create(workspace=name, persist={"paths": ["*.csv"], "variables": False,
                                                 "on_end": True})
    fill(tenant, s["id"], {"keep.csv": b"1\n", "sub/keep2.csv": b"2\n", "drop.txt": b"no\n"})
    assert tenant.delete(s["id"]) in (200, 204)
    wait_for(lambda: list_snaps(tenant, name), 60, interval=0.5,
             what="the exit snapshot of %s to be listed" % name)
    rec = wait_stored(tenant, list_snaps(tenant, name)[0]["id"])
    assert rec["paths"] == ["*.csv"] and rec["variables"] is None, rec
    st, r = restore(tenant, workspace=name)
    assert st == 201, (st, r)
    sessions.adopt(tenant, r)
    assert get_file(tenant, r["id"], "keep.csv") == b"1\n"
    assert get_file(tenant, r["id"], "sub/keep2.csv") == b"2\n"
    assert get_file(tenant, r["id"], "drop.txt") is None


def _sessions_of(client):
    st, doc = client.request("GET", "/v1/sessions")
    assert st == 200, (st, doc)
    return {s["id"] for s in doc["sessions"]}


def _refused(d, tenant, snap_id, words=None):
    """A restore of snap_id is refused 422 corrupt, and leaves no session
    (none listed, no container more than before)."""
    before, containers = _sessions_of(tenant), set(d.containers())
    st, doc = restore(tenant, restore=snap_id)
    if st == 201:
        tenant.delete(doc["id"])
    assert st == 422, (st, doc)
    assert doc["error"]["code"] == "corrupt", doc
    assert snap_id in doc["error"]["message"], doc
    if words:
        assert words in doc["error"]["message"], doc
    assert _sessions_of(tenant) == before
    wait_for(lambda: set(d.containers()) <= containers, 60,
             what="the refused restore's container to be gone")
    return doc


def test_corrupt_snapshot_refused_422_nothing_applied(dird, dirstore, dir_a, sessions):
    tenant, _ = dir_a
    marker = b"MARKER-" + uuid.uuid4().hex.encode() + b"-END"
    files = {"a/first.txt": b"first\n", "a/second.bin": marker * 100, "z.txt": b"last\n"}
    s = sessions.create()
    fill(tenant, s["id"], files)
    rec = snapshot_ok(tenant, s["id"], {"variables": False})
    tar = dirstore.read("snap-a", rec["id"], "workspace.tar")
    man = dirstore.read("snap-a", rec["id"], "manifest.json")
    try:
        # a byte of a file's content: that file's sha256 no longer matches
        i = tar.index(marker) + 3
        bad = tar[:i] + bytes([tar[i] ^ 0x01]) + tar[i + 1:]
        dirstore.write("snap-a", rec["id"], "workspace.tar", bad)
        _refused(dird, tenant, rec["id"], "a/second.bin")
        # a byte of a header (the name of z.txt): the entries do not match
        i = tar.index(b"z.txt")
        bad = tar[:i] + b"y" + tar[i + 1:]
        dirstore.write("snap-a", rec["id"], "workspace.tar", bad)
        _refused(dird, tenant, rec["id"])
        # cut short: a partial snapshot
        dirstore.write("snap-a", rec["id"], "workspace.tar", tar[:len(tar) // 2])
        _refused(dird, tenant, rec["id"])
        dirstore.write("snap-a", rec["id"], "workspace.tar", tar)
        # the manifest: a hex digit of a file's sha256
        doc = json.loads(man)
        h = [e for e in doc["entries"] if e["path"] == "z.txt"][0]["sha256"]
        flipped = ("0" if h[0] != "0" else "1") + h[1:]
        dirstore.write("snap-a", rec["id"], "manifest.json", man.replace(h.encode(),
                                                                        flipped.encode()))
        _refused(dird, tenant, rec["id"], "z.txt")
        # the manifest: its first byte (no longer a JSON object)
        dirstore.write("snap-a", rec["id"], "manifest.json", b"[" + man[1:])
        _refused(dird, tenant, rec["id"])
        # the manifest: a hex digit of the tar's own sha256
        h = doc["sha256"]
        flipped = ("0" if h[-1] != "0" else "1")
        dirstore.write("snap-a", rec["id"], "manifest.json",
                       man.replace(('"%s"' % h).encode(), ('"%s%s"' % (h[:-1], flipped)).encode()))
        _refused(dird, tenant, rec["id"])
    finally:
        dirstore.write("snap-a", rec["id"], "workspace.tar", tar)
        dirstore.write("snap-a", rec["id"], "manifest.json", man)
    # put back as it was, it restores: what was refused was the corruption
    st, r = restore(tenant, restore=rec["id"])
    assert st == 201, (st, r)
    sessions.adopt(tenant, r)
    check_files(tenant, r["id"], files)


def test_snapshot_without_manifest_does_not_exist(dird, dirstore, dir_a, sessions):
    """The manifest commits a snapshot: a tar alone is not one."""
    tenant, _ = dir_a
    s = sessions.create()
    put_file(tenant, s["id"], "f.txt", b"f\n")
    rec = snapshot_ok(tenant, s["id"], {"variables": False})
    snap_id = str(uuid.uuid4())
    dirstore.write("snap-a", snap_id, "workspace.tar",
                   dirstore.read("snap-a", rec["id"], "workspace.tar"))
    before = _sessions_of(tenant)
    st, doc = restore(tenant, restore=snap_id)
    assert st == 404, (st, doc)
    assert _sessions_of(tenant) == before


def test_store_killed_mid_upload_is_retried_and_nothing_lost(redis_server, tmpdir_session):
    """s3rver killed by pid while a 100 MB snapshot goes up (after its first
    part): the answer is 202 pending (or 201 if it had landed), the daemon
    retries with backoff, s3rver comes back on the same port with the same
    data, and the snapshot ends stored with the sha256 of what was spooled;
    the SDK reads that object and it restores."""
    store = S3Store(signed=False)
    d = None
    try:
        d = _daemon(redis_server, tmpdir_session, store, "--store-retries", "1",
                    "--store-timeout-ms", "5000")
        tenant, _ = _tenant(d, "s3-kill")
        ss = Sessions(tenant)
        try:
            s = ss.create(limits={"disk_mb": 512})
            sid = s["id"]
            big = run(tenant, sid, "import os, hashlib\n"
                                   "h = hashlib.sha256()\n"
                                   "with open('/workspace/big.bin', 'wb') as f:\n"
                                   "    for _ in range(100):\n"
                                   "        b = os.urandom(1 << 20); h.update(b); f.write(b)\n"
                                   "print(h.hexdigest())").strip()
            put_file(tenant, sid, "small.txt", b"small\n")
            answer = {}
            t = threading.Thread(target=lambda: answer.update(
                r=snapshot(tenant, sid, {"variables": False})))
            t.start()
            try:
                wait_for(lambda: any(re.search(r"workspace\.tar\?partNumber=\d+&uploadId=\S+ 200",
                                               line) for line in store.srv.lines), 300,
                         interval=0.05, what="a part of the tar stored by s3rver")
                store.kill()
                t.join(SNAP_TIMEOUT)
            finally:
                t.join(SNAP_TIMEOUT)
            st, rec = answer["r"]
            print("the snapshot's answer with the store killed mid-upload: %d" % st)
            assert st in (201, 202), (st, rec)
            if st == 202:
                assert rec["state"] == "pending" and rec["error"], rec
                st2, doc = get_snap(tenant, rec["id"])
                assert st2 == 200 and doc["state"] == "pending", doc
                # the session is not broken by the outage
                assert run(tenant, sid, "print(1+1)").strip() == "2"
            store.start_again()
            rec = wait_stored(tenant, rec["id"], timeout=300)
            key = store.key("s3-kill", rec["id"], "workspace.tar")
            out = os.path.join(store.tmp, "got.tar")
            assert store.sdk("get", key, out) == {"size": rec["size"]}
            assert sha_file(out) == rec["sha256"]
            os.unlink(out)
            assert not [f for f in spool_files(d) if rec["id"] in f], "spool files left behind"
            st, r = restore(tenant, restore=rec["id"])
            assert st == 201, (st, r)
            ss.adopt(tenant, r)
            got = run(tenant, r["id"], "import hashlib\nprint(hashlib.sha256("
                                       "open('/workspace/big.bin','rb').read()).hexdigest())")
            assert got.strip() == big
            assert get_file(tenant, r["id"], "small.txt") == b"small\n"
        finally:
            ss.close()
    finally:
        try:
            if d is not None:
                d.finish()
        finally:
            store.remove()



def test_pending_snapshot_survives_a_daemon_restart(redis_server, tmpdir_session):
    """The store is down when the snapshot is taken: 202 pending, the
    session keeps working; the daemon is stopped and started again (the
    spool survives it) and the store comes back: the snapshot lands, whole."""
    store = S3Store(signed=False)
    d = None
    try:
        d = _daemon(redis_server, tmpdir_session, store, "--store-retries", "1",
                    "--store-timeout-ms", "3000")
        tenant, _ = _tenant(d, "s3-down")
        s = tenant.create()
        try:
            data = os.urandom(3 * MB)
            put_file(tenant, s["id"], "d/data.bin", data)
            earlier = snapshot_ok(tenant, s["id"], {"variables": False})
            store.kill()
            # a stored snapshot cannot be read while the store is down: 503, no session
            before = _sessions_of(tenant)
            st, doc = restore(tenant, restore=earlier["id"])
            if st == 201:
                tenant.delete(doc["id"])
            assert st == 503 and doc["error"]["code"] == "unavailable", (st, doc)
            assert _sessions_of(tenant) == before
            st, rec = snapshot(tenant, s["id"], {"variables": False})
            assert st == 202, (st, rec)
            assert rec["state"] == "pending" and rec["error"], rec
            assert run(tenant, s["id"], "print(1+1)").strip() == "2"
            assert [f for f in spool_files(d) if rec["id"] in f], "nothing spooled"
            # a pending one is not deleted (409) and not restored (503) yet
            st, doc = tenant.request("DELETE", "/v1/snapshots/%s" % rec["id"])
            assert st == 409, (st, doc)
            before = _sessions_of(tenant)
            st, doc = restore(tenant, restore=rec["id"])
            if st == 201:
                tenant.delete(doc["id"])
            assert st == 503, (st, doc)
            assert _sessions_of(tenant) == before
            d.stop()
            d.restart()
            st, doc = get_snap(tenant, rec["id"])
            assert st == 200 and doc["state"] == "pending", (st, doc)
            store.start_again()
            done = wait_stored(tenant, rec["id"], timeout=300)
            assert done["sha256"] == rec["sha256"] and done["size"] == rec["size"], (done, rec)
            out = os.path.join(store.tmp, "got.tar")
            store.sdk("get", store.key("s3-down", rec["id"], "workspace.tar"), out)
            assert sha_file(out) == rec["sha256"]
            wait_for(lambda: not [f for f in spool_files(d) if rec["id"] in f], 30,
                     what="the spool files of the stored snapshot to be removed")
            st, r = restore(tenant, restore=rec["id"])
            assert st == 201, (st, r)
            try:
                assert get_file(tenant, r["id"], "d/data.bin") == data
            finally:
                tenant.delete(r["id"])
        finally:
            tenant.delete(s["id"])
    finally:
        try:
            if d is not None:
                d.finish()
        finally:
            store.remove()

def spool_files(d):
    spool = os.path.join(d.state_dir, "spool")
    return os.listdir(spool) if os.path.isdir(spool) else []


GLOB_FILES = {
    "a.csv": b"1", "sub/b.csv": b"2", "sub/deep/c.csv": b"3", "sub/c.txt": b"4",
    "sub/deep/d.txt": b"5", "out/x/y.bin": b"6", "out/z": b"7", "top.txt": b"8",
    "q1.md": b"9", "q10.md": b"10", "outside/out/n.txt": b"11",
}


@pytest.mark.parametrize("globs, want", [
    (["*.csv"], {"a.csv", "sub/b.csv", "sub/deep/c.csv"}),       # base name, any depth
    (["sub/*.txt"], {"sub/c.txt"}),                               # * stays in its directory
    (["sub/**"], {"sub/b.csv", "sub/deep/c.csv", "sub/c.txt", "sub/deep/d.txt"}),
    (["out/**", "top.txt"], {"out/x/y.bin", "out/z", "top.txt"}),
    (["q?.md"], {"q1.md"}),                                       # ? is one character
    (["out/*"], {"out/x/y.bin", "out/z"}),                        # a matched directory, whole
    (["nothing-matches"], set()),
])
def test_persist_paths_globs(dird, dirstore, dir_a, sessions, globs, want):
    tenant, _ = dir_a
    s = sessions.create()
    fill(tenant, s["id"], GLOB_FILES)
    fill(tenant, s["id"], {".ci/site/fakepkg/__init__.py": b"X = 1\n"})
    rec = snapshot_ok(tenant, s["id"], {"paths": globs, "variables": False})
    assert rec["paths"] == globs, rec
    man = json.loads(dirstore.read("snap-a", rec["id"], "manifest.json"))
    files = {e["path"] for e in man["entries"] if e["type"] == "file"}
    assert files - {".ci/site/fakepkg/__init__.py"} == want, man["entries"]
    assert ".ci/site/fakepkg/__init__.py" in files  # the site is always included
    dirs = {e["path"].rstrip("/") for e in man["entries"] if e["type"] == "dir"}
    on_the_way = {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}
    assert dirs == on_the_way, (dirs, on_the_way)
    st, r = restore(tenant, restore=rec["id"])
    assert st == 201, (st, r)
    sessions.adopt(tenant, r)
    got = {p for p, t in list_files(tenant, r["id"]).items() if t == "file"}
    assert {p for p in got if not p.startswith(".ci/")} == want


def test_caps_are_413(make_daemon):
    store = DirStore()
    try:
        d = make_daemon("--pool-size", "0", "--snapshot-max-mb", "1", "--snapshot-max-files", "20",
                        *store.arg, *(["--images", "python=%s" % IMAGE] if IMAGE else []))
        api = d.api
        s = api.create()
        try:
            put_file(api, s["id"], "big.bin", os.urandom(2 * MB))
            st, doc = snapshot(api, s["id"], {"variables": False})
            assert st == 413 and doc["error"]["code"] == "payload_too_large", (st, doc)
            # within the cap once the globs leave the big file out
            put_file(api, s["id"], "small.txt", b"s")
            rec = snapshot_ok(api, s["id"], {"paths": ["*.txt"], "variables": False})
            assert rec["files"] == 1, rec
            for i in range(30):
                put_file(api, s["id"], "many/f%02d.txt" % i, b"x")
            st, doc = snapshot(api, s["id"], {"paths": ["*.txt"], "variables": False})
            assert st == 413 and doc["error"]["code"] == "payload_too_large", (st, doc)
            assert [r["id"] for r in list_snaps(api)] == [rec["id"]]
            wait_for(lambda: spool_files(d) == [], 30,
                     what="the refused snapshots' spool files to be removed")
            assert run(api, s["id"], "print(1+1)").strip() == "2"
        finally:
            api.delete(s["id"])
    finally:
        store.remove()


def test_restore_larger_than_the_disk_is_413(dird, dir_a, sessions):
    tenant, _ = dir_a
    s = sessions.create(limits={"disk_mb": 64})
    run(tenant, s["id"], "open('/workspace/big.bin','wb').write(__import__('os').urandom(20 << 20))")
    rec = snapshot_ok(tenant, s["id"], {"variables": False})
    before = _sessions_of(tenant)
    st, doc = restore(tenant, restore=rec["id"], limits={"disk_mb": 8})
    if st == 201:
        sessions.adopt(tenant, doc)
    assert st == 413 and doc["error"]["code"] == "payload_too_large", (st, doc)
    assert _sessions_of(tenant) == before


@pytest.mark.parametrize("body, words", [
    ({"paths": "*.csv"}, "paths"),
    ({"paths": [3]}, "paths"),
    ({"paths": ["*.csv"] * 65}, "64"),
    ({"paths": ["x" * 257]}, "256"),
    ({"paths": ["../etc/*"]}, ".."),
    ({"paths": ["a/../b"]}, ".."),
    ({"paths": ["a\u0000b"]}, None),
    ({"variables": "yes"}, "variables"),
    ({"workspace": ".hidden"}, "workspace"),
    ({"workspace": "a/b"}, "workspace"),
    ({"workspace": "x" * 65}, "workspace"),
    ({"workspace": ""}, "workspace"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_snapshot_requests_are_400(dir_a, sessions, body, words):
    tenant, _ = dir_a
    s = sessions.create()
    st, doc = snapshot(tenant, s["id"], body)
    assert st == 400 and doc["error"]["code"] == "bad_request", (st, doc)
    if words is not None:
        assert words in doc["error"]["message"], doc


@pytest.mark.parametrize("body, status", [
    ({"restore": "not-a-uuid"}, 400),
    ({"restore": 7}, 400),
    ({"restore": str(uuid.uuid4())}, 404),
    ({"restore": str(uuid.uuid4()), "workspace": "both"}, 400),
    ({"workspace": ".dot"}, 400),
    ({"workspace": "sp ace"}, 400),
    ({"persist": {"paths": ["../x"], "variables": True, "on_end": True}}, 400),
    ({"persist": {"on_end": "yes"}}, 400),
    ({"persist": {"unknown": 1}}, 400),
    ({"persist": []}, 400),
])
def test_bad_restore_requests(dir_a, body, status):
    tenant, _ = dir_a
    before = _sessions_of(tenant)
    st, doc = restore(tenant, **body)
    if st == 201:
        tenant.delete(doc["id"])
    assert st == status, (st, doc)
    assert _sessions_of(tenant) == before


@pytest.mark.parametrize("method, path", [
    ("GET", "/v1/snapshots/not-a-uuid"),
    ("DELETE", "/v1/snapshots/not-a-uuid"),
    ("GET", "/v1/snapshots/%s" % ("A" * 36)),
    ("GET", "/v1/snapshots?workspace=.x"),
])
def test_bad_snapshot_routes_are_400(dir_a, method, path):
    tenant, _ = dir_a
    st, doc = tenant.request(method, path)
    assert st == 400, (st, doc)


def test_snapshot_of_no_session_is_404(dir_a):
    tenant, _ = dir_a
    st, doc = snapshot(tenant, str(uuid.uuid4()))
    assert st == 404, (st, doc)


def test_another_tenants_snapshot_is_404(dird, dir_a, dir_b, sessions):
    a, _ = dir_a
    b, _ = dir_b
    s = sessions.create()
    put_file(a, s["id"], "secret.txt", b"a's\n")
    name = "mine-%s" % uuid.uuid4().hex[:8]
    rec = snapshot_ok(a, s["id"], {"workspace": name, "variables": False})
    assert get_snap(b, rec["id"])[0] == 404
    assert b.request("DELETE", "/v1/snapshots/%s" % rec["id"])[0] == 404
    st, doc = restore(b, restore=rec["id"])
    if st == 201:
        b.delete(doc["id"])
    assert st == 404, (st, doc)
    assert rec["id"] not in [r["id"] for r in list_snaps(b)]
    st, ws = b.request("GET", "/v1/workspaces")
    assert st == 200 and name not in [w["name"] for w in ws["workspaces"]], ws
    # b's own workspace of the same name is b's, and empty
    st, r = restore(b, workspace=name)
    assert st == 201, (st, r)
    try:
        assert r["restored"] is None and r["workspace"] == name, r
        assert get_file(b, r["id"], "secret.txt") is None
    finally:
        b.delete(r["id"])
    # still a's
    assert get_snap(a, rec["id"])[0] == 200


def test_delete_snapshot(dird, dirstore, dir_a, sessions):
    tenant, _ = dir_a
    s = sessions.create()
    put_file(tenant, s["id"], "f.txt", b"f\n")
    rec = snapshot_ok(tenant, s["id"], {"variables": False})
    assert dirstore.exists("snap-a", rec["id"], "manifest.json")
    st, doc = tenant.request("DELETE", "/v1/snapshots/%s" % rec["id"])
    assert st == 204, (st, doc)
    assert get_snap(tenant, rec["id"])[0] == 404
    assert rec["id"] not in [r["id"] for r in list_snaps(tenant)]
    wait_for(lambda: not dirstore.exists("snap-a", rec["id"], "manifest.json") and
             not dirstore.exists("snap-a", rec["id"], "workspace.tar"), 30,
             what="the deleted snapshot's objects to be gone from the store")
    st, doc = restore(tenant, restore=rec["id"])
    if st == 201:
        tenant.delete(doc["id"])
    assert st == 404, (st, doc)


def test_workspaces_latest_and_a_new_name(dird, dir_a, sessions):
    """GET /v1/workspaces counts a name's snapshots and names the latest;
    "workspace": NAME restores the latest; a new name starts empty and its
    snapshots are filed under it."""
    tenant, _ = dir_a
    name = "ws-%s" % uuid.uuid4().hex[:8]
    s = sessions.create(workspace=name)
    put_file(tenant, s["id"], "v.txt", b"one\n")
    first = snapshot_ok(tenant, s["id"], {"variables": False})
    put_file(tenant, s["id"], "v.txt", b"two\n")
    second = snapshot_ok(tenant, s["id"], {"variables": False})
    assert first["workspace"] == second["workspace"] == name
    assert [r["id"] for r in list_snaps(tenant, name)] == [second["id"], first["id"]]
    st, doc = tenant.request("GET", "/v1/workspaces")
    assert st == 200, (st, doc)
    w = {w["name"]: w for w in doc["workspaces"]}[name]
    assert w["snapshots"] == 2 and w["bytes"] == first["size"] + second["size"], w
    assert w["latest"]["id"] == second["id"], w
    st, r = restore(tenant, workspace=name)
    assert st == 201, (st, r)
    sessions.adopt(tenant, r)
    assert r["restored"]["snapshot"] == second["id"], r
    assert get_file(tenant, r["id"], "v.txt") == b"two\n"
    # an older one by id
    st, r1 = restore(tenant, restore=first["id"])
    assert st == 201, (st, r1)
    sessions.adopt(tenant, r1)
    assert get_file(tenant, r1["id"], "v.txt") == b"one\n"
    # a new name: empty, and what it snapshots is filed under it
    fresh = "new-%s" % uuid.uuid4().hex[:8]
    st, n = restore(tenant, workspace=fresh)
    assert st == 201, (st, n)
    sessions.adopt(tenant, n)
    assert n["restored"] is None and n["workspace"] == fresh, n
    assert {p for p in list_files(tenant, n["id"]) if not p.startswith(".ci")} == set()
    put_file(tenant, n["id"], "n.txt", b"n\n")
    rec = snapshot_ok(tenant, n["id"], {"variables": False})
    assert rec["workspace"] == fresh, rec
    st, doc = tenant.request("GET", "/v1/workspaces")
    assert {w["name"]: w["snapshots"] for w in doc["workspaces"]}[fresh] == 1


def test_ctl_end_to_end(dird, dir_a, sessions):
    """ci-ctl snapshot, snapshots ls/show/rm, restore, workspaces."""
    tenant, key = dir_a
    env = {"CICTL_API_KEY": key}
    name = "ctl-%s" % uuid.uuid4().hex[:8]
    s = sessions.create(workspace=name)
    put_file(tenant, s["id"], "out/r.csv", b"1,2\n")
    put_file(tenant, s["id"], "skip.txt", b"no\n")
    run(tenant, s["id"], "x = 5\nf = lambda: 0")
    r = dird.ctl("snapshot", "--paths", "*.csv", s["id"], env=env, timeout=SNAP_TIMEOUT)
    assert r.returncode == 0, (r.stdout, r.stderr)
    snap_id = r.stdout.strip()
    assert UUID_RE.match(snap_id), r.stdout
    assert "stored" in r.stderr and "workspace %s" % name in r.stderr, r.stderr
    assert re.search(r"variables saved: .*x", r.stderr), r.stderr
    assert "f (" in r.stderr, r.stderr  # the variable it could not save, and why
    # ls, with and without --workspace
    r = dird.ctl("snapshots", env=env)
    assert r.returncode == 0 and snap_id in r.stdout, (r.stdout, r.stderr)
    assert r.stdout.splitlines()[0].split() == ["ID", "WORKSPACE", "STATE", "FILES", "SIZE",
                                                "CREATED"]
    r = dird.ctl("snapshots", "ls", "--workspace", name, env=env)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    assert [row[:3] for row in rows] == [[snap_id, name, "stored"]], r.stdout
    r = dird.ctl("snapshots", "ls", "--workspace", "none-%s" % uuid.uuid4().hex[:6], env=env)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1, r.stdout
    r = dird.ctl("--json", "snapshots", "show", snap_id, env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == snap_id, r.stdout
    r = dird.ctl("snapshots", "show", snap_id, env=env)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(":", 1) for line in r.stdout.splitlines())
    assert lines["id"].strip() == snap_id and lines["state"].strip() == "stored", r.stdout
    assert lines["paths"].strip() == "*.csv", r.stdout
    # workspaces
    r = dird.ctl("workspaces", env=env)
    assert r.returncode == 0, r.stderr
    row = [line.split() for line in r.stdout.splitlines() if line.startswith(name + " ")]
    assert row and row[0][1] == "1" and snap_id in row[0], r.stdout
    # restore by id, with a create option, then by workspace
    r = dird.ctl("restore", snap_id, "--memory", "256", env=env, timeout=SNAP_TIMEOUT)
    assert r.returncode == 0, (r.stdout, r.stderr)
    new = r.stdout.strip()
    sessions.ids.append((tenant, new))
    assert "restored snapshot %s" % snap_id in r.stderr, r.stderr
    assert re.search(r"variables loaded: .*x", r.stderr), r.stderr
    st, doc = tenant.request("GET", "/v1/sessions/%s" % new)
    assert st == 200 and doc["limits"]["memory_mb"] == 256, doc
    assert get_file(tenant, new, "out/r.csv") == b"1,2\n"
    assert get_file(tenant, new, "skip.txt") is None
    assert run(tenant, new, "print(x)").strip() == "5"
    r = dird.ctl("restore", "--workspace", name, env=env, timeout=SNAP_TIMEOUT)
    assert r.returncode == 0, (r.stdout, r.stderr)
    sessions.ids.append((tenant, r.stdout.strip()))
    assert "restored snapshot %s" % snap_id in r.stderr, r.stderr
    fresh = "fresh-%s" % uuid.uuid4().hex[:6]
    r = dird.ctl("restore", "--workspace", fresh, env=env, timeout=SNAP_TIMEOUT)
    assert r.returncode == 0, (r.stdout, r.stderr)
    sessions.ids.append((tenant, r.stdout.strip()))
    assert "no snapshot yet" in r.stderr, r.stderr
    # errors: usage (2) before any request, the server's (5) after
    for args in (("restore",), ("restore", snap_id, "--workspace", name),
                 ("snapshots", "show", "nope"), ("snapshot", "--paths", "", s["id"]),
                 ("snapshot", "--workspace", ".x", s["id"]), ("snapshots", "frob")):
        r = dird.ctl(*args, env=env)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
    r = dird.ctl("snapshots", "show", str(uuid.uuid4()), env=env)
    assert r.returncode == 5 and "not_found" in r.stderr, (r.returncode, r.stderr)
    r = dird.ctl("restore", str(uuid.uuid4()), env=env)
    assert r.returncode == 5 and "not_found" in r.stderr, (r.returncode, r.stderr)
    r = dird.ctl("snapshot", str(uuid.uuid4()), env=env)
    assert r.returncode == 5, (r.returncode, r.stderr)
    # rm
    r = dird.ctl("snapshots", "rm", snap_id, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "removed %s" % snap_id, (r.stdout, r.stderr)
    r = dird.ctl("snapshots", "show", snap_id, env=env)
    assert r.returncode == 5 and "not_found" in r.stderr, r.stderr
    # create's persist options reach the server
    r = dird.ctl("create", "--workspace", name, "--persist-on-end", "--persist-path", "*.csv",
                 "--persist-no-variables", "--json", env=env, timeout=SNAP_TIMEOUT)
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    sessions.ids.append((tenant, doc["id"]))
    assert doc["persist"] == {"paths": ["*.csv"], "variables": False, "on_end": True}, doc
    assert doc["workspace"] == name, doc


# ---------------------------------------------------------------- ci-ctl's requests

class FakeApi:
    """A stand-in for the daemon's snapshot routes on 127.0.0.1: records
    (method, path, JSON body) and answers the spec's documents. It checks
    what ci-ctl sends and how it shows answers the real daemon may not give
    on demand (202 pending, variables skipped)."""

    REC = {"id": "0b6e3f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "workspace": "w1", "session": "s1",
           "size": 20480, "files": 3, "sha256": "ab" * 32, "created_at": "2026-12-01T20:00:00Z",
           "state": "stored", "content_bytes": 123, "paths": ["*.csv"],
           "variables": {"saved": ["x"], "modules": {"np": "numpy"},
                         "skipped": [{"name": "f", "reason": "function defined in the session"}]},
           "skipped": [{"path": "link", "reason": "symlink"}]}

    def __init__(self):
        import http.server
        owner = self
        self.seen = []

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status, doc):
                body = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _any(self):
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                owner.seen.append((self.command, self.path, json.loads(raw) if raw else None))
                rec = owner.REC
                if self.command == "DELETE":
                    return self._send(204, None)
                if self.command == "POST" and self.path.endswith("/snapshots"):
                    return self._send(202, dict(rec, state="pending", error="store down"))
                if self.command == "POST" and self.path == "/v1/sessions":
                    return self._send(201, {"id": "new-session", "workspace": "w1",
                                            "restored": {"snapshot": rec["id"], "workspace": "w1",
                                                         "files": 3, "size": 20480, "ms": 41,
                                                         "variables": {"loaded": ["x"],
                                                                       "modules": {},
                                                                       "skipped": []}}})
                if self.path == "/v1/workspaces":
                    return self._send(200, {"workspaces": [{"name": "w1", "snapshots": 2,
                                                            "bytes": 40960, "latest": rec}]})
                if self.path.startswith("/v1/snapshots/"):
                    return self._send(200, rec)
                if self.path.startswith("/v1/snapshots"):
                    return self._send(200, {"snapshots": [rec]})
                return self._send(404, {"error": {"code": "not_found", "message": "no route"}})

            do_GET = do_POST = do_DELETE = _any

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]

    def ctl(self, *args):
        from harness import CTL_BIN
        return subprocess.run([CTL_BIN, "--server", self.url, *args], capture_output=True,
                              text=True, timeout=60)

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def fake_api():
    f = FakeApi()
    yield f
    f.stop()


def test_ctl_sends_the_spec_requests(fake_api):
    f = fake_api
    sid = FakeApi.REC["id"]
    r = f.ctl("snapshot", "--paths", "*.csv", "--paths", "out/**", "--no-variables",
              "--workspace", "w1", "sess-1")
    assert r.returncode == 0 and r.stdout == sid + "\n", (r.stdout, r.stderr)
    assert f.seen[-1] == ("POST", "/v1/sessions/sess-1/snapshots",
                          {"paths": ["*.csv", "out/**"], "variables": False, "workspace": "w1"})
    assert "pending" in r.stderr and "store down" in r.stderr, r.stderr
    assert "f (function defined in the session)" in r.stderr and "link (symlink)" in r.stderr
    r = f.ctl("snapshot", "sess-1")
    assert r.returncode == 0 and f.seen[-1][2] == {}, f.seen[-1]
    r = f.ctl("snapshots")
    assert r.returncode == 0 and f.seen[-1][:2] == ("GET", "/v1/snapshots"), f.seen[-1]
    assert r.stdout.splitlines()[1].split()[:5] == [sid, "w1", "stored", "3", "20.0"], r.stdout
    r = f.ctl("snapshots", "ls", "--workspace", "w1")
    assert f.seen[-1][:2] == ("GET", "/v1/snapshots?workspace=w1"), f.seen[-1]
    r = f.ctl("snapshots", "show", sid)
    assert r.returncode == 0 and f.seen[-1][:2] == ("GET", "/v1/snapshots/" + sid)
    assert "variables.skipped:" in r.stdout and "sha256:" in r.stdout, r.stdout
    r = f.ctl("snapshots", "rm", sid)
    assert r.returncode == 0 and r.stdout == "removed %s\n" % sid, r.stdout
    assert f.seen[-1][:2] == ("DELETE", "/v1/snapshots/" + sid)
    r = f.ctl("workspaces")
    assert r.returncode == 0 and r.stdout.splitlines()[1].split()[:2] == ["w1", "2"], r.stdout
    assert f.seen[-1][:2] == ("GET", "/v1/workspaces")
    r = f.ctl("restore", sid, "--memory", "256", "--persist-on-end", "--persist-path", "*.csv")
    assert r.returncode == 0 and r.stdout == "new-session\n", (r.stdout, r.stderr)
    assert f.seen[-1] == ("POST", "/v1/sessions",
                          {"limits": {"memory_mb": 256}, "restore": sid,
                           "persist": {"paths": ["*.csv"], "variables": True, "on_end": True}})
    assert "restored snapshot %s" % sid in r.stderr and "41 ms" in r.stderr, r.stderr
    r = f.ctl("restore", "--workspace", "w1", "--persist-no-variables")
    assert r.returncode == 0, r.stderr
    assert f.seen[-1][2] == {"workspace": "w1", "persist": {"paths": None, "variables": False,
                                                            "on_end": False}}, f.seen[-1]
    r = f.ctl("create", "--workspace", "w2")
    assert r.returncode == 0 and f.seen[-1][2] == {"workspace": "w2"}, f.seen[-1]
    r = f.ctl("--json", "snapshots", "show", sid)
    assert json.loads(r.stdout)["id"] == sid
    n = len(f.seen)
    for args in (("restore",), ("restore", sid, "--workspace", "w1"), ("snapshots", "show", "x"),
                 ("snapshots", "rm", "x"), ("snapshot",), ("snapshot", "--paths", "", "s"),
                 ("snapshot", "--paths", "x" * 257, "s"), ("snapshot", "--workspace", "a/b", "s"),
                 ("snapshots", "frob"), ("snapshots", "show", sid, "--workspace", "w"),
                 ("workspaces", "extra"), ("create", "--workspace", ".x")):
        r = f.ctl(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
    r = f.ctl("snapshot", *sum((["--paths", "g%d" % i] for i in range(65)), []), "s")
    assert r.returncode == 2 and "64" in r.stderr, r.stderr
    assert len(f.seen) == n  # usage errors send nothing



def test_retention_keeps_the_newest_per_workspace(make_daemon):
    """--snapshot-keep: per tenant and workspace, the newest N are kept and
    the older ones deleted by the reaper, objects and record."""
    store = DirStore()
    try:
        d = make_daemon("--pool-size", "0", "--snapshot-keep", "2",
                        "--snapshot-retention-every-s", "1", *store.arg,
                        *(["--images", "python=%s" % IMAGE] if IMAGE else []), admin_key=ADMIN)
        tenant, _ = _tenant(d, "keep-a")
        s = tenant.create(workspace="kw")
        try:
            recs = []
            for i in range(3):
                put_file(tenant, s["id"], "v.txt", b"%d" % i)
                recs.append(snapshot_ok(tenant, s["id"], {"variables": False}))
            other = snapshot_ok(tenant, s["id"], {"variables": False, "workspace": "kw-other"})
            wait_for(lambda: [r["id"] for r in list_snaps(tenant, "kw")] ==
                     [recs[2]["id"], recs[1]["id"]], 30, interval=0.2,
                     what="retention to remove the oldest of three (keep 2)")
            assert not store.exists("keep-a", recs[0]["id"], "manifest.json")
            assert not store.exists("keep-a", recs[0]["id"], "workspace.tar")
            assert store.exists("keep-a", recs[1]["id"], "workspace.tar")
            assert [r["id"] for r in list_snaps(tenant, "kw-other")] == [other["id"]]
            d.wait_log("snapshot %s of tenant keep-a: removed by retention" % recs[0]["id"])
        finally:
            tenant.delete(s["id"])
    finally:
        store.remove()


def test_retention_per_tenant_override(make_daemon):
    """The tenant's quota record overrides --snapshot-keep (snapshot_keep)."""
    store = DirStore()
    try:
        d = make_daemon("--pool-size", "0", "--snapshot-keep", "5",
                        "--snapshot-retention-every-s", "1", *store.arg,
                        *(["--images", "python=%s" % IMAGE] if IMAGE else []), admin_key=ADMIN)
        st, doc = d.admin.request("PUT", "/v1/admin/tenants/keep-b/quota",
                                  body={"snapshot_keep": 1})
        assert st == 200, (st, doc)
        tenant, _ = _tenant(d, "keep-b")
        s = tenant.create(workspace="kb")
        try:
            recs = [snapshot_ok(tenant, s["id"], {"variables": False}) for _ in range(3)]
            wait_for(lambda: [r["id"] for r in list_snaps(tenant, "kb")] == [recs[2]["id"]], 30,
                     interval=0.2, what="retention to keep the newest one only (snapshot_keep 1)")
        finally:
            tenant.delete(s["id"])
    finally:
        store.remove()


def _hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


def test_large_snapshot_is_streamed_not_held(make_daemon):
    """100 MB through a snapshot and a restore: the daemon's peak resident
    memory grows by far less than that (spooled to disk and streamed, never
    whole in memory), and the bytes come back whole."""
    store = DirStore()
    try:
        # ASan keeps freed memory in quarantine (256 MB by default): that is
        # the sanitizer's memory, not the daemon's, so none for this one.
        d = make_daemon("--pool-size", "0", *store.arg,
                        *(["--images", "python=%s" % IMAGE] if IMAGE else []),
                        env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:"
                                             "quarantine_size_mb=0"})
        api = d.api
        s = api.create(limits={"disk_mb": 512})
        made = [s["id"]]
        try:
            want = run(api, s["id"], "import os, hashlib\nh = hashlib.sha256()\n"
                                     "with open('/workspace/big.bin', 'wb') as f:\n"
                                     "    for _ in range(100):\n"
                                     "        b = os.urandom(1 << 20); h.update(b); f.write(b)\n"
                                     "print(h.hexdigest())").strip()
            before = _hwm_kb(d.proc.pid)
            rec = snapshot_ok(api, s["id"], {"variables": False})
            assert rec["content_bytes"] == 100 * MB, rec
            st, r = restore(api, restore=rec["id"])
            assert st == 201, (st, r)
            made.append(r["id"])
            grew = _hwm_kb(d.proc.pid) - before
            got = run(api, r["id"], "import hashlib\nprint(hashlib.sha256(open("
                                    "'/workspace/big.bin','rb').read()).hexdigest())").strip()
            assert got == want
            print("peak RSS grew by %d KiB over a 100 MB snapshot and restore" % grew)
            assert grew < 40 * 1024, "the daemon's peak RSS grew by %d KiB" % grew
        finally:
            for sid in made:
                api.delete(sid)
    finally:
        store.remove()


def _hostile_tar(kind):
    """(tar bytes, manifest dict) of a snapshot made to attack the restore."""
    snap_id = str(uuid.uuid4())
    tar, man = build_snapshot(snap_id, "snap-a", "hostile", {"ok.txt": b"ok\n"})
    man = json.loads(man)
    if kind == "symlink":
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            info = tarfile.TarInfo("link")
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            t.addfile(info)
        tar = buf.getvalue()
        man["entries"] = [{"path": "link", "type": "file", "size": 0, "mode": 420,
                           "sha256": sha_bytes(b"")}]
        man["files"], man["content_bytes"] = 1, 0
    elif kind == "dotdot":
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            info = tarfile.TarInfo("../escape.txt")
            info.size = 3
            t.addfile(info, io.BytesIO(b"bad"))
        tar = buf.getvalue()
        man["entries"] = [{"path": "../escape.txt", "type": "file", "size": 3, "mode": 420,
                           "sha256": sha_bytes(b"bad")}]
    elif kind == "other-id":
        man["id"] = str(uuid.uuid4())
    elif kind == "other-tenant":
        man["tenant"] = "snap-b"
    elif kind == "size":
        man["entries"][0]["size"] = 4
        man["content_bytes"] = 4
    man["size"], man["sha256"] = len(tar), sha_bytes(tar)
    return snap_id, tar, json.dumps(man).encode()


@pytest.mark.parametrize("kind", ["symlink", "dotdot", "other-id", "other-tenant", "size"])
def test_hostile_snapshot_in_the_store_is_refused(dird, dirstore, dir_a, kind):
    """Objects written into the store by someone else, consistent with
    their own manifest, but a symlink, a '..' path, a manifest naming
    another snapshot or tenant, a size that lies: 422, nothing applied."""
    tenant, _ = dir_a
    snap_id, tar, man = _hostile_tar(kind)
    dirstore.write("snap-a", snap_id, "workspace.tar", tar)
    dirstore.write("snap-a", snap_id, "manifest.json", man)
    doc = _refused(dird, tenant, snap_id)
    assert dird.api.request("GET", "/readyz")[0] == 200, doc  # still serving
