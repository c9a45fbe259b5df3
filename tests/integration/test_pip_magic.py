"""Issue 14: `%pip install` in a cell goes through the install window
(docs/protocol.md "%pip install", ci_pip.py, daemon/manager_pip.c).

The index, its wheels, the hosts file and the session's allowlist are
test_packages.py's (reused: an index of our own on 127.0.0.1, reached as the
made-up pypi.test through the daemon's proxy, hosts-only resolver). The
image is the one test_packages.py uses with this worktree's runner files on
top (a thin image under a tag of this run, removed at the end), so the
kernel here is the kernel of this tree.
"""
import os
import re
import shutil
import subprocess
import tempfile
import threading
import uuid

import pytest

from harness import wait_for
from harness.packages import index_daemon
from test_packages import ADMIN, index, pip_image, probe  # noqa: F401 (fixtures)

RUNNER = os.path.join(os.path.dirname(__file__), "..", "..", "images", "python", "runner")


@pytest.fixture(scope="module")
def runner_image(pip_image):  # noqa: F811
    tag = "ci/python:citest-pipmagic-%s" % uuid.uuid4().hex[:10]
    ctx = tempfile.mkdtemp(prefix="cit-pipmagic-")
    try:
        os.mkdir(os.path.join(ctx, "runner"))
        for n in os.listdir(RUNNER):
            if n.endswith(".py") and not n.startswith("test_"):
                shutil.copy(os.path.join(RUNNER, n), os.path.join(ctx, "runner", n))
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write("FROM %s\nCOPY runner/ /opt/ci/\n" % pip_image)
        subprocess.run(["docker", "build", "-q", "--network", "none", "-t", tag, ctx],
                       check=True, capture_output=True, timeout=300)
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    try:
        yield tag
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def magicd(redis_server, tmpdir_session, runner_image, index):  # noqa: F811
    d = index_daemon(redis_server, tmpdir_session, index, ADMIN, image=runner_image)
    try:
        yield d
    finally:
        d.finish()


@pytest.fixture(scope="module")
def tenant(magicd):
    return magicd.client(magicd.key("pipmagic-a")["key"])


@pytest.fixture
def session(tenant):
    s = tenant.create(network={"allow": ["other.test:1"]})
    yield s
    tenant.delete(s["id"])


def test_pip_magic_installs_and_the_same_cell_imports(magicd, tenant, session, index):
    sid = session["id"]
    assert probe(tenant, sid, index.port).startswith("HTTP/1.1 403"), "open before the window"
    mark = magicd.log_mark()
    seen = len(index.requests)
    r = tenant.exec(sid, "%pip install tinypkg==1.2\n"
                         "import tinypkg\nprint(tinypkg.VERSION, tinypkg.ANSWER)\n_exit_code",
                    timeout_s=60)
    assert r["status"] == "ok", r
    assert "Successfully installed tinydep-0.3 tinypkg-1.2" in r["stdout"], r["stdout"]
    assert r["stdout"].rstrip().endswith("1.2 42"), r["stdout"]
    assert r["result"] == "0"
    assert any("/simple/tinypkg/" in q for q in index.requests[seen:]), index.requests
    magicd.wait_log("session %s: install window opened: egress to pypi.test:%d" % (sid, index.port),
                    since=mark)
    magicd.wait_log("session %s: install window closed (pip finished, exit 0)" % sid, since=mark)
    # After it: refused by the proxy again, nothing reaches the index.
    seen = len(index.requests)
    assert probe(tenant, sid, index.port).startswith("HTTP/1.1 403")
    assert index.requests[seen:] == []
    # It stays installed (the site on sys.path) for the next cells.
    r = tenant.exec(sid, "import tinydep\ntinydep.ANSWER")
    assert r["status"] == "ok" and r["result"] == "42", r


def test_shell_pip_and_a_failed_pip(magicd, tenant, session, index):
    sid = session["id"]
    r = tenant.exec(sid, "!python3 -m pip install -q tinydep==0.3\nimport tinydep\ntinydep.ANSWER",
                    timeout_s=60)
    assert r["status"] == "ok" and r["result"] == "42", r
    # No such version: pip's own words and its status, as in Jupyter.
    r = tenant.exec(sid, "%pip install tinydep==9.9\n_exit_code", timeout_s=60)
    assert r["status"] == "ok" and r["result"] == "1", r
    assert "No matching distribution found for tinydep==9.9" in r["stdout"], r["stdout"]
    assert "pip exited with status 1" in r["stderr"], r


@pytest.mark.parametrize("line, words", [
    ("%pip install \"tinypkg==1.2;os_name=='posix'\"", "unexpected ';'"),
    ("%pip install tinypkg==1.2 ../evil", "does not start with a package name"),
    ("%pip install --index-url http://evil.test/simple/ tinypkg", "options are not accepted"),
])
def test_refused_requirements_open_nothing(magicd, tenant, session, line, words):
    mark = magicd.log_mark()
    r = tenant.exec(session["id"], line)
    assert r["status"] == "error" and r["error"]["ename"] == "PipError", r
    assert words in r["error"]["evalue"], r["error"]
    assert "install window opened" not in magicd.log_since(mark)


def test_a_session_without_network_is_told_how(magicd, tenant):
    s = tenant.create()
    try:
        r = tenant.exec(s["id"], "%pip install tinypkg")
        assert r["error"]["ename"] == "PipError", r
        assert "created without network access" in r["error"]["evalue"], r["error"]
        assert "network.allow" in r["error"]["evalue"]
    finally:
        tenant.delete(s["id"])


def test_the_window_is_bounded_by_the_executions_deadline(magicd, tenant, session, index):
    """A slow index: the window (the execution's 25 s less the 2 s margin,
    not the node's 60 s) ends first; pip is killed, the cell says so, the
    proxy's connection to the index is closed. (25 s: pip must reach the
    index inside the window even on a loaded machine.)"""
    sid = session["id"]
    mark = magicd.log_mark()
    closed_before = magicd.metric("ci_egress_closed_total", 0)
    seen = len(index.requests)
    index.slow = True
    out = {}
    t = threading.Thread(target=lambda: out.update(
        r=tenant.exec(sid, "%pip install tinypkg==1.2", timeout_s=25)))
    t.start()
    try:
        wait_for(lambda: any("/simple/tinypkg/" in q for q in index.requests[seen:]), 30,
                 what="pip's request at the (slow) index")
        t.join(60)
        r = out["r"]
        assert r["status"] == "error" and r["error"]["ename"] == "PipError", r
        m = re.match(r"timeout: the install window of (\d+) s ended before pip finished; "
                     r"egress to pypi\.test:%d is closed again" % index.port, r["error"]["evalue"])
        assert m and 20 <= int(m.group(1)) <= 23, r["error"]
        magicd.wait_log("session %s: install window opened: egress to pypi.test:%d for %s s"
                        % (sid, index.port, m.group(1)), since=mark)
        magicd.wait_log("session %s: install window closed (the window ended)" % sid, since=mark)
        assert magicd.metric("ci_egress_closed_total", 0) >= closed_before + 1
    finally:
        index.slow = False
        t.join(60)
    seen = len(index.requests)
    assert probe(tenant, sid, index.port).startswith("HTTP/1.1 403")
    assert index.requests[seen:] == []


def test_no_index_configured_says_which_option(redis_server, tmpdir_session, runner_image,
                                               index):  # noqa: F811
    d = index_daemon(redis_server, tmpdir_session, index, ADMIN, image=runner_image, pip=False)
    try:
        c = d.client(d.key("pipmagic-b")["key"])
        s = c.create(network={"allow": ["other.test:1"]})
        r = c.exec(s["id"], "%pip install tinypkg")
        assert r["error"]["ename"] == "PipError", r
        assert "no package index is configured" in r["error"]["evalue"], r["error"]
        assert "--pip-index-url" in r["error"]["evalue"]
        c.delete(s["id"])
    finally:
        d.finish()
