"""Shared by every suite under tests/: puts tests/ on sys.path, so that the
harness package (tests/harness/) is importable as `harness`, and makes the
harness's fixtures visible to every suite."""
import os
import signal
import sys

# A suite started in the background by a script (`make test &`, a lane of
# tests/run-all.sh, a CI step under nohup) inherits SIGINT ignored, and an
# ignored signal stays ignored across exec: every ci-ctl a test then sends
# ^C would ignore it too, as a program started with & should. The tests of
# ^C are about ci-ctl, not about how the suite was started: the suite's
# processes take SIGINT as Python does by default, and their children get
# the default action at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_TESTS = os.path.dirname(os.path.abspath(__file__))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

# pylint: disable=wrong-import-position,unused-import
from harness.fixtures import api, daemon, make_daemon, redis_server, session, tmpdir_session  # noqa: E402,F401
