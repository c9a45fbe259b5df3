"""Finding 11: the resolver may send queries nobody asked for (libevent's evdns
probes a nameserver it marked down with a query for a well-known public name,
and applies resolv.conf search domains).

The proxy now has a stub resolver of its own (--egress-resolver
system|hosts-only|IP:PORT). Here it is pointed at a DNS server this test runs
on 127.0.0.1, which answers made-up *.test names with 127.0.0.1 (our HTTP
server, trusted) and records every query it receives; in hosts-only mode no
DNS is sent at all. And the suite's shared daemon runs hosts-only, so no case
of this suite can send a DNS query.
"""
import json
import socket
import struct
import threading
import time


class DnsServer:
    """UDP on 127.0.0.1: A 127.0.0.1 for the names it knows, NXDOMAIN for the
    rest, no AAAA records; silent (no answer at all) when told so. Every
    query (name, type) is recorded."""

    def __init__(self, names):
        self.names = set(names)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.queries = []
        self.silent = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            try:
                q, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            if len(q) < 12:
                continue
            pos, labels = 12, []
            while pos < len(q) and q[pos]:
                labels.append(q[pos + 1:pos + 1 + q[pos]].decode(errors="replace"))
                pos += 1 + q[pos]
            qtype = struct.unpack(">H", q[pos + 1:pos + 3])[0]
            name = ".".join(labels).lower()
            with self.lock:
                self.queries.append((name, qtype))
                silent = self.silent
            if silent:
                continue
            question = q[12:pos + 5]
            known = name in self.names
            answers = b""
            if known and qtype == 1:
                answers = struct.pack(">HHHIH", 0xc00c, 1, 1, 60, 4) + socket.inet_aton("127.0.0.1")
            flags = 0x8180 if known else 0x8183
            resp = struct.pack(">HHHHHH", struct.unpack(">H", q[:2])[0], flags, 1,
                               1 if answers else 0, 0, 0) + question + answers
            self.sock.sendto(resp, peer)

    def recorded(self):
        with self.lock:
            return list(self.queries)

    def stop(self):
        self.sock.close()


FETCH = r"""
import json, urllib.request, urllib.error
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return [r.status, r.read().decode(errors='replace')]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode(errors='replace')]
    except Exception as e:
        return [None, repr(e)]
print(json.dumps(fetch(%r)))
"""


def fetch(h_api, sid, url):
    r = h_api.exec(sid, FETCH % url, timeout_s=40)
    assert r["status"] == "ok", r
    return json.loads(r["stdout"].strip().splitlines()[-1])


LIMITS = {"memory_mb": 128, "pids": 64, "disk_mb": 32, "exec_timeout_s": 45}


def test_names_resolve_through_our_server_and_nothing_else_is_asked(hostile, make_daemon):
    h = hostile
    dns = DnsServer(["dns-a.test", "dns-b.test"])
    try:
        d = make_daemon("--egress-resolver", "127.0.0.1:%d" % dns.port,
                        "--egress-trusted", "127.0.0.1:%d" % h.http.port,
                        "--max-exec-timeout-s", "60", "--pool-size", "0")
        port = h.http.port
        s = d.api.create(limits=LIMITS, network={"allow": ["dns-a.test:%d" % port,
                                                           "dns-b.test:%d" % port,
                                                           "nxdomain.test:%d" % port]})
        try:
            status, body = fetch(d.api, s["id"], "http://dns-a.test:%d/via-dns" % port)
            assert status == 200 and body == h.http.body.decode(), (status, body)
            assert sorted(set(dns.recorded())) == [("dns-a.test", 1), ("dns-a.test", 28)], \
                dns.recorded()
            # A name the server does not know: NXDOMAIN, a clear 502.
            status, body = fetch(d.api, s["id"], "http://nxdomain.test:%d/" % port)
            assert status == 502 and "NXDOMAIN" in body, (status, body)
            # A name not on the allowlist is never asked at all.
            status, body = fetch(d.api, s["id"], "http://notlisted.test:%d/" % port)
            assert status == 403, (status, body)
            # The server stops answering: the query times out (retried, the
            # same name), and the proxy answers 502.
            dns.silent = True
            status, body = fetch(d.api, s["id"], "http://dns-b.test:%d/" % port)
            assert status == 502 and "timed out" in body, (status, body)
            # A failed nameserver is not probed: evdns sent its probe 10 s
            # after marking a server down. Look for one for 12 s more, while
            # the session goes on working.
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline:
                r = d.api.exec(s["id"], "1 + 1")
                assert r["status"] == "ok", r
                # Deliberate: an observation window (nothing to wait for: the
                # case is that no probe comes); the session's work is paced
                # at one exec every half second meanwhile.
                time.sleep(0.5)
            names = {n for n, _ in dns.recorded()}
            assert names == {"dns-a.test", "dns-b.test", "nxdomain.test"}, dns.recorded()
            assert all(t in (1, 28) for _, t in dns.recorded()), dns.recorded()
            sent = d.metric("ci_egress_dns_queries_total")
            assert sent == len(dns.recorded()), (sent, dns.recorded())
        finally:
            d.api.delete(s["id"])
    finally:
        dns.stop()


def test_hosts_only_sends_no_dns_and_says_why(hostile, make_daemon, tmp_path):
    h = hostile
    dns = DnsServer(["absent.test"])  # would answer, if anyone asked it
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 present.test\n")
    try:
        d = make_daemon("--egress-resolver", "hosts-only", "--egress-hosts-file", str(hosts),
                        "--egress-trusted", "127.0.0.1:%d" % h.http.port, "--pool-size", "0")
        port = h.http.port
        s = d.api.create(limits=LIMITS, network={"allow": ["present.test:%d" % port,
                                                           "absent.test:%d" % port]})
        try:
            status, body = fetch(d.api, s["id"], "http://present.test:%d/" % port)
            assert status == 200 and body == h.http.body.decode(), (status, body)
            status, body = fetch(d.api, s["id"], "http://absent.test:%d/" % port)
            assert status == 502, (status, body)
            assert "not in the egress hosts file" in body and "hosts-only" in body, body
            assert d.metric("ci_egress_dns_queries_total") == 0
            assert dns.recorded() == []
        finally:
            d.api.delete(s["id"])
    finally:
        dns.stop()


def test_the_shared_hostile_daemon_resolves_hosts_only(hostile):
    # Every egress case of this suite runs on this daemon: it must never send
    # a DNS query (nor any packet off this machine).
    h = hostile
    with open("/proc/%d/cmdline" % h.d.proc.pid, "rb") as f:
        args = f.read().split(b"\0")
    i = args.index(b"--egress-resolver")
    assert args[i + 1] == b"hosts-only", args
    # trusted upstreams: loopback only
    trusted = args[args.index(b"--egress-trusted") + 1].decode().split(",")
    assert all(t.startswith("127.0.0.1:") for t in trusted), trusted
    with h.victim(network={"allow": ["absent-from-hosts.test:%d" % h.http.port]}) as s:
        before = h.metric("ci_egress_dns_queries_total")
        answer = h.proxy_raw(s, [b"CONNECT absent-from-hosts.test:%d HTTP/1.1\r\n\r\n"
                                 % h.http.port])[0]
        assert answer.startswith("HTTP/1.1 502"), answer
        assert "not in the egress hosts file" in answer, answer
        assert h.metric("ci_egress_dns_queries_total") == before == 0
    h.assert_daemon_fine()
