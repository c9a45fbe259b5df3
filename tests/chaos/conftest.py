"""Fixtures for the chaos suite (issue 5). The helpers live in chaos_lib.py,
the shared ones (Daemon, RedisServer, wait_for, the run's Redis and its
temporary directory) in the harness (tests/harness/).

  chaos             a factory of daemons; after each test it checks that
                    nothing is orphaned (every container of the daemon's
                    prefix runs for a live session, every live session has its
                    container), deletes every session, checks that no
                    container is left, stops the daemon (sanitizer reports in
                    its log fail the test) and removes what it made by label.
  restartable_redis a Redis of our own that a test may kill and start again.
  docker_forwarder  the daemon's way to the engine, which a test may cut.
At the end of the run no container of any prefix this run used may remain.
"""
import os
import subprocess

import pytest

import chaos_lib as lib
from harness import Daemon, RedisServer, wait_for


def pytest_terminal_summary(terminalreporter):
    if lib.MEASURED:
        terminalreporter.section("chaos measurements")
        for name, value in lib.MEASURED.items():
            terminalreporter.write_line("%s: %s" % (name, value))


def _delete_all_and_check(d):
    """Delete every live session; afterwards no container of the prefix may
    remain but the warm pool's."""
    for sid in lib.live_ids(d):
        status, doc, _ = lib.request(d, "DELETE", "/v1/sessions/%s" % sid, timeout=30)
        assert status in (204, 404, 410), (sid, status, doc)
    wait_for(lambda: len(d.containers()) <= lib.pool_ready(d), 15, interval=0.1,
                 what="no container of %s but the warm pool's after deleting every session"
                 % d.prefix)


def _finish(d):
    """Check, empty and stop one daemon; returns the problems found."""
    problems = []
    if d.proc is not None and d.proc.poll() is None:
        try:
            lib.assert_nothing_orphaned(d, timeout=5)
        except Exception as e:  # noqa: BLE001 - collected, reported below
            problems.append("nothing orphaned: %s" % e)
        try:
            if problems:  # already reported: delete, but do not wait for more
                for sid in lib.live_ids(d):
                    lib.request(d, "DELETE", "/v1/sessions/%s" % sid, timeout=30)
            else:
                _delete_all_and_check(d)
        except Exception as e:  # noqa: BLE001
            problems.append("delete every session: %s" % e)
    try:
        d.finish()  # stop, sanitizer check, cleanup by label
    except AssertionError as e:
        problems.append(str(e))
    if problems:
        problems.append("(daemon log: %s)" % d.log_path)
    return problems


@pytest.fixture
def chaos(redis_server, tmpdir_session):
    """make(*flags, redis=None) starts a daemon (on the suite's Redis unless
    given another); each is checked, emptied and stopped after the test."""
    made = []

    def make(*flags, redis=None):
        d = Daemon(redis or redis_server, tmpdir_session, flags)
        lib.PREFIXES.append(d.prefix)
        made.append(d)
        return d

    yield make
    problems = []
    for d in made:
        problems += _finish(d)
    assert not problems, "after the test:\n" + "\n".join(problems)


@pytest.fixture
def restartable_redis(tmpdir_session):
    r = RedisServer(tmpdir_session)
    yield r
    r.stop()


@pytest.fixture
def docker_forwarder(tmpdir_session):
    f = lib.DockerForwarder(os.path.join(tmpdir_session, "docker-fwd-%d.sock" % os.getpid()))
    yield f
    f.close()


@pytest.fixture(scope="session", autouse=True)
def nothing_left_at_the_end():
    yield
    left = {}
    for prefix in lib.PREFIXES:
        found = lib.docker_containers(prefix)
        if found:
            left[prefix] = found
            # Never leave them behind, even when this check fails.
            subprocess.run(["docker", "rm", "-f", *found], capture_output=True, timeout=120)
    assert not left, "containers left at the end of the chaos run: %s" % left
