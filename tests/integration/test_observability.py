"""Issue 11, observability: /metrics in the Prometheus text format (checked by
promtool on the live page after real traffic), latency histograms that count
what was done, requests by route pattern and status, session endings by
reason, per-tenant usage, and the log formats (every line stamped; JSON lines
parse and carry the request id and traceparent)."""
import json
import re
import shutil
import signal
import subprocess
import time

import pytest

from harness import wait_for

PROMTOOL = shutil.which("promtool")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def page(d):
    r = d.api.send("GET", "/metrics", timeout=10)
    assert r.status == 200, r.status
    assert r.header("content-type", "").startswith("text/plain; version=0.0.4")
    return r.body.decode()


def promtool_check(text):
    """promtool's verdict on a page: (exit status, what it printed)."""
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, (p.stdout + p.stderr).strip()


def value(metrics, series):
    return metrics.get(series, 0.0)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian's prometheus package) missing")
def test_metrics_after_traffic_pass_promtool_and_count_what_was_done(make_daemon):
    started = time.time()
    d = make_daemon("--pool-size", "1")
    api = d.api
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, interval=0.1, what="a full pool")
    before = d.metrics()
    # Two creates (the first from the pool, the second cold as the pool is
    # refilling or not), three execs with results, a 404 route, a malformed
    # id, a delete, and an idle expiry.
    a = api.create()
    b = api.create(idle_timeout_s=2)
    assert api.exec(a["id"], "x = 1")["status"] == "ok"
    assert api.exec(a["id"], "1/0")["status"] == "error"
    assert api.exec(b["id"], "print(2)")["status"] == "ok"
    assert api.request("GET", "/no/such/route")[0] == 404
    assert api.request("GET", "/v1/sessions/not-an-id")[0] == 404
    api.delete(a["id"])
    wait_for(lambda: api.state(b["id"]) in (None, "expired", "gone"), 20, interval=0.1,
             what="the idle session to expire")
    wait_for(lambda: d.metric('ci_session_endings_total{reason="idle"}') == 1, 10,
             interval=0.05, what="the idle ending counted")

    text = page(d)
    rc, said = promtool_check(text)
    assert rc == 0 and said == "", said

    m = d.metrics()
    hist = 'ci_session_create_duration_seconds_count{pool="%s"}'
    creates = sum(value(m, hist % k) - value(before, hist % k) for k in ("hit", "miss"))
    assert creates == 2, creates
    assert value(m, hist % "hit") - value(before, hist % "hit") >= 1  # the pool served one
    assert m["ci_exec_duration_seconds_count"] - value(before, "ci_exec_duration_seconds_count") == 3
    assert m['ci_exec_duration_seconds_bucket{le="+Inf"}'] == m["ci_exec_duration_seconds_count"]
    assert 0 < m["ci_exec_duration_seconds_sum"] < 60 * 3
    # Requests by the route table's pattern, never the raw path.
    created = 'ci_http_requests_total{route="/v1/sessions/?",method="POST",status="201"}'
    assert m[created] == 2
    execs = 'ci_http_requests_total{route="/v1/sessions/{id}/exec",method="POST",status="200"}'
    assert m[execs] == 3
    assert m['ci_http_requests_total{route="other",method="GET",status="404"}'] == 2
    assert not [k for k in m if "not-an-id" in k or "/no/such" in k]
    deleted = 'ci_http_requests_total{route="/v1/sessions/{id}/?",method="DELETE",status="204"}'
    assert m[deleted] == 1
    # Endings by reason; every reason is always there.
    for reason in ("deleted", "idle", "lifetime", "failed", "crashed", "drained", "node_lost"):
        assert 'ci_session_endings_total{reason="%s"}' % reason in m
    assert m['ci_session_endings_total{reason="deleted"}'] == 1
    assert m['ci_session_endings_total{reason="idle"}'] == 1
    # The only tenant without keys.
    assert m['ci_tenant_execs_total{tenant="default"}'] == 3
    assert m['ci_tenant_sessions_created_total{tenant="default"}'] == 2
    assert 0 < m['ci_tenant_exec_seconds_total{tenant="default"}'] <= m["ci_exec_duration_seconds_sum"] + 1e-3
    # Build info and the loop lag, in seconds (the ms gauge is gone).
    # Build info is what GET /version says (one source, lib/version.h).
    ver = d.api.send("GET", "/version").doc
    assert m['ci_build_info{version="%s",git="%s"}' % (ver["version"], ver["git"])] == 1
    assert [k for k in m if k.startswith("ci_build_info")] == \
        ['ci_build_info{version="%s",git="%s"}' % (ver["version"], ver["git"])]
    assert "ci_event_loop_lag_seconds" in m and "ci_loop_lag_max_ms" not in m
    assert "# TYPE ci_session_create_duration_seconds histogram" in text
    # The process gauges agree with what /proc says of the daemon.
    rss = d.rss_kb() * 1024
    assert 0.5 * rss < m["process_resident_memory_bytes"] < 2 * rss, (m["process_resident_memory_bytes"], rss)
    assert 0 < m["process_cpu_seconds_total"] < 600
    assert started - 1 <= m["process_start_time_seconds"] <= time.time()
    assert 'ci_heap_bytes{what="in_use"}' in m and 'ci_heap_bytes{what="mapped"}' in m


def is_raw_json(line):
    """A JSON line written as is (log_raw_line: the audit's, which carry
    their own time), the only lines of a text log without the stamp first."""
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def log_lines(d, mark=0):
    # "\n" only: an audit line may carry U+2028 raw, which splitlines() would cut.
    return [line for line in d.log_since(mark).split("\n") if line.strip()]


def test_json_log_lines_parse_and_carry_request_id_and_traceparent(make_daemon):
    d = make_daemon("--log-format", "json")
    api = d.api
    mark = d.log_mark()
    r = api.send("GET", "/healthz", headers={"X-Request-Id": "obs-json-1",
                                             "traceparent": TRACEPARENT,
                                             "User-Agent": "obs-test"})
    assert r.status == 200 and r.header("x-request-id") == "obs-json-1"
    assert api.request("GET", "/v1/sessions/not-an-id")[0] == 404
    d.wait_log('"request_id":"obs-json-1"', since=mark)
    d.wait_log('"status":404', since=mark)
    docs = []
    for line in log_lines(d):
        doc = json.loads(line)  # every line is one JSON object
        assert isinstance(doc, dict) and STAMP.match(doc["ts"]), line
        assert doc["level"] in ("debug", "info", "warn", "error") and "msg" in doc, line
        docs.append(doc)
    (hit,) = [x for x in docs if x.get("request_id") == "obs-json-1"]
    assert hit["msg"] == "access" and hit["level"] == "info"
    assert hit["method"] == "GET" and hit["route"] == "/healthz" and hit["status"] == 200
    assert hit["traceparent"] == TRACEPARENT and hit["tenant"] == "default"
    assert hit["bytes"] == len(r.body) and hit["duration_ms"] >= 0
    assert hit["peer"].startswith("127.0.0.1:") and hit["user_agent"] == "obs-test"
    (miss,) = [x for x in docs if x.get("msg") == "access" and x.get("status") == 404]
    assert miss["route"] == "other" and miss["path"] == "/v1/sessions/not-an-id"
    assert "traceparent" not in miss and len(miss["request_id"]) >= 16  # ours


def test_text_log_lines_are_stamped_and_the_access_line_has_the_ids(daemon):
    mark = daemon.log_mark()
    r = daemon.api.send("GET", "/readyz", headers={"X-Request-Id": "obs-text-1",
                                                   "traceparent": TRACEPARENT})
    assert r.status == 200
    daemon.wait_log("request_id=obs-text-1", since=mark)
    (line,) = [x for x in log_lines(daemon, mark) if "request_id=obs-text-1" in x]
    assert STAMP.match(line.split(" ", 1)[0]), line
    for want in (" info  access ", "method=GET", "route=/readyz", "status=200",
                 "traceparent=" + TRACEPARENT, "tenant=default", "peer=127.0.0.1:"):
        assert want in line, (want, line)
    for line in log_lines(daemon):
        assert STAMP.match(line.split(" ", 1)[0]) or is_raw_json(line), line


def test_log_format_is_checked(make_daemon, redis_server, tmpdir_session):
    from harness.daemon import DAEMON_BIN
    p = subprocess.run([DAEMON_BIN, "--log-format", "xml", "--redis", redis_server.url],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "log-format: expected text or json" in p.stderr


def test_a_killed_container_counts_as_crashed(make_daemon):
    d = make_daemon("--pool-size", "0")
    s = d.api.create()
    (cid,) = d.containers("label=ci.session=" + s["id"])
    subprocess.run(["docker", "kill", cid], capture_output=True, timeout=60, check=True)
    wait_for(lambda: d.metric('ci_session_endings_total{reason="crashed"}') == 1, 20,
             interval=0.05, what="the crash counted")
    m = d.metrics()
    assert m['ci_session_endings_total{reason="deleted"}'] == 0
    assert m['ci_session_endings_total{reason="idle"}'] == 0


def test_log_format_changes_on_sighup(make_daemon, tmp_path):
    conf = tmp_path / "ci.conf"
    conf.write_text("log-format = text\n")
    d = make_daemon("--config", str(conf))
    mark = d.log_mark()
    conf.write_text("log-format = json\n")
    d.proc.send_signal(signal.SIGHUP)  # by pid
    # The option's own line is the last in the old format; the summary after
    # it is the first in the new one.
    d.wait_log("SIGHUP: log-format: text -> json", since=mark)
    d.wait_log('"msg":"SIGHUP: configuration reloaded; 1 options applied', since=mark)
    after = d.log_mark()
    assert d.api.send("GET", "/healthz", headers={"X-Request-Id": "obs-hup"}).status == 200
    d.wait_log('"request_id":"obs-hup"', since=after)
    for line in log_lines(d, after):
        json.loads(line)
