"""Finding 13: a networked session lost egress after any daemon restart: the
proxy bound a random port at each start and the firewall opened only the new
one, while adopted containers kept the old proxy URL in their environment.

The proxy now listens on a fixed port (--egress-proxy-port, default 3128) on
the sandbox bridge's gateway, so the URL a container was started with stays
right. Here: a networked session with a variable set, the daemon killed -9
and started again, then stopped with SIGTERM and started again; each time
egress through the proxy to our own HTTP server on 127.0.0.1 (a made-up name
in a hosts file, hosts-only resolver, trusted loopback port) works and the
variable is intact.
"""
import json
import signal

import pytest

from chaos_lib import exec_code, exec_value, record, request
from harness import wait_for
from harness.servers import HttpServer

FETCH = r"""
import json, os, urllib.request
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return [r.status, r.read().decode(errors='replace')]
    except Exception as e:
        return [None, repr(e)]
print(json.dumps([os.environ.get('HTTP_PROXY'), fetch(%r)]))
"""


@pytest.fixture
def web():
    srv = HttpServer(b"hello from the chaos suite's own server\n")
    yield srv.port
    srv.stop()


def _fetch(d, sid, url):
    status, doc, _ = exec_code(d, sid, FETCH % url, timeout=20)
    if status != 200 or doc["status"] != "ok":
        return None, [None, "exec: %s %s" % (status, doc)]
    return json.loads(doc["stdout"].strip().splitlines()[-1])


def _egress_works(d, sid, url, bound=30):
    """Wait (bounded) until a fetch through the proxy succeeds; returns the
    proxy URL the sandbox used and the tries it took."""
    tries = []

    def ok():
        proxy, (status, body) = _fetch(d, sid, url)
        tries.append((status, body[:80]))
        return proxy if status == 200 and "chaos suite's own server" in body else None

    try:
        return wait_for(ok, bound, interval=0.2, what="egress through the proxy"), tries
    except AssertionError:
        raise AssertionError("no egress within %ss after the restart: %s\n%s"
                             % (bound, tries[-3:], d.read_log()[-3000:]))


def test_egress_survives_kill9_and_sigterm_restarts(chaos, web, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 web.test\n")
    d = chaos("--egress-resolver", "hosts-only", "--egress-hosts-file", str(hosts),
              "--egress-trusted", "127.0.0.1:%d" % web, "--pool-size", "0")
    url = "http://web.test:%d/" % web
    status, s, _ = request(d, "POST", "/v1/sessions", {"network": {"allow": ["web.test:%d" % web]}},
                           timeout=60)
    assert status == 201, s
    sid = s["id"]
    assert exec_value(d, sid, "x = 41; x") == "41"
    proxy0, _ = _egress_works(d, sid, url, bound=10)
    assert proxy0.endswith(":3128"), proxy0  # the fixed default port

    d.kill()
    d.restart()
    proxy1, tries = _egress_works(d, sid, url)
    record("kill -9: fetches before egress worked again", len(tries) - 1)
    assert proxy1 == proxy0
    assert exec_value(d, sid, "x += 1; x") == "42"

    d.stop(signal.SIGTERM)
    mark = d.log_mark()
    d.restart()
    proxy2, tries = _egress_works(d, sid, url)
    record("SIGTERM: fetches before egress worked again", len(tries) - 1)
    assert proxy2 == proxy0
    assert exec_value(d, sid, "x") == "42"
    # One listener, on the gateway, at the same port as before. (The proxy
    # takes connections a moment before the daemon logs the network ready:
    # wait for the line, then look at it.)
    d.wait_log("proxy %s" % proxy0, since=mark)
    assert "proxy %s" % proxy0 in d.read_log().split("ci-daemon listening on")[-1], \
        d.read_log()[-2000:]

