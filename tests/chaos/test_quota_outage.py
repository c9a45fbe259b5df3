"""Quotas while Redis is down (issue 11): a quota that needs Redis to be
checked answers 503 unavailable, never a silent pass; with the quotas
involved unlimited, executions go on as before; when Redis is back the
checks are made again."""
from chaos_lib import assert_unavailable, exec_code, exec_value, request
from harness import wait_for


def test_quota_checks_need_redis_and_say_so(restartable_redis, chaos):
    r = restartable_redis
    d = chaos("--pool-size", "0", redis=r)
    a = d.api.create()["id"]
    b = d.api.create()["id"]
    status, doc, _ = request(d, "PUT", "/v1/admin/tenants/default/quota", {"executions": 5})
    assert status == 200, (status, doc)
    assert exec_value(d, a, "1 + 1") == "2"
    # The executions quota (of b's tenant) is known here; its check needs Redis.
    r.kill()
    wait_for(lambda: request(d, "GET", "/readyz", timeout=5)[0] == 503, 5, interval=0.05,
             what="redis seen down")
    assert_unavailable(*exec_code(d, b, "2 + 2"), what="exec with an executions quota")
    status, doc, _ = request(d, "GET", "/v1/usage")
    assert status == 503, (status, doc)
    # The requests_per_second quota is 0: tenant requests go on.
    status, doc, _ = request(d, "GET", "/v1/sessions")
    assert status == 200, (status, doc)
    r.start()
    wait_for(lambda: request(d, "GET", "/readyz", timeout=5)[0] == 200, 10, interval=0.05,
             what="redis back")
    assert exec_value(d, b, "3 + 3") == "6"
    # Redis came back empty: the tenant's override is gone, and the flags (0)
    # apply again once the daemon has read it anew (the admin GET reads it).
    status, doc, _ = request(d, "GET", "/v1/admin/tenants/default/quota")
    assert status == 200 and doc["overrides"] == {}, (status, doc)
    # Without a quota to check, Redis is not on an execution's path.
    r.kill()
    wait_for(lambda: request(d, "GET", "/readyz", timeout=5)[0] == 503, 5, interval=0.05,
             what="redis seen down again")
    assert exec_value(d, a, "4 + 4") == "8"
    r.start()
    wait_for(lambda: request(d, "GET", "/readyz", timeout=5)[0] == 200, 10, interval=0.05,
             what="redis back again")


def test_reservations_are_written_back_to_an_empty_redis(restartable_redis, chaos):
    r = restartable_redis
    d = chaos("--pool-size", "0", "--quota-sessions", "1", redis=r)
    d.api.create()
    status, doc, _ = request(d, "POST", "/v1/sessions", {})
    assert status == 429 and doc["error"]["quota"] == "sessions", (status, doc)
    mark = d.log_mark()
    r.kill()
    wait_for(lambda: request(d, "GET", "/readyz", timeout=5)[0] == 503, 5, interval=0.05,
             what="redis seen down")
    r.start()  # empty
    d.wait_log("wrote 1 live sessions", since=mark)
    # The live session holds its slot again: the quota still holds.
    status, doc, _ = request(d, "GET", "/v1/usage")
    assert status == 200 and doc["usage"]["sessions"] == 1, (status, doc)
    status, doc, _ = request(d, "POST", "/v1/sessions", {})
    assert status == 429 and doc["error"]["quota"] == "sessions", (status, doc)
