"""The Python client's transports: https verified against a CA file of the
caller's (a TLS daemon with a certificate made here by openssl), refused
without it; and unix:PATH sockets (the local Docker engine's socket, which
speaks plain HTTP: the transport's own path, with a non-ci error body typed
by its status)."""
import os
import ssl
import subprocess

import pytest

import ci_sandbox
from ci_sandbox import Sandbox
from ci_sandbox.transport import Transport

DOCKER_SOCK = "/var/run/docker.sock"


def make_cert(directory):
    cert, key = os.path.join(directory, "c.pem"), os.path.join(directory, "c.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_https_with_a_ca_file(make_daemon, tmp_path, monkeypatch):
    cert, key = make_cert(str(tmp_path))
    d = make_daemon("--pool-size", "0", "--tls-cert", cert, "--tls-key", key,
                    ssl_context=ssl.create_default_context(cafile=cert), cacert=cert)
    url = "https://127.0.0.1:%d" % d.port
    with Sandbox.create(url=url, ca_file=cert) as sb:
        assert sb.run_code("6 * 7").text == "42"
        sb.files.write("t.txt", b"tls")
        assert sb.files.read("t.txt") == b"tls"
    # CI_SANDBOX_CA_FILE gives it too
    monkeypatch.setenv("CI_SANDBOX_CA_FILE", cert)
    with Sandbox.create(url=url) as sb:
        assert sb.run_code("1").ok
    monkeypatch.delenv("CI_SANDBOX_CA_FILE")
    # without the CA the certificate does not verify: a connection error
    with pytest.raises(ci_sandbox.ConnectionFailed) as e:
        Sandbox.create(url=url)
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value)


def test_unix_socket_transport():
    t = Transport("unix:" + DOCKER_SOCK, timeout=30)
    assert t.call("GET", "/_ping", raw=True) == b"OK"
    assert "ApiVersion" in t.call("GET", "/version")
    with pytest.raises(ci_sandbox.NotFound) as e:
        t.call("GET", "/containers/ci-clients-no-such-container/json")
    assert e.value.status == 404 and e.value.code == "not_found"
    with pytest.raises(ci_sandbox.ConnectionFailed):
        Transport("unix:/nonexistent/ci.sock").call("GET", "/healthz")
