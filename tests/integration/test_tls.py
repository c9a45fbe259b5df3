"""Issue 11: TLS on the API listener (--tls-cert, --tls-key), and the rule
for a listener that is not loopback (keys, and TLS or a proxy's).

Every certificate is made here by Debian's openssl, in the test's own
directory; every connection goes to 127.0.0.1 (a daemon listening on
0.0.0.0 is reached there too)."""
import os
import re
import socket
import ssl
import subprocess
import time

import pytest

from harness import wait_for
from harness.daemon import CTL_BIN, DAEMON_BIN
from harness.http import free_port


def make_cert(directory, name, cn="localhost"):
    """A self-signed certificate for 127.0.0.1 and localhost: (cert, key)."""
    cert = os.path.join(directory, name + ".pem")
    key = os.path.join(directory, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=" + cn,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture
def certs(tmp_path):
    d = str(tmp_path)
    return {"a": make_cert(d, "a"), "b": make_cert(d, "b", cn="other"), "dir": d}


def context_for(cacert):
    ctx = ssl.create_default_context(cafile=cacert)
    return ctx


def tls_daemon(make_daemon, certs, *extra, **options):
    cert, key = certs["a"]
    return make_daemon("--tls-cert", cert, "--tls-key", key, "--http-idle-timeout-s", "2",
                       "--http-head-timeout-s", "1", *extra,
                       ssl_context=context_for(cert), cacert=cert, **options)


def admin_key_file(directory):
    path = os.path.join(directory, "admin.key")
    with open(path, "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    os.chmod(path, 0o600)
    return path


def closed_by_server(sock):
    """True once the server has closed sock (EOF or reset)."""
    try:
        return sock.recv(4096) == b""
    except (socket.timeout, ssl.SSLWantReadError):
        return False
    except (ConnectionResetError, ssl.SSLError):
        return True


class Trickle:
    """Sends data a byte per step(); step() is True once the server closed."""

    def __init__(self, sock, data):
        self.sock, self.data, self.sent = sock, data, 0

    def step(self):
        if self.sent < len(self.data):
            try:
                self.sock.send(self.data[self.sent:self.sent + 1])
                self.sent += 1
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                return True
        return closed_by_server(self.sock)


def test_ctl_over_tls_with_cacert(make_daemon, certs):
    d = tls_daemon(make_daemon, certs, "--pool-size", "0")
    assert "over TLS" in d.read_log()
    r = d.ctl("create")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    try:
        r = d.ctl("exec", sid, "print(1)")
        assert r.returncode == 0 and r.stdout.strip() == "1", (r.stdout, r.stderr)
        # The same through the environment.
        env = dict(os.environ, CICTL_CACERT=certs["a"][0],
                   CICTL_SERVER="https://127.0.0.1:%d" % d.port)
        r = subprocess.run([CTL_BIN, "exec", sid, "print(2)"], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == "2", (r.stdout, r.stderr)
    finally:
        d.api.delete(sid)


def test_clients_without_the_ca_fail_verification(make_daemon, certs):
    d = tls_daemon(make_daemon, certs, "--pool-size", "0")
    url = "https://127.0.0.1:%d/healthz" % d.port
    # Python's client with the system's CAs only.
    with pytest.raises(ssl.SSLCertVerificationError):
        with socket.create_connection(("127.0.0.1", d.port), timeout=10) as raw:
            with ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1"):
                pass
    # curl without --cacert: 60, the peer's certificate could not be verified.
    r = subprocess.run(["curl", "-sS", "--noproxy", "*", url], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 60, (r.returncode, r.stderr)
    # ci-ctl without --cacert, and with another CA: a transport error (5).
    for extra in ([], ["--cacert", certs["b"][0]]):
        r = subprocess.run([CTL_BIN, "--server", "https://127.0.0.1:%d" % d.port, *extra,
                            "health"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 5, (extra, r.stdout, r.stderr)
        assert "certificate" in r.stderr.lower() or "ssl" in r.stderr.lower(), r.stderr
    # With the CA, curl is fine.
    r = subprocess.run(["curl", "-sS", "--noproxy", "*", "--cacert", certs["a"][0], url],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and '"ok"' in r.stdout, (r.returncode, r.stderr)


def test_plain_http_to_the_tls_port_is_refused_and_serving_goes_on(make_daemon, certs):
    d = tls_daemon(make_daemon, certs, "--pool-size", "0")
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            got = b""
            while True:
                try:
                    part = s.recv(4096)
                except ConnectionResetError:
                    break
                if not part:
                    break
                got += part
        # Told so in plain HTTP, never served.
        assert got.startswith(b"HTTP/1.1 400") and b"use https://" in got, got
    # Garbage that is neither: closed too.
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(b"\x16\x03\x01\x00\x05hello-not-tls" * 4)
        wait_for(lambda: closed_by_server(s), 15, what="the server to close a bad handshake")
    assert d.api.request("GET", "/healthz")[0] == 200
    assert d.api.request("GET", "/readyz")[0] == 200


def test_a_client_that_never_handshakes_is_closed(make_daemon, certs):
    d = tls_daemon(make_daemon, certs, "--pool-size", "0")
    silent = socket.create_connection(("127.0.0.1", d.port), timeout=0.5)
    # A ClientHello sent a byte at a time: bytes keep coming, so the idle
    # timeout alone would never close it; the head deadline (from the start
    # of the wait over TLS) does.
    bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = context_for(certs["a"][0]).wrap_bio(bio_in, bio_out, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        hello.do_handshake()
    client_hello = bio_out.read()
    assert len(client_hello) > 100
    trickle = Trickle(socket.create_connection(("127.0.0.1", d.port), timeout=0.2),
                      client_hello)
    done = {}

    def both_closed():
        # One loop: the trickle must not pause while the silent one is watched.
        if "trickle" not in done and trickle.step():
            done["trickle"] = trickle.sent
        if "silent" not in done and closed_by_server(silent):
            done["silent"] = True
        return len(done) == 2

    try:
        wait_for(both_closed, 30, interval=0.3, what="both TLS clients to be closed")
        assert done["trickle"] > 3, "closed before it trickled: %r" % done
        assert trickle.sent < len(client_hello), "the whole hello went out before the close"
        log = d.read_log()
        assert "TLS handshake not done" in log, log[-3000:]
    finally:
        silent.close()
        trickle.sock.close()
    assert d.api.request("GET", "/healthz")[0] == 200


def test_slow_request_head_after_handshake_is_closed(make_daemon, certs):
    d = tls_daemon(make_daemon, certs, "--pool-size", "0")
    raw = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    s = context_for(certs["a"][0]).wrap_socket(raw, server_hostname="127.0.0.1")
    s.settimeout(0.2)
    slow = Trickle(s, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 200)
    try:
        wait_for(slow.step, 30, interval=0.1, what="the slow head to be closed")
        assert slow.sent < len(slow.data)
    finally:
        s.close()
    assert d.api.request("GET", "/healthz")[0] == 200


def test_a_cert_that_does_not_load_refuses_to_start(certs, tmp_path):
    cert_a, key_a = certs["a"]
    cert_b, key_b = certs["b"]
    cases = [
        ((cert_a, key_b), "tls-key %s does not match tls-cert %s" % (key_b, cert_a)),
        ((cert_a, str(tmp_path / "missing.key")), "No such file or directory"),
        ((key_a, key_a), "cannot load a PEM certificate"),
    ]
    for (cert, key), message in cases:
        r = subprocess.run([DAEMON_BIN, "--listen", "127.0.0.1:%d" % free_port(),
                            "--state-dir", "/tmp/cit-tls-unused", "--tls-cert", cert,
                            "--tls-key", key], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert message in r.stderr, r.stderr
    r = subprocess.run([DAEMON_BIN, "--tls-cert", cert_a], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "tls-cert is set but tls-key is not" in r.stderr, r.stderr


def test_certificate_reload_on_sighup(make_daemon, certs, tmp_path):
    live_cert = str(tmp_path / "live.pem")
    live_key = str(tmp_path / "live.key")
    for src, dst in zip(certs["a"], (live_cert, live_key)):
        with open(src) as f, open(dst, "w") as g:
            g.write(f.read())
    d = make_daemon("--tls-cert", live_cert, "--tls-key", live_key, "--pool-size", "0",
                    ssl_context=context_for(certs["a"][0]))
    assert d.api.request("GET", "/healthz")[0] == 200
    # Rotate to b: new connections get b (verified against b's CA, not a's).
    for src, dst in zip(certs["b"], (live_cert, live_key)):
        with open(src) as f, open(dst + ".new", "w") as g:
            g.write(f.read())
        os.rename(dst + ".new", dst)
    mark = d.log_mark()
    d.proc.send_signal(1)
    d.wait_log("TLS certificate reloaded", since=mark)
    assert "CN = other" in d.log_since(mark) or "CN=other" in d.log_since(mark)
    from harness.http import Client
    assert Client(d.port, ssl_context=context_for(certs["b"][0])).request(
        "GET", "/healthz")[0] == 200
    with pytest.raises(ssl.SSLCertVerificationError):
        Client(d.port, ssl_context=context_for(certs["a"][0])).request("GET", "/healthz")
    # A broken pair on reload: the daemon keeps the one it has.
    with open(live_key, "w") as f, open(certs["a"][1]) as g:
        f.write(g.read())
    mark = d.log_mark()
    d.proc.send_signal(1)
    d.wait_log("new connections keep the previous certificate", since=mark)
    assert Client(d.port, ssl_context=context_for(certs["b"][0])).request(
        "GET", "/healthz")[0] == 200


# ---------------------------------------------------------------- the listener rule


def test_non_loopback_listener_without_keys_refuses_to_start(tmp_path):
    port = free_port()
    r = subprocess.run([DAEMON_BIN, "--listen", "0.0.0.0:%d" % port,
                        "--state-dir", "/tmp/cit-tls-unused"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert ("listen 0.0.0.0:%d is not loopback: it needs --admin-key-file (API keys), and TLS "
            "(--tls-cert and --tls-key) or --plain-http-behind-proxy" % port) in r.stderr, r.stderr
    # With keys but neither TLS nor the proxy flag: says what is still missing.
    r = subprocess.run([DAEMON_BIN, "--listen", "0.0.0.0:%d" % port,
                        "--admin-key-file", admin_key_file(str(tmp_path)),
                        "--state-dir", "/tmp/cit-tls-unused"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "--admin-key-file" not in r.stderr and "--plain-http-behind-proxy" in r.stderr, r.stderr


def test_non_loopback_listener_behind_a_proxy_starts(make_daemon, tmp_path):
    d = make_daemon("--admin-key-file", admin_key_file(str(tmp_path)),
                    "--plain-http-behind-proxy", "--pool-size", "0", listen_host="0.0.0.0")
    assert "listening on 0.0.0.0:%d" % d.port in d.read_log()
    assert d.api.request("GET", "/healthz")[0] == 200


def test_non_loopback_listener_with_tls_starts(make_daemon, certs, tmp_path):
    d = tls_daemon(make_daemon, certs, "--admin-key-file", admin_key_file(str(tmp_path)),
                   "--pool-size", "0", listen_host="0.0.0.0")
    assert "listening on 0.0.0.0:%d over TLS" % d.port in d.read_log()
    assert d.api.request("GET", "/healthz")[0] == 200


# ---------------------------------------------------------------- versions


VERSION_RE = r"^%s \d+\.\d+\.\d+ \(git ([0-9a-f]{7,40}|unknown)\)\n$"


def test_versions_and_option_errors(daemon):
    r = subprocess.run([DAEMON_BIN, "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and re.match(VERSION_RE % "ci-daemon", r.stdout), r
    r = subprocess.run([CTL_BIN, "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and re.match(VERSION_RE % "ci-ctl", r.stdout), r
    for argv, message in (
        (["--foo"], "ci-daemon: unknown option --foo (see --help)"),
        (["--foo", "1"], "ci-daemon: unknown option --foo (see --help)"),
        (["--listen"], "ci-daemon: option --listen needs a value"),
        (["--version=1"], "ci-daemon: option --version takes no value"),
    ):
        r = subprocess.run([DAEMON_BIN, *argv], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and r.stderr.strip() == message, (argv, r)
    for argv, message in (
        (["--foo"], "ci-ctl: unknown option --foo (see --help)"),
        (["--server"], "ci-ctl: option --server needs a value (see --help)"),
        (["--version=2"], "ci-ctl: option --version takes no value (see --help)"),
    ):
        r = subprocess.run([CTL_BIN, *argv], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and r.stderr.strip() == message, (argv, r)
    # The server's, without a key, and through ci-ctl.
    status, doc = daemon.api.request("GET", "/version")
    ours = subprocess.run([DAEMON_BIN, "--version"], capture_output=True, text=True).stdout
    assert status == 200 and doc["api"] == "v1", doc
    assert ours == "ci-daemon %s (git %s)\n" % (doc["version"], doc["git"])
    r = daemon.ctl("version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.match(VERSION_RE % "client: ci-ctl", lines[0] + "\n"), lines
    assert lines[1] == "server: ci-daemon %s (git %s), API v1" % (doc["version"], doc["git"])
    r = daemon.ctl("--json", "version")
    assert r.returncode == 0 and '"server":{"version"' in r.stdout, r.stdout


def test_connection_caps_hold_over_tls(make_daemon, certs):
    """At the per-peer cap the oldest TLS connection still waiting makes room
    (as in clear), and the newest is served."""
    cert, key = certs["a"]
    d = make_daemon("--tls-cert", cert, "--tls-key", key, "--max-conns-per-peer", "2",
                    "--pool-size", "0", ssl_context=context_for(cert))
    first = socket.create_connection(("127.0.0.1", d.port), timeout=0.2)
    second = socket.create_connection(("127.0.0.1", d.port), timeout=0.2)
    try:
        # A third: the oldest waiting one (first) is closed for it.
        assert d.api.request("GET", "/healthz")[0] == 200
        wait_for(lambda: closed_by_server(first), 15, what="the oldest connection evicted")
        assert not closed_by_server(second)
        assert "to make room (max-conns-per-peer)" in d.read_log()
    finally:
        first.close()
        second.close()
