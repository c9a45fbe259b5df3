"""Runner tests of "language": "bash" | "javascript" (ci_lang.py), no daemon.

As test_runner.py: the test plays the daemon over the kernel protocol with
supervisor.py and kernel.py run on the host (bash and node from the host).

    /usr/bin/python3 -m pytest images/python/runner/test_lang.py -q
"""

import json
import os
import shutil
import signal
import subprocess

import pytest

from test_runner import T, sandbox
from harness import wait_for
from harness.procfs import alive, signal_pending

HAVE_NODE = shutil.which("node") is not None
needs_node = pytest.mark.skipif(not HAVE_NODE, reason="node is not installed")


def start(sb, code, lang, **caps):
    eid = sb.nid()
    h = {"t": "exec", "id": eid}
    if lang is not None:
        h["language"] = lang
    h.update(caps)
    sb.kern.send(h, code.encode())
    return eid


def collect(sb, eid, timeout=T):
    res = {"stdout": b"", "stderr": b"", "frames": []}
    while True:
        h, body = sb.kern.recv(timeout)
        assert h.get("id") == eid, h
        res["frames"].append((h, body))
        if h["t"] == "stream":
            res[h["name"]] += body
        elif h["t"] == "done":
            res.update({k: h[k] for k in ("status", "result", "error", "files")})
            return res


def run(sb, code, lang, **caps):
    return collect(sb, start(sb, code, lang, **caps))


def first_line(sb, eid):
    """The first stdout line of a running execution (its stream frames)."""
    got = b""
    while b"\n" not in got:
        h, body = sb.kern.recv()
        assert h["t"] == "stream" and h["id"] == eid, h
        got += body
    return got.split(b"\n")[0].decode()


def kill_kernel(sb):
    """What the daemon's hard timeout does: SIGKILL to the kernel; the
    supervisor reports it and starts another, which connects."""
    kpid = sb.kern.hello["pid"]
    os.kill(kpid, signal.SIGKILL)
    h, _ = sb.sup.recv()
    assert h["t"] == "kernel_exit" and h["pid"] == kpid and h["signal"] == 9, h
    sb.kern = sb.daemon.accept()


@pytest.fixture
def sb():
    with sandbox("cilang-") as s:
        yield s


@pytest.fixture(scope="module")
def shared():
    with sandbox("cilang-") as s:
        yield s


# ------------------------------------------------------------------ bash

def test_bash_state_and_exit_status(shared):
    r = run(shared, "mkdir -p sub && cd sub && greeting=hello\nf() { echo \"f:$1\"; }\necho ok",
            "bash")
    assert r["status"] == "ok" and r["result"] == "0" and r["error"] is None, r
    assert r["stdout"] == b"ok\n"
    r = run(shared, "echo \"$greeting $(basename \"$PWD\")\"; f 7", "bash")
    assert r["stdout"] == b"hello sub\nf:7\n" and r["result"] == "0", r
    r = run(shared, "echo out; echo err >&2; (exit 3)", "bash")
    assert r["status"] == "error" and r["result"] == "3", r
    assert r["error"]["ename"] == "ExitStatus" and r["error"]["evalue"] == "exit status 3"
    assert r["stdout"] == b"out\n" and r["stderr"] == b"err\n"
    # a bash cell does not move the Python kernel, nor touch its names
    r = run(shared, "import os; os.path.basename(os.getcwd()), 'greeting' in globals()", None)
    assert r["result"] == "('ws', False)", r


def test_bash_error_names_the_cell_line(shared):
    r = run(shared, "true\n\nno_such_command_xyz", "bash")
    assert r["status"] == "error" and r["result"] == "127", r
    assert b"line 3: no_such_command_xyz: command not found" in r["stderr"], r["stderr"]


def test_bash_files_are_reported(shared):
    r = run(shared, "cd \"$SANDBOX_WORKSPACE\" && printf 12345 > from_bash.txt", "bash")
    assert r["status"] == "ok", r
    assert {"path": "from_bash.txt", "size": 5, "change": "created"} in r["files"], r["files"]


def test_bash_exit_starts_a_new_shell(sb):
    run(sb, "kept=1; echo $$", "bash")
    r = run(sb, "exit 4", "bash")
    assert r["status"] == "error" and r["error"]["ename"] == "ChildExited", r
    assert "exited with status 4" in r["error"]["evalue"]
    r = run(sb, "echo \"[${kept-}]\"", "bash")
    assert r["status"] == "ok" and r["stdout"] == b"[]\n", r


def test_bash_output_cap(shared):
    r = run(shared, "head -c 300000 /dev/zero | tr '\\0' a; echo; echo tail-end", "bash",
            stdout_cap=10000, stderr_cap=10000)
    assert r["status"] == "ok", r
    tails = [h for h, _ in r["frames"] if h.get("tail")]
    assert len(tails) == 1 and tails[0]["dropped"] == 300000 + 1 + 9 - 10000, tails
    assert len(r["stdout"]) == 10000 and r["stdout"].endswith(b"a\ntail-end\n")


def test_bash_interrupt_keeps_the_shell(sb):
    run(sb, "kept=yes", "bash")
    kpid = sb.kern.hello["pid"]
    for code in ("echo $$; sleep 60; echo after", "echo $$; while :; do :; done; echo after",
                 "slow() { sleep 60; }; echo $$; slow; echo after"):
        eid = start(sb, code, "bash")
        first_line(sb, eid)
        os.kill(kpid, signal.SIGINT)
        r = collect(sb, eid)
        assert r["status"] == "error" and r["error"]["ename"] == "KeyboardInterrupt", (code, r)
        assert b"after" not in r["stdout"], (code, r)
    r = run(sb, "echo $kept", "bash")
    assert r["status"] == "ok" and r["stdout"] == b"yes\n", r


def test_bash_ignoring_sigint_is_ended_by_the_kernel_kill(sb):
    kpid = sb.kern.hello["pid"]
    eid = start(sb, "trap '' INT; sleep 60 & echo $$ $!; wait", "bash")
    shell, sleeper = (int(x) for x in first_line(sb, eid).split())
    os.kill(kpid, signal.SIGINT)
    wait_for(lambda: not signal_pending(kpid, signal.SIGINT), T,
             what="the kernel to take the SIGINT")
    wait_for(lambda: not signal_pending(shell, signal.SIGINT), T,
             what="the shell to take the forwarded SIGINT")
    assert alive(shell) and alive(sleeper)   # they ignore it: the hard timeout's case
    # in the kernel's process group, which the supervisor kills when the kernel dies
    assert os.getpgid(shell) == kpid and os.getpgid(sleeper) == kpid
    kill_kernel(sb)
    wait_for(lambda: not alive(shell) and not alive(sleeper), T,
             what="the shell and its child to die with the kernel")
    r = run(sb, "echo fresh", "bash")
    assert r["status"] == "ok" and r["stdout"] == b"fresh\n", r


def test_interrupt_before_the_child_runs(sb):
    """An interrupt that reaches the kernel as the exec frame does (the
    daemon's early interrupt) ends a bash execution before it starts."""
    kpid = sb.kern.hello["pid"]
    run(sb, "true", "bash")
    for _ in range(5):
        eid = start(sb, "sleep 60", "bash")
        sb.kern.send({"t": "interrupt", "id": eid})
        os.kill(kpid, signal.SIGINT)
        r = collect(sb, eid)
        assert r["status"] == "error" and r["error"]["ename"] == "KeyboardInterrupt", r
    assert run(sb, "echo ok", "bash")["stdout"] == b"ok\n"


def test_unknown_language_and_python_by_name(shared):
    r = run(shared, "1", "cobol")
    assert r["status"] == "error" and r["error"]["ename"] == "ValueError", r
    assert "javascript" in r["error"]["evalue"] and "bash" in r["error"]["evalue"]
    r = run(shared, "6 * 7", "python")
    assert r["status"] == "ok" and r["result"] == "42", r


# ------------------------------------------------------------ javascript

def node_inspect(*exprs):
    """How Node itself (util.inspect) shows each expression (one node run)."""
    script = "process.stdout.write(JSON.stringify([%s].map((v) => require('util').inspect(v))))" % (
        ", ".join("(%s)" % e for e in exprs))
    out = subprocess.run(["node", "-e", script], capture_output=True, check=True, timeout=T)
    return json.loads(out.stdout)


@needs_node
def test_js_state_and_results(shared):
    r = run(shared, "var a = 1;\nlet b = 2;\nconst c = {x: 'y', n: [1, 2, 3]};\nfunction inc(v) { return v + 1; }\na + b", "javascript")
    assert r["status"] == "ok" and r["result"] == "3" and r["error"] is None, r
    r = run(shared, "console.log('sum', a + b); inc(b)", "javascript")
    assert r["stdout"] == b"sum 3\n" and r["result"] == "3", r
    exprs = ("{x: 'y', n: [1, 2, 3]}", "'str'", "[1, 'two', {three: 3}, null]",
             "new Map([[1, {a: 2}]])", "Array.from({length: 200}, (_, i) => i)",
             "{deep: {er: {than: {two: 1}}}}", "10n", "Symbol('s')", "new Error('shown').message")
    want = node_inspect(*exprs)
    assert run(shared, "c", "javascript")["result"] == want[0]
    for expr, w in zip(exprs[1:], want[1:]):
        r = run(shared, "(" + expr + ")", "javascript")
        assert r["status"] == "ok" and r["result"] == w, (expr, r)
    r = run(shared, "let nothing = undefined; nothing", "javascript")
    assert r["status"] == "ok" and r["result"] is None, r
    r = run(shared, "Promise.resolve(40).then((v) => v + b)", "javascript")
    assert r["status"] == "ok" and r["result"] == "42", r
    r = run(shared, "require('path').join('a', 'b')", "javascript")
    assert r["result"] == "'a/b'", r


@needs_node
def test_js_errors_with_stack_and_lines(shared):
    r = run(shared, "function boom() {\n  throw new TypeError('bad ' + 1);\n}\n\nboom();", "javascript")
    assert r["status"] == "error", r
    e = r["error"]
    assert e["ename"] == "TypeError" and e["evalue"] == "bad 1", e
    tb = e["traceback"]
    assert tb[0] == "TypeError: bad 1", tb
    assert any("at boom (<cell-" in s and ":2:9)" in s for s in tb), tb
    assert any(s.strip().startswith("at <cell-") and s.endswith(":5:1") for s in tb), tb
    assert not any("ci_node_repl" in s or "node:" in s for s in tb), tb
    # a function of an earlier cell keeps its own cell's name and line
    run(shared, "\nfunction later() { return null.x; }", "javascript")
    e = run(shared, "later()", "javascript")["error"]
    assert e["ename"] == "TypeError" and any(":2:" in s and "at later" in s for s in e["traceback"]), e
    # a syntax error: the cell's line, the source and the caret
    e = run(shared, "let ok = 1;\nlet = ;", "javascript")["error"]
    assert e["ename"] == "SyntaxError", e
    assert e["traceback"][0].startswith("<cell-") and e["traceback"][0].endswith(":2"), e
    assert "let = ;" in e["traceback"] and any(s.strip() == "^" for s in e["traceback"]), e
    # a thrown non-Error, a rejected Promise
    e = run(shared, "throw {code: 5}", "javascript")["error"]
    assert e["ename"] == "Uncaught" and e["evalue"] == "{ code: 5 }", e
    e = run(shared, "Promise.reject(new RangeError('no'))", "javascript")["error"]
    assert e["ename"] == "RangeError" and e["evalue"] == "no", e
    # the context survived all of it
    assert run(shared, "typeof boom", "javascript")["result"] == "'function'"


@needs_node
def test_js_late_callback_error_does_not_end_node(shared):
    r = run(shared, "var pid0 = process.pid; setTimeout(() => { throw new Error('later') }, 0); 1",
            "javascript")
    assert r["status"] == "ok", r
    r = run(shared, "new Promise((res) => setTimeout(() => res(process.pid === pid0), 50))",
            "javascript")
    assert r["status"] == "ok" and r["result"] == "true", r


@needs_node
def test_js_process_exit_starts_a_new_context(sb):
    run(sb, "var kept = 1", "javascript")
    r = run(sb, "process.exit(5)", "javascript")
    assert r["status"] == "error" and r["error"]["ename"] == "ChildExited", r
    assert "exited with status 5" in r["error"]["evalue"], r
    r = run(sb, "typeof kept", "javascript")
    assert r["status"] == "ok" and r["result"] == "'undefined'", r


@needs_node
def test_js_output_cap(shared):
    r = run(shared, "process.stdout.write('a'.repeat(300000) + '\\ntail-end\\n'); 0", "javascript",
            stdout_cap=10000, stderr_cap=10000)
    assert r["status"] == "ok" and r["result"] == "0", r
    tails = [h for h, _ in r["frames"] if h.get("tail")]
    assert len(tails) == 1 and tails[0]["dropped"] == 300000 + 10 - 10000, tails
    assert len(r["stdout"]) == 10000 and r["stdout"].endswith(b"a\ntail-end\n")


@needs_node
def test_js_interrupt_keeps_the_context(sb):
    run(sb, "var kept = 'yes'", "javascript")
    kpid = sb.kern.hello["pid"]
    for code in ("console.log(process.pid); while (true) {}",
                 "console.log(process.pid); new Promise(() => {})"):
        eid = start(sb, code, "javascript")
        first_line(sb, eid)
        os.kill(kpid, signal.SIGINT)
        r = collect(sb, eid)
        assert r["status"] == "error" and r["error"]["ename"] == "KeyboardInterrupt", (code, r)
    r = run(sb, "kept", "javascript")
    assert r["status"] == "ok" and r["result"] == "'yes'", r


@needs_node
def test_js_interrupt_after_writing_to_the_streams(sb):
    """A cell that wrote through console or process.stdout/stderr, then
    spins, is still broken by the interrupt: on Node.js 20 (Debian 13) a
    write through libuv's pipe stream left breakOnSigint deaf more often
    than not (the cell ran to its deadline), so the cell's writes go to the
    fds directly. Several rounds: the failure was a race, one round in four
    passed."""
    run(sb, "var kept = 'yes'", "javascript")
    kpid = sb.kern.hello["pid"]
    for i in range(4):
        for write in ("console.log(process.pid)", "process.stdout.write(process.pid + '\\n')",
                      "console.error('e'); console.log(process.pid)"):
            eid = start(sb, write + "; while (true) {}", "javascript")
            first_line(sb, eid)
            os.kill(kpid, signal.SIGINT)
            r = collect(sb, eid)
            assert r["status"] == "error" and r["error"]["ename"] == "KeyboardInterrupt", \
                (i, write, r)
    r = run(sb, "console.log('out'); console.error('err'); kept", "javascript")
    assert r["status"] == "ok" and r["result"] == "'yes'", r
    assert r["stdout"] == b"out\n" and r["stderr"] == b"err\n", r


@needs_node
def test_js_blocked_in_a_child_is_ended_by_the_kernel_kill(sb):
    kpid = sb.kern.hello["pid"]
    eid = start(sb, "console.log(process.pid);\n"
                    "require('child_process').execSync(\"trap '' INT; sleep 60\")", "javascript")
    node = int(first_line(sb, eid))
    os.kill(kpid, signal.SIGINT)
    wait_for(lambda: not signal_pending(kpid, signal.SIGINT), T,
             what="the kernel to take the SIGINT")
    assert alive(node)
    kill_kernel(sb)
    wait_for(lambda: not alive(node), T, what="node to die with the kernel")
    r = run(sb, "typeof kept", "javascript")
    assert r["status"] == "ok" and r["result"] == "'undefined'", r


@needs_node
def test_all_three_languages_in_one_kernel(shared):
    run(shared, "py_side = 'p'", None)
    run(shared, "var js_side = 'j'", "javascript")
    run(shared, "sh_side=s", "bash")
    assert run(shared, "py_side", None)["result"] == "'p'"
    assert run(shared, "js_side", "javascript")["result"] == "'j'"
    assert run(shared, "echo $sh_side", "bash")["stdout"] == b"s\n"


@needs_node
def test_children_are_not_handed_the_daemon_socket(shared):
    kpid = shared.kern.hello["pid"]
    kernel_sockets = set()
    for f in os.listdir("/proc/%d/fd" % kpid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (kpid, f))
        except OSError:
            continue
        if link.startswith("socket:"):
            kernel_sockets.add(link)
    assert kernel_sockets
    r = run(shared, "for f in /proc/$$/fd/*; do readlink $f; done", "bash")
    assert not set(r["stdout"].decode().split()) & kernel_sockets, r
    r = run(shared, "const fs_ = require('fs'); console.log(JSON.stringify("
                    "fs_.readdirSync('/proc/self/fd').map((f) => {"
                    " try { return fs_.readlinkSync('/proc/self/fd/' + f); } catch (e) { return ''; } })))",
            "javascript")
    assert r["status"] == "ok", r
    assert not set(json.loads(r["stdout"])) & kernel_sockets, r
