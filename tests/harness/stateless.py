"""The stateless tier through build/tools/stateless-run (the ASan build in the
suites: next to CITEST_DAEMON), for tests/integration/test_stateless.py,
tests/hostile/test_stateless_escape.py and tests/bench/stateless.py.

Each StatelessTool has a --sandbox-uid-base of its own, so the host uids its
runs get (base-1 down to base-1-max_running, the last one the start check's)
are this tool's only: "no process left" is then a scan of /proc for them.
"""
import json
import os
import random
import subprocess

from .daemon import DAEMON_BIN, ROOT, SANITIZER_MARKS

_default_tool = os.path.join(os.path.dirname(DAEMON_BIN), "tools", "stateless-run")
if not os.path.exists(_default_tool):
    _default_tool = os.path.join(ROOT, "build", "tools", "stateless-run")
TOOL_BIN = os.environ.get("CITEST_STATELESS_RUN", _default_tool)


def host_uid_procs(uids):
    """[(pid, uid, state)] of every process (zombies too) whose real uid is in uids."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/status" % name) as f:
                text = f.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "-1").split()[0])
        if uid in uids:
            out.append((int(name), uid, fields.get("State", "?").strip()))
    return out


class StatelessTool:
    def __init__(self, *args, max_running=4):
        self.uid_base = random.randrange(300_000, 2_000_000_000, 100)
        self.max_running = max_running
        self.args = ["--sandbox-uid-base", str(self.uid_base),
                     "--stateless-max-running", str(max_running)] + list(args)

    @property
    def uids(self):
        """Every host uid this tool's runs may have (the start check's included)."""
        return set(range(self.uid_base - 1 - self.max_running, self.uid_base))

    @property
    def slot_uids(self):
        """The uids of the runs proper (the start check's left out)."""
        return set(range(self.uid_base - self.max_running, self.uid_base))

    def popen(self, code, *args):
        """The tool started on code (for a test that watches it while it runs)."""
        p = subprocess.Popen([TOOL_BIN] + self.args + list(args), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(code.encode() if isinstance(code, str) else code)
        p.stdin.close()
        p.stdin = None                 # so that communicate() leaves it alone
        return p

    def popen_with_pid(self, make_code, *args):
        """The tool started, then fed make_code(its pid) (code that aims at it)."""
        p = subprocess.Popen([TOOL_BIN] + self.args + list(args), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(make_code(p.pid).encode())
        p.stdin.close()
        p.stdin = None
        return p

    def results(self, code, *args, timeout=120):
        """Every line the tool printed (one per call), parsed; fails on a
        sanitizer report or a non-zero exit."""
        p = self.popen(code, *args)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
        err = err.decode(errors="replace")
        assert p.returncode == 0, "stateless-run exited %d: %s" % (p.returncode, err)
        for mark in SANITIZER_MARKS:
            assert mark not in err, err
        return [json.loads(line) for line in out.decode().splitlines() if line.strip()]

    def run(self, code, *args, timeout=120):
        """The one exec result of running code once."""
        rs = self.results(code, *args, timeout=timeout)
        assert len(rs) == 1, rs
        return rs[0]
