"""Shared by every suite under tests/: puts tests/ on sys.path, so that the
harness package (tests/harness/) is importable as `harness`, and makes the
harness's fixtures visible to every suite."""
import os
import sys

_TESTS = os.path.dirname(os.path.abspath(__file__))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

# pylint: disable=wrong-import-position,unused-import
from harness.fixtures import api, daemon, make_daemon, redis_server, session, tmpdir_session  # noqa: E402,F401
