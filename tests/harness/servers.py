"""Servers of the test's own on this machine, for sandboxes and the egress
proxy to reach (or, the point of many cases, not to reach). Each records
what came, and stop() ends it.

  HttpServer       HTTP on 127.0.0.1: a fixed body for every GET; records
                   (peer, path, Host) of each request
  RecordingServer  TCP on 127.0.0.1: keeps every byte of each connection and
                   whether the peer closed it
  Listeners        a TCP and a UDP listener on 0.0.0.0 (so on the gateway of
                   the sandbox network too) that record every peer

"Nothing came" cannot be waited for, but "everything sent before now has been
seen" can: flush() sends a marker of our own from loopback behind whatever
is already queued (a listener's accept queue and a datagram socket are first
in, first out) and returns once the server has dealt with the marker and
with every connection accepted before it. After a flush, an empty record
means that nothing was on its way.
"""
import http.client
import http.server
import socket
import threading
import uuid

from .wait import wait_for

FLUSH_PATH = "/__ci_flush__/"
FLUSH_DATAGRAM = b"CI-FLUSH "


def _listener(host, backlog):
    """A TCP listening socket on host, on a free port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, 0))
    s.listen(backlog)
    return s


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""
    owner = None
    timeout = 10  # a connection that never sends its request is closed, not held

    def do_GET(self):
        if self.path.startswith(FLUSH_PATH):
            self.owner._flushed(self.path[len(FLUSH_PATH):], self.request)
        else:
            self.owner.seen.append((self.client_address[0], self.path, self.headers.get("Host")))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


class _CountingServer(http.server.ThreadingHTTPServer):
    """Numbers the connections in the order they were accepted and knows
    which ones are still being handled."""
    daemon_threads = True

    def __init__(self, addr, handler):
        super().__init__(addr, handler)
        self.lock = threading.Lock()
        self.accepted = 0
        self.order = {}      # request socket -> accept number
        self.open = set()    # accept numbers still being handled

    def process_request(self, request, client_address):
        with self.lock:
            n = self.accepted
            self.accepted += 1
            self.order[request] = n
            self.open.add(n)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.lock:
            n = self.order.pop(request, None)
            self.open.discard(n)
        super().shutdown_request(request)


class HttpServer:
    """Our own HTTP server on 127.0.0.1 (the proxy reaches it by a made-up
    name mapped to loopback)."""

    def __init__(self, body=None):
        self.body = body or ("hello from the tests' own server %s\n" % uuid.uuid4().hex).encode()
        self.seen = []
        self._markers = {}
        handler = type("H", (_Handler,), {"body": self.body, "owner": self})
        self.srv = _CountingServer(("127.0.0.1", 0), handler)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def _flushed(self, token, request):
        with self.srv.lock:
            if token in self._markers:
                self._markers[token] = self.srv.order.get(request)

    def flush(self, timeout=15):
        """Return once every connection accepted before now has been handled."""
        token = uuid.uuid4().hex
        self._markers[token] = None
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("GET", FLUSH_PATH + token)
            c.getresponse().read()
        finally:
            c.close()
        mark = self._markers.pop(token)
        assert mark is not None, "the flush marker was not seen"

        def before_done():
            with self.srv.lock:
                return not any(n < mark for n in self.srv.open)
        wait_for(before_done, timeout, what="the HTTP server's earlier connections to end")

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


class RecordingServer:
    """A TCP server of ours on 127.0.0.1 that keeps, per connection, every
    byte received and whether the peer closed. On the first request head of a
    connection it answers a small keep-alive response (whatever the request
    said about closing; no answer to a path with /hold, nor to tunnel data
    starting with TUNNEL) and then keeps reading: so a second request that
    reaches it is recorded, and a connection stays open until the other side
    closes it."""

    RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: keep-alive\r\n\r\nrecorded\n"

    def __init__(self):
        self.srv = _listener("127.0.0.1", 256)
        self.port = self.srv.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []  # dicts: data (bytes), closed (bool), answered (bool)
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            rec = {"data": b"", "closed": False, "answered": False, "sock": c}
            with self.lock:
                self.conns.append(rec)
            threading.Thread(target=self._serve, args=(c, rec), daemon=True).start()

    def _serve(self, c, rec):
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                with self.lock:
                    rec["data"] += chunk
                    answer = not rec["answered"] and b"\r\n\r\n" in rec["data"] \
                        and not rec["data"].startswith(b"TUNNEL") \
                        and b"/hold" not in rec["data"].split(b"\r\n")[0]
                    if answer:
                        rec["answered"] = True
                if answer:
                    c.sendall(self.RESPONSE)
        except OSError:
            pass
        finally:
            with self.lock:
                rec["closed"] = True
            c.close()

    def count(self):
        with self.lock:
            return len(self.conns)

    def since(self, n):
        """Snapshots of the connections accepted after the first n."""
        with self.lock:
            return [dict(data=r["data"], closed=r["closed"]) for r in self.conns[n:]]

    def stop(self):
        self.stopping = True
        try:
            self.srv.close()
        except OSError:
            pass
        with self.lock:
            socks = [r["sock"] for r in self.conns if not r["closed"]]
        for c in socks:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Listeners:
    """A TCP and a UDP listener on 0.0.0.0 that record every peer."""

    def __init__(self):
        self.tcp = _listener("0.0.0.0", 64)
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.udp.bind(("0.0.0.0", self.port))
        except OSError:
            self.udp.bind(("0.0.0.0", 0))
        self.udp_port = self.udp.getsockname()[1]
        self.tcp_peers = []
        self.udp_peers = []
        self.lock = threading.Lock()
        self._tcp_markers = {}   # our flush connection's local port -> seen
        self._udp_markers = {}   # token -> seen
        self.stopping = False
        self.threads = [threading.Thread(target=self._tcp_loop, daemon=True),
                        threading.Thread(target=self._udp_loop, daemon=True)]
        for t in self.threads:
            t.start()

    def _tcp_loop(self):
        while not self.stopping:
            try:
                c, peer = self.tcp.accept()
            except OSError:
                return
            with self.lock:
                if peer[0] == "127.0.0.1" and peer[1] in self._tcp_markers:
                    self._tcp_markers[peer[1]] = True
                    c.close()
                    continue
            self.tcp_peers.append(peer[0])
            try:
                c.sendall(b"HOST-LISTENER-REACHED\n")
            except OSError:
                pass
            c.close()

    def _udp_loop(self):
        while not self.stopping:
            try:
                data, peer = self.udp.recvfrom(65536)
            except OSError:
                return
            if peer is None or self.stopping:
                return
            if data.startswith(FLUSH_DATAGRAM):
                token = data[len(FLUSH_DATAGRAM):].decode(errors="replace")
                with self.lock:
                    if token in self._udp_markers:
                        self._udp_markers[token] = True
                        continue
            self.udp_peers.append(peer[0])

    def flush(self, timeout=15):
        """Return once every connection and datagram that reached the
        listeners before now has been recorded."""
        token = uuid.uuid4().hex
        with self.lock:
            self._udp_markers[token] = False
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.sendto(FLUSH_DATAGRAM + token.encode(), ("127.0.0.1", self.udp_port))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            with self.lock:
                self._tcp_markers[port] = False
            t.settimeout(timeout)
            t.connect(("127.0.0.1", self.port))
            wait_for(lambda: self._tcp_markers[port] and self._udp_markers[token], timeout,
                     what="the listeners to see our own markers")
        with self.lock:
            del self._tcp_markers[port]
            del self._udp_markers[token]

    def stop(self):
        self.stopping = True
        for s in (self.tcp, self.udp):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
