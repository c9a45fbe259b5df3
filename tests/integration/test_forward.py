"""Issue 15: a call for a session that lives on another node is forwarded to
its owner and the owner's answer streamed back (daemon/forward.c).

Two daemons share one Redis and key prefix; the session is made on B and
every call goes through A: exec, a streamed exec whose events arrive as B
writes them, a large file up and down with A's memory bounded, listing,
keepalive, delete; errors pass through with their JSON; an owner killed
mid-stream cuts the caller's stream and A keeps serving; an owner whose URL
refuses is a 503 naming it; a client's forged cluster token makes nobody a
peer; TLS between the nodes against --peer-ca-file, and a wrong CA refused.

Both daemons share this host's engine: what is proved is the proxy (HTTP,
streaming, backpressure, failures), not separate engines or hosts."""
import hashlib
import os
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

from harness import procfs, wait_for
from harness.http import Client, free_port

from test_tls import make_cert


def secret_file(directory, name="cluster.secret", secret=None):
    path = os.path.join(str(directory), name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write((secret or os.urandom(32).hex()) + "\n")
    return path


def pair(make_daemon, tmp_path, a_extra=(), b_extra=(), b_options=None, a_options=None,
         secret=None):
    """A and B on one Redis and key prefix with one cluster secret, B's URL
    advertised (B's own flags may say otherwise). Heartbeats are quick, so A
    routes soon; a node is lost only after 10 s, so a loaded machine's late
    heartbeat does not tombstone B's sessions in the middle of a case."""
    sec = secret or secret_file(tmp_path)
    common = ("--pool-size", "0", "--heartbeat-ms", "200", "--node-lost-ms", "10000",
              "--cluster-secret-file", sec)
    a = make_daemon(*common, *a_extra, **(a_options or {}))
    b = make_daemon(*common, *b_extra, prefix=a.prefix, **(b_options or {}))
    return a, b


def wait_routed(a, sid):
    """Until A forwards calls for sid (it has seen B's heartbeat)."""
    wait_for(lambda: a.api.request("GET", "/v1/sessions/" + sid, timeout=10)[0] == 200, 15,
             interval=0.1, what="node A to answer for B's session")



def test_forward_session_calls_through_another_node(make_daemon, tmp_path):
    a, b = pair(make_daemon, tmp_path)
    s = b.api.create()
    sid = s["id"]
    try:
        wait_routed(a, sid)
        status, doc = a.api.request("GET", "/v1/sessions/" + sid)
        assert status == 200 and doc["id"] == sid
        # Exec through A: the result is B's, and the request id is the same in both logs.
        rid = "fwd-test-%d" % os.getpid()
        r = a.api.send("POST", "/v1/sessions/%s/exec" % sid, body={"code": "x = 41\nx + 1"},
                       headers={"X-Request-Id": rid})
        assert r.status == 200, (r.status, r.body[:300])
        assert r.doc["result"] == "42" and r.doc["kernel"] == "preserved"
        assert r.headers["x-request-id"] == rid
        assert r.headers["content-type"].startswith("application/json")
        b.wait_log(rid)
        assert rid in a.read_log()
        # The variable lives on B.
        assert b.api.exec(sid, "x")["result"] == "41"
        # Keepalive and the session's own document through A.
        status, doc = a.api.request("POST", "/v1/sessions/%s/keepalive" % sid)
        assert status == 200 and doc["id"] == sid, doc
        # Errors pass through with the owner's JSON and status.
        status, doc = a.api.request("GET", "/v1/sessions/%s/files/nope.txt" % sid)
        assert status == 404 and doc["error"]["code"] == "not_found", doc
        status, doc = a.api.request("POST", "/v1/sessions/%s/exec" % sid, raw=b"{not json",
                                    headers={"Content-Type": "application/json"})
        assert status == 400 and doc["error"]["code"] == "bad_request", doc
        # An upload the owner refuses by its length is answered at once (413),
        # while the caller is still sending.
        big = 600 << 20
        status, doc, sent, _ = a.api.upload("PUT", "/v1/sessions/%s/files/huge.bin" % sid,
                                            (b"x" * (1 << 20) for _ in range(600)), length=big,
                                            timeout=60)
        assert status == 413 and doc["error"]["code"] == "payload_too_large", doc
        assert sent < big, sent
        # Files: list, put small, delete.
        status, doc = a.api.request("PUT", "/v1/sessions/%s/files/small.txt" % sid, raw=b"hello")
        assert status == 201 and doc["size"] == 5, doc
        status, doc = a.api.request("GET", "/v1/sessions/%s/files" % sid)
        assert status == 200 and any(f["path"] == "small.txt" for f in doc["files"]), doc
        r = a.api.send("GET", "/v1/sessions/%s/files/small.txt" % sid)
        assert r.status == 200 and r.body == b"hello"
        assert a.api.request("DELETE", "/v1/sessions/%s/files/small.txt" % sid)[0] == 204
        assert b.api.request("GET", "/v1/sessions/%s/files/small.txt" % sid)[0] == 404
        m = a.metrics()
        assert m['ci_forward_calls_total{outcome="answered"}'] >= 10, m
        assert m["ci_forward_inflight"] == 0
        # Delete the session through A: it is gone on B.
        assert a.api.request("DELETE", "/v1/sessions/" + sid)[0] == 204
        wait_for(lambda: b.api.request("GET", "/v1/sessions/" + sid)[0] == 410, 10,
                 what="the session gone on B")
        sid = None
    finally:
        if sid:
            b.api.delete(sid)


def test_forward_streamed_exec_events_arrive_as_written(make_daemon, tmp_path):
    """The code prints, then waits for a file that the test writes only once it
    has read that first event through A: a proxy that held the stream back
    until the end would leave the code waiting (it gives up after 20 s and
    says so)."""
    a, b = pair(make_daemon, tmp_path)
    sid = b.api.create()["id"]
    try:
        wait_routed(a, sid)
        code = ("import os, time\n"
                "print('waiting', flush=True)\n"
                "t = time.monotonic()\n"
                "while not os.path.exists('/workspace/go') and time.monotonic() - t < 20:\n"
                "    time.sleep(0.02)\n"
                "print('released' if os.path.exists('/workspace/go') else 'gave up')\n")
        with a.api.stream("POST", "/v1/sessions/%s/exec" % sid,
                          body={"code": code, "stream": True, "timeout_s": 30}) as st:
            assert st.status == 200
            events = st.events()
            first = None
            for _, ev in events:
                if ev["type"] == "stdout":
                    first = ev
                    break
                assert ev["type"] != "result", ev
            assert first is not None and "waiting" in first["text"]
            # Only now is the code let go, through A as well.
            status, _ = Client(a.port).request("PUT", "/v1/sessions/%s/files/go" % sid, raw=b"1")
            assert status == 201
            rest = [ev for _, ev in events]
        result = rest[-1]
        assert result["type"] == "result", rest
        assert "released" in result["stdout"], result
    finally:
        b.api.delete(sid)


def test_forward_large_file_both_ways_with_bounded_memory(make_daemon, tmp_path):
    """100 MiB up through A and back: the same bytes, and A's RSS grows by
    far less than the file (the body is streamed, never held whole)."""
    # ASan's quarantine keeps freed memory (256 MiB by default): A's RSS
    # would count what was freed long ago. A small one shows what is held.
    asan = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:quarantine_size_mb=1"}
    a, b = pair(make_daemon, tmp_path, a_options={"env": asan})
    sid = b.api.create(limits={"disk_mb": 256})["id"]
    size, piece = 100 << 20, 1 << 20
    block = os.urandom(piece)
    want = hashlib.sha256()
    for i in range(size // piece):
        want.update(bytes([i & 0xff]) + block[1:])
    try:
        wait_routed(a, sid)
        base = procfs.rss_kb(a.proc.pid)
        peak = [base]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], procfs.rss_kb(a.proc.pid))
                done.wait(0.02)
        t = threading.Thread(target=sample)
        t.start()
        try:
            chunks = (bytes([i & 0xff]) + block[1:] for i in range(size // piece))
            status, doc, sent, _ = a.api.upload("PUT", "/v1/sessions/%s/files/big.bin" % sid,
                                                chunks, length=size, timeout=120)
            assert status == 201 and doc["size"] == size, doc
            got = hashlib.sha256()
            n = 0
            with a.api.stream("GET", "/v1/sessions/%s/files/big.bin" % sid, timeout=120) as st:
                assert st.status == 200
                while True:
                    buf = st.read(1 << 16)
                    if not buf:
                        break
                    got.update(buf)
                    n += len(buf)
            # A chunked upload goes through too (no Content-Length to pass on).
            status, doc, _, _ = a.api.upload("PUT", "/v1/sessions/%s/files/chunked.bin" % sid,
                                             (block for _ in range(8)), timeout=60)
            assert status == 201 and doc["size"] == 8 * piece, doc
        finally:
            done.set()
            t.join()
        assert n == size and got.hexdigest() == want.hexdigest()
        grew_mb = (peak[0] - base) / 1024
        print("A's RSS: %.1f MiB before, peak %.1f MiB (+%.1f MiB) over a %d MiB upload and "
              "download" % (base / 1024, peak[0] / 1024, grew_mb, size >> 20))
        assert grew_mb < (size >> 20) / 2, "A held %.1f MiB more during a %d MiB transfer" % (grew_mb, size >> 20)
    finally:
        b.api.delete(sid)


def test_forward_owner_killed_mid_stream(make_daemon, tmp_path):
    a, b = pair(make_daemon, tmp_path)
    sid = b.api.create()["id"]
    wait_routed(a, sid)
    code = "import time\nprint('started', flush=True)\ntime.sleep(25)\nprint('end')\n"
    with a.api.stream("POST", "/v1/sessions/%s/exec" % sid,
                      body={"code": code, "stream": True, "timeout_s": 30}, timeout=20) as st:
        assert st.status == 200
        events = st.events()
        for _, ev in events:
            if ev["type"] == "stdout":
                break
        b.kill()
        t0 = time.monotonic()
        seen = []
        try:
            for _, ev in events:
                seen.append(ev)
        except Exception as e:  # a chunked body cut short: IncompleteRead and the like
            seen.append({"type": "cut", "why": repr(e)})
        assert not any(ev["type"] == "result" for ev in seen), seen
        print("the caller's stream ended %.2f s after the owner was killed (%s)"
              % (time.monotonic() - t0, seen[-1] if seen else "no more events"))
    # A keeps serving, and now says the owner is unreachable (or lost, later).
    assert a.api.request("GET", "/healthz")[0] == 200
    status, doc = a.api.request("GET", "/v1/sessions/" + sid, timeout=15)
    assert status in (503, 410), (status, doc)
    assert b.node in doc["error"]["message"], doc
    assert a.metrics()['ci_forward_calls_total{outcome="broken"}'] == 1


def test_forward_owner_refusing_is_503_naming_it(make_daemon, tmp_path):
    dead = free_port()  # nobody listens here
    a, b = pair(make_daemon, tmp_path, b_extra=("--advertise-url", "http://127.0.0.1:%d" % dead))
    sid = b.api.create()["id"]
    try:
        def answered():
            r = a.api.send("GET", "/v1/sessions/" + sid, timeout=10)
            return r if r.status == 503 else None
        r = wait_for(answered, 15, interval=0.1, what="a 503 from A")
        msg = r.doc["error"]["message"]
        assert r.doc["error"]["code"] == "unavailable"
        assert b.node in msg and ("refused" in msg or "unreachable" in msg), msg
        assert r.headers.get("retry-after") == "1"
        print("refused: %s" % msg)
        # An exec with a body is refused the same way, and A keeps serving.
        status, doc = a.api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "1"})
        assert status == 503 and b.node in doc["error"]["message"], doc
        assert a.api.request("GET", "/healthz")[0] == 200
        assert a.metrics()['ci_forward_calls_total{outcome="unavailable"}'] >= 2
    finally:
        b.api.delete(sid)


def test_forward_forged_cluster_token_makes_no_peer(make_daemon, tmp_path):
    a, b = pair(make_daemon, tmp_path)
    sid = b.api.create()["id"]
    try:
        wait_routed(a, sid)
        forged = {"X-CI-Cluster-Token": "x" * 64}
        for d in (a, b):
            status, doc = d.api.request("GET", "/v1/sessions/" + sid, headers=forged)
            assert status == 403 and doc["error"]["code"] == "forbidden", (d.node, status, doc)
        # Without a forged token all is well, and B logs no forbidden peer call.
        assert a.api.request("GET", "/v1/sessions/" + sid)[0] == 200
    finally:
        b.api.delete(sid)


def test_forward_over_tls_with_the_peer_ca(make_daemon, tmp_path):
    d = str(tmp_path)
    cert, key = make_cert(d, "b")
    other, _ = make_cert(d, "other", cn="other")
    ctx = ssl.create_default_context(cafile=cert)
    sec = secret_file(tmp_path)
    common = ("--pool-size", "0", "--heartbeat-ms", "200", "--node-lost-ms", "10000",
              "--cluster-secret-file", sec)
    a = make_daemon(*common, "--peer-ca-file", cert)
    b_port = free_port()
    b = make_daemon(*common, "--tls-cert", cert, "--tls-key", key,
                    "--advertise-url", "https://127.0.0.1:%d" % b_port, prefix=a.prefix,
                    ssl_context=ctx, cacert=cert, port=b_port)
    wrong = make_daemon(*common, "--peer-ca-file", other, prefix=a.prefix)
    sid = b.api.create()["id"]
    try:
        wait_routed(a, sid)
        assert a.api.exec(sid, "6 * 7")["result"] == "42"
        status, doc = wrong.api.request("GET", "/v1/sessions/" + sid, timeout=15)
        assert status == 503, (status, doc)
        msg = doc["error"]["message"]
        assert b.node in msg and "TLS" in msg and "certificate" in msg.lower(), msg
        print("a wrong CA: %s" % msg)
        # The right CA, but a certificate for another name: refused too.
        named = os.path.join(d, "named")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        named + ".key", "-out", named + ".pem", "-days", "2", "-subj",
                        "/CN=wrong.test", "-addext", "subjectAltName=DNS:wrong.test"],
                       check=True, capture_output=True, timeout=60)
        nctx = ssl.create_default_context(cafile=named + ".pem")
        nctx.check_hostname = False  # the harness's own readiness probe
        c_port = free_port()
        c = make_daemon(*common, "--tls-cert", named + ".pem", "--tls-key", named + ".key",
                        "--advertise-url", "https://127.0.0.1:%d" % c_port, prefix=a.prefix,
                        ssl_context=nctx, cacert=named + ".pem", port=c_port)
        a2 = make_daemon(*common, "--peer-ca-file", named + ".pem", prefix=a.prefix)
        sid_c = c.api.create()["id"]
        try:
            status, doc = wait_for(lambda: (lambda r: r if r[0] != 404 else None)(
                a2.api.request("GET", "/v1/sessions/" + sid_c, timeout=15)), 15, interval=0.1,
                what="A2 to route C's session")
            msg = doc["error"]["message"]
            assert status == 503 and c.node in msg and "TLS" in msg, (status, doc)
            assert "127.0.0.1" in msg and "name" in msg, msg
            print("a certificate for another name: %s" % msg)
        finally:
            c.api.delete(sid_c)
    finally:
        b.api.delete(sid)


def test_forward_inflight_cap_and_a_caller_leaving_mid_upload(make_daemon, tmp_path):
    """--forward-max-inflight 1: a second call while one is forwarded is a
    503; a caller that leaves half-way through an upload frees its place at
    once (the next call goes through)."""
    a, b = pair(make_daemon, tmp_path, a_extra=("--forward-max-inflight", "1"))
    sid = b.api.create()["id"]
    try:
        wait_routed(a, sid)
        code = ("import os, time\nprint('holding', flush=True)\nt = time.monotonic()\n"
                "while not os.path.exists('/workspace/go') and time.monotonic() - t < 20:\n"
                "    time.sleep(0.02)\n")
        with a.api.stream("POST", "/v1/sessions/%s/exec" % sid,
                          body={"code": code, "stream": True, "timeout_s": 30}) as st:
            for _, ev in st.events():
                if ev["type"] == "stdout":
                    break
            status, doc = a.api.request("GET", "/v1/sessions/" + sid)
            assert status == 503 and "1 calls at once" in doc["error"]["message"], doc
            assert b.api.request("PUT", "/v1/sessions/%s/files/go" % sid, raw=b"1")[0] == 201
            rest = [ev for _, ev in st.events()]
            assert rest[-1]["type"] == "result", rest
        wait_for(lambda: a.api.request("GET", "/v1/sessions/" + sid)[0] == 200, 10,
                 what="the forward's place to be free again")
        # Half of a 32 MiB upload, then the caller goes.
        s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
        s.sendall(b"PUT /v1/sessions/%s/files/half.bin HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Length: %d\r\n\r\n" % (sid.encode(), 32 << 20))
        block = os.urandom(1 << 20)
        for _ in range(16):
            s.sendall(block)
        s.close()
        wait_for(lambda: a.api.request("GET", "/v1/sessions/" + sid)[0] == 200, 10,
                 what="the abandoned upload's forward to end")
        assert b.api.exec(sid, "1 + 1")["result"] == "2"
        assert a.metrics()['ci_forward_calls_total{outcome="caller_gone"}'] == 1
    finally:
        b.api.delete(sid)


def test_forward_secret_file_rules_and_reload(make_daemon, tmp_path):
    short = secret_file(tmp_path, "short.secret", secret="too-short")
    with pytest.raises(AssertionError) as e:
        make_daemon("--cluster-secret-file", short)
    assert "cluster-secret-file" in str(e.value) and "at least 32" in str(e.value)
    # A group-readable secret is taken, with a warning.
    loose = secret_file(tmp_path, "loose.secret")
    os.chmod(loose, 0o640)
    a, b = pair(make_daemon, tmp_path, secret=loose)
    assert "can be read by its group or others" in a.read_log()
    sid = b.api.create()["id"]
    try:
        wait_routed(a, sid)
        # B alone takes a new secret: A's forwards now carry a token B does
        # not know, and B refuses them (403 passes through).
        with open(loose, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        mark = b.log_mark()
        b.proc.send_signal(signal.SIGHUP)
        b.wait_log("SIGHUP: cluster secret re-read", since=mark)
        # A still has the old secret in memory: B refuses what it forwards.
        status, doc = a.api.request("GET", "/v1/sessions/" + sid)
        assert status == 403 and "secret" in doc["error"]["message"], doc
        # A reloads the same file: the two agree again.
        mark = a.log_mark()
        a.proc.send_signal(signal.SIGHUP)
        a.wait_log("SIGHUP: cluster secret re-read", since=mark)
        assert a.api.request("GET", "/v1/sessions/" + sid)[0] == 200
    finally:
        b.api.delete(sid)
