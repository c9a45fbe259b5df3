"""Issue 12: the review rung. A run whose ladder ends in review waits for a
human: the case is in the tenant's queue (and sent to the webhook, signed);
approving it with edited code runs that code and completes the run;
rejecting it ends the run failed with the reviewer's comment."""
import hashlib
import hmac
import http.server
import json
import threading
import time

from harness import wait_for

SECRET = b"review-webhook-secret-0123456789"


def post_run(api, sid, body):
    path = "/v1/sessions/%s/runs" % sid if sid else "/v1/runs"
    st, doc = api.request("POST", path, body, timeout=120)
    assert st == 200, doc
    return doc


def wait_run(api, rid):
    st, doc = api.request("GET", "/v1/runs/%s?wait_s=60" % rid, timeout=90)
    assert st == 200, doc
    return doc


def test_review_approved_with_edited_code_completes_the_run_in_its_session(daemon):
    api = daemon.api
    sid = api.create()["id"]
    assert api.exec(sid, "base = 40")["status"] == "ok"
    doc = post_run(api, sid, {"code": "base + two", "on_failure": ["review"]})
    assert doc["status"] == "failed" and doc["state"] == "review", doc
    dg = doc["degraded"]
    assert dg["mode"] == "review" and dg["state"] == "pending", dg
    st, queue = api.request("GET", "/v1/reviews")
    (case,) = [r for r in queue["reviews"] if r["id"] == dg["review"]]
    assert case["run"] == doc["id"] and case["state"] == "pending"
    assert case["case"]["attempts"][0]["code"] == "base + two"
    # Until decided, a long poll on the run times out with it still waiting.
    st, still = api.request("GET", "/v1/runs/%s?wait_s=1" % doc["id"], timeout=30)
    assert still["state"] == "review"
    st, decided = api.request("POST", "/v1/reviews/%s/approve" % dg["review"],
                              {"code": "two = 2\nbase + two", "comment": "defined two"})
    assert st == 200 and decided["state"] == "approved", decided
    done = wait_run(api, doc["id"])
    assert done["state"] == "done" and done["status"] == "ok", done
    last = done["attempts"][-1]
    assert last["source"] == "review" and last["code"] == "two = 2\nbase + two"
    assert done["result"]["result"] == "42"
    assert done["degraded"]["state"] == "approved" and done["degraded"]["comment"] == "defined two"
    # It ran in the run's own session: its variables are there.
    assert api.exec(sid, "two")["result"] == "2"
    # Deciding twice is a conflict.
    r = api.send("POST", "/v1/reviews/%s/reject" % dg["review"], {"comment": "late"})
    assert r.status == 409


def test_review_rejected_ends_the_run_failed_with_the_comment(daemon):
    api = daemon.api
    doc = post_run(api, None, {"code": "import os\nos.remove('/etc/passwd')", "on_failure": ["review"]})
    rid, review = doc["id"], doc["degraded"]["review"]
    st, decided = api.request("POST", "/v1/reviews/%s/reject" % review,
                              {"comment": "not touching system files"})
    assert st == 200, decided
    done = wait_run(api, rid)
    assert done["state"] == "done" and done["status"] == "failed", done
    assert done["degraded"]["state"] == "rejected"
    assert done["degraded"]["comment"] == "not touching system files"
    assert len(done["attempts"]) == 1


class Receiver(http.server.BaseHTTPRequestHandler):
    got = []
    fail_first = 2

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        ts = self.headers.get("X-CI-Timestamp", "")
        sig = self.headers.get("X-CI-Signature", "")
        want = "sha256=" + hmac.new(SECRET, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        Receiver.got.append({"ok": hmac.compare_digest(sig, want), "body": body, "ts": ts})
        status = 500 if len(Receiver.got) <= Receiver.fail_first else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def test_the_webhook_is_signed_and_retried(make_daemon, tmp_path):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        secret = tmp_path / "hook.secret"
        secret.write_bytes(SECRET)
        secret.chmod(0o600)
        d = make_daemon("--pool-size", "0", "--review-webhook-url",
                        "http://127.0.0.1:%d/hook" % srv.server_address[1],
                        "--review-webhook-secret-file", str(secret))
        doc = post_run(d.api, None, {"code": "1/0", "on_failure": ["review"]})
        review = doc["degraded"]["review"]
        wait_for(lambda: len(Receiver.got) >= 3, 30, interval=0.05,
                 what="the delivery, retried after two 500s")
        assert all(g["ok"] for g in Receiver.got), Receiver.got
        event = json.loads(Receiver.got[-1]["body"])
        assert event["event"] == "review.pending" and event["review"] == review
        assert event["run"] == doc["id"]
        assert abs(int(Receiver.got[-1]["ts"]) - time.time()) < 120
        # The same body each time: a retry, not a new event.
        assert len({g["body"] for g in Receiver.got}) == 1
    finally:
        srv.shutdown()
