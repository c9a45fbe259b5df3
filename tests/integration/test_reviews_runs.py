"""The review queue end to end with the run engine (issue 12): a run whose
attempts all fail, with on_failure ["review"], becomes a pending case
(reviews_open), the webhook is told (signed, checked by the receiver), and
the reviewer's decision completes the run: approved with edited code, the
code runs and the run ends ok; rejected, the run ends failed with the
comment."""
import json
import os
import time

from harness import wait_for
from harness.fake_llm import FakeLLM  # the fixer helper's scripted model server

from test_reviews import Receiver, secret_file  # noqa: E402 (same folder)

BROKEN = "print(1/0)"


def start_run(client, sid, fake, goal="divide"):
    status, doc = client.request("POST", "/v1/sessions/%s/runs" % sid, body={
        "code": BROKEN, "goal": goal, "max_attempts": 2,
        "fixer": {"url": fake.url, "model": "broken"}, "on_failure": ["review"]})
    assert status == 200, doc
    return doc


def case_for(client, run_id, timeout=30):
    found = {}

    def listed():
        status, doc = client.request("GET", "/v1/reviews")
        for r in doc.get("reviews", []) if status == 200 else []:
            if r["run"] == run_id:
                found.update(r)
                return True
        return False
    wait_for(listed, timeout, what="the run's review case")
    return found


def test_run_to_review_approved_with_edit_and_rejected(make_daemon, tmp_path):
    rx = Receiver([500, 200])
    try:
        with FakeLLM(replies={"broken": ["print(2/0)"]}) as fake:
            d = make_daemon("--review-webhook-url", rx.url,
                            "--review-webhook-secret-file", secret_file(tmp_path),
                            "--fixer-allowed-urls", fake.url)
            sid = d.api.create()["id"]
            run = start_run(d.api, sid, fake)
            assert run["status"] == "failed" and run["state"] == "review", run
            assert run["degraded"]["mode"] == "review", run
            case = case_for(d.api, run["id"])
            assert case["state"] == "pending"
            assert [a["code"] for a in case["case"]["attempts"]][:1] == [BROKEN]
            # The webhook got it, signed, on the second try.
            wait_for(lambda: any(s == 200 and ok for s, ok, _, _ in rx.seen), 30,
                     what="the webhook's retried delivery")
            ev = json.loads(rx.seen[-1][3])
            assert ev["event"] == "review.pending" and ev["review"] == case["id"]
            assert ev["run"] == run["id"]
            # Approved with edited code: it runs and the run ends ok.
            status, dec = d.api.request("POST", "/v1/reviews/%s/approve" % case["id"],
                                        body={"code": "print(6*7)"})
            assert status == 200 and dec["state"] == "approved"
            status, done = d.api.request("GET", "/v1/runs/%s?wait_s=20" % run["id"])
            assert status == 200 and done["status"] == "ok", done
            assert "42" in json.dumps(done["result"])
            # Another run, rejected: failed, with the comment.
            run2 = start_run(d.api, sid, fake)
            case2 = case_for(d.api, run2["id"])
            status, _ = d.api.request("POST", "/v1/reviews/%s/reject" % case2["id"],
                                      body={"comment": "not worth it"})
            assert status == 200
            status, done2 = d.api.request("GET", "/v1/runs/%s?wait_s=20" % run2["id"])
            # (failed, or skipped: repairs of this pattern may have been
            # tried often enough, never fixing it)
            assert status == 200 and done2["status"] in ("failed", "skipped"), done2
            assert done2["degraded"]["state"] == "rejected"
            assert "not worth it" in json.dumps(done2)
            d.api.delete(sid)
    finally:
        rx.close()
