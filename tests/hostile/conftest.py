"""Fixtures for the hostile-code suite (issue 4). The shared daemon and the
checks every case ends with are in hostile_lib.py, the servers in
tests/harness/servers.py.

One daemon serves the whole suite. It is started with the egress flags the
network cases need:
  --egress-resolver    hosts-only: no DNS query is ever sent, whatever a case
                       asks for (test_egress_dns.py checks that it is so)
  --egress-hosts-file  names of our own: allowed.test/later.test/rebind.test ->
                       127.0.0.1; private.test -> the gateway (host side) of the
                       suite's own sandbox bridge, added once that network
                       exists (Hostile.map_private_name: the file is rewritten
                       and re-read on SIGHUP), refused as private before any
                       connect
  --egress-trusted     127.0.0.1:<port> of our HTTP server and of our recording
                       TCP server only
Servers of our own run on the host for the whole suite and are stopped at the
end: an HTTP server on 127.0.0.1 (the positive case), a recording TCP server
on 127.0.0.1 (it keeps every byte each connection brought, and when each
closed), a TCP and a UDP listener on 0.0.0.0 and a redis-server on 0.0.0.0
(the firewall cases: they record every peer, so a test can tell that nothing
from a sandbox reached them).
"""
import os

import pytest

from harness import Daemon, RedisServer
from harness.servers import HttpServer, Listeners, RecordingServer
from hostile_lib import HOSTS, Hostile


@pytest.fixture(scope="session")
def hostile(redis_server, tmpdir_session):
    http = HttpServer(("hello from the hostile suite's own server %s\n"
                       % os.urandom(8).hex()).encode())
    recorder = RecordingServer()
    listeners = Listeners()
    open_redis = RedisServer(tmpdir_session, bind="0.0.0.0", protected_mode=True)
    hosts = os.path.join(tmpdir_session, "hostile-hosts")
    with open(hosts, "w") as f:
        f.write(HOSTS)
    d = None
    try:
        # A small ASan quarantine, so the daemon's RSS (checked by the output
        # flood case) reflects what it holds rather than freed memory parked
        # by the sanitizer. Harmless for a build without ASan.
        asan = os.environ.get("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        d = Daemon(redis_server, tmpdir_session,
                   ("--egress-resolver", "hosts-only",
                    "--egress-hosts-file", hosts,
                    "--egress-trusted", "127.0.0.1:%d,127.0.0.1:%d" % (http.port, recorder.port),
                    "--kill-grace-ms", "1000",
                    # Cases count containers; a refilling pool would blur that.
                    "--pool-size", "0"),
                   env={"ASAN_OPTIONS": asan + ":quarantine_size_mb=16"})
        h = Hostile(d, http, recorder, listeners, open_redis, hosts)
        yield h
        h.close()
    finally:
        try:
            if d is not None:
                # stop, sanitizer check, then remove what carries this run's
                # label (containers, the sandbox network and its firewall
                # chain), even when a case failed
                d.finish()
        finally:
            open_redis.stop()
            listeners.stop()
            recorder.stop()
            http.stop()
