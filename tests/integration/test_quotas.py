"""Per-tenant quotas (issue 11): each quota's 429 with Retry-After and the
quota's name, slots given back on every ending, overrides over the flags,
bad PUT bodies, and quotas that hold across two daemons on one Redis.

Without --admin-key-file every caller is tenant "default" and admin, so the
quotas here are the tenant "default"'s (by flag or by PUT)."""
import signal
import subprocess
import threading

from harness import wait_for

QUOTA = "/v1/admin/tenants/default/quota"
USAGE = "/v1/admin/tenants/default/usage"


def put_quota(d, body, tenant="default"):
    status, doc = d.api.request("PUT", "/v1/admin/tenants/%s/quota" % tenant, body=body)
    assert status == 200, (status, doc)
    return doc


def usage(d):
    status, doc = d.api.request("GET", USAGE)
    assert status == 200, (status, doc)
    return doc["usage"]


def assert_refused(resp, quota):
    """A 429 quota_exceeded naming quota, with an integer Retry-After >= 1;
    returns the Retry-After."""
    assert resp.status == 429, (resp.status, resp.doc)
    err = resp.doc["error"]
    assert err["code"] == "quota_exceeded" and err["quota"] == quota, err
    retry = resp.header("Retry-After")
    assert retry is not None and retry.isdigit() and int(retry) >= 1, retry
    return int(retry)


def create(d, **body):
    return d.api.send("POST", "/v1/sessions", body=body)


def run(d, sid, code, **extra):
    return d.api.send("POST", "/v1/sessions/%s/exec" % sid, body=dict(code=code, **extra))


def test_quota_routes_overrides_and_bad_bodies(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-sessions", "5", "--quota-requests-per-second",
                    "1000")
    status, doc = d.api.request("GET", QUOTA)
    assert status == 200
    assert doc == {"tenant": "default", "overrides": {},
                   "quota": {"sessions": 5, "executions": 0, "memory_mb": 0,
                             "exec_seconds_per_hour": 0, "requests_per_second": 1000,
                             "disk_mb": 0, "snapshot_keep": 50, "snapshot_max_age_s": 2592000,
                             "stateless": True, "stateless_runs": 1}}
    doc = put_quota(d, {"sessions": 2, "executions": 0, "memory_mb": 4096})
    assert doc["overrides"] == {"sessions": 2, "executions": 0, "memory_mb": 4096}
    assert doc["quota"]["sessions"] == 2 and doc["quota"]["requests_per_second"] == 1000
    assert d.api.request("GET", QUOTA)[1] == doc
    # Another tenant's quota is its own; the stored object is replaced whole.
    other = put_quota(d, {"executions": 3}, tenant="acme-2")
    assert other["tenant"] == "acme-2" and other["quota"]["sessions"] == 5
    assert d.api.request("GET", QUOTA)[1]["overrides"]["sessions"] == 2
    assert put_quota(d, {"executions": 1})["overrides"] == {"executions": 1}
    assert put_quota(d, {})["overrides"] == {}
    for body, word in (({"sessions": 1, "bogus": 2}, "bogus"), ({"executions": -1}, "executions"),
                       ({"memory_mb": 1.5}, "memory_mb"), ({"sessions": "3"}, "sessions"),
                       ([1, 2], "object"), ({"sessions": None}, "sessions")):
        status, doc = d.api.request("PUT", QUOTA, body=body)
        assert status == 400 and doc["error"]["code"] == "bad_request", (body, doc)
        assert word in doc["error"]["message"], (body, doc)
    status, doc = d.api.request("PUT", QUOTA, raw=b"{not json")
    assert status == 400
    # A bad PUT changed nothing.
    assert d.api.request("GET", QUOTA)[1]["overrides"] == {}
    for bad in ("Acme", "-x", "a.b", "x" * 64):
        status, doc = d.api.request("GET", "/v1/admin/tenants/%s/quota" % bad)
        assert status == 400 and "tenant" in doc["error"]["message"], (bad, doc)
    # Usage: the caller's own and the admin's view agree.
    status, own = d.api.request("GET", "/v1/usage")
    assert status == 200 and own["tenant"] == "default"
    assert set(own["usage"]) == {"sessions", "executions", "memory_mb", "exec_seconds_last_hour",
                                 "requests_last_second", "disk_mb"}
    # Requests are counted in batches (a tenant's every 100 ms): polling
    # /v1/usage is itself a tenant's requests.
    wait_for(lambda: d.api.request("GET", "/v1/usage")[1]["usage"]["requests_last_second"] >= 1,
             5, interval=0.05, what="requests counted")
    assert own["quota"]["sessions"] == 5


def test_sessions_quota_refuses_without_touching_the_pool_and_frees_on_end(make_daemon):
    d = make_daemon("--pool-size", "1", "--quota-sessions", "1")
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, what="a warm sandbox")
    first = d.api.create()
    wait_for(lambda: d.metric("ci_pool_size") == 1, 60, what="the pool refilled")
    hits = d.metric("ci_pool_hits_total")
    retry = assert_refused(create(d), "sessions")
    assert retry == 1
    assert d.metric("ci_pool_size") == 1 and d.metric("ci_pool_hits_total") == hits
    # The one-shot is a session too.
    assert_refused(d.api.send("POST", "/v1/exec", body={"code": "1"}), "sessions")
    assert usage(d)["sessions"] == 1
    # A delete gives the slot back.
    assert d.api.delete(first["id"]) == 204
    second = wait_for(lambda: (lambda r: r.status == 201 and r.doc)(create(d, idle_timeout_s=1)),
                      20, interval=0.2, what="a create after the delete")
    # So does an expiry.
    wait_for(lambda: d.api.request("GET", "/v1/sessions/" + second["id"])[0] == 410, 20,
             interval=0.1, what="the idle expiry")
    third = wait_for(lambda: (lambda r: r.status == 201 and r.doc)(create(d)), 20, interval=0.2,
                     what="a create after the expiry")
    # And a create that fails (an image that is not there).
    assert d.api.delete(third["id"]) == 204
    wait_for(lambda: usage(d)["sessions"] == 0, 20, what="no session held")
    status, _ = d.api.request("POST", "/v1/sessions", body={"image": "nonesuch"})
    assert status >= 400
    assert usage(d)["sessions"] == 0
    assert d.api.delete(d.api.create()["id"]) == 204


def test_override_beats_the_flag_and_zero_is_unlimited(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-sessions", "1")
    a = d.api.create()
    assert_refused(create(d), "sessions")
    put_quota(d, {"sessions": 0})
    b = d.api.create()
    c = d.api.create()
    put_quota(d, {"sessions": 3})
    assert_refused(create(d), "sessions")
    put_quota(d, {})  # back to the flag: 1, and 3 are live
    assert_refused(create(d), "sessions")
    for s in (a, b, c):
        assert d.api.delete(s["id"]) == 204


def test_executions_quota_holds_the_slot_while_running(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-executions", "1")
    a, b = d.api.create(), d.api.create()
    done = {}

    def long_run():
        done["r"] = run(d, a["id"], "import time\ntime.sleep(4)\n'slept'")

    t = threading.Thread(target=long_run)
    t.start()
    try:
        wait_for(lambda: d.api.state(a["id"]) == "busy", 20, what="a busy")
        assert_refused(run(d, b["id"], "1 + 1"), "executions")
        assert_refused(d.api.send("POST", "/v1/exec", body={"code": "1"}), "executions")
        assert usage(d)["executions"] == 1
    finally:
        t.join(60)
    assert done["r"].status == 200 and done["r"].doc["result"] == "'slept'"
    wait_for(lambda: run(d, b["id"], "2 + 2").status == 200, 20, interval=0.2,
             what="an execution after the first ended")
    assert usage(d)["executions"] == 0


def test_memory_quota_sums_the_sessions_limits(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-memory-mb", "700")
    a = d.api.create(limits={"memory_mb": 512})
    assert_refused(create(d, limits={"memory_mb": 256}), "memory_mb")
    b = d.api.create(limits={"memory_mb": 128})
    assert usage(d)["memory_mb"] == 640
    assert d.api.delete(a["id"]) == 204
    c = wait_for(lambda: (lambda r: r.status == 201 and r.doc)(create(d, limits={"memory_mb": 512})),
                 20, interval=0.2, what="memory given back")
    for s in (b, c):
        assert d.api.delete(s["id"]) == 204


def test_exec_seconds_per_hour(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-exec-seconds-per-hour", "1")
    s = d.api.create()
    r = run(d, s["id"], "import time\ntime.sleep(1.5)")
    assert r.status == 200, r.doc
    retry = assert_refused(run(d, s["id"], "1"), "exec_seconds_per_hour")
    # The time leaves the window an hour after it was used.
    assert 3500 <= retry <= 3600, retry
    assert usage(d)["exec_seconds_last_hour"] >= 1.5
    put_quota(d, {"exec_seconds_per_hour": 0})
    assert run(d, s["id"], "1").status == 200
    d.api.delete(s["id"])


def test_requests_per_second(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-requests-per-second", "2")
    client = d.api.keep_alive()
    answers = [client.send("GET", "/v1/sessions") for _ in range(30)]
    refused = [r for r in answers if r.status == 429]
    assert refused and len(refused) < 30
    assert all(r.status in (200, 429) for r in answers)
    for r in refused:
        assert assert_refused(r, "requests_per_second") == 1
    # The probes and the admin routes are not a tenant's requests.
    assert d.api.request("GET", "/healthz")[0] == 200
    assert d.api.request("GET", USAGE)[0] == 200
    # The bucket refills.
    wait_for(lambda: client.send("GET", "/v1/sessions").status == 200, 10, interval=0.2,
             what="the bucket refilled")
    client.close()


def test_sessions_quota_holds_across_two_daemons(make_daemon):
    a = make_daemon("--pool-size", "0")
    b = make_daemon("--pool-size", "0", "--key-prefix", a.prefix)
    put_quota(a, {"sessions": 2})
    sa = a.api.create()
    wait_for(lambda: b.api.request("GET", QUOTA)[1]["quota"]["sessions"] == 2, 5,
             what="b sees the quota")
    sb = b.api.create()
    assert_refused(create(a), "sessions")
    assert_refused(create(b), "sessions")
    assert usage(b)["sessions"] == 2
    # Deleted on b, the slot is free on a.
    assert b.api.delete(sb["id"]) == 204
    sc = wait_for(lambda: (lambda r: r.status == 201 and r.doc)(create(a)), 20, interval=0.2,
                  what="a create on a after a delete on b")
    for sid in (sa["id"], sc["id"]):
        assert a.api.delete(sid) == 204
    wait_for(lambda: usage(a)["sessions"] == 0, 20, what="nothing held")
    # Racing creates from both nodes never exceed the quota.
    put_quota(a, {"sessions": 3})
    wait_for(lambda: b.api.request("GET", QUOTA)[1]["quota"]["sessions"] == 3, 5,
             what="b sees the new quota")
    results = []
    lock = threading.Lock()

    def one(d):
        r = create(d)
        with lock:
            results.append((d, r))

    threads = [threading.Thread(target=one, args=(a if i % 2 else b,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    made = [(d, r.doc["id"]) for d, r in results if r.status == 201]
    refused = [r for _, r in results if r.status == 429]
    assert len(made) == 3 and len(refused) == 5, [(r.status, r.doc) for _, r in results]
    for r in refused:
        assert_refused(r, "sessions")
    assert usage(a)["sessions"] == 3
    for d, sid in made:
        assert d.api.delete(sid) == 204


def test_a_crashed_node_s_reservation_is_released_by_its_recovery(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-sessions", "1")
    s = d.api.create()
    d.stop(9)
    # The container goes while the node is down: on its return, recovery
    # finds the session dead, and its tombstone releases the slot.
    subprocess.run(["docker", "rm", "-f", *d.containers("label=ci.session=" + s["id"])],
                   capture_output=True, timeout=60, check=True)
    d.restart()
    wait_for(lambda: d.api.request("GET", "/v1/sessions/" + s["id"])[0] == 410, 30,
             interval=0.2, what="the session tombstoned by recovery")
    wait_for(lambda: usage(d)["sessions"] == 0, 20, what="the slot given back")
    assert d.api.delete(d.api.create()["id"]) == 204


def test_ctl_quota_and_usage(make_daemon):
    d = make_daemon("--pool-size", "0", "--quota-sessions", "4")
    out = d.ctl("quota", "default")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["QUOTA", "LIMIT", "FROM"]
    assert ["sessions", "4", "server"] in [l.split() for l in lines]
    assert ["executions", "unlimited", "server"] in [l.split() for l in lines]
    out = d.ctl("quota", "default", "--set", "sessions=1", "--set", "memory_mb=2048")
    assert out.returncode == 0, out.stderr
    rows = [l.split() for l in out.stdout.splitlines()]
    assert ["sessions", "1", "tenant"] in rows and ["memory_mb", "2048", "tenant"] in rows
    # --set keeps what it does not name; 'default' drops the tenant's own.
    out = d.ctl("quota", "default", "--set", "sessions=default")
    rows = [l.split() for l in out.stdout.splitlines()]
    assert ["sessions", "4", "server"] in rows and ["memory_mb", "2048", "tenant"] in rows
    assert d.api.request("GET", QUOTA)[1]["overrides"] == {"memory_mb": 2048}
    for bad in (("quota", "default", "--set", "bogus=1"), ("quota", "default", "--set", "sessions=-1"),
                ("quota", "Bad"), ("usage", "a/b")):
        out = d.ctl(*bad)
        assert out.returncode == 2, (bad, out.stdout, out.stderr)
    out = d.ctl("--json", "quota", "default")
    assert out.returncode == 0 and '"overrides":{"memory_mb":2048}' in out.stdout.replace(" ", "")
    # A 429 names the quota and the Retry-After.
    put_quota(d, {"sessions": 1})
    s = d.api.create()
    out = d.ctl("create")
    assert out.returncode != 0
    assert "quota_exceeded" in out.stderr and "sessions" in out.stderr and "retry in 1s" in out.stderr
    out = d.ctl("usage")
    assert out.returncode == 0, out.stderr
    rows = [l.split() for l in out.stdout.splitlines()]
    assert rows[0] == ["tenant", "default"] and ["sessions", "1", "1"] in rows
    assert ["memory_mb", "512", "unlimited"] in rows
    admin = d.ctl("usage", "default")
    assert admin.returncode == 0 and ["sessions", "1", "1"] in [l.split() for l in
                                                               admin.stdout.splitlines()]
    d.api.delete(s["id"])


def test_sighup_changes_the_quota_flags(make_daemon, tmp_path):
    conf = tmp_path / "ci.conf"
    conf.write_text("quota-sessions = 1\n")
    d = make_daemon("--pool-size", "0", "--config", str(conf))
    s = d.api.create()
    assert_refused(create(d), "sessions")
    conf.write_text("quota-sessions = 0\n")
    mark = d.log_mark()
    d.proc.send_signal(signal.SIGHUP)
    d.wait_log("SIGHUP: quota-sessions: 1 -> 0", since=mark)
    t = d.api.create()
    assert d.api.request("GET", QUOTA)[1]["quota"]["sessions"] == 0
    for sid in (s["id"], t["id"]):
        assert d.api.delete(sid) == 204


# ------------------------------------------------------------ with real tenants

ADMIN = "admin-" + "q" * 40


def test_a_key_s_quota_is_its_tenant_s_and_no_other_s(make_daemon):
    """POST /v1/admin/keys {"tenant","quota"} sets the tenant's quota (as a
    PUT would): one tenant at its limit leaves another's untouched, /v1/usage
    is the caller's own, and a bad quota makes no key."""
    d = make_daemon("--pool-size", "0", admin_key=ADMIN)
    mark = d.log_mark()
    r = d.admin.send("POST", "/v1/admin/keys", body={"tenant": "acme", "quota": {"sesions": 1}})
    assert r.status == 400 and "sesions" in r.doc["error"]["message"]
    assert d.admin.request("GET", "/v1/admin/keys?tenant=acme")[1] == {"keys": []}
    a = d.client(d.key("acme", quota={"sessions": 1, "memory_mb": 4096})["key"])
    b = d.client(d.key("bravo")["key"])
    status, doc = d.admin.request("GET", "/v1/admin/tenants/acme/quota")
    assert status == 200 and doc["overrides"] == {"sessions": 1, "memory_mb": 4096}
    first = a.send("POST", "/v1/sessions", body={})
    assert first.status == 201, first.doc
    assert_refused(a.send("POST", "/v1/sessions", body={}), "sessions")
    # bravo has no quota: its sessions are its own.
    made = [b.send("POST", "/v1/sessions", body={}) for _ in range(2)]
    assert [m.status for m in made] == [201, 201]
    status, mine = a.request("GET", "/v1/usage")
    assert status == 200 and mine["tenant"] == "acme" and mine["usage"]["sessions"] == 1
    status, theirs = b.request("GET", "/v1/usage")
    assert status == 200 and theirs["tenant"] == "bravo" and theirs["usage"]["sessions"] == 2
    # A tenant may not read or set quotas: the admin routes are the admin's.
    assert a.request("GET", "/v1/admin/tenants/acme/quota")[0] == 403
    assert a.request("PUT", "/v1/admin/tenants/acme/quota", body={"sessions": 9})[0] == 403
    # The admin actions are in the audit.
    d.wait_log('"action":"admin_quota_set"', since=mark)
    status, doc = d.admin.request("GET", "/v1/admin/audit?action=admin_quota_set")
    assert status == 200 and [e["target"] for e in doc["entries"]] == ["acme"], doc
    # ... and so is the refused create, as acme's own.
    status, doc = a.request("GET", "/v1/audit?action=session_create")
    assert status == 200 and [e["outcome"] for e in doc["entries"]] == ["ok", "quota_exceeded"], doc
    for s in [first] + made:
        owner = a if s is first else b
        assert owner.delete(s.doc["id"]) == 204


def test_an_unlimited_tenant_s_executions_are_counted_in_batches(make_daemon):
    """Without an execution quota, executions cost Redis nothing of their own:
    a short one's time goes with its tenant's next batch, a long one is
    announced at the next flush, so the usage still sees it running."""
    d = make_daemon("--pool-size", "0")
    s = d.api.create()
    for _ in range(5):
        assert run(d, s["id"], "1 + 1").status == 200
    done = {}
    t = threading.Thread(target=lambda: done.setdefault(
        "r", run(d, s["id"], "import time; time.sleep(2)")))
    t.start()
    try:
        wait_for(lambda: usage(d)["executions"] == 1, 10, interval=0.05,
                 what="the running execution in the usage")
    finally:
        t.join(30)
    assert done["r"].status == 200 and done["r"].doc["status"] == "ok"
    wait_for(lambda: usage(d)["executions"] == 0 and usage(d)["exec_seconds_last_hour"] >= 2,
             10, interval=0.05, what="the execution's end and its time in the usage")
    d.api.delete(s["id"])
