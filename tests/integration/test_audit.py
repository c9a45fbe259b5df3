"""Issue 11, the audit trail: every exec, file write and delete, session
create and delete and admin action goes to the Redis stream <prefix>audit
and to the log as one JSON line; GET /v1/audit and /v1/admin/audit read it
back (filters, paging, long poll); ci-ctl audit prints it. Real daemon,
Redis and containers."""
import hashlib
import json
import os
import signal
import subprocess
import threading
import urllib.parse
import uuid

from harness import wait_for
from harness.http import raw_connect, status_of
from harness.daemon import CTL_BIN, DAEMON_BIN, Daemon
from harness.redis import RedisServer
from helpers_exec import RFC3339, error_of, files_url, new_session, put_bytes

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
ENTRY_KEYS = {"id", "type", "time", "action", "tenant", "key_id", "outcome", "duration_ms",
              "node", "request_id"}


def audit(api, admin=True, **params):
    """The answer of GET /v1/admin/audit (or /v1/audit) with params."""
    path = "/v1/admin/audit" if admin else "/v1/audit"
    if params:
        path += "?" + urllib.parse.urlencode(params)
    status, doc = api.request("GET", path, timeout=60)
    assert status == 200, (status, doc)
    assert set(doc) == {"entries", "next"}, doc
    return doc


def entries_of(api, **params):
    return audit(api, **params)["entries"]


def find_entry(api, request_id, **params):
    """The entry of request_id, waited for (the stream write is async)."""
    found = []

    def look():
        found[:] = [e for e in entries_of(api, limit=1000, **params)
                    if e.get("request_id") == request_id]
        return found

    wait_for(look, 10, what="the audit entry of request %s" % request_id)
    assert len(found) == 1, found
    return found[0]


def exec_with(api, sid, code, headers):
    status, doc = api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": code},
                              headers=headers)
    assert status == 200, (status, doc)
    return doc


def rid():
    return "audit-" + uuid.uuid4().hex


def audit_lines(d, request_id):
    """The log lines that are audit entries of request_id, parsed."""
    out = []
    # Lines end at "\n" only: str.splitlines would also cut at U+2028,
    # which JSON carries raw.
    for line in d.read_log().split("\n"):
        if line.startswith("{") and request_id in line:
            doc = json.loads(line)  # each one is a whole JSON document
            if doc.get("type") == "audit":
                out.append(doc)
    return out


# ---------------------------------------------------------------- entries


def test_exec_entry_hash_head_request_id_traceparent(daemon, api, session):
    sid = session["id"]
    # 10 KiB of code with multi-byte characters across the 4 KiB boundary:
    # byte 4095 starts a 3-byte character, so the head stops before it.
    first = "x = 1\n#"
    code = first + "a" * (4095 - len(first)) + "\u20ac\u20ac\u20ac\n"
    while len(code.encode()) < 10 * 1024:
        code += "# \u00fc\u00e9\U0001f600 noch eine Zeile\n"
    code += "x + 1\n"
    raw = code.encode()
    assert raw[4095:4098] == "\u20ac".encode()
    r1 = rid()
    result = exec_with(api, sid, code, {"X-Request-Id": r1, "traceparent": TRACEPARENT})
    assert result["status"] == "ok" and result["result"] == "2", result

    e = find_entry(api, r1, session=sid)
    assert set(e) >= ENTRY_KEYS | {"session", "traceparent", "code_sha256", "code_head"}, e
    assert e["action"] == "exec" and e["session"] == sid, e
    assert e["code_sha256"] == hashlib.sha256(raw).hexdigest(), e
    head = raw[:4096].decode("utf-8", "ignore")
    assert e["code_head"] == head and len(head.encode()) == 4095, len(e["code_head"].encode())
    assert e["outcome"] == "ok" and isinstance(e["duration_ms"], int) and e["duration_ms"] >= 0
    assert e["traceparent"] == TRACEPARENT, e
    assert e["tenant"] == "default" and e["key_id"] == "" and e["node"] == daemon.node, e
    assert RFC3339.match(e["time"]) and e["time"].endswith("Z"), e

    # An execution that raises is recorded with its status; an invalid
    # traceparent is not recorded at all.
    r2 = rid()
    result = exec_with(api, sid, "raise ValueError('no')", {"X-Request-Id": r2,
                                                          "traceparent": "00-xyz-01"})
    assert result["status"] == "error", result
    e2 = find_entry(api, r2, session=sid)
    assert e2["outcome"] == "error" and "traceparent" not in e2, e2
    assert e2["code_sha256"] == hashlib.sha256(b"raise ValueError('no')").hexdigest()
    assert e2["code_head"] == "raise ValueError('no')", e2


def test_oneshot_entry(daemon, api):
    r = rid()
    status, doc = api.request("POST", "/v1/exec", body={"code": "6 * 7"},
                              headers={"X-Request-Id": r}, timeout=120)
    assert status == 200 and doc["result"] == "42", (status, doc)
    e = find_entry(api, r, action="exec_oneshot")
    assert e["outcome"] == "ok" and e["code_sha256"] == hashlib.sha256(b"6 * 7").hexdigest(), e


def test_session_and_file_entries_in_order(daemon, api):
    s = api.create()
    sid = s["id"]
    try:
        status, doc = put_bytes(daemon.port, sid, "dir/a.txt", b"hello audit")
        assert status == 201, (status, doc)
        assert api.request("DELETE", files_url(sid, "dir/a.txt"))[0] == 204
        # A delete that fails is recorded with its error code.
        assert error_of(api.request("DELETE", files_url(sid, "nope")))[0] == 404
        # So is an upload refused for its size (the session's disk_mb).
        big = s["limits"]["disk_mb"] * 1024 * 1024 + 1
        status, _ = api.request("PUT", files_url(sid, "big"), raw=b"",
                                headers={"Content-Length": str(big)})
        assert status == 413, status
    finally:
        assert api.delete(sid) == 204
    want = ["session_create", "file_write", "file_delete", "file_delete", "file_write",
            "session_delete"]
    wait_for(lambda: [e["action"] for e in entries_of(api, session=sid)] == want, 10,
             what="the session's six entries")
    got = entries_of(api, session=sid)
    assert got[1]["path"] == "dir/a.txt" and got[1]["size"] == len(b"hello audit"), got[1]
    assert got[2]["path"] == "dir/a.txt" and got[2]["outcome"] == "ok", got[2]
    assert got[3]["path"] == "nope" and got[3]["outcome"] == "not_found", got[3]
    assert got[4]["path"] == "big" and got[4]["outcome"] == "payload_too_large", got[4]
    assert "size" not in got[4], got[4]
    assert all(e["outcome"] == "ok" for e in (got[0], got[5])), got
    # Newest last, and ids grow.
    ids = [sid_key(e["id"]) for e in got]
    assert ids == sorted(ids), ids


def test_admin_gc_and_drain_entries(make_daemon):
    d = make_daemon()
    r = rid()
    status, doc = d.api.request("POST", "/v1/admin/gc", headers={"X-Request-Id": r},
                                timeout=120)
    assert status == 200, (status, doc)
    e = find_entry(d.api, r, action="admin_gc")
    assert e["outcome"] == "ok" and "session" not in e, e

    r = rid()
    status, _ = d.api.request("POST", "/v1/admin/drain", headers={"X-Request-Id": r})
    assert status == 202
    # The daemon exits after a drain: the stream in Redis and the log keep it.
    wait_for(lambda: d.proc.poll() is not None, 60, what="the drained daemon to exit")
    lines = audit_lines(d, r)
    assert len(lines) == 1 and lines[0]["action"] == "admin_drain", lines
    stream = d.redis.cli("XRANGE", d.prefix + "audit", "-", "+")
    assert r in stream and "admin_drain" in stream, stream[-2000:]


# ---------------------------------------------------------------- the log


def test_log_line_is_the_entry_and_survives_hostile_code(daemon, api, session):
    sid = session["id"]
    code = ('s = "line1\\nline2"\n# "quoted" \'single\' \\ back\\slash \x01\x07\x1b[31mred\x1b[0m'
            '\r\n# tab\there \u2028 sep \x7f del\ns\n')
    r = rid()
    result = exec_with(api, sid, code, {"X-Request-Id": r, "traceparent": TRACEPARENT})
    assert result["status"] == "ok", result
    e = find_entry(api, r, session=sid)
    wait_for(lambda: audit_lines(daemon, r), 10, what="the audit line in the log")
    lines = audit_lines(daemon, r)
    assert len(lines) == 1, lines
    logged = lines[0]
    assert logged["code_head"] == code and logged["traceparent"] == TRACEPARENT, logged
    # The same entry as in the stream (which adds its id).
    assert {**logged, "id": e["id"]} == e, (logged, e)
    # One physical line: no raw control character made it through.
    raw = [ln for ln in daemon.read_log().split("\n") if r in ln and ln.startswith("{")]
    assert len(raw) == 1 and all(ord(ch) >= 0x20 for ch in raw[0]), raw


# ---------------------------------------------------------------- retention


def test_retention_cap(make_daemon, api):
    cap = 50
    d = make_daemon("--audit-max-entries", str(cap))
    with new_session(d.api) as s:
        for i in range(200):
            d.api.exec(s["id"], str(i))
    key = d.prefix + "audit"
    # MAXLEN ~ trims whole stream nodes only: the length stays at the cap
    # plus at most one node's worth (stream-node-max-entries), as Redis
    # documents for the approximate form.
    node = int(d.redis.cli("CONFIG", "GET", "stream-node-max-entries").splitlines()[1])
    n = int(d.redis.cli("XLEN", key))
    assert cap <= n <= cap + node, (n, cap, node)
    # The newest survive.
    last = entries_of(d.api, action="exec", limit=1)
    assert last[0]["code_head"] == "199", last


# ---------------------------------------------------------------- reading


def sid_key(stream_id):
    return tuple(int(x) for x in stream_id.split("-"))


def xadd(d, tenant, action, session, n=1):
    """Entries written straight into the daemon's stream, as it would."""
    for i in range(n):
        entry = {"type": "audit", "time": "2026-12-01T12:00:00.000Z", "action": action,
                 "tenant": tenant, "key_id": "k-" + tenant, "session": session,
                 "request_id": "%s-%s-%d" % (tenant, action, i), "outcome": "ok",
                 "duration_ms": i, "node": d.node}
        d.redis.cli("XADD", d.prefix + "audit", "*", "time", "1", "action", action,
                    "tenant", tenant, "session", session, "outcome", "ok",
                    "json", json.dumps(entry))


def test_filters_paging_and_tenant_scoping(make_daemon):
    d = make_daemon()
    api = d.api
    xadd(d, "acme", "exec", "s-acme-1", n=25)
    xadd(d, "acme", "file_write", "s-acme-2", n=3)
    xadd(d, "globex", "exec", "s-globex", n=7)

    # The tenant route: the caller's tenant only (here "default"), whatever
    # it asks for.
    assert entries_of(api, admin=False) == []
    assert entries_of(api, admin=False, tenant="acme") == []
    assert entries_of(api, admin=False, session="s-acme-1") == []
    # The admin route: every tenant, or one.
    assert len(entries_of(api, limit=1000)) == 35
    acme = entries_of(api, tenant="acme", limit=1000)
    assert len(acme) == 28 and {e["tenant"] for e in acme} == {"acme"}, acme
    assert {e["tenant"] for e in entries_of(api, tenant="globex")} == {"globex"}
    assert len(entries_of(api, tenant="acme", action="file_write")) == 3
    assert {e["session"] for e in entries_of(api, session="s-globex")} == {"s-globex"}

    # Without since: the latest `limit`, newest last, next = the newest.
    latest = audit(api, tenant="acme", action="exec", limit=5)
    assert [e["request_id"] for e in latest["entries"]] == \
        ["acme-exec-%d" % i for i in range(20, 25)], latest
    # Paging forward from the start: 10, 10, 5, then nothing; next chains.
    pages, since = [], "0-0"
    while True:
        page = audit(api, tenant="acme", action="exec", limit=10, since=since)
        if not page["entries"]:
            assert page["next"] == since, page
            break
        pages.append([e["request_id"] for e in page["entries"]])
        since = page["next"]
        # next is the last entry looked at: the last one given on a full
        # page, else past the non-matching ones that were scanned too.
        if len(page["entries"]) == 10:
            assert since == page["entries"][-1]["id"], page
        else:
            assert sid_key(since) >= sid_key(page["entries"][-1]["id"]), page
    assert [len(p) for p in pages] == [10, 10, 5], pages
    assert sum(pages, []) == ["acme-exec-%d" % i for i in range(25)]
    # since as an RFC 3339 time: everything after it (the stream ids are
    # Redis's clock), and nothing after now + 1 h.
    assert len(entries_of(api, since="2000-01-01T00:00:00Z", limit=1000)) == 35
    assert entries_of(api, since="2999-01-01T00:00:00.000Z") == []

    # Bad parameters are refused.
    for bad in ({"limit": "0"}, {"limit": "1001"}, {"limit": "x"}, {"wait_s": "31"},
                {"since": "yesterday"}, {"since": "12-ab"}):
        path = "/v1/admin/audit?" + urllib.parse.urlencode(bad)
        assert error_of(api.request("GET", path)) == (400, "bad_request"), bad
    # A filter that does not decode is refused, never read as "no filter".
    for raw in ("tenant=%zz", "session=a%00b", "action=%"):
        assert error_of(api.request("GET", "/v1/admin/audit?" + raw)) == (400, "bad_request")
        assert error_of(api.request("GET", "/v1/audit?" + raw)) == (400, "bad_request")


def test_hostile_stream_content_is_skipped(make_daemon):
    """What Redis holds is outside input: entries that are not JSON objects
    are left out, the rest still served."""
    d = make_daemon()
    key = d.prefix + "audit"
    d.redis.cli("XADD", key, "*", "tenant", "default", "json", "{not json")
    d.redis.cli("XADD", key, "*", "tenant", "default", "json", "[1,2]")
    d.redis.cli("XADD", key, "*", "tenant", "default")
    d.redis.cli("XADD", key, "*", "tenant", "default", "json", '{"action":"exec","id":"forged"}')
    got = entries_of(d.api, admin=False)
    assert len(got) == 1 and got[0]["action"] == "exec" and got[0]["id"] != "forged", got


def test_long_poll(make_daemon):
    d = make_daemon()
    api = d.api
    start = audit(api)["next"]
    # Nothing new: an empty answer once wait_s is over.
    doc = audit(api, since=start, wait_s=1)
    assert doc["entries"] == [] and doc["next"] == start, doc
    got = {}

    def poll():
        got["doc"] = audit(api, since=start, wait_s=20, action="admin_gc")

    t = threading.Thread(target=poll)
    t.start()
    try:
        r = rid()
        assert api.request("POST", "/v1/admin/gc", headers={"X-Request-Id": r},
                           timeout=120)[0] == 200
    finally:
        t.join(60)
    assert [e["request_id"] for e in got["doc"]["entries"]] == [r], got


def test_ctl_audit(make_daemon):
    d = make_daemon()
    xadd(d, "acme", "exec", "s-acme", n=3)
    with new_session(d.api) as s:
        sid = s["id"]
        code = "print('ctl')"
        d.api.exec(sid, code)
        sha = hashlib.sha256(code.encode()).hexdigest()
        wait_for(lambda: entries_of(d.api, session=sid, action="exec"), 10, what="the entry")

        out = d.ctl("audit", "--session", sid)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert [ln.split()[2] for ln in lines] == ["session_create", "exec"], out.stdout
        f = lines[1].split()
        assert f[1] == "default" and f[3] == sid and f[4] == "ok" and f[5].endswith("ms")
        assert f[6] == sha[:12], lines[1]
        # The tenant route sees none of acme's; --tenant and --all do.
        assert "acme" not in d.ctl("audit").stdout
        out = d.ctl("audit", "--tenant", "acme", "--json")
        docs = [json.loads(ln) for ln in out.stdout.splitlines()]
        assert len(docs) == 3 and {e["tenant"] for e in docs} == {"acme"}, out.stdout
        assert len(d.ctl("audit", "--all", "--limit", "2").stdout.splitlines()) == 2
        out = d.ctl("audit", "--all", "--action", "exec", "--json")
        assert {json.loads(ln)["action"] for ln in out.stdout.splitlines()} == {"exec"}

        # --follow prints new entries as they come, until Ctrl-C (exit 0).
        p = subprocess.Popen([CTL_BIN, "--server", "http://127.0.0.1:%d" % d.port, "audit",
                              "--follow", "--session", sid, "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            seen = []
            reader = threading.Thread(target=lambda: seen.extend(iter(p.stdout.readline, "")))
            reader.start()
            wait_for(lambda: len(seen) >= 2, 20, what="the first page of --follow")
            d.api.exec(sid, "'followed'")
            wait_for(lambda: any("followed" in ln for ln in seen), 30,
                     what="--follow to print the new entry")
        finally:
            p.send_signal(signal.SIGINT)
            p.wait(30)
            reader.join(10)
        assert p.returncode == 0, p.stderr.read()


# ---------------------------------------------------------------- Redis down


def test_redis_down_exec_works_log_line_and_drop_counter(tmpdir_session):
    redis = RedisServer(tmpdir_session)
    d = None
    try:
        d = Daemon(redis, tmpdir_session)
        s = d.api.create()
        before = d.metric("ci_audit_dropped_total")
        redis.kill()
        wait_for(lambda: d.metric('ci_up{dependency="redis"}') == 0, 10,
                 what="the daemon to see Redis down")
        r = rid()
        result = exec_with(d.api, s["id"], "1 + 1", {"X-Request-Id": r})
        assert result["status"] == "ok" and result["result"] == "2", result
        wait_for(lambda: audit_lines(d, r), 10, what="the audit line in the log")
        assert audit_lines(d, r)[0]["action"] == "exec"
        # Counted when the batch goes out (5 ms after the entry is queued).
        wait_for(lambda: d.metric("ci_audit_dropped_total") >= before + 1, 10,
                 what="the entry counted as dropped")
        # Reading the trail says Redis is down, and the daemon keeps serving.
        assert error_of(d.api.request("GET", "/v1/audit"))[0] == 503
        redis.start()
        wait_for(lambda: d.metric('ci_up{dependency="redis"}') == 1, 20,
                 what="the daemon to reconnect")
        r = rid()
        exec_with(d.api, s["id"], "2", {"X-Request-Id": r})
        find_entry(d.api, r)
        d.api.delete(s["id"])
    finally:
        if d is not None:
            if redis.proc.poll() is not None:
                redis.start()
            d.finish()
        redis.stop()


def test_metrics_has_the_drop_counter(daemon):
    assert "ci_audit_dropped_total" in daemon.metrics()


def test_config_bounds():
    out = subprocess.run([DAEMON_BIN, "--audit-max-entries", "1"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode != 0 and "outside 10..100000000" in out.stderr, out.stderr
    out = subprocess.run([DAEMON_BIN, "--help"], capture_output=True, text=True, timeout=30)
    assert "--audit-max-entries" in out.stdout + out.stderr


def test_in_flight_cap_drops_and_counts(tmpdir_session):
    """A Redis that accepts but does not answer (stopped): audit writes stay
    in flight up to the cap, the rest are dropped and counted, executions go
    on, and every entry is in the log."""
    redis = RedisServer(tmpdir_session)
    d = None
    try:
        d = Daemon(redis, tmpdir_session)
        s = d.api.create()
        key = d.prefix + "audit"
        wait_for(lambda: redis.cli("XLEN", key) == "1", 10, what="the session_create entry")
        before = d.metric("ci_audit_dropped_total")
        n = 300
        os.kill(redis.proc.pid, signal.SIGSTOP)
        try:
            for i in range(n):
                d.api.exec(s["id"], str(i))
            # Queued entries reach the store within a few ms (audit.c's
            # flush): 256 stay in flight (STORE_AUDIT_INFLIGHT_MAX), the
            # rest are dropped.
            wait_for(lambda: d.metric("ci_audit_dropped_total") - before >= n - 256, 10,
                     what="the writes past the in-flight cap to be dropped")
            dropped = d.metric("ci_audit_dropped_total") - before
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)
        wait_for(lambda: int(redis.cli("XLEN", key)) == 1 + n - dropped, 20,
                 what="the writes in flight to land")
        log = d.read_log()
        assert all('"code_head":"%d"' % i in log for i in range(n))
        d.api.delete(s["id"])
    finally:
        if d is not None:
            d.finish()
        redis.stop()


def test_long_poll_cap_gone_clients_and_shutdown(make_daemon):
    """At most 64 long polls at a time (more get 503 at once); a client that
    goes away frees its place; a poll still waiting at shutdown is answered
    and freed (the ASan daemon reports no leak)."""
    d = make_daemon()
    start = audit(d.api)["next"]
    req = ("GET /v1/audit?wait_s=30&since=%s HTTP/1.1\r\nHost: localhost\r\n\r\n" % start).encode()
    socks = [raw_connect(d.port, req) for _ in range(64)]

    def probe():
        path = "/v1/audit?wait_s=1&since=" + start
        return d.api.request("GET", path, timeout=30)[0]

    try:
        wait_for(lambda: probe() == 503, 20, what="the 65th long poll to be refused")
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: probe() == 200, 20, what="the gone clients' places to be freed")
    last = raw_connect(d.port, req)
    try:
        wait_for(lambda: probe() == 200, 5, what="the daemon to serve")
        assert d.stop() == 0
        answer = last.recv(65536)
        assert answer == b"" or status_of(answer) == 503, answer[:200]
    finally:
        last.close()
