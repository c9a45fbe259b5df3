"""Finding 6: after a PATCH narrowed the allowlist, a tunnel opened before kept
working; a deleted session's tunnels lived on until its sandbox went.

Now a PATCH closes every open tunnel and plain-HTTP upstream connection of the
session that the new list no longer permits (and leaves the others alone),
and the end of a session closes all of its proxy connections at once. Seen
from inside the sandbox (its end of the tunnel reads EOF) and at our own
recording server on 127.0.0.1 (its end closes).
"""

# Runs in the sandbox: tunnels and a plain-HTTP request kept open in globals,
# so that the next execution (after the PATCH) can look at them.
OPEN = r"""
import json, os, socket, urllib.parse
p = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
def tunnel(host, port, hello):
    c = socket.create_connection((p.hostname, p.port), timeout=15)
    c.sendall(b'CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n' % (host, port, host, port))
    got = b''
    while b'\r\n\r\n' not in got:
        chunk = c.recv(4096)
        if not chunk:
            break
        got += chunk
    c.sendall(hello)
    return c, got.split(b'\r\n')[0].decode()
def plain(host, port):
    # the recorder never answers /hold: the request stays in flight
    c = socket.create_connection((p.hostname, p.port), timeout=15)
    c.sendall(b'GET http://%s:%d/hold HTTP/1.1\r\nHost: %s:%d\r\n\r\n' % (host, port, host, port))
    return c, 'sent'

held = {}
"""

# Runs in the sandbox: whether each held connection was closed by the proxy.
STATE = r"""
import json, socket
def state(c):
    c.settimeout(10)
    try:
        data = c.recv(4096)
    except socket.timeout:
        return 'open'
    except OSError as e:
        return 'closed:' + type(e).__name__
    return 'closed' if data == b'' else 'data:' + data.decode(errors='replace')
print(json.dumps({k: state(c) for k, c in sorted(held.items())}))
"""


def _recorded(h, before, marker):
    return [c for c in h.recorder.since(before) if marker in c["data"]]


def test_patch_closes_the_tunnels_it_no_longer_permits(hostile):
    h = hostile
    rec, web = h.recorder.port, h.http.port
    before = h.recorder.count()
    with h.victim(network={"allow": ["allowed.test:%d" % rec, "later.test:%d" % web]}) as s:
        out = h.run_json(s, OPEN + r"""
held['tunnel'], a = tunnel(b'allowed.test', %d, b'TUNNEL-1 hello')
held['plain'], b = plain(b'allowed.test', %d)
held['kept'], c = tunnel(b'later.test', %d, b'')
print(json.dumps([a, b, c]))
""" % (rec, rec, web))
        assert out == ["HTTP/1.1 200 Connection established", "sent",
                       "HTTP/1.1 200 Connection established"], out
        h.wait_for(lambda: len(_recorded(h, before, b"TUNNEL-1")) == 1 and
                   len(_recorded(h, before, b"GET /hold ")) == 1, 10,
                   what="the tunnel and the request at the recorder")
        assert not any(c["closed"] for c in h.recorder.since(before))
        closed_before = h.metric("ci_egress_closed_total", 0)
        # Narrow the list: allowed.test goes, later.test stays.
        st, doc = h.api.request("PATCH", "/v1/sessions/%s" % s["id"],
                                body={"network": {"allow": ["later.test:%d" % web]}})
        assert st == 200, (st, doc)
        # At the recorder: both connections to allowed.test are closed.
        h.wait_for(lambda: all(c["closed"] for c in h.recorder.since(before)), 10,
                   what="the proxy to close the tunnel and the request to allowed.test")
        # In the sandbox: the two see EOF; the tunnel to later.test is open
        # and still works (a request through it gets our HTTP server's page).
        st = h.run_json(s, STATE.replace("sorted(held.items())",
                                         "sorted((k, c) for k, c in held.items() if k != 'kept')"))
        assert st == {"plain": "closed", "tunnel": "closed"}, st
        out = h.run_json(s, r"""
c = held['kept']
c.sendall(b'GET /still-open HTTP/1.0\r\nHost: later.test\r\n\r\n')
data = b''
while True:
    chunk = c.recv(65536)
    if not chunk:
        break
    data += chunk
print(json.dumps(data.decode(errors='replace')))
""")
        assert out.startswith("HTTP/1.0 200") and h.http.body.decode() in out, out
        assert h.metric("ci_egress_closed_total") == closed_before + 2
        # The PATCH did not widen anything: allowed.test is refused now.
        again = h.proxy_raw(s, [b"CONNECT allowed.test:%d HTTP/1.1\r\n\r\n" % rec])[0]
        assert again.startswith("HTTP/1.1 403"), again
    h.assert_daemon_fine()


def test_delete_closes_all_tunnels_of_the_session_at_once(hostile):
    h = hostile
    rec = h.recorder.port
    before = h.recorder.count()
    s = h.create(network={"allow": ["allowed.test:%d" % rec]})
    try:
        out = h.run_json(s, OPEN + r"""
for i in range(3):
    held['t%%d' %% i], st = tunnel(b'allowed.test', %d, b'TUNNEL-D%%d' %% i)
    assert st.endswith('200 Connection established'), st
print(json.dumps(len(held)))
""" % rec)
        assert out == 3
        h.wait_for(lambda: len(_recorded(h, before, b"TUNNEL-D")) == 3, 10,
                   what="three tunnels at the recorder")
        closed_before = h.metric("ci_egress_closed_total")
    finally:
        h.delete(s["id"])
    # The daemon closed them itself, when the session ended (not because the
    # sandbox went away: that is counted nowhere).
    assert h.metric("ci_egress_closed_total") == closed_before + 3
    h.wait_for(lambda: all(c["closed"] for c in _recorded(h, before, b"TUNNEL-D")), 10,
               what="the recorder to see every tunnel closed")
    assert "egress: session %s ended: 3 proxy connections closed" % s["id"] in h.d.read_log()
    h.assert_daemon_fine()
