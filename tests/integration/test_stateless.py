"""The stateless tier (issue 12, item 4): stdlib-only python3 run once in
bubblewrap, through build/tools/stateless-run (the daemon's objects on an
event loop; the run engine that uses the tier is built apart). Real bwrap,
real processes: the result has the kernel's shape, nothing persists,
output is capped, and a deadline kills everything the code started."""
import json
import os
import time

import pytest

from harness import wait_for
from harness.stateless import StatelessTool, host_uid_procs

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"),
                                reason="bubblewrap is not installed (deploy/setup.sh)")


@pytest.fixture
def tool():
    return StatelessTool()


def assert_nothing_left(tool):
    wait_for(lambda: not host_uid_procs(tool.uids), 10,
             what="no process of the tier's uids %s left" % sorted(tool.uids))


def test_stdout_stderr_and_the_last_value(tool):
    r = tool.run("import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n6 * 7\n")
    assert r["status"] == "ok", r
    assert r["stdout"] == "to out\n"
    assert r["stderr"] == "to err\n"
    assert r["result"] == "42"
    assert r["error"] is None
    assert r["files"] == [] and r["display"] == []
    assert r["kernel"] == "preserved" and r["reason"] is None


def test_no_value_when_the_last_statement_is_not_an_expression(tool):
    r = tool.run("x = 1\n")
    assert r["status"] == "ok" and r["result"] is None


def test_a_traceback_like_the_kernels(tool):
    r = tool.run("def f(d):\n    return d['missing']\n\nf({})\n")
    assert r["status"] == "error", r
    e = r["error"]
    assert e["ename"] == "KeyError" and e["evalue"] == "'missing'"
    tb = e["traceback"]
    assert tb[0] == "Traceback (most recent call last):"
    # The cell is named like the kernel's; the runner's own frames are gone.
    # one line per entry: a frame, then its source line
    assert tb[1] == '  File "<cell-1>", line 4, in <module>' and tb[2].strip() == "f({})", tb
    i = tb.index('  File "<cell-1>", line 2, in f')
    assert tb[i + 1].strip() == "return d['missing']", tb
    assert all("\n" not in line for line in tb), tb
    assert tb[-1] == "KeyError: 'missing'"
    assert not any("<string>" in line for line in tb), tb


def test_a_syntax_error(tool):
    r = tool.run("def broken(:\n")
    assert r["status"] == "error"
    assert r["error"]["ename"] == "SyntaxError"
    assert any("<cell-1>" in line for line in r["error"]["traceback"])


def test_sys_exit_zero_is_ok_and_nonzero_is_an_error(tool):
    assert tool.run("import sys\nprint('a')\nsys.exit(0)\n")["status"] == "ok"
    r = tool.run("import sys\nsys.exit(3)\n")
    assert r["status"] == "error" and r["error"]["ename"] == "SystemExit"


def test_the_stdlib_works(tool):
    code = ("import json, re, math, statistics, csv, io, collections, datetime, sqlite3, hashlib\n"
            "con = sqlite3.connect(':memory:')\n"
            "con.execute('create table t(x)'); con.executemany('insert into t values (?)', [(1,), (2,), (4,)])\n"
            "rows = con.execute('select sum(x) from t').fetchone()[0]\n"
            "buf = io.StringIO(); csv.writer(buf).writerow(['a', 1])\n"
            "json.dumps({'sum': rows, 'mean': statistics.mean([1, 2, 3]), 'csv': buf.getvalue(),\n"
            "            'sqrt': math.sqrt(16), 'h': hashlib.sha256(b'x').hexdigest()[:8]})\n")
    r = tool.run(code)
    assert r["status"] == "ok", r
    assert r["result"] == repr('{"sum": 7, "mean": 2, "csv": "a,1\\r\\n", "sqrt": 4.0, "h": "2d711642"}')


# pytest and openpyxl are installed on this host (deploy/setup.sh), in
# /usr/lib/python3/dist-packages: importable only when site runs, so they
# prove that -S is in force (numpy and pandas may simply be missing).
@pytest.mark.parametrize("module", ["numpy", "pandas", "pytest", "openpyxl"])
def test_third_party_packages_are_absent(tool, module):
    # -S keeps site-packages (and Debian's dist-packages) off sys.path even
    # where the host has them installed.
    r = tool.run("import %s\n" % module)
    assert r["status"] == "error"
    assert r["error"]["ename"] == "ModuleNotFoundError", r["error"]


def test_nothing_persists_between_two_runs(tool):
    r = tool.run("open('/workspace/kept.txt', 'w').write('x')\n"
                 "open('/tmp/kept.txt', 'w').write('x')\n"
                 "import os\nsorted(os.listdir('/workspace'))\n")
    assert r["status"] == "ok" and r["result"] == "['kept.txt']", r
    r = tool.run("import os\n(os.listdir('/workspace'), os.listdir('/tmp'), os.getcwd())\n")
    assert r["status"] == "ok"
    assert r["result"] == "([], [], '/workspace')"


def test_output_is_capped_head_and_tail(tool):
    r = tool.run("import sys\nfor i in range(200000):\n    print('line %06d' % i)\n",
                 "--output-cap-bytes", "4096")
    assert r["status"] == "ok"
    assert r["stdout_truncated"] is True
    out = r["stdout"]
    assert out.startswith("line 000000\n")
    assert out.endswith("line 199999\n")       # the tail is kept, like the kernel's
    assert "bytes truncated" in out
    assert len(out) < 4096 + 200


def test_binary_output_does_not_break_the_result(tool):
    r = tool.run("import os\nos.write(1, b'\\xff\\xfe ok\\n')\n")
    assert r["status"] == "ok" and r["stdout"].endswith(" ok\n")


@pytest.mark.parametrize("code", ["while True:\n    pass\n", "import time\ntime.sleep(600)\n"])
def test_a_timeout_ends_in_time_and_leaves_no_process(tool, code):
    # The code also forks children in new sessions that would outlive it
    # without the pid namespace.
    spawner = ("import os, time\n"
               "for i in range(3):\n"
               "    if os.fork() == 0:\n"
               "        os.setsid()\n"
               "        time.sleep(600)\n"
               "        os._exit(0)\n")
    p = tool.popen(spawner + code, "--stateless-timeout-s", "2")
    wait_for(lambda: len([x for x in host_uid_procs(tool.uids) if x[2][0] != "Z"]) >= 5, 30,
             what="the code and its children running")
    t0 = time.monotonic()
    out, err = p.communicate(timeout=60)
    r = json.loads(out.decode().splitlines()[0])
    assert r["status"] == "timeout", r
    assert "2s deadline" in r["reason"]
    assert 1900 <= r["duration_ms"] < 30000
    assert time.monotonic() - t0 < 30
    assert_nothing_left(tool)


def test_a_run_without_timeout_leaves_no_background_process(tool):
    r = tool.run("import subprocess\np = subprocess.Popen(['sleep', '600'])\np.pid > 0\n")
    assert r["status"] == "ok" and r["result"] == "True", r
    assert_nothing_left(tool)


def test_beyond_max_running_the_tier_is_busy():
    tool = StatelessTool(max_running=1)
    rs = tool.results("import time\ntime.sleep(1)\n", "--runs", "2", "--parallel", "2")
    statuses = sorted(r.get("status") or r["error"]["message"] for r in rs)
    assert statuses == ["ok", "the stateless tier is busy"], rs
    busy = [r for r in rs if "error" in r and isinstance(r["error"], dict) and "code" in r["error"]]
    assert busy[0]["error"]["code"] == "unavailable"


def test_an_unusable_bwrap_makes_the_tier_unavailable(tmp_path):
    tool = StatelessTool("--stateless-bwrap", str(tmp_path / "no-such-bwrap"))
    r = tool.run("1\n", "--no-wait")
    assert r["error"]["code"] == "unavailable", r


def test_runs_one_after_another_reuse_the_slots(tool):
    rs = tool.results("1 + 1\n", "--runs", "6", "--parallel", "3")
    assert [r["result"] for r in rs] == ["2"] * 6
    assert_nothing_left(tool)


SLEEPER = ("import os, time\n"
           "if os.fork() == 0:\n"
           "    os.setsid()\n"
           "    time.sleep(600)\n"
           "time.sleep(600)\n")


def running_procs(tool):
    return [x for x in host_uid_procs(tool.uids) if x[2][0] != "Z"]


def test_a_cancelled_run_is_killed_and_reaped(tool):
    # The deadline (60 s) is past the tool's 10 s wait for the reaping, so
    # only the cancel can have ended it.
    r = tool.results(SLEEPER, "--cancel-after-ms", "1500", "--stateless-timeout-s", "60")
    # No callback for the cancelled call; the tier reaped it (running 0).
    assert r == [{"cancelled": 1, "running": 0}], r
    assert_nothing_left(tool)


def test_the_daemon_dying_takes_the_runs_with_it(tool):
    p = tool.popen(SLEEPER)
    try:
        wait_for(lambda: len(running_procs(tool)) >= 3, 30,
                 what="bwrap, the code and its detached child")
    finally:
        p.kill()                       # SIGKILL: no clean-up code runs
        p.communicate(timeout=30)
    # bwrap dies with its parent (PR_SET_PDEATHSIG), python with bwrap
    # (--die-with-parent), the rest with python's pid namespace.
    assert_nothing_left(tool)


def test_option_bounds():
    import subprocess
    from harness.stateless import TOOL_BIN
    for args, msg in ((["--stateless-timeout-s", "61"], "stateless-timeout-s: 61 is outside 1..60"),
                      (["--stateless-max-running", "0"], "is outside 1..32"),
                      (["--stateless-memory-mb", "8"], "is outside 64..4096"),
                      # its uids go below the sessions' range, never below 1000
                      (["--sandbox-uid-base", "1002"], "leaves no room for its uids")):
        p = subprocess.run([TOOL_BIN] + args, input=b"1", capture_output=True, timeout=30)
        assert p.returncode == 2 and msg in p.stderr.decode(), (args, p.stderr)
