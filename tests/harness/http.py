"""The one HTTP client of the test suites and the benchmarks, stdlib only.

  Client(port)            JSON and raw requests to a server on loopback (or a
                          unix socket: Client(unix=path), the Docker engine);
                          every call has a timeout, so a hang is an error;
                          api_key=KEY sends Authorization: Bearer KEY on each
                          (a request's own Authorization header wins)
    .request(...)         (status, document): the JSON body parsed, else bytes
    .send(...)            a Response: status, headers (lower-case names), body
    .stream(...)          a Stream to read as it comes (NDJSON events, a
                          paced download), closed by its `with` block
    .upload(...)          a body sent in pieces, stopping as soon as the
                          server answers early (a 413 before the end)
    .metrics()            /metrics as {series: value}
    .keep_alive()         a Client of its own that keeps one connection open
                          across calls (one thread; the default opens a
                          connection per call, so a Client is thread-safe)
  raw_connect(port, ...)  a plain socket, for the bytes a test sends on
  raw_exchange(port, ...) purpose malformed: send, read until the server closes
  status_of(bytes)        the status code of a raw response, or None
  free_port()             a free TCP port on loopback

Every answer a Client reads from a ci-daemon (a port harness.Daemon
registered) is reported to the OpenAPI drift check when it is on
(openapi_check.py; tests/integration turns it on): a mismatch with
docs/openapi.yaml is an AssertionError. raw_connect and raw_exchange are
not checked (their bytes are malformed on purpose).
"""
import http.client
import json
import select
import socket
import time

from . import openapi_check

DEFAULT_TIMEOUT = 120.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_body(payload):
    """A JSON body as a document; anything else as the bytes it was."""
    try:
        return json.loads(payload) if payload else None
    except ValueError:
        return payload


class Response:
    """A whole answer. doc is the parsed body (bytes when it is not JSON)."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def doc(self):
        return parse_body(self.body)

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    getheader = header  # the http.client spelling


class Stream:
    """An answer being read: status and headers now, the body as it comes."""

    def __init__(self, conn, resp, t0, line_check=None):
        self.conn = conn
        self.resp = resp
        self.t0 = t0
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}
        self.line_check = line_check  # the drift check of each NDJSON line

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    getheader = header

    def settimeout(self, seconds):
        """How long one read may wait for bytes (a stall detector)."""
        self.conn.sock.settimeout(seconds)

    def read(self, n=-1):
        return self.resp.read(n) if n >= 0 else self.resp.read()

    def readline(self):
        return self.resp.readline()

    def events(self):
        """NDJSON: yields (seconds since the request was sent, document) per line."""
        while True:
            line = self.resp.readline()
            if not line:
                return
            doc = json.loads(line)
            if self.line_check is not None:
                openapi_check.observe_line(self.line_check, doc)
            yield time.monotonic() - self.t0, doc

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Client:
    """Requests to one server. host/port (loopback), or unix=path; source
    binds the client's end to a local address (another loopback peer)."""

    def __init__(self, port=None, host="127.0.0.1", unix=None, timeout=DEFAULT_TIMEOUT,
                 source=None, persistent=False, api_key=None, ssl_context=None):
        self.ssl_context = ssl_context  # set: https (an ssl.SSLContext)
        self.port = port
        self.host = host
        self.unix = unix
        self.timeout = timeout
        self.source = source
        self.persistent = persistent
        self.api_key = api_key
        self._conn = None

    def keep_alive(self):
        """A Client of the same server that reuses one connection (for one thread)."""
        return Client(self.port, self.host, self.unix, self.timeout, self.source, persistent=True,
                      api_key=self.api_key, ssl_context=self.ssl_context)

    def with_key(self, api_key):
        """A Client of the same server that sends another API key (None: none)."""
        return Client(self.port, self.host, self.unix, self.timeout, self.source,
                      persistent=self.persistent, api_key=api_key, ssl_context=self.ssl_context)

    def _connection(self, timeout):
        if self.unix is not None:
            return _UnixConnection(self.unix, timeout)
        if self.ssl_context is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self.ssl_context,
                source_address=(self.source, 0) if self.source else None)
        return http.client.HTTPConnection(
            self.host, self.port, timeout=timeout,
            source_address=(self.source, 0) if self.source else None)

    def _body(self, body, raw, headers):
        hdrs = dict(headers or {})
        if self.api_key is not None and not any(k.lower() == "authorization" for k in hdrs):
            hdrs["Authorization"] = "Bearer " + self.api_key
        if body is not None:
            hdrs.setdefault("Content-Type", "application/json")
            return json.dumps(body).encode(), hdrs
        # A raw body goes as JSON too unless the caller says otherwise (a
        # test of malformed JSON, say): the daemon refuses (415) a body of
        # another type on its JSON routes; a file upload takes any type.
        if raw is not None and not any(k.lower() == "content-type" for k in hdrs):
            hdrs["Content-Type"] = "application/json"
        return raw, hdrs

    def send(self, method, path, body=None, raw=None, headers=None, timeout=None,
             chunked=False):
        """One request; body is sent as JSON, raw as it is (bytes, or an
        iterable of bytes with chunked=True). Returns a Response."""
        data, hdrs = self._body(body, raw, headers)
        if self.persistent:
            if self._conn is None:
                self._conn = self._connection(self.timeout if timeout is None else timeout)
            conn = self._conn
        else:
            conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, path, body=data, headers=hdrs, encode_chunked=chunked)
            resp = conn.getresponse()
            payload = resp.read()
            out = Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload)
            if self.persistent and resp.will_close:
                self.close()
            openapi_check.observe(self, method, path, out.status, out.headers, payload)
            return out
        except BaseException:
            if self.persistent:
                self.close()
            raise
        finally:
            if not self.persistent:
                conn.close()

    def request(self, method, path, body=None, raw=None, headers=None, timeout=None):
        """(status, document) of one request."""
        r = self.send(method, path, body=body, raw=raw, headers=headers, timeout=timeout)
        return r.status, r.doc

    def stream(self, method, path, body=None, raw=None, headers=None, timeout=None):
        """Send a request and return a Stream once the status line and the
        headers are in (use it in a `with` block)."""
        data, hdrs = self._body(body, raw, headers)
        conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            t0 = time.monotonic()
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            headers = {k.lower(): v for k, v in resp.getheaders()}
            line_check = openapi_check.observe(self, method, path, resp.status, headers, None,
                                               streamed=True)
            return Stream(conn, resp, t0, line_check)
        except BaseException:
            conn.close()
            raise

    def upload(self, method, path, chunks, length=None, headers=None, timeout=None):
        """Send chunks (an iterable of bytes) as the body: with Content-Length
        when length is given, else chunked. Stops sending as soon as the server
        has answered (an early 413), then reads the answer.
        Returns (status, document, bytes sent, seconds)."""
        timeout = self.timeout if timeout is None else timeout
        t0 = time.monotonic()
        conn = self._connection(timeout)
        try:
            conn.putrequest(method, path)
            hdrs = dict(headers or {"Content-Type": "application/octet-stream"})
            if self.api_key is not None and not any(k.lower() == "authorization" for k in hdrs):
                hdrs["Authorization"] = "Bearer " + self.api_key
            for k, v in hdrs.items():
                conn.putheader(k, v)
            if length is None:
                conn.putheader("Transfer-Encoding", "chunked")
            else:
                conn.putheader("Content-Length", str(length))
            conn.endheaders()
            sock = conn.sock
            sent = 0

            def answered():
                r, _, _ = select.select([sock], [], [], 0)
                return bool(r)

            def send_all(buf):
                view = memoryview(buf)
                while view:
                    r, w, _ = select.select([sock], [sock], [], timeout)
                    if r:
                        return False           # the server answered early
                    if not w:
                        raise AssertionError("upload stalled for %ss" % timeout)
                    n = sock.send(view)
                    view = view[n:]
                return True

            try:
                for chunk in chunks:
                    if answered():
                        break
                    frame = chunk if length is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk)
                    if not send_all(frame):
                        break
                    sent += len(chunk)
                else:
                    if length is None:
                        send_all(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass                           # answered early and closed: read the answer
            resp = conn.getresponse()
            payload = resp.read()
            openapi_check.observe(self, method, path, resp.status,
                                  {k.lower(): v for k, v in resp.getheaders()}, payload)
            return resp.status, parse_body(payload), sent, time.monotonic() - t0
        finally:
            conn.close()

    def close(self):
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def metrics(self):
        """/metrics as {series: value}, e.g. {'ci_pool_size': 2.0,
        'ci_fds{what="limit"}': 1048576.0}."""
        r = self.send("GET", "/metrics", timeout=10)
        assert r.status == 200, (r.status, r.body[:200])
        out = {}
        for line in r.body.decode(errors="replace").splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
        return out

    # The daemon's API, for the cases that must succeed.
    def create(self, **body):
        status, doc = self.request("POST", "/v1/sessions", body=body)
        assert status == 201, (status, doc)
        return doc

    def exec(self, sid, code, **extra):
        status, doc = self.request("POST", "/v1/sessions/%s/exec" % sid,
                                   body=dict(code=code, **extra))
        assert status == 200, (status, doc)
        return doc

    def delete(self, sid):
        return self.request("DELETE", "/v1/sessions/%s" % sid)[0]

    def state(self, sid):
        """The session's state (ready, busy, ...), or None when it is not there."""
        status, doc = self.request("GET", "/v1/sessions/%s" % sid, timeout=10)
        return doc.get("state") if status == 200 else None


def raw_connect(port, data=b"", host="127.0.0.1", timeout=10, source=None):
    """A plain TCP connection (for bytes that are not a well-formed request),
    with data sent on it; the caller closes it."""
    s = socket.create_connection((host, port), timeout=timeout,
                                 source_address=(source, 0) if source else None)
    if data:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
    return s


def raw_exchange(port, data, timeout=10, read=True, host="127.0.0.1"):
    """Send raw bytes; return what came back until the server closed (or
    nothing came for `timeout` seconds)."""
    s = raw_connect(port, data, host=host, timeout=timeout)
    try:
        out = b""
        while read:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def status_of(resp):
    """The status code of a raw HTTP response, or None when it is not one."""
    if not resp.startswith(b"HTTP/1."):
        return None
    return int(resp[9:12])
