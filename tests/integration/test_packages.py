"""Issue 13, item 5: time-boxed package installs
(POST /v1/sessions/{id}/packages).

The index is a PEP 503 "simple" index of our own on 127.0.0.1, serving wheels
this test writes by hand (tiny pure-Python packages: no PyPI, no network).
The sandbox reaches it only through the daemon's egress proxy, by the made-up
name pypi.test, which the daemon's hosts file maps to loopback (hosts-only
resolver: no DNS query is ever sent), and the proxy trusts 127.0.0.1 on that
port only. The session's own allowlist names another made-up host: the index
is reachable during the install window and refused by the proxy after it.

pip must be in the sandbox image. ci/python:latest gets it from
images/python/packages.txt (python3-pip) once rebuilt; until then this module
builds a throwaway image of its own on top of it (Debian's pip of this host,
the same Python 3.11, and this worktree's kernel.py) under a tag of this run,
and removes it at the end.
"""
import base64
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
import zipfile

import pytest

from harness.packages import index_daemon
from harness import Daemon, image_tag, wait_for

ADMIN = "admin-" + "p" * 40
BASE_IMAGE = image_tag()  # the image the daemon under test runs (CID_IMAGES)
HOST_PIP = "/usr/lib/python3/dist-packages/pip"
KERNEL_PY = os.path.join(os.path.dirname(__file__), "..", "..", "images", "python", "runner",
                         "kernel.py")


# ---------------------------------------------------------------- wheels

def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(name, version, files, requires=()):
    """A pure-Python wheel, written by hand: (filename, bytes)."""
    dist = "%s-%s.dist-info" % (name, version)
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    meta += "".join("Requires-Dist: %s\n" % r for r in requires)
    entries = dict(files)
    entries[dist + "/METADATA"] = meta
    entries[dist + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: ci-test\nRoot-Is-Purelib: true\n"
                                "Tag: py3-none-any\n")
    record = "".join("%s,%s,%d\n" % (p, _record_hash(d.encode()), len(d.encode()))
                     for p, d in entries.items())
    entries[dist + "/RECORD"] = record + dist + "/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in entries.items():
            z.writestr(p, d)
    return "%s-%s-py3-none-any.whl" % (name, version), buf.getvalue()


# ---------------------------------------------------------------- the index

class Index:
    """A PEP 503 simple index on 127.0.0.1. slow: every request waits (up to
    a minute, or until stop) before it is answered."""

    def __init__(self, wheels):
        self.wheels = {}  # project -> [(filename, bytes)]
        for project, fn, data in wheels:
            self.wheels.setdefault(project, []).append((fn, data))
        self.requests = []
        self.slow = False
        self.release = threading.Event()
        owner = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *a):
                pass

            def do_GET(self):
                owner.requests.append(self.path)
                if owner.slow:
                    owner.release.wait(60)
                path = self.path.split("?")[0]
                if path.startswith("/simple/"):
                    project = path[len("/simple/"):].strip("/")
                    files = owner.wheels.get(project)
                    if files is None:
                        return self._send(404, b"no such project", "text/plain")
                    links = "".join(
                        '<a href="/files/%s#sha256=%s">%s</a><br>\n'
                        % (fn, hashlib.sha256(d).hexdigest(), fn) for fn, d in files)
                    return self._send(200, ("<!DOCTYPE html><html><body>\n%s</body></html>\n"
                                            % links).encode(), "text/html")
                if path.startswith("/files/"):
                    fn = path[len("/files/"):]
                    for files in owner.wheels.values():
                        for f, d in files:
                            if f == fn:
                                return self._send(200, d, "application/octet-stream")
                return self._send(404, b"not here", "text/plain")

            def _send(self, status, body, ctype):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.release.set()
        self.srv.shutdown()
        self.srv.server_close()


# ---------------------------------------------------------------- the image

def _image_has_pip(image):
    r = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python3", "-c",
                        "import pip"], capture_output=True, timeout=120)
    return r.returncode == 0


@pytest.fixture(scope="module")
def pip_image():
    if _image_has_pip(BASE_IMAGE):
        yield BASE_IMAGE
        return
    if not os.path.isdir(HOST_PIP):
        pytest.fail("%s has no pip and this host has no %s to build a test image from: "
                    "rebuild the image (images/python/packages.txt has python3-pip)"
                    % (BASE_IMAGE, HOST_PIP))
    tag = "ci/python:citest-pip-%s" % uuid.uuid4().hex[:10]
    ctx = tempfile.mkdtemp(prefix="cit-pip-image-")
    try:
        shutil.copytree(HOST_PIP, os.path.join(ctx, "pip"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(KERNEL_PY, os.path.join(ctx, "kernel.py"))
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write("FROM %s\nCOPY pip /usr/lib/python3/dist-packages/pip\n"
                    "COPY kernel.py /opt/ci/kernel.py\n" % BASE_IMAGE)
        subprocess.run(["docker", "build", "-q", "--network", "none", "-t", tag, ctx],
                       check=True, capture_output=True, timeout=300)
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    try:
        yield tag
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, timeout=120)


# ---------------------------------------------------------------- the daemon

@pytest.fixture(scope="module")
def index():
    wheels = []
    for v in ("1.0", "1.2"):
        fn, data = make_wheel("tinypkg", v, {"tinypkg/__init__.py":
                                             "VERSION = %r\nfrom tinydep import ANSWER\n" % v},
                              requires=["tinydep"])
        wheels.append(("tinypkg", fn, data))
    fn, data = make_wheel("tinydep", "0.3", {"tinydep/__init__.py": "ANSWER = 42\n"})
    wheels.append(("tinydep", fn, data))
    ix = Index(wheels)
    yield ix
    ix.stop()


@pytest.fixture(scope="module")
def pkgd(redis_server, tmpdir_session, pip_image, index):
    d = index_daemon(redis_server, tmpdir_session, index, ADMIN, image=pip_image)
    try:
        yield d
    finally:
        d.finish()


@pytest.fixture(scope="module")
def tenant_key(pkgd):
    return pkgd.key("pkg-a")["key"]


@pytest.fixture(scope="module")
def tenant(pkgd, tenant_key):
    return pkgd.client(tenant_key)


@pytest.fixture
def session(tenant):
    """A networked session: its own allowlist names another host only."""
    s = tenant.create(network={"allow": ["other.test:1"]})
    yield s
    tenant.delete(s["id"])


def install(client, sid, specs, timeout_s=None, timeout=120):
    body = {"pip": specs}
    if timeout_s is not None:
        body["timeout_s"] = timeout_s
    return client.request("POST", "/v1/sessions/%s/packages" % sid, body=body, timeout=timeout)


# Runs in the sandbox: one plain-HTTP request to the index through the proxy;
# prints the status line the proxy (or the index) answered.
PROBE = r"""
import os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
c = socket.create_connection((p.hostname, p.port), timeout=15)
c.sendall(b'GET http://pypi.test:%d/simple/tinypkg/ HTTP/1.1\r\nHost: pypi.test:%d\r\nConnection: close\r\n\r\n')
got = b''
while b'\r\n' not in got:
    chunk = c.recv(4096)
    if not chunk:
        break
    got += chunk
print(got.split(b'\r\n')[0].decode())
"""


def probe(client, sid, port):
    r = client.exec(sid, PROBE % (port, port))
    assert r["status"] == "ok", r
    return r["stdout"].strip()


# ---------------------------------------------------------------- the cases

def test_install_then_import_and_the_window_closes(pkgd, tenant, session, index):
    sid = session["id"]
    # Before the window the proxy refuses the index: only other.test is allowed.
    assert probe(tenant, sid, index.port).startswith("HTTP/1.1 403"), "open before the window"
    seen = len(index.requests)
    mark = pkgd.log_mark()
    st, doc = install(tenant, sid, ["tinypkg==1.2"], timeout_s=60)
    assert st == 200, (st, doc)
    got = {p["name"]: p["version"] for p in doc["installed"]}
    assert got == {"tinypkg": "1.2", "tinydep": "0.3"}, doc
    assert doc["index"] == "pypi.test:%d" % index.port and doc["timeout_s"] == 60, doc
    assert doc["site"] == "/workspace/.ci/site"
    assert doc["pip_ms"] > 0 and doc["window_ms"] >= 0, doc
    assert any("/simple/tinypkg/" in r for r in index.requests[seen:]), index.requests
    pkgd.wait_log("session %s: install window opened: egress to pypi.test:%d" % (sid, index.port),
                  since=mark)
    pkgd.wait_log("session %s: install window closed (pip finished)" % sid, since=mark)
    # The next execution imports it (the kernel's sys.path has the site).
    r = tenant.exec(sid, "import tinypkg\nprint(tinypkg.VERSION, tinypkg.ANSWER, tinypkg.__file__)")
    assert r["status"] == "ok", r
    assert r["stdout"].split()[:2] == ["1.2", "42"], r
    assert r["stdout"].split()[2].startswith("/workspace/.ci/site/"), r
    # After the window the proxy refuses the index again, and the index
    # saw nothing of it.
    seen = len(index.requests)
    assert probe(tenant, sid, index.port).startswith("HTTP/1.1 403")
    assert index.requests[seen:] == []


def test_kernel_restart_keeps_the_site_on_sys_path(pkgd, tenant, session, index):
    """The kernel puts the site on sys.path itself at start (kernel.py), so
    a package installed before a kernel restart still imports after it."""
    sid = session["id"]
    st, doc = install(tenant, sid, ["tinypkg==1.0"], timeout_s=60)
    assert st == 200, (st, doc)
    assert {p["name"]: p["version"] for p in doc["installed"]}["tinypkg"] == "1.0", doc
    r = tenant.exec(sid, "import os; os._exit(3)")
    assert r["status"] == "killed", r
    r = tenant.exec(sid, "import tinypkg\nprint(tinypkg.VERSION)")
    assert r["status"] == "ok" and r["stdout"].strip() == "1.0", r


def test_slow_index_hits_the_window_and_egress_closes(pkgd, tenant, session, index):
    """The index holds pip's request: the window ends with that proxy
    connection open, the daemon closes it, and the answer says timeout."""
    sid = session["id"]
    mark = pkgd.log_mark()
    closed_before = pkgd.metric("ci_egress_closed_total", 0)
    seen = len(index.requests)
    index.slow = True
    answer = {}
    # Long enough for pip to start and reach the index inside the window
    # (checked below: the index saw the request), short for a test.
    window = 20

    def run():
        answer["r"] = install(tenant, sid, ["tinypkg==1.2"], timeout_s=window)

    t = threading.Thread(target=run)
    t.start()
    try:
        wait_for(lambda: any("/simple/tinypkg/" in r for r in index.requests[seen:]), window,
                 what="pip's request at the (slow) index, inside the window")
        t.join(window + 30)
        st, doc = answer["r"]
        assert st == 504, (st, doc)
        assert doc["error"]["code"] == "timeout", doc
        assert "install window of %d s ended" % window in doc["error"]["message"], doc
        pkgd.wait_log("session %s: install window closed (the window ended)" % sid, since=mark)
        # The held connection was closed by the window's end.
        assert pkgd.metric("ci_egress_closed_total", 0) >= closed_before + 1
    finally:
        index.slow = False
        t.join(60)
    # After it: refused by the proxy, nothing reaches the index.
    seen = len(index.requests)
    assert probe(tenant, sid, index.port).startswith("HTTP/1.1 403")
    assert index.requests[seen:] == []
    # The session is fine, and nothing was installed.
    r = tenant.exec(sid, "import importlib.util\nprint(importlib.util.find_spec('tinypkg'))")
    assert r["status"] == "ok" and r["stdout"].strip() == "None", r


@pytest.mark.parametrize("body, words", [
    ({"pip": ["--index-url=http://evil.test/"]}, "package name"),
    ({"pip": ["tinypkg @ http://evil.test/x.whl"]}, "URLs"),
    ({"pip": ["tinypkg==1.2; os_name=='posix'"]}, "pip:"),
    ({"pip": ["tinypkg==1.2'"]}, "pip:"),
    ({"pip": []}, "at least one"),
    ({"pip": "tinypkg"}, "expected an array"),
    ({"pip": [3]}, "expected a string"),
    ({"pip": ["tinypkg"], "timeout_s": 0}, "timeout_s"),
    ({"pip": ["tinypkg"], "timeout_s": 61}, "--install-max-timeout-s"),
    ({"pip": ["tinypkg"], "index_url": "http://evil.test/"}, "unknown field"),
])
def test_bad_requests_are_400(tenant, session, body, words):
    st, doc = tenant.request("POST", "/v1/sessions/%s/packages" % session["id"], body=body)
    assert st == 400, (st, doc)
    assert words in doc["error"]["message"], doc


def test_a_session_without_network_is_400(tenant):
    s = tenant.create()
    try:
        st, doc = install(tenant, s["id"], ["tinypkg"])
        assert st == 400 and "network" in doc["error"]["message"], (st, doc)
    finally:
        tenant.delete(s["id"])


def test_another_tenants_session_is_404(pkgd, tenant, session):
    other = pkgd.client(pkgd.key("pkg-b")["key"])
    st, doc = install(other, session["id"], ["tinypkg==1.2"])
    assert st == 404, (st, doc)


def test_a_busy_session_is_409(tenant, session):
    sid = session["id"]
    done = {}

    def run():
        done["r"] = tenant.exec(sid, "import time\ntime.sleep(4)")

    t = threading.Thread(target=run)
    t.start()
    try:
        wait_for(lambda: tenant.state(sid) == "busy", 15, what="the execution to run")
        st, doc = install(tenant, sid, ["tinypkg==1.2"])
        assert st == 409 and doc["error"]["code"] == "busy", (st, doc)
    finally:
        t.join(30)
    assert done["r"]["status"] == "ok"


def test_no_index_configured_is_503_naming_the_option(redis_server, tmpdir_session, pkgd,
                                                       tenant, session):
    d = Daemon(redis_server, tmpdir_session, ("--pool-size", "0"))
    try:
        # Checked before the session: any well-formed id gets it.
        st, doc = install(d.api, session["id"], ["tinypkg==1.2"])
        assert st == 503, (st, doc)
        assert "--pip-index-url" in doc["error"]["message"], doc
    finally:
        d.finish()


def test_ctl_install_prints_names_and_versions(pkgd, tenant_key, session):
    env = {"CICTL_API_KEY": tenant_key}
    r = pkgd.ctl("install", "--timeout", "60", session["id"], "tinydep==0.3", env=env)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == ["tinydep 0.3"], r.stdout
    r = pkgd.ctl("install", session["id"], "tinydep @ http://evil.test/x.whl", env=env)
    assert r.returncode == 5 and "bad_request" in r.stderr and "URLs" in r.stderr, (
        r.returncode, r.stderr)
    # an option-looking spec never reaches the server
    r = pkgd.ctl("install", session["id"], "--index-url=http://evil.test/", env=env)
    assert r.returncode == 2 and "unknown option" in r.stderr, (r.returncode, r.stderr)
    r = pkgd.ctl("install", session["id"], env=env)
    assert r.returncode == 2, (r.returncode, r.stderr)
