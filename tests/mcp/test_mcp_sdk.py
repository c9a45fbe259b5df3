"""Issue 16, item 1: the MCP endpoint (/mcp, docs/mcp.md), driven by the
official MCP TypeScript SDK's Client over StreamableHTTPClientTransport and
by the MCP Inspector's CLI, against a real daemon with API keys, real
sandboxes, a snapshot store in a directory of this run and the fake fixer
model of tests/harness/fake_llm.py (on loopback)."""
import base64
import json
import os
import shutil
import tempfile
import uuid

import pytest

from harness import Daemon, FakeLLM
from mcp_lib import SdkClient, inspector, texts

ADMIN = "admin-" + "m" * 40
ALLOWED_ORIGIN = "http://allowed.test:6274"
TOOLS = {"create_session", "run_code", "upload_file", "download_file", "list_files",
         "install_packages", "snapshot", "restore", "delete_session"}


@pytest.fixture(scope="module")
def llm():
    with FakeLLM({}) as fake:
        yield fake


@pytest.fixture(scope="module")
def md(redis_server, tmpdir_session, llm):
    store = tempfile.mkdtemp(prefix="cit-mcp-store-", dir="/tmp")
    d = Daemon(redis_server, tmpdir_session,
               ("--pool-size", "0", "--kill-grace-ms", "1000", "--store", "dir:%s" % store,
                "--fixer-allowed-urls", llm.url, "--fixer-timeout-ms", "5000",
                "--mcp-allowed-origins", "http://other.test, %s" % ALLOWED_ORIGIN),
               admin_key=ADMIN)
    d.tenant_a = d.key("mcp-a")["key"]
    d.tenant_b = d.key("mcp-b")["key"]
    d.url = "http://127.0.0.1:%d/mcp" % d.port
    yield d
    try:
        d.finish()
    finally:
        shutil.rmtree(store, ignore_errors=True)


@pytest.fixture
def client(md):
    with SdkClient(md.url, key=md.tenant_a) as c:
        c.ok("connect")
        yield c


def new_session(client):
    r = client.call("create_session")
    assert not r["isError"], r
    return r["structuredContent"]["id"]


def test_connect_negotiates_and_lists_the_tools(md):
    with SdkClient(md.url, key=md.tenant_a) as c:
        a = c.ok("connect")
        assert a["server"]["name"] == "ci"
        assert "tools" in a["capabilities"]
        c.ok("ping")
        tools = c.ok("list")["tools"]
    assert {t["name"] for t in tools} == TOOLS
    for t in tools:
        s = t["inputSchema"]
        assert s["type"] == "object" and s["additionalProperties"] is False, t
        assert t["description"]
    run = next(t for t in tools if t["name"] == "run_code")
    assert {"retries", "fixer", "on_failure", "retry_hopeless", "session_id", "code"} <= \
        set(run["inputSchema"]["properties"])


def test_state_is_kept_across_calls_and_a_traceback_is_an_error(md, client):
    sid = new_session(client)
    r = client.call("run_code", session_id=sid, code="x = 41")
    assert not r["isError"], r
    r = client.call("run_code", session_id=sid, code="print(x + 1)\nx * 2")
    assert not r["isError"], r
    assert "42" in texts(r) and "[result] 82" in texts(r)
    assert r["structuredContent"]["status"] == "ok"
    r = client.call("run_code", session_id=sid, code="def f():\n    return 1 / 0\nf()")
    assert r["isError"] is True, r
    assert "ZeroDivisionError" in texts(r) and "<cell-" in texts(r)
    assert r["structuredContent"]["error"]["ename"] == "ZeroDivisionError"
    r = client.call("run_code", session_id=sid, code="import sys; print('oops', file=sys.stderr)")
    assert "[stderr]\noops" in texts(r)
    r = client.call("delete_session", session_id=sid)
    assert not r["isError"], r
    r = client.call("run_code", session_id=sid, code="x")
    assert r["isError"] is True and "expired" in texts(r), r


def test_a_chart_is_image_content(md, client):
    sid = new_session(client)
    try:
        r = client.call("run_code", session_id=sid, code=(
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 3, 2])\nplt.show()"))
        assert not r["isError"], r
        images = [c for c in r["content"] if c["type"] == "image"]
        assert len(images) == 1 and images[0]["mimeType"] == "image/png"
        assert base64.b64decode(images[0]["data"])[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        client.call("delete_session", session_id=sid)


def test_one_shot_and_other_languages(md, client):
    r = client.call("run_code", code="print(6 * 7)")
    assert not r["isError"] and "42" in texts(r), r
    r = client.call("run_code", code="echo hi; exit 3", language="bash")
    assert r["isError"] is True and "hi" in texts(r), r


def test_upload_download_and_list(md, client):
    sid = new_session(client)
    try:
        r = client.call("upload_file", session_id=sid, path="data/notes.txt", content="héllo\n")
        assert not r["isError"] and "wrote 7 bytes" in texts(r), r
        blob = bytes(range(256)) * 4
        r = client.call("upload_file", session_id=sid, path="bin/raw.dat",
                        content=base64.b64encode(blob).decode(), encoding="base64")
        assert not r["isError"], r
        r = client.call("run_code", session_id=sid,
                        code="open('/workspace/data/notes.txt').read().upper()")
        assert "HÉLLO" in texts(r), r
        r = client.call("list_files", session_id=sid)
        paths = {f["path"]: f for f in r["structuredContent"]["files"]}
        assert paths["data/notes.txt"]["size"] == 7 and paths["bin/raw.dat"]["size"] == 1024
        for sub in ("data", "data/"):
            r = client.call("list_files", session_id=sid, path=sub)
            assert [f["path"] for f in r["structuredContent"]["files"] if f["type"] == "file"] == ["data/notes.txt"]
        r = client.call("list_files", session_id=sid, path="dat")  # a path, not a string prefix
        assert r["structuredContent"]["files"] == [] and texts(r) == "(no files)", r
        r = client.call("download_file", session_id=sid, path="data/notes.txt")
        assert r["content"] == [{"type": "text", "text": "héllo\n"}], r
        r = client.call("download_file", session_id=sid, path="bin/raw.dat")
        res = r["content"][0]
        assert res["type"] == "resource" and base64.b64decode(res["resource"]["blob"]) == blob
        client.call("run_code", session_id=sid, code=(
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2]); plt.savefig('/workspace/c.png')"))
        r = client.call("download_file", session_id=sid, path="c.png")
        assert r["content"][0]["type"] == "image" and r["content"][0]["mimeType"] == "image/png"
        r = client.call("download_file", session_id=sid, path="nope.txt")
        assert r["isError"] is True, r
        r = client.call("upload_file", session_id=sid, path="../etc/x", content="x")
        assert r["isError"] is True and "bad_path" in texts(r), r
    finally:
        client.call("delete_session", session_id=sid)


def test_snapshot_and_restore(md, client):
    sid = new_session(client)
    client.call("run_code", session_id=sid, code="kept = [1, 2, 3]\nopen('/workspace/f.txt','w').write('snap')")
    r = client.call("snapshot", session_id=sid)
    assert not r["isError"], r
    snap = r["structuredContent"]["id"]
    client.call("delete_session", session_id=sid)
    r = client.call("restore", snapshot_id=snap)
    assert not r["isError"], r
    sid2 = r["structuredContent"]["id"]
    try:
        r = client.call("run_code", session_id=sid2, code="print(sum(kept), open('/workspace/f.txt').read())")
        assert "6 snap" in texts(r), r
    finally:
        client.call("delete_session", session_id=sid2)


def test_run_options_go_through_the_runs_workflow(md, client, llm):
    model = "mcp-fix-%s" % uuid.uuid4().hex[:6]
    llm.add(model, ["total = sum(prices)\ntotal"])
    sid = new_session(client)
    try:
        client.call("run_code", session_id=sid, code="prices = [1, 2, 39]")
        r = client.call("run_code", session_id=sid, code="total = sum(price)\ntotal", retries=2,
                        fixer={"url": llm.url, "model": model}, on_failure=["manual"])
        assert not r["isError"], r
        run = r["structuredContent"]
        assert run["status"] == "ok" and [a["source"] for a in run["attempts"]] == ["submitted", "fixer"]
        assert "[result] 42" in texts(r) and "2 attempt(s)" in texts(r)
        # Without a fixer that can fix it: isError, the ladder's answer kept.
        r = client.call("run_code", session_id=sid, code="1/0", retries=0, fixer=None)
        assert r["isError"] is True and r["structuredContent"]["status"] != "ok", r
        # retry_hopeless alone is a run too (its request carries it)
        r = client.call("run_code", session_id=sid, code="1/0", retry_hopeless=True,
                        fixer=None)
        assert r["isError"] is True and "attempts" in r["structuredContent"], r
    finally:
        client.call("delete_session", session_id=sid)


def test_no_key_and_a_wrong_key_are_refused(md):
    for key in (None, "not-a-key"):
        with SdkClient(md.url, key=key) as c:
            a = c.cmd("connect")
            assert not a["ok"] and a["code"] == 401 and "unauthorized" in a["error"], a


def test_origin_is_checked(md):
    with SdkClient(md.url, key=md.tenant_a, origin="http://evil.test") as c:
        a = c.cmd("connect")
        assert not a["ok"] and a["code"] == 403 and "mcp-allowed-origins" in a["error"], a
    with SdkClient(md.url, key=md.tenant_a, origin=ALLOWED_ORIGIN) as c:
        c.ok("connect")
        assert c.ok("list")["tools"]


def test_another_tenants_session_is_not_found(md, client):
    sid = new_session(client)
    try:
        with SdkClient(md.url, key=md.tenant_b) as other:
            other.ok("connect")
            for name, args in (("run_code", {"code": "1"}), ("list_files", {}),
                               ("download_file", {"path": "x"}), ("delete_session", {}),
                               ("snapshot", {})):
                r = other.call(name, session_id=sid, **args)
                assert r["isError"] is True and "not_found" in texts(r), (name, r)
        r = client.call("run_code", session_id=sid, code="'still here'")
        assert not r["isError"], r
    finally:
        client.call("delete_session", session_id=sid)


def test_the_inspector_cli_lists_and_calls(md):
    rc, out, err = inspector(md.url, "--method", "tools/list", key=md.tenant_a)
    assert rc == 0, err
    assert {t["name"] for t in json.loads(out)["tools"]} == TOOLS
    rc, out, err = inspector(md.url, "--method", "tools/call", "--tool-name", "run_code",
                             "--tool-arg", "code=print(6*7)", key=md.tenant_a)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["isError"] is False and "42" in texts(doc), doc
    rc, out, err = inspector(md.url, "--method", "tools/list")
    assert rc != 0


def test_quotas_audit_and_the_rest_api_see_the_same_sessions(md):
    from harness import Client, wait_for
    tenant = "mcp-q-%s" % uuid.uuid4().hex[:6]
    key = md.key(tenant)["key"]
    st, doc = md.admin.request("PUT", "/v1/admin/tenants/%s/quota" % tenant, body={"sessions": 1})
    assert st == 200, doc
    rest = Client(md.port, api_key=key)
    with SdkClient(md.url, key=key) as c:
        c.ok("connect")
        sid = new_session(c)
        try:
            # The REST API lists the session MCP made, for that tenant only.
            st, doc = rest.request("GET", "/v1/sessions")
            assert st == 200 and [s["id"] for s in doc["sessions"]] == [sid], doc
            st, doc = md.client(md.tenant_b).request("GET", "/v1/sessions")
            assert sid not in [s["id"] for s in doc["sessions"]]
            # Its quota holds over MCP as over REST.
            r = c.call("create_session")
            assert r["isError"] is True and "quota_exceeded" in texts(r), r
            r = c.call("run_code", code="1")  # a one-shot is a session too
            assert r["isError"] is True and "quota_exceeded" in texts(r), r
            c.call("run_code", session_id=sid, code="print('audited')")
        finally:
            c.call("delete_session", session_id=sid)

    def actions():
        st, doc = rest.request("GET", "/v1/audit?limit=100")
        assert st == 200, doc
        return {(e["action"], e["outcome"]) for e in doc["entries"] if e.get("session") in (sid, None)}
    wait_for(lambda: {("session_create", "ok"), ("exec", "ok"), ("session_delete", "ok")} <= actions(),
             10, what="the audit entries of the MCP calls")
