"""Hostile code, part 3: reaching what it must not.

Every destination here is on this machine: loopback, the gateway (host side)
of the daemon's own sandbox network, our own containers, or names that the
daemon's --egress-hosts-file maps to loopback (allowed.test, later.test,
rebind.test) or to that gateway (private.test: the proxy refuses the name as
private before it connects). The daemon resolves hosts-only: no DNS.
"""
import json
import socket
import time

import pytest

from harness import wait_for
from harness.http import raw_connect
from harness.procfs import open_connections


@pytest.fixture(scope="module")
def net(hostile):
    """A session that may reach allowed.test (our HTTP server) and, by name,
    rebind.test and private.test (which the proxy must still refuse)."""
    h = hostile
    s = h.create(network={"allow": ["allowed.test:%d" % h.http.port,
                                    "rebind.test:%d" % h.listeners.port,
                                    "private.test"]})
    h.map_private_name()  # the network exists now
    yield s
    h.delete(s["id"])


def run_json(h, s, code):
    r = h.exec(s["id"], code)
    assert r["status"] == "ok", r
    return json.loads(r["stdout"].strip().splitlines()[-1])


FETCH = r"""
import json, os, urllib.request, urllib.error
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            return [r.status, r.read().decode(errors='replace')]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode(errors='replace')]
    except Exception as e:
        return [None, repr(e)]
"""


def fetch(h, s, url):
    """urllib, with the proxy from the environment (as user code would)."""
    return run_json(h, s, FETCH + "print(json.dumps(fetch(%r)))" % url)


VIA_PROXY = r"""
import http.client, json, os, urllib.parse
def via_proxy(url):
    # explicitly through the proxy, whatever NO_PROXY says
    p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
    c = http.client.HTTPConnection(p.hostname, p.port, timeout=15)
    try:
        c.request('GET', url)
        r = c.getresponse()
        return [r.status, r.read().decode(errors='replace')]
    except Exception as e:
        return [None, repr(e)]
    finally:
        c.close()
"""


def via_proxy(h, s, url):
    return run_json(h, s, VIA_PROXY + "print(json.dumps(via_proxy(%r)))" % url)


def test_sandbox_gets_the_proxy_and_nothing_else(hostile, net):
    h = hostile
    gw = h.gateway()
    out = run_json(h, net, r"""
import json, os, socket
print(json.dumps({"proxy": [os.environ.get(k) for k in ('HTTP_PROXY', 'HTTPS_PROXY',
                                                          'http_proxy', 'https_proxy')],
                  "ifaces": [n for _, n in socket.if_nameindex()],
                  "routes": open('/proc/net/route').read().splitlines()[1:]}))
""")
    assert len(set(out["proxy"])) == 1, out
    proxy = out["proxy"][0]
    assert proxy.startswith("http://%s:" % gw), (proxy, gw)
    assert sorted(out["ifaces"]) == ["eth0", "lo"], out
    # Every route leads to the sandbox subnet or through the gateway (this
    # host, where the firewall chain and the internal network's isolation
    # rules apply).
    gw_hex = "%08X" % int.from_bytes(socket.inet_aton(gw), "little")
    for r in out["routes"]:
        f = r.split()
        assert f[2] in ("00000000", gw_hex), (r, gw)
    h.assert_daemon_fine()


def test_allowlisted_name_is_fetched_through_the_proxy(hostile, net):
    h = hostile
    url = "http://allowed.test:%d/positive" % h.http.port
    seen = len(h.http.seen)
    status, body = fetch(h, net, url)
    assert status == 200 and body == h.http.body.decode(), (status, body)
    # Our server was reached by the proxy (on loopback), for that path only.
    assert h.http.seen[seen:] == [("127.0.0.1", "/positive", "allowed.test:%d" % h.http.port)], \
        h.http.seen[seen:]
    # CONNECT tunnels too (what HTTPS clients use).
    out = run_json(h, net, r"""
import http.client, json, os, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
c = http.client.HTTPConnection(p.hostname, p.port, timeout=15)
c.set_tunnel('allowed.test', %d)
c.request('GET', '/tunnel')
r = c.getresponse()
print(json.dumps([r.status, r.read().decode()]))
""" % h.http.port)
    assert out == [200, h.http.body.decode()], out
    h.assert_daemon_fine()


def test_name_not_on_the_allowlist_is_refused_403(hostile, net):
    h = hostile
    for url in ("http://notlisted.test/", "http://notlisted.test:%d/" % h.http.port,
                "http://allowed.test/",                    # allowed name, other port
                "http://allowed.test:%d/" % h.listeners.port,
                "http://127.0.0.1:%d/" % h.http.port,      # an IP literal, not listed
                "http://%s:%d/" % (h.gateway(), h.listeners.port)):
        status, body = via_proxy(h, net, url)
        assert status == 403, (url, status, body)
        assert "allowlist" in body, (url, body)
    # CONNECT to a host not on the list.
    out = run_json(h, net, r"""
import json, os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
s = socket.create_connection((p.hostname, p.port), timeout=15)
s.sendall(b'CONNECT notlisted.test:443 HTTP/1.1\r\nHost: notlisted.test:443\r\n\r\n')
data = b''
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
print(json.dumps(data.decode(errors='replace')))
""")
    assert out.startswith("HTTP/1.1 403") and "allowlist" in out, out
    assert h.listeners.tcp_peers == [], h.listeners.tcp_peers
    h.assert_daemon_fine()


def test_allowlisted_name_resolving_to_loopback_is_refused(hostile, net):
    # rebind.test is on the list but maps to 127.0.0.1 (DNS rebinding): our
    # listener on 0.0.0.0 would accept on loopback, and must see nobody.
    h = hostile
    status, body = fetch(h, net, "http://rebind.test:%d/" % h.listeners.port)
    assert status == 403, (status, body)
    assert "loopback" in body, body
    assert h.listeners.tcp_peers == [], h.listeners.tcp_peers
    h.assert_daemon_fine()


def test_allowlisted_name_resolving_to_private_space_is_refused(hostile, net):
    h = hostile
    status, body = fetch(h, net, "http://private.test/")
    assert status == 403, (status, body)
    assert "private" in body, body
    h.assert_daemon_fine()


def test_patch_changes_the_allowlist_live(hostile):
    h = hostile
    url = "http://later.test:%d/later" % h.http.port
    with h.victim(network={"allow": ["allowed.test:%d" % h.http.port]}) as s:
        status, body = fetch(h, s, url)
        assert status == 403 and "allowlist" in body, (status, body)
        st, doc = h.api.request("PATCH", "/v1/sessions/%s" % s["id"],
                                body={"network": {"allow": ["later.test:%d" % h.http.port]}})
        assert st == 200 and doc["network"]["allow"] == ["later.test:%d" % h.http.port], (st, doc)
        status, body = fetch(h, s, url)
        assert status == 200 and body == h.http.body.decode(), (status, body)
        # ... and the name it replaced is refused now.
        status, body = fetch(h, s, "http://allowed.test:%d/" % h.http.port)
        assert status == 403, (status, body)
        # PATCH can only change the network.
        st, doc = h.api.request("PATCH", "/v1/sessions/%s" % s["id"],
                                body={"limits": {"memory_mb": 4096}})
        assert st == 400 and doc["error"]["code"] == "bad_request", (st, doc)
    h.assert_daemon_fine()


def test_patch_cannot_give_network_to_a_session_without_one(hostile):
    h = hostile
    with h.victim() as s:
        st, doc = h.api.request("PATCH", "/v1/sessions/%s" % s["id"],
                                body={"network": {"allow": ["allowed.test:%d" % h.http.port]}})
        assert st == 400, (st, doc)
        r = h.exec(s["id"], "import socket; print(len(socket.if_nameindex()))")
        assert r["status"] == "ok" and r["stdout"] == "1\n", r
    h.assert_daemon_fine()


CONNECT_ALL = r"""
import errno, json, socket, time
from concurrent.futures import ThreadPoolExecutor
def tcp(host, port, timeout=1.0):
    s = socket.socket()
    s.settimeout(timeout)
    t0 = time.monotonic()
    try:
        s.connect((host, port))
        try:
            data = s.recv(64).decode(errors='replace')
        except OSError:
            data = ''
        return ['connected', data]
    except socket.timeout:
        return ['timeout', round(time.monotonic() - t0, 2)]
    except OSError as e:
        return [errno.errorcode.get(e.errno, str(e.errno)), None]
    finally:
        s.close()
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _ in range(3):
            s.sendto(b'sandbox datagram', (host, port))
        return 'sent'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
"""


def test_direct_connections_to_the_host_are_blocked(hostile, net):
    # Bypassing the proxy: the gateway is this host. Our TCP listener and our
    # redis-server listen on 0.0.0.0 (so on the gateway address too), the
    # daemon's API on 127.0.0.1; only the proxy port may be reached.
    h = hostile
    gw = h.gateway()
    proxy_port = int(run_json(h, net, "import os, json\n"
                                      "print(json.dumps(os.environ['HTTP_PROXY'].rsplit(':', 1)[1]))"))
    ports = {"listener": h.listeners.port, "redis": h.open_redis.port, "api": h.d.port,
             "session_redis": h.d.redis.port, "ssh": 22, "dns": 53, "docker_tcp": 2375}
    before = h.open_redis.clients()
    out = run_json(h, net, CONNECT_ALL + r"""
gw = %r
targets = dict(%r)
targets["proxy"] = %d
with ThreadPoolExecutor(len(targets)) as ex:   # in parallel: a DROP costs the timeout
    futs = {name: ex.submit(tcp, gw, port) for name, port in targets.items()}
res = {name: f.result() for name, f in futs.items()}
res["udp_listener"] = udp(gw, %d)
res["udp_dns"] = udp(gw, 53)
print(json.dumps(res))
""" % (gw, ports, proxy_port, h.listeners.udp_port))
    # The proxy port is open (so the others are refused by the firewall, not
    # by a broken network).
    assert out["proxy"][0] == "connected", out
    for name in ports:
        assert out[name][0] != "connected", (name, out)
    h.listeners.flush()  # whatever the sandbox sent has been seen by now
    assert h.listeners.tcp_peers == [] and h.listeners.udp_peers == [], \
        (h.listeners.tcp_peers, h.listeners.udp_peers)
    after = h.open_redis.clients()
    assert after.count("addr=") == before.count("addr="), (before, after)
    h.assert_daemon_fine()


def test_sandbox_loopback_is_its_own(hostile, net):
    h = hostile
    out = run_json(h, net, CONNECT_ALL + r"""
print(json.dumps({"api": tcp('127.0.0.1', %d), "redis": tcp('127.0.0.1', %d),
                  "listener": tcp('127.0.0.1', %d)}))
""" % (h.d.port, h.d.redis.port, h.listeners.port))
    for k, v in out.items():
        assert v[0] == "ECONNREFUSED", (k, out)
    assert h.listeners.tcp_peers == []
    h.assert_daemon_fine()


def test_session_without_network_reaches_nothing(hostile, net):
    h = hostile
    gw = h.gateway()  # exists: `net` made the sandbox network
    with h.victim() as s:
        out = run_json(h, s, CONNECT_ALL + r"""
import socket
res = {"ifaces": [n for _, n in socket.if_nameindex()],
       "gateway": tcp(%r, %d), "proxy_name": None}
try:
    socket.getaddrinfo('allowed.test', 80)
    res["dns"] = 'resolved'
except socket.gaierror as e:
    res["dns"] = 'gaierror'
res["udp"] = udp(%r, %d)
print(json.dumps(res))
""" % (gw, h.listeners.port, gw, h.listeners.udp_port))
        assert out["ifaces"] == ["lo"], out
        assert out["gateway"][0] == "ENETUNREACH", out
        assert out["dns"] == "gaierror", out
        assert out["udp"] == "ENETUNREACH", out
        assert h.inspect(s["id"])["HostConfig"]["NetworkMode"] == "none"
    h.listeners.flush()  # whatever the sandbox sent has been seen by now
    assert h.listeners.tcp_peers == [] and h.listeners.udp_peers == []
    h.assert_daemon_fine()


SERVE = r"""
import socket, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(('0.0.0.0', 8765))
srv.listen(16)
usrv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
usrv.bind(('0.0.0.0', 8765))
usrv.settimeout(None)
got = []
def loop():
    while True:
        c, a = srv.accept()
        got.append(a[0])
        c.sendall(b'SANDBOX-B\n')
        c.close()
def uloop():
    while True:
        d, a = usrv.recvfrom(100)
        got.append('udp:' + a[0])
threading.Thread(target=loop, daemon=True).start()
threading.Thread(target=uloop, daemon=True).start()
print('serving')
"""


FLUSH_B = r"""
import socket, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
me = %r
u.sendto(b'marker', (me, 8765))
end = time.monotonic() + 10
while 'udp:' + me not in got and time.monotonic() < end:
    time.sleep(0.01)  # sandbox code: waits for its own marker
print(got)
"""


def test_another_sessions_container_is_unreachable(hostile, net):
    h = hostile
    with h.victim(network={"allow": ["allowed.test:%d" % h.http.port]}) as b:
        r = h.exec(b["id"], SERVE)
        assert r["status"] == "ok" and r["stdout"] == "serving\n", r
        ip_b = h.container_ip(b["id"])
        ip_a = h.container_ip(net["id"])
        assert ip_a != ip_b
        # B reaches its own server on its own address: it is listening.
        out = run_json(h, b, CONNECT_ALL + "print(json.dumps(tcp(%r, 8765)))" % ip_b)
        assert out == ["connected", "SANDBOX-B\n"], out
        # A (same network) cannot: inter-container traffic is off.
        out = run_json(h, net, CONNECT_ALL + "print(json.dumps([tcp(%r, 8765), udp(%r, 8765)]))"
                       % (ip_b, ip_b))
        assert out[0][0] != "connected", out
        # Nor through the proxy: B's address is not on A's allowlist, and a
        # private address is refused anyway.
        status, body = fetch(h, net, "http://%s:8765/" % ip_b)
        assert status == 403, (status, body)
        # B's own marker, sent to its UDP server: once it is in `got`, every
        # datagram that reached B before it is too (a socket's queue is first
        # in, first out); A's connection attempts have all been answered.
        got = h.exec(b["id"], FLUSH_B % ip_b)["stdout"]
        assert "udp:%s" % ip_b in got, got
        assert ip_a not in got, got
    h.assert_daemon_fine()


def test_raw_socket_with_network_is_refused(hostile, net):
    h = hostile
    out = run_json(h, net, r"""
import json, socket
res = {}
for name, args in (("raw", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
                   ("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0x0300))):
    try:
        socket.socket(*args).close()
        res[name] = "opened"
    except OSError as e:
        res[name] = type(e).__name__
# Docker 20.10 lets containers open ICMP datagram ("ping") sockets
# (net.ipv4.ping_group_range); an echo to the gateway must get no reply.
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.settimeout(1.0)
    s.sendto(b'\x08\x00\x00\x00\x00\x01\x00\x01' + b'ci-hostile', (%r, 0))
    try:
        s.recvfrom(100)
        res["ping"] = "reply"
    except socket.timeout:
        res["ping"] = "no reply"
except OSError as e:
    res["ping"] = type(e).__name__
print(json.dumps(res))
""" % h.gateway())
    assert out["raw"] == "PermissionError" and out["packet"] == "PermissionError", out
    assert out["ping"] != "reply", out
    h.assert_daemon_fine()


def test_proxy_is_no_relay_for_anyone_but_sessions(hostile, net):
    # From the host (source = the gateway address, owned by no session) the
    # proxy refuses even an allowlisted destination.
    h = hostile
    gw = h.gateway()
    proxy_port = int(run_json(h, net, "import os, json\n"
                                      "print(json.dumps(os.environ['HTTP_PROXY'].rsplit(':', 1)[1]))"))
    seen = len(h.http.seen)
    # The proxy answers at once, before any request: read that first.
    with raw_connect(proxy_port, host=gw, timeout=10) as c:
        data = b""
        while True:
            chunk = c.recv(4096)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 403"), data
    assert b"no session owns" in data, data
    # And a request sent straight away is not forwarded either.
    with raw_connect(proxy_port, host=gw, timeout=10) as c:
        try:
            c.sendall(b"GET http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
                      % h.http.port)
            while c.recv(4096):
                pass
        except ConnectionResetError:
            pass
    h.http.flush()  # whatever reached our server has been handled by now
    assert len(h.http.seen) == seen
    h.assert_daemon_fine()


def test_proxy_refuses_malformed_and_smuggled_requests(hostile, net):
    h = hostile
    seen = len(h.http.seen)
    out = run_json(h, net, r"""
import json, os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
def ask(raw):
    s = socket.create_connection((p.hostname, p.port), timeout=15)
    s.sendall(raw)
    data = b''
    while True:
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    s.close()
    return data.decode(errors='replace')[:300]
port = %d
res = {
  "userinfo": ask(b'GET http://allowed.test:%%d@notlisted.test/ HTTP/1.1\r\nHost: x\r\n\r\n' %% port),
  "relative": ask(b'GET / HTTP/1.1\r\nHost: allowed.test:%%d\r\n\r\n' %% port),
  "https_abs": ask(b'GET https://allowed.test:%%d/ HTTP/1.1\r\nHost: x\r\n\r\n' %% port),
  "garbage": ask(b'\x00\x01\x02 not http at all\r\n\r\n'),
  "huge_head": ask(b'GET http://allowed.test:%%d/ HTTP/1.1\r\n' %% port + b'X-A: ' + b'a' * 40000 + b'\r\n\r\n'),
  "bad_port": ask(b'CONNECT allowed.test:99999 HTTP/1.1\r\n\r\n'),
  "nul_host": ask(b'CONNECT allowed.test\x00.evil:443 HTTP/1.1\r\n\r\n'),
}
print(json.dumps(res))
""" % h.http.port)
    for k, v in out.items():
        status = v[9:12] if v.startswith("HTTP/1.") else ""
        assert status in ("400", "403", "405", "431", "") and not status.startswith("2"), (k, v)
    assert out["userinfo"].startswith("HTTP/1.1 400") or out["userinfo"].startswith("HTTP/1.1 403"), out
    assert len(h.http.seen) == seen, h.http.seen[seen:]
    h.assert_daemon_fine()


def test_one_session_cannot_exhaust_the_proxy_for_others(hostile, net):
    # Session A holds thousands of idle connections to the shared egress
    # proxy (spread over processes: pids 64 x nofile 1024); session B must
    # still fetch through it meanwhile.
    h = hostile
    with h.victim(limits={"pids": 64, "memory_mb": 256, "exec_timeout_s": 30},
                  network={"allow": ["allowed.test:%d" % h.http.port]}) as a:
        hog = r"""
import os, socket, time, urllib.parse, json
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
addr = (p.hostname, p.port)
kids = []
r, w = os.pipe()
for k in range(6):
    pid = os.fork()
    if pid == 0:
        held = []
        try:
            for _ in range(1000):
                held.append(socket.create_connection(addr, timeout=5))
        except OSError:
            pass
        os.write(w, b'%d\n' % len(held))
        # held until the test says (the file appears), a minute at most
        end = time.monotonic() + 60
        while not os.path.exists('/workspace/release') and time.monotonic() < end:
            time.sleep(0.05)
        os._exit(0)
    kids.append(pid)
os.close(w)
counts = []
buf = b''
while len(counts) < len(kids):
    chunk = os.read(r, 100)
    if not chunk:
        break
    buf += chunk
    counts = [int(x) for x in buf.split()]
print(json.dumps(counts))
"""
        proxy_port = int(run_json(h, net, "import os, json\n"
                                          "print(json.dumps(os.environ['HTTP_PROXY']"
                                          ".rsplit(':', 1)[1]))"))
        ip_a = h.container_ip(a["id"])
        r = h.exec(a["id"], hog)
        assert r["status"] == "ok", r
        held = sum(json.loads(r["stdout"]))
        try:
            # While A's connections are held (until released), B (the shared
            # `net`) fetches.
            t0 = time.monotonic()
            status, body = fetch(h, net, "http://allowed.test:%d/during-hog" % h.http.port)
            took = time.monotonic() - t0
            print("\n[proxy exhaustion] session A opened %d proxy connections; B's fetch "
                  "meanwhile: %s %r in %.2f s" % (held, status, body[:60], took))
            h.assert_daemon_fine()
        finally:
            st, _ = h.api.request("PUT", "/v1/sessions/%s/files/release" % a["id"], raw=b"")
            assert st == 201, st
        # Once A's holders are gone (the proxy has closed every connection
        # from A), B fetches again (so the refusal above would have been the
        # exhaustion, not something else).
        wait_for(lambda: not open_connections(proxy_port, ip_a), 30,
                 what="the proxy to close session A's connections")
        s2, b2 = fetch(h, net, "http://allowed.test:%d/after-hog" % h.http.port)
        print("[proxy exhaustion] after A's connections closed, B's fetch: %s" % s2)
        assert s2 == 200 and b2 == h.http.body.decode(), (s2, b2)
        assert status == 200 and body == h.http.body.decode(), \
            "DAEMON BUG: with %d proxy connections held by another session, B got %s %r" % (
                held, status, body[:200])
    h.assert_daemon_fine()
