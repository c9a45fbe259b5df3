"""Hostile input to the quotas (issue 11): admin bodies that are not what
they should be, names by the thousand (the daemon's cache of tenants stays
bounded), and a Redis whose quota keys hold garbage. The daemon answers
clearly, keeps serving, and its sanitizers stay quiet (checked when each
daemon is finished)."""
import json

from harness import wait_for


def test_bad_quota_bodies_and_many_tenants(make_daemon):
    d = make_daemon("--pool-size", "0")
    path = "/v1/admin/tenants/default/quota"
    bodies = [b"", b"null", b"[]", b"{" * 40 + b"}" * 40, b'{"sessions":1e400}',
              b'{"sessions":-0.0}', b'{"sessions":18446744073709551616}',
              b'{"\\u0000":1}', b'{"sessions":1,"sessions":2,"x":3}',
              json.dumps({"k%d" % i: i for i in range(2000)}).encode(),
              b'{"sessions":"' + b"9" * 100000 + b'"}']
    for raw in bodies:
        status, doc = d.api.request("PUT", path, raw=raw,
                                    headers={"Content-Type": "application/json"})
        assert status == 400 and doc["error"]["code"] == "bad_request", (raw[:60], status, doc)
    assert d.api.request("GET", path)[1]["overrides"] == {}
    # More tenants than the daemon remembers: every answer is still right.
    client = d.api.keep_alive()
    for i in range(4200):
        r = client.send("GET", "/v1/admin/tenants/t%d/quota" % i)
        assert r.status == 200 and r.doc["tenant"] == "t%d" % i, (i, r.status, r.doc)
    put = client.send("PUT", "/v1/admin/tenants/t7/quota", body={"sessions": 3})
    assert put.status == 200 and put.doc["quota"]["sessions"] == 3
    assert client.send("GET", "/v1/admin/tenants/t7/quota").doc["overrides"] == {"sessions": 3}
    client.close()
    assert d.api.request("GET", "/v1/sessions")[0] == 200


def test_garbage_in_the_quota_keys(make_daemon, redis_server):
    d = make_daemon("--pool-size", "0", "--quota-sessions", "2")
    p = d.prefix
    # A stored quota that is not one: read as none (the flags), and logged.
    redis_server.cli("SET", p + "tenant:default:quota", '{"sessions":"lots"')
    status, doc = d.api.request("GET", "/v1/admin/tenants/default/quota")
    assert status == 200 and doc["overrides"] == {} and doc["quota"]["sessions"] == 2
    d.wait_log("the stored quota of tenant default is not valid")
    # Reservations of the wrong type, or with values that are not numbers.
    redis_server.cli("DEL", p + "tenant:default:quota")
    redis_server.cli("HSET", p + "quota:default:memory", "x", "not a number")
    redis_server.cli("SET", p + "quota:default:exec_ms", "NaN")
    redis_server.cli("ZADD", p + "quota:default:exec_seconds", "1", "garbage")
    redis_server.cli("HSET", p + "quota:default:requests", "tokens", "inf", "ts", "-5")
    status, doc = d.api.request("GET", "/v1/usage")
    assert status == 200, (status, doc)
    s = d.api.create()
    assert d.api.exec(s["id"], "1 + 1")["result"] == "2"
    # A key of another type: the scripts fail, the answer says so.
    redis_server.cli("DEL", p + "quota:default:sessions")
    redis_server.cli("SET", p + "quota:default:sessions", "a string")
    status, doc = d.api.request("POST", "/v1/sessions", body={})
    assert status == 503 and doc["error"]["code"] == "unavailable", (status, doc)
    assert "WRONGTYPE" in doc["error"]["message"] or "redis" in doc["error"]["message"]
    redis_server.cli("DEL", p + "quota:default:sessions")
    wait_for(lambda: d.api.request("GET", "/v1/sessions")[0] == 200, 5, what="still serving")
    assert d.api.delete(s["id"]) == 204
