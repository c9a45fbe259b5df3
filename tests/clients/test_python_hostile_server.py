"""The Python client against a server that does not keep the API's promises
(a loopback HTTP server of the test's own, run in a thread and shut down by
the test): answers that are not JSON, an error page that is not the error
shape, a stream that ends without its result, a line over the cap, a
server that never answers. Each is a typed CiError, never a hang, a crash or
an unbounded read."""
import http.server
import json
import threading

import pytest

import ci_sandbox
from ci_sandbox import transport as transport_mod
from ci_sandbox.sandbox import Sandbox
from ci_sandbox.transport import Transport

SESSION = {"id": "11111111-1111-4111-8111-111111111111", "state": "ready"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stall = None  # an Event the "stall" route waits on

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/v1/sessions/"):
            self.reply(200, json.dumps(SESSION).encode())
        elif self.path == "/notjson":
            self.reply(200, b"<html>hello</html>", "text/html")
        elif self.path == "/badgateway":
            self.reply(502, b"<html>bad gateway</html>", "text/html")
        elif self.path == "/ratelimited":
            self.send_response(429)
            self.send_header("Retry-After", "7")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/huge":
            self.reply(200, b"[" + b"1," * 600 + b"1]")
        elif self.path == "/stall":
            self.stall.wait(30)
            self.reply(200, b"{}")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        if body.get("code") == "no-result":
            self.wfile.write(b'{"type":"stdout","text":"a\\n"}\n')
        elif body.get("code") == "garbage":
            self.wfile.write(b'{"type":"stdout","text":"a\\n"}\nnot json\n')
        elif body.get("code") == "long-line":
            self.wfile.write(b'{"type":"stdout","text":"' + b"x" * 5000 + b'"}\n')
        elif body.get("code") == "error-event":
            self.wfile.write(b'{"type":"error","error":{"code":"expired","message":"it ended"}}\n')
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture
def server():
    Handler.stall = threading.Event()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    Handler.stall.set()
    srv.shutdown()
    srv.server_close()
    th.join(10)


def test_answers_that_break_the_contract_are_typed_errors(server, monkeypatch):
    t = Transport(server, timeout=10)
    with pytest.raises(ci_sandbox.ProtocolError):
        t.call("GET", "/notjson")
    with pytest.raises(ci_sandbox.CiError) as e:
        t.call("GET", "/badgateway")
    assert e.value.status == 502 and "bad gateway" in e.value.message
    with pytest.raises(ci_sandbox.QuotaExceeded) as e:
        t.call("GET", "/ratelimited")
    assert e.value.retry_after == 7 and e.value.quota is None
    monkeypatch.setattr(transport_mod, "MAX_JSON_BYTES", 1000)
    with pytest.raises(ci_sandbox.ProtocolError, match="over 1000 bytes"):
        t.call("GET", "/huge")


def test_streams_that_break_the_contract_are_typed_errors(server, monkeypatch):
    sb = Sandbox.connect(SESSION["id"], url=server, timeout=10)
    cb = []
    with pytest.raises(ci_sandbox.ProtocolError, match="without its result"):
        sb.run_code("no-result", on_stdout=cb.append)
    assert cb == ["a\n"]
    with pytest.raises(ci_sandbox.ProtocolError, match="not JSON"):
        sb.run_code("garbage", on_stdout=cb.append)
    with pytest.raises(ci_sandbox.Expired, match="it ended"):
        sb.run_code("error-event", on_stdout=cb.append)
    monkeypatch.setattr(transport_mod, "MAX_LINE_BYTES", 1000)
    with pytest.raises(ci_sandbox.ProtocolError, match="over 1000 bytes"):
        sb.run_code("long-line", on_stdout=cb.append)


def test_a_server_that_never_answers_is_a_timeout(server):
    with pytest.raises(ci_sandbox.Timeout) as e:
        Transport(server, timeout=1).call("GET", "/stall")
    assert e.value.code == "timeout" and e.value.status is None
