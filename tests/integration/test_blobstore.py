"""The snapshot stores (daemon/blobstore.h) driven through blob-tool: the
directory store on a temporary directory, and the S3 store against a real
s3rver from npm (tests/s3/, installed by deploy/setup.sh) on 127.0.0.1,
with the official AWS SDK for JavaScript reading what ci wrote and writing
what ci reads.

s3rver 3.7.1 checks the access key id of a SigV4 request but not the
signature itself (lib/middleware/authentication.js: "Signature version 4
calculation is unimplemented"), so a wrong secret is not refused by it.
The signatures are checked by SigV4Front instead: a small reverse proxy in
front of s3rver that recomputes each request's signature from the secret
(AWS's published algorithm, Python's hmac) and refuses a mismatch with 403
SignatureDoesNotMatch, as S3 does. That the official SDK's requests pass
it is what says the checker itself is right.
"""
import hashlib
import hmac
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import urllib.parse

import pytest

from harness.http import free_port
from harness.procfs import stop_process
from harness.wait import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, os.environ.get("CITEST_BLOB_TOOL", "build/tools/blob-tool"))
S3DIR = os.path.join(ROOT, "tests", "s3")
S3RVER = os.path.join(S3DIR, "node_modules", ".bin", "s3rver")
BUCKET = "snap"
MB = 1024 * 1024



def needs_s3(fn):
    """Missing, the S3 tests fail (they do not skip): make test must run
    them, and its setup step installs s3rver (deploy/setup.sh)."""
    return fn



def tool(store, *args, check=True, env=None, timeout=300):
    p = subprocess.run([TOOL, *store, *args], capture_output=True, text=True, env=env,
                       timeout=timeout)
    if check:
        assert p.returncode == 0, "blob-tool %s: rc %d: %s" % (args, p.returncode, p.stderr)
    return p


def hwm_kb(stderr):
    m = re.findall(r"vmhwm_kb (\d+)", stderr)
    assert m, stderr
    return int(m[-1])


def make_file(path, size, seed=b"x"):
    """size bytes that do not repeat within a part (sha256 counter mode)."""
    with open(path, "wb") as f:
        i = 0
        block = b""
        left = size
        while left > 0:
            if not block:
                block = b"".join(hashlib.sha256(seed + (i * 1000 + j).to_bytes(8, "big")).digest()
                                 for j in range(2048))
                i += 1
            n = min(left, len(block))
            f.write(block[:n])
            block = block[n:]
            left -= n


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MB), b""):
            h.update(chunk)
    return h.hexdigest()


def ls(store, prefix=""):
    out = tool(store, "ls", prefix).stdout.split("\n")
    return {line.split(" ")[0]: int(line.split(" ")[1]) for line in out if line}


# ---- the directory store ----

@pytest.fixture
def dirstore(tmp_path):
    root = tmp_path / "store"
    return ["--store", "dir:%s" % root], root


def test_dir_put_get_list_delete(dirstore, tmp_path):
    store, root = dirstore
    src = tmp_path / "src"
    make_file(src, 300000)
    for key in ("t/a/one.tar", "t/a/two.tar", "t/b/three", "u"):
        assert tool(store, "put", str(src), key).stdout.strip() == "bytes 300000"
    assert ls(store) == {"t/a/one.tar": 300000, "t/a/two.tar": 300000, "t/b/three": 300000,
                         "u": 300000}
    assert list(ls(store, "t/a/")) == ["t/a/one.tar", "t/a/two.tar"]
    assert list(ls(store, "t/a/o")) == ["t/a/one.tar"]
    # pages of one key each come back in order, all of them
    p = tool(store, "--page", "1", "ls", "t/")
    assert [l.split()[0] for l in p.stdout.split("\n") if l] == ["t/a/one.tar", "t/a/two.tar",
                                                                 "t/b/three"]
    out = tmp_path / "out"
    tool(store, "get", "t/b/three", str(out))
    assert sha(out) == sha(src)
    # the callback forms (what the snapshot API will use for a stream)
    tool(store, "--via-callback", "put", str(src), "cb")
    tool(store, "--via-callback", "get", "cb", str(out))
    assert sha(out) == sha(src)
    # a stream that is not ready half the time (BLOB_READ_AGAIN, blob_resume)
    tool(store, "--again", "put", str(src), "again")
    tool(store, "get", "again", str(out))
    assert sha(out) == sha(src)
    tool(store, "rm", "t/b/three")
    tool(store, "rm", "t/b/three")  # not there: not an error
    assert "t/b/three" not in ls(store)
    assert not (root / "t" / "b").exists()  # the empty directory went with it
    p = tool(store, "get", "t/b/three", str(out), check=False)
    assert p.returncode == 2 and "no object t/b/three" in p.stderr
    p = tool(store, "--max-bytes", "1000", "get", "u", str(out), check=False)
    assert p.returncode == 1 and "over the cap" in p.stderr


@pytest.mark.parametrize("key", ["../x", "/etc/passwd", "a//b", "a/../b", ".hidden", "a/.tmp/x",
                                 "a/", "", "a b", "a\\b", "x" * 513])
def test_dir_refuses_bad_keys(dirstore, tmp_path, key):
    store, root = dirstore
    src = tmp_path / "src"
    src.write_bytes(b"data")
    p = tool(store, "put", str(src), key, check=False)
    assert p.returncode == 3 and "bad object key" in p.stderr
    assert not os.path.exists(os.path.join(os.path.dirname(str(root)), "x"))


def test_dir_big_object_streamed(dirstore, tmp_path):
    """100 MB through the store: the tool's peak RSS stays far below it."""
    store, root = dirstore
    src = tmp_path / "big"
    make_file(src, 100 * MB)
    p = tool(store, "put", str(src), "big/obj")
    put_hwm = hwm_kb(p.stderr)
    out = tmp_path / "big.out"
    p = tool(store, "get", "big/obj", str(out))
    get_hwm = hwm_kb(p.stderr)
    assert sha(out) == sha(src)
    assert put_hwm < 40 * 1024 and get_hwm < 40 * 1024, (put_hwm, get_hwm)
    p = tool(store, "--via-callback", "put", str(src), "big/cb")
    assert hwm_kb(p.stderr) < 40 * 1024


def test_dir_killed_put_leaves_no_object(dirstore, tmp_path):
    """A put killed half way leaves nothing under its key (only a temporary
    file, swept when a store opens there next)."""
    store, root = dirstore
    tool(store, "ls")  # makes the store
    proc = subprocess.Popen([TOOL, *store, "put", "-", "k/obj"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(os.urandom(3 * MB))
        proc.stdin.flush()
        tmpdir = root / ".tmp"
        wait_for(lambda: any(f.stat().st_size >= 2 * MB for f in tmpdir.iterdir()), 30,
                 what="the put's temporary file holds 2 MB")
        assert "k/obj" not in ls(store)
        proc.kill()
        proc.wait(10)
    finally:
        stop_process(proc, signal.SIGKILL)
        proc.stdin.close()
    assert "k/obj" not in ls(store)
    assert not (root / "k" / "obj").exists()
    p = tool(store, "get", "k/obj", str(tmp_path / "o"), check=False)
    assert p.returncode == 2
    assert list((root / ".tmp").iterdir()) == []  # swept by the ls's open


def test_dir_replace_is_whole(dirstore, tmp_path):
    store, root = dirstore
    a, b = tmp_path / "a", tmp_path / "b"
    make_file(a, 2 * MB, b"a")
    make_file(b, 3 * MB, b"b")
    tool(store, "put", str(a), "obj")
    tool(store, "put", str(b), "obj")
    out = tmp_path / "out"
    tool(store, "get", "obj", str(out))
    assert sha(out) == sha(b)


# ---- the S3 store against s3rver ----

class S3rver:
    def __init__(self, tmp_path, port=None):
        assert os.path.exists(S3RVER), \
            "s3rver is not installed: run deploy/setup.sh (npm ci in tests/s3)"
        self.dir = tmp_path / ("s3rver-%d" % (port or 0))
        self.dir.mkdir(exist_ok=True)
        self.port = port or free_port()
        self.log = open(str(tmp_path / ("s3rver-%d.log" % self.port)), "ab")
        env = dict(os.environ)
        # s3rver's continuation tokens use DES, which OpenSSL 3 keeps in
        # its legacy provider.
        env["NODE_OPTIONS"] = "--openssl-legacy-provider"
        self.proc = subprocess.Popen(
            [S3RVER, "-d", str(self.dir), "-a", "127.0.0.1", "-p", str(self.port),
             "--no-vhost-buckets", "--configure-bucket", BUCKET],
            stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.lines = []  # its request log
        self.reader = None
        wait_for(lambda: self._banner(), 30, what="s3rver listening")

    def _banner(self):
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("s3rver exited: see %s" % self.log.name)
        if b"listening on 127.0.0.1:" in line:
            # drain its further output so it never blocks on a full pipe
            self.reader = threading.Thread(target=self._drain, daemon=True)
            self.reader.start()
            return True
        return False

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line.decode(errors="replace"))

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self, sig=signal.SIGTERM):
        stop_process(self.proc, sig)
        self.log.close()


@pytest.fixture
def s3(tmp_path):
    srv = S3rver(tmp_path)
    yield srv
    srv.stop()


def creds_file(tmp_path, access="S3RVER", secret="S3RVER", form="lines"):
    f = tmp_path / ("cred-%s-%s-%s" % (access, secret, form))
    if form == "lines":
        f.write_text("%s\n%s\n" % (access, secret))
    else:
        f.write_text("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n" %
                     (access, secret))
    return str(f)


def s3store(srv, tmp_path, prefix="ci/snaps", **kw):
    return ["--store", "s3://%s/%s" % (BUCKET, prefix), "--store-endpoint", srv.endpoint,
            "--store-credentials-file", creds_file(tmp_path, **kw)]


def sdk(srv, *args):
    env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")
    p = subprocess.run(["node", os.path.join(S3DIR, "sdk_interop.mjs"), srv.endpoint, BUCKET,
                        *args], capture_output=True, text=True, env=env, timeout=120, cwd=S3DIR)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@needs_s3
def test_s3_put_get_list_delete(s3, tmp_path):
    store = s3store(s3, tmp_path)
    src = tmp_path / "src"
    make_file(src, 300000)
    for key in ("t/a/one.tar", "t/a/two.tar", "t/b/three"):
        assert tool(store, "put", str(src), key).stdout.strip() == "bytes 300000"
    assert ls(store, "t/") == {"t/a/one.tar": 300000, "t/a/two.tar": 300000, "t/b/three": 300000}
    assert list(ls(store, "t/a/")) == ["t/a/one.tar", "t/a/two.tar"]
    # continuation tokens: pages of one key
    p = tool(store, "--page", "1", "ls", "t/")
    assert [l.split()[0] for l in p.stdout.split("\n") if l] == ["t/a/one.tar", "t/a/two.tar",
                                                                 "t/b/three"]
    out = tmp_path / "out"
    tool(store, "get", "t/a/two.tar", str(out))
    assert sha(out) == sha(src)
    tool(store, "--via-callback", "get", "t/a/two.tar", str(out))
    assert sha(out) == sha(src)
    tool(store, "rm", "t/a/two.tar")
    assert list(ls(store, "t/")) == ["t/a/one.tar", "t/b/three"]
    p = tool(store, "get", "t/a/two.tar", str(out), check=False)
    assert p.returncode == 2 and "404" in p.stderr
    # the store's prefix is where everything went: the SDK sees it there
    keys = [o["key"] for o in sdk(s3, "list", "ci/snaps/")]
    assert keys == ["ci/snaps/t/a/one.tar", "ci/snaps/t/b/three"]
    # the key=value form of the credentials file
    assert "t/a/one.tar" in ls(s3store(s3, tmp_path, form="kv"), "t/")


@needs_s3
def test_s3_wrong_access_key_refused(s3, tmp_path):
    store = s3store(s3, tmp_path, access="NOTAKEY")
    p = tool(store, "ls", check=False)
    assert p.returncode == 1
    assert "HTTP 403 InvalidAccessKeyId" in p.stderr


@needs_s3
def test_s3_environment_credentials(s3, tmp_path):
    store = ["--store", "s3://%s/env" % BUCKET, "--store-endpoint", s3.endpoint]
    env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")
    src = tmp_path / "src"
    src.write_bytes(b"hello")
    tool(store, "put", str(src), "k", env=env)
    env.pop("AWS_ACCESS_KEY_ID")
    p = tool(store, "ls", check=False, env=env)
    assert p.returncode == 3 and "no credentials" in p.stderr


@needs_s3
def test_s3_multipart_100mb(s3, tmp_path):
    """100 MB goes up as a multipart upload (8 MiB parts) and comes back
    whole, without the tool ever holding it: its peak RSS is far below."""
    store = s3store(s3, tmp_path)
    src = tmp_path / "big"
    make_file(src, 100 * MB)
    p = tool(store, "put", str(src), "big/obj")
    assert p.stdout.strip() == "bytes %d" % (100 * MB)
    put_hwm = hwm_kb(p.stderr)
    out = tmp_path / "big.out"
    p = tool(store, "get", "big/obj", str(out))
    get_hwm = hwm_kb(p.stderr)
    assert sha(out) == sha(src)
    # the same through a stream that is not ready half the time
    assert tool(store, "--again", "put", str(src), "big/again").stdout.strip() == \
        "bytes %d" % (100 * MB)
    tool(store, "get", "big/again", str(out))
    assert sha(out) == sha(src)
    assert put_hwm < 60 * 1024 and get_hwm < 60 * 1024, (put_hwm, get_hwm)
    # s3rver's request log: 13 parts went up (12 of 8 MiB and the rest)
    parts = [l for l in s3.lines if re.search(r"big/obj\?partNumber=\d+&uploadId=\S+ 200", l)]
    assert len(parts) == 13, s3.lines[-20:]
    assert "application/octet-stream" in "".join(
        m.read_text() for m in (s3.dir / BUCKET).rglob("*obj._S3rver_metadata.json"))


@needs_s3
def test_s3_interop_with_the_aws_sdk(s3, tmp_path):
    store = s3store(s3, tmp_path, prefix="w")
    small, big = tmp_path / "small", tmp_path / "big"
    make_file(small, 1000, b"s")
    make_file(big, 20 * MB, b"b")
    tool(store, "put", str(small), "tenant/s1.tar")
    tool(store, "put", str(big), "tenant/s2.tar")  # multipart
    assert sdk(s3, "list", "w/tenant/") == [{"key": "w/tenant/s1.tar", "size": 1000},
                                            {"key": "w/tenant/s2.tar", "size": 20 * MB}]
    out = tmp_path / "sdk.out"
    assert sdk(s3, "get", "w/tenant/s2.tar", str(out)) == {"size": 20 * MB}
    assert sha(out) == sha(big)
    # and the other way: the SDK uploads, ci reads
    sdk_src = tmp_path / "sdk.src"
    make_file(sdk_src, 3 * MB, b"sdk")
    sdk(s3, "put", "w/tenant/from-sdk.tar", str(sdk_src))
    assert ls(store, "tenant/")["tenant/from-sdk.tar"] == 3 * MB
    tool(store, "get", "tenant/from-sdk.tar", str(out))
    assert sha(out) == sha(sdk_src)


@needs_s3
def test_s3_killed_mid_upload_fails_cleanly(tmp_path):
    """s3rver killed while a multipart upload is going up: the tool retries,
    then fails with a clear error; with s3rver back on the same data, no
    object (whole or partial) is visible under the key."""
    srv = S3rver(tmp_path)
    port = srv.port
    store = s3store(srv, tmp_path) + ["--retries", "2", "--timeout-ms", "10000"]
    src = tmp_path / "big"
    make_file(src, 100 * MB)
    proc = subprocess.Popen([TOOL, *store, "--via-callback", "put", str(src), "k/obj"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: "read 25165824" in proc.stderr.readline(), 120,
                 what="the tool fed 24 MiB (three parts)")
        srv.stop(signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        stop_process(proc, signal.SIGKILL)
    assert proc.returncode == 1, err
    assert "store: put (upload part) ci/snaps/k/obj" in err
    assert "after 3 attempts" in err
    srv = S3rver(tmp_path, port=port)
    try:
        assert "k/obj" not in ls(store)
        p = tool(store, "get", "k/obj", str(tmp_path / "o"), check=False)
        assert p.returncode == 2
    finally:
        srv.stop()


# ---- the signatures, checked ----

def _canon_query(raw):
    pairs = []
    for part in raw.split("&") if raw else []:
        name, _, value = part.partition("=")
        pairs.append((urllib.parse.quote(urllib.parse.unquote(name), safe="-_.~"),
                      urllib.parse.quote(urllib.parse.unquote(value), safe="-_.~")))
    return "&".join("%s=%s" % p for p in sorted(pairs))


def sigv4_check(method, path, headers, body, secret):
    """None when the request's SigV4 signature is right, else why not."""
    auth = headers.get("authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, ?"
                 r"SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$", auth)
    if not m:
        return "no SigV4 Authorization header"
    _, date, region, signed, signature = m.groups()
    payload = headers.get("x-amz-content-sha256")
    if payload is None:
        return "no x-amz-content-sha256"
    if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
        return "the payload hash does not match the body"
    names = signed.split(";")
    if "host" not in names or "x-amz-date" not in names:
        return "host and x-amz-date must be signed"
    upath, _, query = path.partition("?")
    canon = "\n".join([method, upath, _canon_query(query)] +
                      ["%s:%s" % (n, " ".join(headers.get(n, "").split())) for n in names] +
                      ["", signed, payload])
    scope = "%s/%s/s3/aws4_request" % (date, region)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", headers["x-amz-date"], scope,
                         hashlib.sha256(canon.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (date, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    want = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(want, signature) else "SignatureDoesNotMatch"


class SigV4Front:
    """127.0.0.1:PORT -> s3rver, refusing any request whose signature is
    not right for secret; counts what it checked."""

    def __init__(self, backend_port, secret="S3RVER"):
        front = self
        self.checked, self.refused = 0, 0
        self.fail_next = 0  # answer this many requests 503 SlowDown first
        self.failed = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                if front.fail_next > 0:
                    front.fail_next -= 1
                    front.failed += 1
                    out = b"<Error><Code>SlowDown</Code><Message>busy</Message></Error>"
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                why = sigv4_check(self.command, self.path, hdrs, body, secret)
                front.checked += 1
                if why:
                    front.refused += 1
                    out = ("<Error><Code>SignatureDoesNotMatch</Code><Message>%s</Message>"
                           "</Error>" % why).encode()
                    self.send_response(403)
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                c = http.client.HTTPConnection("127.0.0.1", backend_port, timeout=60)
                c.request(self.command, self.path, body=body,
                          headers={k: v for k, v in self.headers.items()
                                   if k.lower() not in ("connection", "expect")})
                r = c.getresponse()
                data = r.read()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                c.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def front(s3):
    f = SigV4Front(s3.port)
    yield f
    f.stop()


@needs_s3
def test_sigv4_checked_and_wrong_secret_refused(s3, front, tmp_path):
    """Every request ci signs passes an independent SigV4 check (put,
    multipart create/part/complete, list with a continuation token, get,
    delete); one signed with a wrong secret is refused, and ci says so."""
    store = ["--store", "s3://%s/sig" % BUCKET, "--store-endpoint", front.endpoint,
             "--store-credentials-file", creds_file(tmp_path), "--part-size", str(5 * MB)]
    src, big = tmp_path / "src", tmp_path / "big"
    make_file(src, 1000)
    make_file(big, 12 * MB)
    tool(store, "put", str(src), "a/one")
    tool(store, "put", str(big), "a/two")  # three parts
    p = tool(store, "--page", "1", "ls", "a/")
    assert [l.split()[0] for l in p.stdout.split("\n") if l] == ["a/one", "a/two"]
    out = tmp_path / "out"
    tool(store, "get", "a/two", str(out))
    assert sha(out) == sha(big)
    tool(store, "rm", "a/one")
    assert front.refused == 0 and front.checked >= 9
    # the checker takes the official SDK's signatures (so it checks right)
    env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")
    r = subprocess.run(["node", os.path.join(S3DIR, "sdk_interop.mjs"), front.endpoint, BUCKET,
                        "list", "sig/"], capture_output=True, text=True, env=env, timeout=120,
                       cwd=S3DIR)
    assert r.returncode == 0, r.stderr
    assert [o["key"] for o in json.loads(r.stdout)] == ["sig/a/two"]
    assert front.refused == 0
    # a wrong secret: refused, with S3's code in ci's error, and nothing stored
    bad = ["--store", "s3://%s/sig" % BUCKET, "--store-endpoint", front.endpoint,
           "--store-credentials-file", creds_file(tmp_path, secret="WRONG")]
    p = tool(bad, "put", str(src), "a/three", check=False)
    assert p.returncode == 1
    assert "HTTP 403 SignatureDoesNotMatch" in p.stderr
    p = tool(bad, "ls", check=False)
    assert p.returncode == 1 and "403" in p.stderr
    assert front.refused == 2
    assert "a/three" not in ls(store, "a/")


# ---- cancel ----

def test_dir_cancelled_put_leaves_nothing(dirstore, tmp_path):
    store, root = dirstore
    src = tmp_path / "src"
    make_file(src, 20 * MB)
    p = tool(store, "--cancel-after", str(5 * MB), "put", str(src), "k/obj")
    assert p.stdout.startswith("cancelled after"), p.stdout
    assert list((root / ".tmp").iterdir()) == []  # removed by the cancel, not a sweep
    assert not (root / "k" / "obj").exists()
    assert "k/obj" not in ls(store)


@needs_s3
def test_s3_cancelled_put_aborts_its_upload(s3, tmp_path):
    """A multipart put cancelled after two parts sends AbortMultipartUpload
    (the store finishes it on its own), never CompleteMultipartUpload, and
    no object appears. s3rver 3.7.1 answers the abort 405 (it has no
    AbortMultipartUpload route); what is checked is that it was sent."""
    store = s3store(s3, tmp_path) + ["--part-size", str(5 * MB)]
    src = tmp_path / "src"
    make_file(src, 30 * MB)
    p = tool(store, "--cancel-after", str(12 * MB), "put", str(src), "k/obj")
    assert p.stdout.startswith("cancelled after"), (p.stdout, p.stderr)
    assert wait_for(lambda: [l for l in s3.lines
                             if re.search(r"k/obj\?uploadId=\S+ (204|405) ", l)], 10,
                    what="s3rver logged the AbortMultipartUpload")
    assert not [l for l in s3.lines if re.search(r"k/obj\?uploadId=\S+ 200 ", l)]  # no Complete
    assert "k/obj" not in ls(store)


@needs_s3
def test_s3_retries_5xx_then_gives_up_clearly(s3, front, tmp_path):
    """A 503 is retried with backoff: two of them and the put, the get and
    the list still work; more than the retries allow and the op fails
    naming the step, the service's code and the attempts."""
    store = ["--store", "s3://%s/retry" % BUCKET, "--store-endpoint", front.endpoint,
             "--store-credentials-file", creds_file(tmp_path), "--retries", "2"]
    src = tmp_path / "src"
    make_file(src, 100000)
    for args in (("put", str(src), "k"), ("get", "k", str(tmp_path / "out")), ("ls",)):
        front.fail_next, front.failed = 2, 0
        tool(store, *args)
        assert front.failed == 2
    assert sha(tmp_path / "out") == sha(src)
    front.fail_next = 100
    p = tool(store, "put", str(src), "k2", check=False)
    assert p.returncode == 1
    assert "store: put retry/k2: HTTP 503 SlowDown: busy (after 3 attempts)" in p.stderr
    front.fail_next = 0
    assert "k2" not in ls(store)


# ---- a hostile S3 service ----

class HostileS3:
    """127.0.0.1: answers by the request's path, as a broken or hostile
    service might."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, status, body, length=None):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if "list-type=2" in self.path and "prefix=h%2Fhuge" in self.path:
                    return self._send(200, b"<ListBucketResult>" + b"<Contents>" * 300000)
                if "list-type=2" in self.path and "prefix=h%2Fnotoken" in self.path:
                    return self._send(200, b"<ListBucketResult><Contents><Key>h/notoken/a</Key>"
                                      b"<Size>1</Size></Contents><IsTruncated>true</IsTruncated>"
                                      b"</ListBucketResult>")
                if "list-type=2" in self.path:
                    return self._send(200, b"<ListBucketResult><Contents><Key>h/../../etc</Key>"
                                      b"<Size>1</Size></Contents><Contents><Key>h/ok</Key>"
                                      b"<Size>2</Size></Contents></ListBucketResult>")
                if self.path.endswith("/endless"):  # says 10 GB, sends 3 MB then stops
                    self.send_response(200)
                    self.send_header("Content-Length", str(10 << 30))
                    self.end_headers()
                    for _ in range(3):
                        self.wfile.write(b"x" * MB)
                    self.close_connection = True
                    return
                return self._send(404, b"<Error><Code>NoSuchKey</Code></Error>")

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                return self._send(200, b"<InitiateMultipartUploadResult><Bucket>b</Bucket>"
                                  b"</InitiateMultipartUploadResult>")

            def do_PUT(self):
                n = int(self.headers.get("content-length") or 0)
                while n > 0:
                    n -= len(self.rfile.read(min(n, MB)))
                self.send_response(200)  # no ETag
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = "http://127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile():
    h = HostileS3()
    yield h
    h.stop()


def test_s3_hostile_service(hostile, tmp_path):
    store = ["--store", "s3://%s/h" % BUCKET, "--store-endpoint", hostile.endpoint,
             "--store-credentials-file", creds_file(tmp_path), "--retries", "1"]
    # keys that are not ours or not valid are not passed on
    assert ls(store) == {"ok": 2}
    p = tool(store, "ls", "huge", check=False)
    assert p.returncode == 1 and "larger than the cap" in p.stderr
    p = tool(store, "ls", "notoken", check=False)
    assert p.returncode == 1 and "without a usable token" in p.stderr
    # an object larger than the caller's cap stops at the cap
    p = tool(store, "--max-bytes", str(2 * MB), "get", "endless", str(tmp_path / "o"),
             check=False)
    assert p.returncode == 1 and "over the cap" in p.stderr
    # an answer cut short is an error, not a short object
    p = tool(store, "get", "endless", str(tmp_path / "o"), check=False)
    assert p.returncode == 1 and "store: get h/endless" in p.stderr
    # a CreateMultipartUpload answer without an UploadId
    big = tmp_path / "big"
    make_file(big, 9 * MB)
    p = tool(store, "put", str(big), "k", check=False)
    assert p.returncode == 1 and "no UploadId in the answer" in p.stderr


# ---- the daemon's options ----

@pytest.mark.parametrize("args,why", [
    (["--store", "bogus"], "neither dir:PATH nor s3://bucket/prefix"),
    (["--store", "dir:relative"], "needs an absolute path"),
    (["--store", "s3://snap/x"], "needs --store-endpoint"),
    (["--store", "s3://snap/../x", "--store-endpoint", "http://127.0.0.1:1"], "bad prefix"),
    (["--store", "s3://snap/x", "--store-endpoint", "ftp://127.0.0.1:1"], "http:// or https://"),
    (["--store", "s3://snap/x", "--store-endpoint", "http://127.0.0.1:1", "--store-region",
      "Bad Region"], "bad region"),
])
def test_daemon_refuses_a_bad_store_at_start(args, why):
    daemon = os.path.join(ROOT, os.environ.get("CITEST_DAEMON", "build/ci-daemon"))
    p = subprocess.run([daemon, *args], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert why in p.stderr, p.stderr
