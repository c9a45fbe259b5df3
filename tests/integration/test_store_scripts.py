"""The store's Lua scripts (daemon/store_script.c) with a Redis that forgot
them: once a script's digest is known its calls go by EVALSHA; after SCRIPT
FLUSH (as after a restart, or on another Redis) that answers NOSCRIPT, and
the call is sent again whole, so the caller never sees it. One test per
store file that runs scripts (quota, reviews, failure memory), each on a
Redis of its own (SCRIPT FLUSH must not reach anyone else's)."""
import json
import re
import time
import uuid

from harness.daemon import Daemon
from harness.redis import RedisServer


def stat(redis, section, name):
    """A counter of INFO <section> (0 when absent)."""
    m = re.search(r"^%s:.*?(?:calls|count)=(\d+)" % re.escape(name), redis.cli("INFO", section),
                  re.M)
    return int(m.group(1)) if m else 0


def survives_flush(redis, read):
    """read() -> (status, doc), a call that runs a script: answered before
    (the second time by EVALSHA) and after SCRIPT FLUSH, where Redis said
    NOSCRIPT. The doc of the last."""
    for _ in range(2):
        status, doc = read()
        assert status == 200, (status, doc)
    assert stat(redis, "commandstats", "cmdstat_evalsha") > 0
    assert redis.cli("SCRIPT", "FLUSH") == "OK"
    before = stat(redis, "errorstats", "errorstat_NOSCRIPT")
    status, doc = read()
    assert status == 200, (status, doc)
    assert stat(redis, "errorstats", "errorstat_NOSCRIPT") > before
    return doc


def with_own_redis(tmp_path, tmpdir_session, body):
    own = RedisServer(str(tmp_path))
    d = None
    try:
        d = Daemon(own, tmpdir_session, ("--pool-size", "0"))
        body(d, own)
    finally:
        if d is not None:
            d.finish()
        own.stop()


def test_quota_scripts_after_noscript(tmp_path, tmpdir_session):
    def body(d, redis):
        doc = survives_flush(redis, lambda: d.api.request("GET", "/v1/usage"))
        assert doc["usage"]["sessions"] == 0, doc
        status, doc = d.api.request("GET", "/v1/usage")
        assert status == 200, (status, doc)

    with_own_redis(tmp_path, tmpdir_session, body)


def test_review_scripts_after_noscript(tmp_path, tmpdir_session):
    def body(d, redis):
        rid, run = str(uuid.uuid4()), str(uuid.uuid4())
        now = int(time.time() * 1000)
        key = "%sreview:default:%s" % (d.prefix, rid)
        redis.cli("HSET", key, "run", run, "state", "pending", "case",
                  json.dumps({"id": run}), "created_ms", str(now))
        redis.cli("ZADD", "%sreviews:default" % d.prefix, str(now), rid)
        doc = survives_flush(redis, lambda: d.api.request("GET", "/v1/reviews"))
        assert [c["id"] for c in doc["reviews"]] == [rid], doc
        # another script of the file, whole the first time, decided once
        status, doc = d.api.request("POST", "/v1/reviews/%s/approve" % rid)
        assert status == 200 and doc["state"] == "approved", (status, doc)
        assert d.api.send("POST", "/v1/reviews/%s/approve" % rid, body={}).status == 409

    with_own_redis(tmp_path, tmpdir_session, body)


def test_failure_scripts_after_noscript(tmp_path, tmpdir_session):
    def body(d, redis):
        sig = "0123456789abcdef"
        fields = {"ename": "NameError", "message": "name 'x' is not defined", "line": "x",
                  "image": "ci/python:latest", "class": "", "seen": "1", "retried": "0",
                  "fixed_rule": "0", "fixed_fixer": "0", "first_ms": "1", "last_ms": "2"}
        args = []
        for k, v in fields.items():
            args += [k, v]
        now = int(time.time() * 1000)
        redis.cli("HSET", "%sfail:default:%s" % (d.prefix, sig), *args)
        redis.cli("ZADD", "%sfails:default" % d.prefix, str(now), sig)
        doc = survives_flush(redis, lambda: d.api.request("GET", "/v1/failures"))
        assert [f["signature"] for f in doc["failures"]] == [sig], doc
        assert d.api.request("DELETE", "/v1/failures/" + sig)[0] == 204
        status, doc = d.api.request("GET", "/v1/failures")
        assert status == 200 and doc["failures"] == [], (status, doc)

    with_own_redis(tmp_path, tmpdir_session, body)
