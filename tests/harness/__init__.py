"""The test harness shared by every suite (integration, hostile, chaos, the
runner's own tests) and by the benchmarks (tests/bench/).

Importable as `harness` once tests/ is on sys.path: tests/conftest.py puts it
there for pytest, the bench scripts do it themselves.

  harness.daemon   Daemon (a real ci-daemon of the test's own), remove_state_dir,
                   parse_time, ROOT, DAEMON_BIN, CTL_BIN
  harness.redis    RedisServer (its own server on a free loopback port)
  harness.http     Client, the one HTTP client; raw_connect / raw_exchange for
                   bytes that are malformed on purpose; free_port
  harness.wait     wait_for(cond, timeout, what=...): the only way to wait
  harness.procfs   process and socket state from /proc, to wait on
  harness.servers  HTTP, recording and listening servers of the test's own
  harness.fake_llm FakeLLM, a scripted OpenAI-compatible chat completions
                   server standing in for the fixer model
  harness.images   image_tag: the sandbox image's tag the daemon under test
                   uses (CID_IMAGES), for a test's own containers
  harness.stats    percentile
  harness.measure  measurements a test checks and a benchmark reports
                   (idle expiry lateness)
  harness.fixtures the pytest fixtures (tmpdir_session, redis_server, daemon,
                   make_daemon, api, session)

Rules the package is built to keep: every process a test starts is stopped
by its pid, everything a daemon made is removed by its label and key prefix
even when a test fails, every request has a timeout, every destination is on
this machine, and nothing waits by sleeping.
"""
from .daemon import CTL_BIN, DAEMON_BIN, ROOT, Daemon, known_options, parse_time, remove_state_dir
from .fake_llm import FakeLLM
from .http import Client, Response, free_port, raw_connect, raw_exchange, status_of
from .images import image_tag
from .redis import RedisServer
from .stats import percentile
from .wait import wait_for

__all__ = ["CTL_BIN", "DAEMON_BIN", "ROOT", "Client", "Daemon", "FakeLLM", "RedisServer", "Response",
           "free_port", "image_tag", "known_options", "parse_time", "percentile", "raw_connect", "raw_exchange", "remove_state_dir",
           "status_of", "wait_for"]
