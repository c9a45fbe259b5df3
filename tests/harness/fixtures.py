"""The pytest fixtures every suite shares (tests/conftest.py makes them
visible to all of them).

  tmpdir_session  a directory for the run's logs and servers (kept afterwards,
                  for the daemon logs)
  redis_server    the run's own Redis
  daemon          one daemon for the tests that need no special flags
  make_daemon     make(*flags, **options) -> a Daemon of the test's own,
                  finished (stopped, sanitizer-checked, cleaned up) after it
  api             the shared daemon's Client
  session         a fresh session on the shared daemon, deleted afterwards
"""
import tempfile

import pytest

from .daemon import Daemon
from .redis import RedisServer


@pytest.fixture(scope="session")
def tmpdir_session():
    return tempfile.mkdtemp(prefix="citest-")


@pytest.fixture(scope="session")
def redis_server(tmpdir_session):
    r = RedisServer(tmpdir_session)
    yield r
    r.stop()


@pytest.fixture(scope="session")
def daemon(redis_server, tmpdir_session):
    """One daemon shared by the tests that need no special configuration."""
    d = Daemon(redis_server, tmpdir_session)
    yield d
    d.finish()


@pytest.fixture
def make_daemon(redis_server, tmpdir_session):
    """A factory for daemons with their own flags (and Daemon's options:
    nofile, env), finished after the test."""
    made = []

    def make(*extra, **options):
        d = Daemon(redis_server, tmpdir_session, extra, **options)
        made.append(d)
        return d

    yield make
    errors = []
    for d in made:
        try:
            d.finish()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


@pytest.fixture
def api(daemon):
    return daemon.api


@pytest.fixture
def session(daemon):
    """A fresh session, deleted afterwards."""
    s = daemon.api.create()
    yield s
    daemon.api.delete(s["id"])
