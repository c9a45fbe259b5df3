"""Issue 11: SIGHUP reloads the options the table marks live and names
those that need a restart (the harness's own flags are on the command line,
which beats the file, so these tests change options only the file sets)."""
import json
import signal
import subprocess

from harness import wait_for
from harness.servers import HttpServer


def write_config(path, **options):
    path.write_text("".join("%s = %s\n" % (k.replace("_", "-"), v) for k, v in options.items()))


def hup(d):
    mark = d.log_mark()
    d.proc.send_signal(signal.SIGHUP)
    d.wait_log("SIGHUP: configuration", since=mark)
    return d.log_since(mark)


def containers_of(d):
    out = subprocess.run(["docker", "ps", "-q", "--filter", "label=ci.prefix=" + d.prefix],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def test_pool_size_follows_the_file(make_daemon, tmp_path):
    conf = tmp_path / "ci.conf"
    write_config(conf, pool_size=0)
    d = make_daemon("--config", str(conf))
    assert d.metric("ci_pool_size") == 0
    write_config(conf, pool_size=2)
    said = hup(d)
    assert "SIGHUP: pool-size: 0 -> 2" in said, said
    assert "1 options applied, 0 need a restart" in said, said
    wait_for(lambda: d.metric("ci_pool_size") == 2, 90, interval=0.2, what="a pool of 2")
    write_config(conf, pool_size=1)
    said = hup(d)
    assert "SIGHUP: pool-size: 2 -> 1" in said, said
    wait_for(lambda: d.metric("ci_pool_size") == 1 and len(containers_of(d)) == 1, 60,
             interval=0.2, what="the pool shrunk to 1, its container removed")
    # Still serving from the pool.
    hits = d.metric("ci_pool_hits_total")
    s = d.api.create()
    try:
        assert d.metric("ci_pool_hits_total") == hits + 1
        assert d.api.exec(s["id"], "6*7")["result"] == "42"
    finally:
        d.api.delete(s["id"])


def test_restart_options_are_named_and_nothing_is_silent(make_daemon, tmp_path):
    conf = tmp_path / "ci.conf"
    write_config(conf, pool_size=0)
    d = make_daemon("--config", str(conf))
    said = hup(d)
    assert "no option changed" in said, said
    write_config(conf, pool_size=0, fd_reserve=100, tombstone_ttl_s=60, max_body_bytes=4096)
    said = hup(d)
    assert "SIGHUP: fd-reserve changed: needs a restart; still 64 (the file says 100)" in said
    assert "SIGHUP: tombstone-ttl-s changed: needs a restart; still 86400" in said, said
    assert "SIGHUP: max-body-bytes: 2097152 -> 4096" in said, said
    assert "1 options applied, 2 need a restart" in said, said
    assert "no option changed" not in said and "changed: nothing" not in said
    # Applied: a body over the new cap is refused.
    status, doc = d.api.request("POST", "/v1/sessions", raw=b"{" + b" " * 5000 + b"}",
                                headers={"Content-Type": "application/json"})
    assert status == 413, (status, doc)
    # The restart ones are said again on the next reload: they still differ.
    said = hup(d)
    assert "fd-reserve changed: needs a restart" in said and "0 options applied" in said, said
    # A file that does not validate changes nothing.
    write_config(conf, pool_size=0, memory_mb=999999999)
    said = hup(d)
    assert "configuration not reloaded" in said, said
    write_config(conf, pool_size=0, fd_reserve=100, tombstone_ttl_s=60, max_body_bytes=4096,
                 memory_mb=4096, max_memory_mb=1024)
    said = hup(d)
    assert "configuration not reloaded: memory-mb exceeds max-memory-mb" in said, said


FETCH = """
import json, urllib.request, urllib.error
try:
    with urllib.request.urlopen(%r, timeout=20) as r:
        print(json.dumps([r.status, r.read().decode()]))
except urllib.error.HTTPError as e:
    print(json.dumps([e.code, e.read().decode(errors="replace")]))
"""


def test_egress_trusted_follows_the_file(make_daemon, tmp_path):
    server = HttpServer(body=b"hello from the test's own server")
    port = server.port
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 allowed.test\n")
    conf = tmp_path / "ci.conf"
    base = {"pool_size": 0, "egress_resolver": "hosts-only", "egress_hosts_file": str(hosts)}
    write_config(conf, **base)
    try:
        d = make_daemon("--config", str(conf))
        s = d.api.create(network={"allow": ["allowed.test:%d" % port]})
        url = "http://allowed.test:%d/" % port
        try:
            r = d.api.exec(s["id"], FETCH % url)
            status, body = json.loads(r["stdout"].strip().splitlines()[-1])
            assert status == 403, (status, body)  # loopback, not trusted
            write_config(conf, egress_trusted="127.0.0.1:%d" % port, **base)
            said = hup(d)
            assert 'SIGHUP: egress-trusted: "" -> 127.0.0.1:%d' % port in said, said
            r = d.api.exec(s["id"], FETCH % url)
            status, body = json.loads(r["stdout"].strip().splitlines()[-1])
            assert status == 200 and "hello from the test" in body, (status, body)
            # And back.
            write_config(conf, **base)
            hup(d)
            r = d.api.exec(s["id"], FETCH % url)
            status, body = json.loads(r["stdout"].strip().splitlines()[-1])
            assert status == 403, (status, body)
        finally:
            d.api.delete(s["id"])
    finally:
        server.stop()
