"""A web page driving a keyless daemon (issue 28 item 2).

Without keys (the `make run` default) any page a browser shows can send
requests to 127.0.0.1: a cross-site POST with Content-Type text/plain needs
no CORS preflight, and a DNS-rebound name makes the page same-origin with the
daemon so that it can read the answers too. Each attack is sent here as the
browser would send it (the Origin, Host and Content-Type a browser sets)
against the suite's keyless daemon; each must be refused before anything
runs: no session created, no code run, no gc and no drain.
"""
import json

from harness import wait_for
from harness.http import raw_exchange

EVIL = "http://evil.test:8000"


def _sessions(h):
    st, doc = h.api.request("GET", "/v1/sessions")
    assert st == 200, doc
    return {s["id"] for s in doc["sessions"]}


def _error(r):
    try:
        return json.loads(r.body)["error"]
    except (ValueError, KeyError, TypeError):
        return {"code": None, "message": r.body[:200]}


def _marker_absent(h, sid, name):
    st, _ = h.api.request("GET", "/v1/sessions/%s/files/%s" % (sid, name))
    return st == 404


def test_cross_site_text_plain_posts_run_nothing(hostile):
    h = hostile
    sid = h.neighbour["id"]
    before = _sessions(h)
    mark = h.d.log_mark()
    code = "open('/workspace/pwned-%s', 'w').write('x')"
    attacks = [
        ("POST", "/v1/sessions", {"image": "python"}),
        ("POST", "/v1/exec", {"code": code % "oneshot"}),
        ("POST", "/v1/runs", {"code": code % "run", "fixer": None}),
        ("POST", "/v1/sessions/%s/exec" % sid, {"code": code % "exec"}),
        ("POST", "/v1/admin/gc", None),
        ("POST", "/v1/admin/drain", None),
        ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "create_session", "arguments": {}}}),
    ]
    for method, path, body in attacks:
        raw = json.dumps(body).encode() if body is not None else b""
        # the browser's simple request: a foreign Origin, text/plain
        r = h.api.send(method, path, raw=raw,
                       headers={"Origin": EVIL, "Content-Type": "text/plain;charset=UTF-8"})
        assert r.status == 403 and _error(r)["code"] == "forbidden", (path, r.status, r.body)
        assert "Origin" in _error(r)["message"], r.body
        # the same without an Origin (a page's form, a sandbox's curl): a
        # JSON route takes only a JSON body
        raw = raw or b"{}"
        r = h.api.send(method, path, raw=raw, headers={"Content-Type": "text/plain"})
        assert r.status == 415 and _error(r)["code"] == "unsupported_media_type", \
            (path, r.status, r.body)
        assert "application/json" in _error(r)["message"], r.body
        resp = raw_exchange(h.d.port, b"%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close"
                            b"\r\nContent-Length: %d\r\n\r\n%s"
                            % (method.encode(), path.encode(), len(raw), raw), timeout=30)
        assert resp.startswith(b"HTTP/1.1 415 "), (path, resp[:200])  # no type at all
        r = h.api.send(method, path, raw=raw,
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert r.status == 415, (path, r.status, r.body)
    # a foreign Origin is refused whatever the type (a preflighted fetch the
    # browser was tricked into, or a client that says application/json)
    r = h.api.send("POST", "/v1/sessions/%s/exec" % sid, body={"code": code % "json"},
                   headers={"Origin": EVIL})
    assert r.status == 403, r.body
    r = h.api.send("GET", "/v1/sessions", headers={"Origin": "null"})
    assert r.status == 403, r.body
    # nothing ran: no session, no file, no gc, no drain
    assert _sessions(h) == before
    for name in ("oneshot", "exec", "json", "run"):
        assert _marker_absent(h, sid, "pwned-" + name), name
    assert h.api.request("GET", "/readyz")[0] == 200, "the daemon was drained"
    # an audited action of ours, then the log: no admin_gc, no admin_drain
    s = h.create()
    h.d.wait_log('"session_create"', since=mark)
    log = h.d.log_since(mark)
    assert '"admin_gc"' not in log and '"admin_drain"' not in log, "gc or drain ran"
    h.delete(s["id"])
    h.assert_daemon_fine()


def test_rebound_host_reads_nothing(hostile):
    h = hostile
    sid = h.neighbour["id"]
    st, _ = h.api.request("PUT", "/v1/sessions/%s/files/secret.txt" % sid, raw=b"mine",
                          headers={"Content-Type": "application/octet-stream"})
    assert st == 201
    host = "evil.test:%d" % h.d.port
    # After the rebinding the page is same-origin: its GETs carry no Origin,
    # its POSTs carry its own; the Host is the page's name either way.
    for method, path, headers in (
            ("GET", "/v1/sessions", {}),
            ("GET", "/v1/sessions/%s" % sid, {}),
            ("GET", "/v1/sessions/%s/files" % sid, {}),
            ("GET", "/v1/sessions/%s/files/secret.txt" % sid, {}),
            ("GET", "/v1/admin/keys", {}),
            ("GET", "/healthz", {}),
            ("POST", "/v1/sessions", {"Origin": "http://" + host,
                                      "Content-Type": "application/json"})):
        r = h.api.send(method, path, raw=b"{}" if method == "POST" else None,
                       headers=dict(headers, Host=host))
        assert r.status == 403 and _error(r)["code"] == "forbidden", (path, r.status, r.body)
        assert b"mine" not in r.body and sid.encode() not in r.body, r.body
        assert "Host" in _error(r)["message"], r.body
    for bad in ("localhost.evil.test", "127.0.0.1.evil.test:%d" % h.d.port, "192.0.2.1"):
        r = h.api.send("GET", "/v1/sessions", headers={"Host": bad})
        assert r.status == 403, (bad, r.status)
    h.assert_daemon_fine()


def test_what_a_local_client_sends_still_works(hostile):
    h = hostile
    sid = h.neighbour["id"]
    port = h.d.port
    # loopback and localhost Hosts, with and without the port
    for host in ("127.0.0.1:%d" % port, "localhost:%d" % port, "localhost", "[::1]:%d" % port):
        r = h.api.send("GET", "/v1/sessions/%s" % sid, headers={"Host": host})
        assert r.status == 200, (host, r.status, r.body)
    # the daemon's own page (the reviewer's page) posts with its own Origin
    r = h.api.send("POST", "/v1/sessions/%s/exec" % sid, body={"code": "6 * 7"},
                   headers={"Origin": "http://127.0.0.1:%d" % port})
    assert r.status == 200 and "42" in json.dumps(r.doc), r.body
    # parameters of the JSON type are fine
    r = h.api.send("POST", "/v1/sessions/%s/exec" % sid, raw=b'{"code": "1 + 1"}',
                   headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status == 200, r.body
    # a body-less POST needs no type
    r = h.api.send("POST", "/v1/sessions/%s/keepalive" % sid)
    assert r.status in (200, 204), r.body
    # an upload is raw bytes of any type
    for ctype in ("application/octet-stream", "text/plain", None):
        headers = {"Content-Type": ctype} if ctype else {"Content-Type": ""}
        st, doc = h.api.request("PUT", "/v1/sessions/%s/files/up.txt" % sid, raw=b"bytes",
                                headers=headers)
        assert st == 201, (ctype, st, doc)
    wait_for(lambda: h.api.request("GET", "/readyz")[0] == 200, 10, what="readyz")
    h.assert_daemon_fine()
