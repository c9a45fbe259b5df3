"""Issue 12, the review queue: GET /v1/reviews, GET /v1/reviews/{id},
POST .../approve (optionally with edited code) and .../reject (with a
comment), decided once, per tenant; ci-ctl reviews. The run engine is not
on this branch: the pending cases are seeded by writing the documented keys
(docs/operations.md) under the test daemon's own prefix."""
import json
import os
import subprocess
import threading
import time
import uuid

import pytest

from harness import wait_for
from harness.daemon import Daemon
from harness.redis import RedisServer

ADMIN = "admin-" + "r" * 40


def case_doc(run_id, codes=("print(1/0)", "print(1/1 + x)")):
    attempts = []
    for n, code in enumerate(codes, 1):
        attempts.append({"n": n, "code": code, "status": "error",
                         "error": {"ename": "ZeroDivisionError", "evalue": "division by zero",
                                   "traceback": ["Traceback ...", "ZeroDivisionError"]},
                         "source": "submitted" if n == 1 else "fixer", "duration_ms": 12})
    return {"id": run_id, "status": "degraded", "attempts": attempts, "goal": "divide"}


def seed(d, tenant, case=None, created_ms=None, state="pending"):
    """A pending case of tenant, written as the daemon writes it; (review id, run id)."""
    rid, run = str(uuid.uuid4()), str(uuid.uuid4())
    created_ms = created_ms or int(time.time() * 1000)
    doc = case if case is not None else case_doc(run)
    key = "%sreview:%s:%s" % (d.prefix, tenant, rid)
    d.redis.cli("HSET", key, "run", run, "state", state, "case", json.dumps(doc),
                "created_ms", str(created_ms))
    d.redis.cli("EXPIRE", key, "600")
    d.redis.cli("ZADD", "%sreviews:%s" % (d.prefix, tenant), str(created_ms), rid)
    return rid, run


def error_of(resp):
    doc = resp.doc
    assert isinstance(doc, dict) and "error" in doc, (resp.status, resp.body[:300])
    return doc["error"]["code"]


def test_list_get_approve_reject_decided_once(daemon):
    api = daemon.api
    older, _ = seed(daemon, "default", created_ms=int(time.time() * 1000) - 5000)
    rid, run = seed(daemon, "default")
    status, doc = api.request("GET", "/v1/reviews")
    assert status == 200, doc
    ids = [r["id"] for r in doc["reviews"]]
    # Newest first.
    assert ids.index(rid) < ids.index(older)
    r = next(x for x in doc["reviews"] if x["id"] == rid)
    assert r["run"] == run and r["state"] == "pending" and r["decided_at"] is None
    assert r["comment"] is None and r["code"] is None
    assert r["created_at"].endswith("Z")
    assert [a["n"] for a in r["case"]["attempts"]] == [1, 2]
    assert r["case"]["attempts"][1]["source"] == "fixer"
    # One case.
    status, one = api.request("GET", "/v1/reviews/" + rid)
    assert status == 200 and one["id"] == rid and one["case"]["goal"] == "divide"
    # ?limit=
    status, doc = api.request("GET", "/v1/reviews?limit=1")
    assert status == 200 and len(doc["reviews"]) == 1
    # Approve as it stands (no body).
    status, dec = api.request("POST", "/v1/reviews/%s/approve" % rid)
    assert status == 200, dec
    assert dec["state"] == "approved" and dec["decided_at"] is not None and dec["code"] is None
    # Decided once: a second approval, or a rejection, is 409 conflict.
    r2 = api.send("POST", "/v1/reviews/%s/approve" % rid, body={})
    assert r2.status == 409 and error_of(r2) == "conflict"
    r2 = api.send("POST", "/v1/reviews/%s/reject" % rid, body={"comment": "no"})
    assert r2.status == 409 and error_of(r2) == "conflict"
    # Pending lists no longer show it; all does.
    status, doc = api.request("GET", "/v1/reviews")
    assert rid not in [x["id"] for x in doc["reviews"]]
    status, doc = api.request("GET", "/v1/reviews?state=all")
    assert rid in [x["id"] for x in doc["reviews"]]
    # Reject the other, with a comment.
    status, dec = api.request("POST", "/v1/reviews/%s/reject" % older,
                              body={"comment": "needs the real data set"})
    assert status == 200 and dec["state"] == "rejected"
    assert dec["comment"] == "needs the real data set"
    status, again = api.request("GET", "/v1/reviews/" + older)
    assert again["state"] == "rejected" and again["comment"] == "needs the real data set"
    # Audited: one entry per decision.
    daemon.wait_log('"outcome":"rejected"', timeout=10)


def test_approve_with_edited_code(daemon):
    rid, _ = seed(daemon, "default")
    code = "import math\nprint(math.pi)  # <b>edited</b>\n"
    status, dec = daemon.api.request("POST", "/v1/reviews/%s/approve" % rid,
                                     body={"code": code, "comment": "fixed the import"})
    assert status == 200, dec
    assert dec["code"] == code and dec["comment"] == "fixed the import"
    status, got = daemon.api.request("GET", "/v1/reviews/" + rid)
    assert got["code"] == code and got["state"] == "approved"
    key = "%sreview:%s:%s" % (daemon.prefix, "default", rid)
    assert daemon.redis.cli("HGET", key, "code") == code.strip()


def test_bad_requests(daemon):
    api = daemon.api
    rid, _ = seed(daemon, "default")
    for body in ({}, {"comment": ""}, {"comment": None}, {"comment": 3}, {"code": "x", "comment": "y"}):
        r = api.send("POST", "/v1/reviews/%s/reject" % rid, body=body)
        assert r.status == 400 and error_of(r) == "bad_request", (body, r.body[:200])
    for body in ({"code": 1}, {"code": ""}, {"nope": 1}, [1]):
        r = api.send("POST", "/v1/reviews/%s/approve" % rid, body=body)
        assert r.status == 400 and error_of(r) == "bad_request", (body, r.body[:200])
    r = api.send("POST", "/v1/reviews/%s/approve" % rid, raw=b"{not json")
    assert r.status == 400
    for q in ("state=maybe", "limit=0", "limit=x", "limit=100000"):
        r = api.send("GET", "/v1/reviews?" + q)
        assert r.status == 400 and error_of(r) == "bad_request", q
    # Still pending after all of that.
    assert api.request("GET", "/v1/reviews/" + rid)[1]["state"] == "pending"


def test_unknown_and_malformed_are_404(daemon):
    never = str(uuid.uuid4())
    for method, path in (("GET", "/v1/reviews/" + never),
                         ("POST", "/v1/reviews/%s/approve" % never),
                         ("POST", "/v1/reviews/%s/reject" % never)):
        r = daemon.api.send(method, path, body={"comment": "x"} if method == "POST" else None)
        assert r.status == 404 and error_of(r) == "not_found", (path, r.status)
    r = daemon.api.send("GET", "/v1/reviews/not-a-uuid")
    assert r.status == 404


def test_hostile_stored_records_are_skipped(daemon):
    """What Redis holds is outside input: a record of the wrong shape is no
    record, and the list goes on."""
    good, _ = seed(daemon, "default")
    bad = str(uuid.uuid4())
    key = "%sreview:default:%s" % (daemon.prefix, bad)
    daemon.redis.cli("HSET", key, "run", "not-a-uuid", "state", "pending", "case", "{}")
    daemon.redis.cli("ZADD", "%sreviews:default" % daemon.prefix, str(int(time.time() * 1000)), bad)
    weird, _ = seed(daemon, "default", case="not json at all")
    weird_key = "%sreview:default:%s" % (daemon.prefix, weird)
    daemon.redis.cli("HSET", weird_key, "case", "[[[[not json")
    status, doc = daemon.api.request("GET", "/v1/reviews?limit=500")
    assert status == 200
    ids = [r["id"] for r in doc["reviews"]]
    assert good in ids and bad not in ids
    w = next(r for r in doc["reviews"] if r["id"] == weird)
    assert w["case"] is None
    assert daemon.api.send("GET", "/v1/reviews/" + bad).status == 404
    daemon.redis.cli("DEL", key)


def test_expired_cases_leave_the_list(daemon):
    rid, _ = seed(daemon, "default")
    daemon.redis.cli("DEL", "%sreview:default:%s" % (daemon.prefix, rid))
    status, doc = daemon.api.request("GET", "/v1/reviews?state=all&limit=500")
    assert rid not in [r["id"] for r in doc["reviews"]]
    assert daemon.redis.cli("ZSCORE", "%sreviews:default" % daemon.prefix, rid) == ""


def test_list_is_bounded_in_bytes(daemon, tmp_path):
    """One list answers at most about 16 MiB of case text (and at least one
    case), whatever the limit: of three cases of 7 MiB, the newest two."""
    big = json.dumps(case_doc("x", codes=("x" * (7 << 20),)))
    blob = tmp_path / "case.json"
    blob.write_text(big)
    ids = []
    base = int(time.time() * 1000) + 60000  # newer than every other case
    for i in range(3):
        rid, _ = seed(daemon, "default", created_ms=base + i)
        with open(blob, "rb") as f:
            subprocess.run(["redis-cli", "-p", str(daemon.redis.port), "-x", "HSET",
                            "%sreview:default:%s" % (daemon.prefix, rid), "case"],
                           stdin=f, check=True, capture_output=True, timeout=30)
        ids.append(rid)
    try:
        status, doc = daemon.api.request("GET", "/v1/reviews?limit=50", timeout=60)
        assert status == 200
        got = [r["id"] for r in doc["reviews"]]
        assert got == [ids[2], ids[1]], got[:4]
        assert len(doc["reviews"][0]["case"]["attempts"][0]["code"]) == 7 << 20
        # limit=1 still answers the one.
        status, doc = daemon.api.request("GET", "/v1/reviews?limit=1", timeout=60)
        assert [r["id"] for r in doc["reviews"]] == [ids[2]]
    finally:
        for rid in ids:
            daemon.redis.cli("DEL", "%sreview:default:%s" % (daemon.prefix, rid))
            daemon.redis.cli("ZREM", "%sreviews:default" % daemon.prefix, rid)


def test_tenants_are_isolated(make_daemon):
    d = make_daemon("--pool-size", "0", admin_key=ADMIN)
    a = d.client(d.key("acme")["key"])
    b = d.client(d.key("umbrella")["key"])
    rid, _ = seed(d, "acme")
    status, doc = a.request("GET", "/v1/reviews")
    assert status == 200 and [r["id"] for r in doc["reviews"]] == [rid]
    status, doc = b.request("GET", "/v1/reviews")
    assert status == 200 and doc["reviews"] == []
    never = str(uuid.uuid4())
    # Another tenant's case answers exactly as one that never existed.
    for path in ("/v1/reviews/%s", "/v1/reviews/%s/approve", "/v1/reviews/%s/reject"):
        method = "GET" if path.endswith("%s") else "POST"
        body = {"comment": "x"} if method == "POST" else None
        theirs = b.send(method, path % rid, body=body)
        none = b.send(method, path % never, body=body)
        assert theirs.status == none.status == 404
        assert theirs.doc == none.doc
    # ... and it is untouched.
    assert a.request("GET", "/v1/reviews/" + rid)[1]["state"] == "pending"
    # The admin is not a tenant; no key is nobody.
    assert d.admin.send("GET", "/v1/reviews").status == 403
    assert d.api.send("GET", "/v1/reviews").status == 401
    status, dec = a.request("POST", "/v1/reviews/%s/approve" % rid, body={"comment": "ok"})
    assert status == 200 and dec["state"] == "approved"
    key = "%sreview:acme:%s" % (d.prefix, rid)
    # decided_by is the key that decided.
    assert len(d.redis.cli("HGET", key, "decided_by")) == 16


def test_redis_down_is_503(tmpdir_session):
    r = RedisServer(tmpdir_session)
    d = None
    try:
        d = Daemon(r, tmpdir_session, ["--pool-size", "0"])
        rid, _ = seed(d, "default")
        assert d.api.send("GET", "/v1/reviews").status == 200
        r.kill()
        wait_for(lambda: d.api.send("GET", "/v1/reviews").status == 503, 15,
                 what="the review list to answer 503 with Redis down")
        for method, path, body in (("GET", "/v1/reviews/" + rid, None),
                                   ("POST", "/v1/reviews/%s/approve" % rid, {}),
                                   ("POST", "/v1/reviews/%s/reject" % rid, {"comment": "x"})):
            resp = d.api.send(method, path, body=body)
            assert resp.status == 503 and error_of(resp) == "unavailable", (path, resp.status)
            assert resp.header("Retry-After")
        # Back: it serves again (the case went with the old Redis).
        r.start()
        wait_for(lambda: d.api.send("GET", "/v1/reviews").status == 200, 30,
                 what="the review list to come back")
    finally:
        if d is not None:
            d.finish()
        r.stop()


def test_page_is_served_with_its_headers(daemon):
    for path, ctype in (("/review", "text/html"), ("/review/app.js", "text/javascript"),
                        ("/review/app.css", "text/css")):
        r = daemon.api.send("GET", path)
        assert r.status == 200, path
        assert r.header("Content-Type").startswith(ctype)
        assert r.header("Content-Security-Policy") == (
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'")
        assert r.header("X-Content-Type-Options") == "nosniff"
        assert r.header("X-Frame-Options") == "DENY"
        assert r.header("Referrer-Policy") == "no-referrer"
    html = daemon.api.send("GET", "/review").body.decode()
    assert '<script src="/review/app.js"' in html and "<style" not in html
    js = daemon.api.send("GET", "/review/app.js").body.decode()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "Function(", "setAttribute(\"on", "style="):
        assert sink not in js, sink


def test_page_needs_no_key_but_the_data_does(make_daemon):
    d = make_daemon("--pool-size", "0", admin_key=ADMIN)
    assert d.api.send("GET", "/review").status == 200
    assert d.api.send("GET", "/review/app.js").status == 200
    assert d.api.send("GET", "/v1/reviews").status == 401


# ------------------------------------------------------------------ ci-ctl


def test_ctl_reviews(daemon):
    rid, run = seed(daemon, "default")
    other, _ = seed(daemon, "default")
    out = daemon.ctl("reviews")
    assert out.returncode == 0, out.stderr
    assert rid in out.stdout and run[:8] in out.stdout
    out = daemon.ctl("reviews", "--json")
    assert out.returncode == 0, out.stderr
    assert rid in [r["id"] for r in json.loads(out.stdout)["reviews"]]
    out = daemon.ctl("reviews", "show", rid)
    assert out.returncode == 0 and "print(1/1 + x)" in out.stdout, out.stdout + out.stderr
    out = daemon.ctl("reviews", "show", rid, "--json")
    assert json.loads(out.stdout)["id"] == rid
    # Reject needs a comment.
    out = daemon.ctl("reviews", "reject", rid)
    assert out.returncode != 0 and "--comment" in out.stderr
    out = daemon.ctl("reviews", "approve", rid, "--code-file", "-", "--comment", "edited",
                     input="print('fixed')\n")
    assert out.returncode == 0, out.stderr
    got = daemon.api.request("GET", "/v1/reviews/" + rid)[1]
    assert got["state"] == "approved" and got["code"] == "print('fixed')\n"
    out = daemon.ctl("reviews", "approve", rid)
    assert out.returncode != 0 and "already decided" in out.stderr
    out = daemon.ctl("reviews", "reject", other, "--comment", "wrong approach")
    assert out.returncode == 0, out.stderr
    assert daemon.api.request("GET", "/v1/reviews/" + other)[1]["state"] == "rejected"
    out = daemon.ctl("reviews", "--all")
    assert out.returncode == 0 and rid in out.stdout and "approved" in out.stdout
    out = daemon.ctl("reviews", "show", str(uuid.uuid4()))
    assert out.returncode != 0


# ------------------------------------------------------------------ the webhook

import hashlib  # noqa: E402
import hmac  # noqa: E402
import http.server  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402

from harness import ROOT  # noqa: E402

SECRET = b"s3cret-for-the-receiver\x01"


def tool(name):
    for build in ("build/asan", "build"):
        p = os.path.join(ROOT, build, "tools", name)
        if os.path.exists(p):
            return p
    raise AssertionError("%s is not built (make build/tools/%s)" % (name, name))


class Receiver:
    """A webhook receiver on 127.0.0.1 that checks each delivery's signature
    the way docs/api.md tells receivers to, and answers the statuses given
    in turn (the last one repeats)."""

    def __init__(self, statuses, secret=SECRET):
        self.statuses = list(statuses)
        self.secret = secret
        self.seen = []  # (status answered, verified, headers, body)
        self.lock = threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ts = self.headers.get("X-CI-Timestamp", "")
                sig = self.headers.get("X-CI-Signature", "")
                want = "sha256=" + hmac.new(outer.secret, ts.encode() + b"." + body,
                                            hashlib.sha256).hexdigest()
                fresh = ts.isdigit() and abs(time.time() - int(ts)) < 300
                ok = hmac.compare_digest(sig, want) and fresh
                with outer.lock:
                    n = len(outer.seen)
                    status = outer.statuses[min(n, len(outer.statuses) - 1)] if ok else 401
                    outer.seen.append((status, ok, dict(self.headers), body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d/hook" % self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def secret_file(tmp_path, secret=SECRET):
    p = tmp_path / "webhook-secret"
    p.write_bytes(secret + b"\n")
    os.chmod(p, 0o600)
    return str(p)


def open_review(redis, prefix, tenant, run, case, *flags):
    return subprocess.run([tool("review-open"), "--redis", redis.url, "--prefix", prefix,
                           "--tenant", tenant, "--run", run, *flags],
                          input=json.dumps(case), capture_output=True, text=True, timeout=60)


def test_webhook_signed_and_retried_until_delivered(daemon, tmp_path):
    """A review opened (reviews_open) reaches the webhook: signed, and after
    two 500s delivered on the third try, with backoff."""
    rx = Receiver([500, 500, 200])
    try:
        run = str(uuid.uuid4())
        out = open_review(daemon.redis, daemon.prefix, "default", run, case_doc(run),
                          "--webhook-url", rx.url, "--secret-file", secret_file(tmp_path),
                          "--wait-s", "30")
        assert out.returncode == 0, out.stderr
        rid = out.stdout.split()[0]
        stats = json.loads(out.stdout.strip().splitlines()[-1])
        assert stats == {"review": rid, "delivered": 1, "failed": 0, "dropped": 0}, out.stdout
        assert [s for s, _, _, _ in rx.seen] == [500, 500, 200]
        assert all(ok for _, ok, _, _ in rx.seen)
        event = json.loads(rx.seen[-1][3])
        assert event["event"] == "review.pending" and event["tenant"] == "default"
        assert event["review"] == rid and event["run"] == run
        # Every try is the same delivery, each signed with its own timestamp.
        assert len({h["X-CI-Delivery"] for _, _, h, _ in rx.seen}) == 1
        # The case is in the queue, and its created_ms is the event's.
        status, got = daemon.api.request("GET", "/v1/reviews/" + rid)
        assert status == 200 and got["state"] == "pending" and got["run"] == run
        stored = daemon.redis.cli("HGET", "%sreview:default:%s" % (daemon.prefix, rid), "created_ms")
        assert int(stored) == event["created_ms"]
        ttl = int(daemon.redis.cli("TTL", "%sreview:default:%s" % (daemon.prefix, rid)))
        assert 0 < ttl <= 600
    finally:
        rx.close()


def test_webhook_with_the_wrong_secret_is_refused_and_given_up(daemon, tmp_path):
    """The receiver's check works: a delivery signed with another secret is
    refused (401) every time, and the webhook gives up after its tries."""
    rx = Receiver([200], secret=b"another secret")
    try:
        run = str(uuid.uuid4())
        out = open_review(daemon.redis, daemon.prefix, "default", run, case_doc(run),
                          "--webhook-url", rx.url, "--secret-file", secret_file(tmp_path),
                          "--wait-s", "120")
        assert out.returncode == 0, out.stderr
        stats = json.loads(out.stdout.strip().splitlines()[-1])
        assert stats["delivered"] == 0 and stats["failed"] == 1, out.stdout
        assert len(rx.seen) == 6 and not any(ok for _, ok, _, _ in rx.seen)
    finally:
        rx.close()


def test_daemon_webhook_options(make_daemon, tmp_path):
    # A URL without a readable secret file: the daemon does not start.
    bad = subprocess.run([daemon_bin(), "--review-webhook-url", "http://127.0.0.1:9/hook",
                          "--review-webhook-secret-file", str(tmp_path / "none"),
                          "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "review-webhook-secret-file" in bad.stderr
    rx = Receiver([200])
    try:
        sf = secret_file(tmp_path)
        d = make_daemon("--pool-size", "0", "--review-webhook-url", rx.url,
                        "--review-webhook-secret-file", sf)
        d.wait_log("review webhook: " + rx.url)
        for outcome in ("delivered", "failed", "dropped"):
            assert d.metric('ci_review_webhook_deliveries_total{outcome="%s"}' % outcome) == 0
        # SIGHUP re-reads the secret; an unreadable one keeps the previous.
        mark = d.log_mark()
        os.unlink(sf)
        d.proc.send_signal(__import__("signal").SIGHUP)
        d.wait_log("the webhook keeps its previous secret", since=mark)
        secret_file(tmp_path, b"rotated")
        mark = d.log_mark()
        d.proc.send_signal(__import__("signal").SIGHUP)
        d.wait_log("review webhook secret re-read", since=mark)
    finally:
        rx.close()


def daemon_bin():
    from harness import DAEMON_BIN
    return DAEMON_BIN


def test_frozen_redis_and_stopping_with_calls_waiting(tmpdir_session):
    """A Redis that takes commands and never answers (SIGSTOP) is answered
    for: 503 after the store's deadline. A daemon stopped while review
    calls wait on it answers them and exits cleanly (sanitizers)."""
    import signal as sig
    r = RedisServer(tmpdir_session)
    d = None
    try:
        d = Daemon(r, tmpdir_session, ["--pool-size", "0"])
        assert d.api.send("GET", "/v1/reviews").status == 200
        os.kill(r.proc.pid, sig.SIGSTOP)
        try:
            resp = d.api.send("GET", "/v1/reviews", timeout=30)
            assert resp.status == 503 and error_of(resp) == "unavailable"
            # Calls waiting when the daemon stops.
            results = []

            def ask():
                try:
                    results.append(d.api.send("GET", "/v1/reviews/" + str(uuid.uuid4()),
                                              timeout=30).status)
                except Exception as e:  # noqa: BLE001 - a closed connection is an answer too
                    results.append(repr(e))
            threads = [threading.Thread(target=ask) for _ in range(3)]
            for t in threads:
                t.start()
            # The three are in: their connections are open (the requests
            # themselves are small and sent at once).
            wait_for(lambda: len(d.open_api_connections()) >= 3, 10,
                     what="three review calls waiting in the daemon")
            d.stop()
            for t in threads:
                t.join(30)
            assert len(results) == 3, results
            assert all(x == 503 or isinstance(x, str) for x in results), results
        finally:
            os.kill(r.proc.pid, sig.SIGCONT)
    finally:
        if d is not None:
            d.finish()
        r.stop()
