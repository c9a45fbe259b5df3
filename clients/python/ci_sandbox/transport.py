"""One HTTP connection per call to the daemon, standard library only.

The address is `http://HOST:PORT`, `https://HOST:PORT` (verified against the
system's CAs, or a CA file of the caller's) or `unix:/path/to.sock` (the
daemon's `--listen unix:PATH`). Every call has a timeout; answers are read
with a cap, so a hostile or broken peer cannot make the client hold
unbounded memory."""
import http.client
import json
import socket
import ssl
import urllib.parse

from . import errors

MAX_JSON_BYTES = 64 << 20  # a JSON answer: exec results carry at most ~22 MiB
MAX_LINE_BYTES = 64 << 20  # one NDJSON event (a display of 20 MiB, base64)


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (the Host header says "localhost")."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class Transport:
    """Where the daemon is and how to authenticate to it.

    url       http://..., https://... or unix:/path.sock
    api_key   sent as Authorization: Bearer (None: no header)
    ca_file   a PEM CA bundle for https (None: the system's)
    timeout   seconds for connecting and for each read (None: 300)
    """

    def __init__(self, url, api_key=None, ca_file=None, timeout=None):
        self.url = url
        self.api_key = api_key
        self.timeout = 300.0 if timeout is None else float(timeout)
        if url.startswith("unix:"):
            self._kind = "unix"
            self._path = url[5:]
            if self._path.startswith("//"):
                self._path = self._path[2:]
            self._base = ""
            return
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise errors.BadRequest("url %r: expected http://HOST[:PORT], https://HOST[:PORT] "
                                    "or unix:PATH" % url, code="bad_request")
        self._kind = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._base = parts.path.rstrip("/")
        self._ssl = None
        if self._kind == "https":
            self._ssl = ssl.create_default_context(cafile=ca_file)

    def _connection(self, timeout):
        if self._kind == "unix":
            return _UnixConnection(self._path, timeout)
        if self._kind == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def open(self, method, path, body=None, headers=None, timeout=None):
        """Send a request; returns (connection, response) with the status and
        headers read. A non-2xx answer raises its typed error. body may be
        bytes or a JSON-able object (sent as application/json)."""
        hdrs = {"Accept": "application/json"}
        if self.api_key:
            hdrs["Authorization"] = "Bearer " + self.api_key
        if body is not None and not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        elif body is not None:
            hdrs["Content-Type"] = "application/octet-stream"
        hdrs.update(headers or {})
        conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, self._base + path, body=body, headers=hdrs)
            resp = conn.getresponse()
        except socket.timeout as e:
            conn.close()
            raise errors.Timeout("%s %s: no answer from %s within the client's timeout (%s)"
                                 % (method, path, self.url, e), code="timeout") from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise errors.ConnectionFailed("%s %s: cannot reach the daemon at %s: %s"
                                          % (method, path, self.url, e), code="connection") from e
        if resp.status >= 300:
            try:
                payload = read_capped(resp, 1 << 20)
            except errors.CiError:
                payload = b""
            finally:
                conn.close()
            raise errors.from_response(resp.status, lower_headers(resp), payload)
        return conn, resp

    def call(self, method, path, body=None, headers=None, timeout=None, raw=False):
        """A whole request: the parsed JSON answer (None for an empty body), or
        the bytes with raw=True."""
        conn, resp = self.open(method, path, body, headers, timeout)
        try:
            payload = read_capped(resp, None if raw else MAX_JSON_BYTES)
        finally:
            conn.close()
        if raw:
            return payload
        if not payload:
            return None
        try:
            return json.loads(payload)
        except ValueError as e:
            raise errors.ProtocolError("%s %s: the answer is not JSON: %r"
                                       % (method, path, payload[:100]), code="protocol",
                                       status=resp.status) from e

    def lines(self, method, path, body=None, timeout=None):
        """A streamed NDJSON answer: yields each line's object as it comes."""
        conn, resp = self.open(method, path, body, {"Accept": "application/x-ndjson"}, timeout)
        try:
            while True:
                try:
                    line = resp.readline(MAX_LINE_BYTES + 1)
                except socket.timeout as e:
                    raise errors.Timeout("%s %s: the stream went silent past the client's timeout"
                                         % (method, path), code="timeout") from e
                except (OSError, http.client.HTTPException) as e:
                    raise errors.ConnectionFailed("%s %s: the stream broke: %s" % (method, path, e),
                                                  code="connection") from e
                if not line:
                    return
                if len(line) > MAX_LINE_BYTES:
                    raise errors.ProtocolError("%s %s: a stream line over %d bytes"
                                               % (method, path, MAX_LINE_BYTES), code="protocol")
                line = line.strip()
                if not line:
                    continue
                try:
                    yield json.loads(line)
                except ValueError as e:
                    raise errors.ProtocolError("%s %s: a stream line that is not JSON: %r"
                                               % (method, path, line[:100]), code="protocol") from e
        finally:
            conn.close()


def lower_headers(resp):
    return {k.lower(): v for k, v in resp.getheaders()}


def read_capped(resp, cap):
    """The body, refusing more than cap bytes (None: no cap)."""
    try:
        if cap is None:
            return resp.read()
        data = resp.read(cap + 1)
    except socket.timeout as e:
        raise errors.Timeout("the answer stopped coming within the client's timeout",
                             code="timeout") from e
    except (OSError, http.client.HTTPException) as e:
        raise errors.ConnectionFailed("the connection broke mid-answer: %s" % e,
                                      code="connection") from e
    if len(data) > cap:
        raise errors.ProtocolError("an answer over %d bytes" % cap, code="protocol")
    return data
