"""The clients suite: the client libraries of clients/ against a live daemon
(the real ci-daemon, CITEST_DAEMON, with API keys on), started by the harness
and finished (stopped, sanitizer-checked, cleaned up) after the module.

  keyed_daemon  one daemon with an admin key, for the module
  tenant_key    a fresh tenant's key on it
  client_env    the environment a client reads (CI_SANDBOX_URL, _API_KEY)
"""
import os
import sys
import uuid

import pytest

from harness.daemon import Daemon

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY_CLIENT = os.path.join(ROOT, "clients", "python")
if PY_CLIENT not in sys.path:
    sys.path.insert(0, PY_CLIENT)


@pytest.fixture(scope="module")
def keyed_daemon(redis_server, tmpdir_session):
    d = Daemon(redis_server, tmpdir_session, ("--pool-size", "0"), admin_key=uuid.uuid4().hex)
    yield d
    d.finish()


@pytest.fixture
def tenant_key(keyed_daemon):
    return keyed_daemon.key("cl-" + uuid.uuid4().hex[:8])["key"]


@pytest.fixture
def url(keyed_daemon):
    return "http://127.0.0.1:%d" % keyed_daemon.port
