"""Sentinels that lie (issue 15, item 6): a daemon given --redis
sentinel://... where every sentinel is a fake of the test's own
(harness.sentinel.FakeSentinel, on loopback) that hangs, answers garbage,
gives a bogus address, gives a replica's address (a real redis-server that is
a replica), hangs up, names a "master" that never answers, or floods. The daemon keeps asking, each question bounded by
--redis-sentinel-timeout-ms, logs what each sentinel did wrong, answers
/readyz 503 naming Redis, never uses the replica, does not crash; once one
sentinel tells the truth it is ready on the real master."""
import pytest

from harness import Daemon, RedisServer, wait_for
from harness.sentinel import FakeSentinel


class _Target:
    """What the daemon's harness needs of its Redis: the URL it is given, and
    a cli() on the server its keys land in (for the cleanup)."""

    def __init__(self, url, real):
        self.url = url
        self.real = real

    def cli(self, *args):
        return self.real.cli(*args)


@pytest.fixture
def servers(tmpdir_session):
    real = RedisServer(tmpdir_session)
    replica = RedisServer(tmpdir_session, extra_args=["--replicaof", "127.0.0.1", str(real.port)])
    fakes = {}
    try:
        for mode in ("silent", "garbage", "bogus", "replica", "hangup"):
            fakes[mode] = FakeSentinel(mode, addr=("127.0.0.1", replica.port))
        # A sentinel naming a "master" that accepts and never answers (the
        # silent fake's port): ROLE must be bounded too.
        fakes["stalled"] = FakeSentinel("good", addr=("127.0.0.1", fakes["silent"].port))
        fakes["flood"] = FakeSentinel("flood")
        yield real, replica, fakes
    finally:
        for f in fakes.values():
            f.stop()
        replica.stop()
        real.stop()


def test_lying_sentinels_are_bounded_and_survived(servers, tmpdir_session):
    real, replica, fakes = servers
    order = [fakes[m] for m in ("silent", "garbage", "bogus", "replica", "hangup", "stalled",
                                    "flood")]
    url = "sentinel://%s/ci15-sentinel-hostile" % ",".join("127.0.0.1:%d" % f.port for f in order)
    d = Daemon(_Target(url, real), tmpdir_session,
               ("--redis-sentinel-timeout-ms", "300", "--pool-size", "0"), wait_ready=False)
    try:
        # It keeps asking: every sentinel that reads is asked again and again.
        wait_for(lambda: all(fakes[m].asked >= 3 for m in ("silent", "garbage", "bogus", "replica")),
                 30, interval=0.05, what="the daemon to keep asking every sentinel")
        p = "127.0.0.1:%d" % fakes["silent"].port
        for text in ("sentinel %s did not answer within 300 ms" % p,
                     "sentinel 127.0.0.1:%d answered garbage" % fakes["garbage"].port,
                     "sentinel 127.0.0.1:%d gave a bogus master address" % fakes["bogus"].port,
                     "127.0.0.1:%d, given by the sentinels as the master of ci15-sentinel-hostile, "
                     "is not a master (ROLE)" % replica.port,
                     "sentinel 127.0.0.1:%d: connection lost" % fakes["hangup"].port,
                     "127.0.0.1:%d, given by the sentinels as the master of ci15-sentinel-hostile, "
                     "did not answer ROLE within 3 s" % fakes["silent"].port,
                     "sentinel 127.0.0.1:%d sent more than 64 KiB; cut off" % fakes["flood"].port):
            d.wait_log(text, timeout=10)
        # A clear log, not a flood: each sentinel's problem once until it changes.
        assert d.read_log().count("did not answer within 300 ms") <= 2, d.read_log()[-3000:]

        status, doc = d.api.request("GET", "/readyz", timeout=5)
        assert status == 503, (status, doc)
        msg = doc["error"]["message"]
        assert "redis is not reachable: asking the sentinels for master ci15-sentinel-hostile" in msg
        assert doc["checks"]["redis"] == "down"
        assert doc["redis"]["resolving"] is True and doc["redis"]["master"] is None, doc
        assert d.api.request("GET", "/healthz", timeout=5)[0] == 200
        status, doc = d.api.request("POST", "/v1/sessions", body={}, timeout=10)
        assert status == 503, (status, doc)
        # The replica was never used: none of our keys there.
        assert replica.cli("--scan", "--pattern", d.prefix + "*") == ""

        # One sentinel tells the truth: the daemon is ready, on the real master.
        fakes["garbage"].addr = ("127.0.0.1", real.port)
        fakes["garbage"].mode = "good"
        wait_for(d.ready, 30, interval=0.05, what="/readyz 200 once a sentinel tells the truth")
        status, doc = d.api.request("GET", "/readyz", timeout=5)
        assert doc["redis"]["master"] == "127.0.0.1:%d" % real.port, doc
        assert d.proc.poll() is None
    finally:
        d.finish()


def test_a_master_demoted_under_the_daemon_is_left(tmpdir_session):
    """No +switch-master and no dropped connection: the master the daemon
    holds becomes a replica (REPLICAOF), and a sentinel (a fake that does not
    publish) now names the other server. The daemon's once-a-second ROLE check
    must notice, and it moves to the new master."""
    a = RedisServer(tmpdir_session)
    b = RedisServer(tmpdir_session)
    fake = FakeSentinel("good", addr=("127.0.0.1", a.port))
    d = None
    try:
        url = "sentinel://127.0.0.1:%d/ci15-sentinel-demoted" % fake.port
        d = Daemon(_Target(url, a), tmpdir_session, ("--pool-size", "0"))
        status, doc = d.api.request("GET", "/readyz", timeout=5)
        assert doc["redis"]["master"] == "127.0.0.1:%d" % a.port, doc
        mark = d.log_mark()
        fake.addr = ("127.0.0.1", b.port)
        assert a.cli("REPLICAOF", "127.0.0.1", str(b.port)) == "OK"
        d.wait_log("redis: master 127.0.0.1:%d moved to 127.0.0.1:%d" % (a.port, b.port),
                   timeout=15, since=mark)
        assert "leaving 127.0.0.1:%d: is not a master (ROLE)" % a.port in d.log_since(mark), \
            d.log_since(mark)
        wait_for(d.ready, 10, interval=0.05, what="/readyz 200 on the new master")
        sid = d.api.create()["id"]
        assert b.cli("EXISTS", d.prefix + "session:" + sid) == "1"
        d.api.delete(sid)
        d.redis = _Target(url, b)  # the cleanup finds the keys where they are now
    finally:
        if d is not None:
            d.finish()
        fake.stop()
        a.stop()
        b.stop()
