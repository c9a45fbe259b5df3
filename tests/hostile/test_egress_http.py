"""Finding 8: the plain-HTTP proxy forwarded any Host header, and a bare-LF
line end or `Connection :` hid its `Connection: close`, so later requests on
the upstream connection went unchecked.

Now heads are parsed strictly (llhttp plus checks of our own), the Host
header must name the request target, and exactly one request (with its body)
goes to an upstream connection. The upstream here is the suite's recording
server on 127.0.0.1 (allowed.test, trusted): it keeps every byte each
connection brought and answers keep-alive, so anything that got past the
proxy is seen.
"""
import pytest


@pytest.fixture(scope="module")
def web(hostile):
    h = hostile
    s = h.create(network={"allow": ["allowed.test:%d" % h.recorder.port]})
    yield s
    h.delete(s["id"])


def _status(answer):
    return answer[9:12] if answer.startswith("HTTP/1.") else answer[:60]


def _request(h, path, host=None, extra=""):
    host = host if host is not None else "allowed.test:%d" % h.recorder.port
    return ("GET http://allowed.test:%d%s HTTP/1.1\r\nHost: %s\r\n%s\r\n"
            % (h.recorder.port, path, host, extra)).encode()


def test_host_header_must_match_the_request_target(hostile, web):
    h = hostile
    before = h.recorder.count()
    port = h.recorder.port
    answers = h.proxy_raw(web, [
        _request(h, "/other-host", host="notlisted.test"),
        _request(h, "/other-port", host="allowed.test:%d" % (port + 1)),
        _request(h, "/no-port", host="allowed.test"),       # port 80, not ours
        b"GET http://allowed.test:%d/two-hosts HTTP/1.1\r\nHost: allowed.test:%d\r\n"
        b"Host: notlisted.test\r\n\r\n" % (port, port),
    ])
    for a in answers:
        assert _status(a) == "400", answers
    assert "does not match the request target" in answers[0], answers[0]
    assert "more than one Host" in answers[3], answers[3]
    assert h.recorder.since(before) == [], h.recorder.since(before)
    # The matching Host goes through (so the refusals were about the header).
    ok = h.proxy_raw(web, [_request(h, "/same-host")])[0]
    assert _status(ok) == "200" and ok.endswith("recorded\n"), ok
    h.wait_for(lambda: all(c["closed"] for c in h.recorder.since(before)), 15,
             what="the recorded connection to close")
    got = h.recorder.since(before)
    assert len(got) == 1 and got[0]["data"].startswith(b"GET /same-host HTTP/1.1\r\n"), got
    assert b"\r\nHost: allowed.test:%d\r\n" % port in got[0]["data"], got
    h.assert_daemon_fine()


def test_malformed_heads_are_refused(hostile, web):
    h = hostile
    before = h.recorder.count()
    t = "http://allowed.test:%d" % h.recorder.port
    host = "allowed.test:%d" % h.recorder.port
    cases = {
        "bare_lf": ("GET %s/a HTTP/1.1\nHost: %s\n\n" % (t, host)).encode(),
        # the attack of the finding: a bare LF hides the header from a proxy
        # that splits on CRLF, and keeps the upstream connection alive
        "bare_lf_hidden_keepalive":
            ("GET %s/a HTTP/1.1\r\nHost: %s\r\nX-A: 1\nConnection: keep-alive\r\n\r\n"
             "GET %s/b HTTP/1.1\r\nHost: %s\r\n\r\n" % (t, host, t, host)).encode(),
        "space_before_colon":
            ("GET %s/a HTTP/1.1\r\nHost: %s\r\nConnection : keep-alive\r\n\r\n"
             % (t, host)).encode(),
        "obs_fold": ("GET %s/a HTTP/1.1\r\nHost: %s\r\nX-A: 1\r\n Connection: keep-alive\r\n\r\n"
                     % (t, host)).encode(),
        "bare_cr": ("GET %s/a HTTP/1.1\r\nHost: %s\rX-A: 1\r\n\r\n" % (t, host)).encode(),
        "two_lengths": ("POST %s/a HTTP/1.1\r\nHost: %s\r\nContent-Length: 1\r\n"
                        "Content-Length: 1\r\n\r\nx" % (t, host)).encode(),
        "length_and_chunked": ("POST %s/a HTTP/1.1\r\nHost: %s\r\nContent-Length: 4\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % (t, host)).encode(),
        "other_coding": ("POST %s/a HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: gzip\r\n\r\n"
                         % (t, host)).encode(),
        "http2": ("GET %s/a HTTP/2.0\r\nHost: %s\r\n\r\n" % (t, host)).encode(),
    }
    answers = dict(zip(cases, h.proxy_raw(web, list(cases.values()))))
    for name, a in answers.items():
        assert _status(a) == "400", (name, a)
    assert "bare LF" in answers["bare_lf"] and "bare LF" in answers["bare_lf_hidden_keepalive"]
    assert "obs-fold" in answers["obs_fold"], answers["obs_fold"]
    assert h.recorder.since(before) == [], h.recorder.since(before)
    h.assert_daemon_fine()


def test_only_the_first_request_reaches_the_upstream(hostile, web):
    # Pipelined requests after the first (and after its body, by
    # Content-Length or chunked) must never reach the upstream unchecked.
    h = hostile
    before = h.recorder.count()
    t = "http://allowed.test:%d" % h.recorder.port
    host = "allowed.test:%d" % h.recorder.port
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: notlisted.test\r\n\r\n"
    raws = [
        ("GET %s/first HTTP/1.1\r\nHost: %s\r\n\r\nGET %s/second HTTP/1.1\r\nHost: %s\r\n\r\n"
         % (t, host, t, host)).encode() + smuggled,
        ("POST %s/length HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n\r\nhello"
         % (t, host)).encode() + smuggled,
        ("POST %s/chunked HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5;ext=1\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n" % (t, host)).encode() + smuggled,
    ]
    answers = h.proxy_raw(web, raws)
    for a in answers:
        assert _status(a) == "200" and a.endswith("recorded\n"), answers
    # The sandbox closed each connection after its answer; the proxy then
    # closes the upstream one, and the recorder has all it will ever get.
    h.wait_for(lambda: len(h.recorder.since(before)) == 3 and
             all(c["closed"] for c in h.recorder.since(before)), 15,
             what="the three upstream connections to close")
    got = sorted((c["data"] for c in h.recorder.since(before)), key=lambda d: d.split()[1])
    by_path = {d.split()[1]: d for d in got}
    assert set(by_path) == {b"/first", b"/length", b"/chunked"}, got
    for path, data in by_path.items():
        # one request line, ours; nothing of what followed it
        assert data.count(b" HTTP/1.1\r\n") == 1, (path, data)
        assert b"second" not in data and b"smuggled" not in data, (path, data)
        assert b"\r\nConnection: close\r\n" in data, (path, data)
    assert by_path[b"/length"].endswith(b"\r\n\r\nhello"), by_path[b"/length"]
    # re-chunked: the same body, without the extension and the trailer
    assert by_path[b"/chunked"].endswith(b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), by_path[b"/chunked"]
    h.assert_daemon_fine()


def test_the_connection_ends_with_its_one_answer(hostile, web):
    # The recorder answers keep-alive and would keep the connection open; the
    # proxy closes it once the answer is complete, so a keep-alive client
    # opens a new connection (checked again) for its next request.
    h = hostile
    before = h.recorder.count()
    out = h.run_json(web, r"""
import json, os, socket, time, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
c = socket.create_connection((p.hostname, p.port), timeout=10)
c.sendall(b'GET http://allowed.test:%d/keepalive HTTP/1.1\r\nHost: allowed.test:%d\r\n'
          b'Connection: keep-alive\r\n\r\n')
data, end = b'', None
while True:
    try:
        chunk = c.recv(65536)
    except socket.timeout:
        end = 'timeout'
        break
    if not chunk:
        end = 'eof'
        break
    data += chunk
print(json.dumps([end, data.decode(errors='replace')]))
""" % (h.recorder.port, h.recorder.port))
    end, data = out
    assert end == "eof" and data.startswith("HTTP/1.1 200") and data.endswith("recorded\n"), out
    h.wait_for(lambda: [c["closed"] for c in h.recorder.since(before)] == [True], 10,
               what="the upstream connection to close")
    h.assert_daemon_fine()
