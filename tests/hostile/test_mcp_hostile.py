"""Hostile clients of the MCP endpoint (issue 16, item 1; docs/mcp.md):
malformed JSON-RPC, huge bodies, wrong types, unknown tools and methods,
another tenant's session, a foreign Origin, path tricks. Each is answered
clearly (a JSON-RPC error or an isError result) and the daemon keeps
serving: the check after each is a real tools/call that runs code."""
import json

import pytest

ADMIN = "admin-" + "h" * 40


@pytest.fixture(scope="module")
def hd(redis_server, tmpdir_session):
    from harness import Daemon
    d = Daemon(redis_server, tmpdir_session, ("--pool-size", "0", "--max-body-bytes", "65536"),
               admin_key=ADMIN)
    d.key_a = d.key("hostile-a")["key"]
    d.key_b = d.key("hostile-b")["key"]
    yield d
    d.finish()


def post(d, body, key=None, headers=None, raw=None):
    """POST /mcp: (status, parsed body or bytes)."""
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if key is not False:
        h["Authorization"] = "Bearer %s" % (key or d.key_a)
    h.update(headers or {})
    data = raw if raw is not None else json.dumps(body).encode()
    r = d.api.send("POST", "/mcp", raw=data, headers=h)
    return r.status, r.doc


def rpc(d, method, params=None, key=None, id_=1):
    msg = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return post(d, msg, key=key)


def call(d, name, key=None, **arguments):
    st, doc = rpc(d, "tools/call", {"name": name, "arguments": arguments}, key=key)
    assert st == 200, (st, doc)
    return doc


def still_serving(d):
    doc = call(d, "run_code", code="print(6 * 7)")
    assert doc["result"]["isError"] is False and "42" in doc["result"]["content"][0]["text"], doc


@pytest.mark.parametrize("raw, code", [
    (b"{", -32700), (b"", -32700), (b"\x00\x01\x02", -32700), (b"[" * 5000, -32700),
    (b'"just a string"', -32600), (b"42", -32600), (b"null", -32600),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600),
    (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600),
    (b'{"id":1,"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":""}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', -32600),
    (b'{"jsonrpc":"2.0","id":1}', -32600),
])
def test_malformed_messages_are_json_rpc_errors(hd, raw, code):
    st, doc = post(hd, None, raw=raw)
    assert st == 400, (st, doc)
    assert doc["jsonrpc"] == "2.0" and doc["error"]["code"] == code, doc
    still_serving(hd)


def test_an_id_survives_into_the_error(hd):
    st, doc = post(hd, None, raw=b'{"jsonrpc":"2.0","id":"abc","method":"ping","params":"x"}')
    assert st == 400 and doc["id"] == "abc" and doc["error"]["code"] == -32600, doc


def test_a_huge_body_is_refused_before_it_is_read(hd):
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "run_code", "arguments": {"code": "#" * 200000}}})
    r = hd.api.send("POST", "/mcp", raw=big.encode(),
                    headers={"Authorization": "Bearer %s" % hd.key_a,
                             "Content-Type": "application/json"})
    assert r.status == 413, (r.status, r.body[:200])
    still_serving(hd)


def test_unknown_methods_and_tools(hd):
    st, doc = rpc(hd, "sampling/createMessage")
    assert st == 200 and doc["error"]["code"] == -32601, doc
    st, doc = rpc(hd, "tools/call", {"name": "rm_rf"})
    assert doc["error"]["code"] == -32602 and "unknown tool" in doc["error"]["message"], doc
    st, doc = rpc(hd, "tools/call", {"arguments": {}})
    assert doc["error"]["code"] == -32602, doc
    st, doc = rpc(hd, "tools/call", {"name": ["run_code"]})
    assert doc["error"]["code"] == -32602, doc
    still_serving(hd)


@pytest.mark.parametrize("name, arguments, says", [
    ("run_code", {}, "missing argument \"code\""),
    ("run_code", {"code": 5}, "code: expected string"),
    ("run_code", {"code": "1", "timeout_s": "10"}, "timeout_s: expected integer"),
    ("run_code", {"code": "1", "timeout_s": 0}, "at least 1"),
    ("run_code", {"code": "1", "retries": 99}, "at most 9"),
    ("run_code", {"code": "1", "language": "cobol"}, "not one of"),
    ("run_code", {"code": "1", "on_failure": ["pray"]}, "on_failure[0]"),
    ("run_code", {"code": "1", "rm": True}, "unknown argument \"rm\""),
    ("upload_file", {"session_id": "x", "path": "a"}, "missing argument \"content\""),
    ("install_packages", {"session_id": "x", "packages": []}, "at least 1"),
    ("install_packages", {"session_id": "x", "packages": [1]}, "packages[0]"),
    ("restore", {}, "one of snapshot_id and workspace"),
])
def test_arguments_that_break_the_schema(hd, name, arguments, says):
    st, doc = rpc(hd, "tools/call", {"name": name, "arguments": arguments})
    assert st == 200 and doc["error"]["code"] == -32602, doc
    assert says in doc["error"]["message"], doc


def test_arguments_not_an_object(hd):
    st, doc = rpc(hd, "tools/call", {"name": "run_code", "arguments": "print(1)"})
    assert doc["error"]["code"] == -32602, doc


def test_ids_and_paths_that_are_not_what_they_seem(hd):
    for sid in ("../../v1/admin/keys", "x" * 5000, "", "00000000-0000-0000-0000-000000000000/exec"):
        doc = call(hd, "run_code", session_id=sid, code="1")
        assert doc["result"]["isError"] is True and "not_found" in doc["result"]["content"][0]["text"], doc
    sid = call(hd, "create_session")["result"]["structuredContent"]["id"]
    try:
        for path in ("/etc/passwd", "../x", "a/../../b", ""):
            doc = call(hd, "upload_file", session_id=sid, path=path, content="x")
            assert doc["result"]["isError"] is True, (path, doc)
            doc = call(hd, "download_file", session_id=sid, path=path)
            assert doc["result"]["isError"] is True, (path, doc)
        # A NUL would cut "a\u0000b" to "a": the message is refused whole.
        st, doc = rpc(hd, "tools/call", {"name": "upload_file", "arguments": {
            "session_id": sid, "path": "a\u0000b", "content": "x"}})
        assert st == 400 and doc["error"]["code"] == -32600 and doc["id"] == 1, doc
        doc = call(hd, "list_files", session_id=sid)
        assert doc["result"]["structuredContent"]["files"] == [], doc
        doc = call(hd, "upload_file", session_id=sid, path="b.bin", content="!!not base64!!",
                   encoding="base64")
        assert doc["result"]["isError"] is True and "base64" in doc["result"]["content"][0]["text"]
    finally:
        call(hd, "delete_session", session_id=sid)
    still_serving(hd)


def test_another_tenants_session_is_not_theirs(hd):
    sid = call(hd, "create_session")["result"]["structuredContent"]["id"]
    try:
        call(hd, "upload_file", session_id=sid, path="secret.txt", content="mine")
        for name, args in (("run_code", {"code": "open('secret.txt').read()"}),
                           ("download_file", {"path": "secret.txt"}), ("list_files", {}),
                           ("upload_file", {"path": "secret.txt", "content": "theirs"}),
                           ("snapshot", {}),
                           ("delete_session", {})):
            doc = call(hd, name, key=hd.key_b, session_id=sid, **args)
            res = doc["result"]
            assert res["isError"] is True and "not_found" in res["content"][0]["text"], (name, doc)
            assert "mine" not in json.dumps(doc)
        doc = call(hd, "download_file", session_id=sid, path="secret.txt")
        assert doc["result"]["content"][0]["text"] == "mine", doc
    finally:
        call(hd, "delete_session", session_id=sid)


def test_keys_origin_and_methods(hd):
    st, doc = post(hd, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, key=False)
    assert st == 401, doc
    st, doc = post(hd, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, key="nope")
    assert st == 401, doc
    st, doc = post(hd, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                   headers={"Origin": "http://rebind.test"})
    assert st == 403 and doc["error"]["code"] == "forbidden", doc
    st, doc = post(hd, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                   headers={"MCP-Protocol-Version": "1999-01-01"})
    assert st == 400, doc
    for method in ("GET", "DELETE"):
        r = hd.api.send(method, "/mcp", headers={"Authorization": "Bearer %s" % hd.key_a})
        assert r.status == 405 and r.header("Allow") == "POST", (method, r.status)
    # Notifications and stray responses are accepted without an answer.
    st, doc = post(hd, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert st == 202 and doc is None
    st, doc = post(hd, {"jsonrpc": "2.0", "id": 9, "result": {}})
    assert st == 202 and doc is None
    still_serving(hd)


def test_sse_only_clients_get_one_event(hd):
    r = hd.api.send("POST", "/mcp", raw=json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}).encode(),
                    headers={"Authorization": "Bearer %s" % hd.key_a, "Accept": "text/event-stream",
                             "Content-Type": "application/json"})
    assert r.status == 200 and r.header("Content-Type") == "text/event-stream"
    assert r.body.startswith(b"event: message\ndata: ")
    doc = json.loads(r.body.split(b"data: ", 1)[1])
    assert doc == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_no_leak_and_no_sanitizer_report(hd):
    for _ in range(20):
        post(hd, None, raw=b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{"code":7}}}')
    still_serving(hd)
    assert not hd.sanitizer_errors()
