"""The fixer inside runs (POST /v1/sessions/{id}/runs), end to end against
harness.FakeLLM: fixed at attempt 2, the fixer down or past its deadline
(the run says so and goes on), and which fixer a request may name
(--fixer-allowed-urls, --fixer-key-dir)."""
import json
import os
import tempfile

from harness import FakeLLM, free_port


BROKEN = "greeting = 'hello'\nprint(greting)\n"
FIXED = "greeting = 'hello'\nprint(greeting)"


def run(d, body):
    sid = d.api.create()["id"]
    try:
        return d.api.request("POST", "/v1/sessions/%s/runs" % sid, body, timeout=120)
    finally:
        d.api.delete(sid)


def test_a_run_is_fixed_at_attempt_2_by_the_fixer(make_daemon):
    with FakeLLM(replies={"m1": [FIXED]}) as llm:
        d = make_daemon("--fixer-url", llm.url, "--fixer-model", "m1")
        status, doc = run(d, {"code": BROKEN, "goal": "print a greeting", "max_attempts": 3})
        assert status == 200, doc
        assert doc["status"] == "ok", doc
        assert [a["source"] for a in doc["attempts"]] == ["submitted", "fixer"]
        assert doc["attempts"][1]["code"] == FIXED
        assert doc["attempts"][1]["fixer_ms"] >= 0
        assert "hello" in json.dumps(doc["result"])
        asked = llm.requests[0]["messages"][1]["content"]
        assert "print a greeting" in asked and "NameError" in asked and "greting" in asked


def test_a_fixer_that_is_down_is_said_and_the_run_goes_on(make_daemon):
    d = make_daemon("--fixer-url", "http://127.0.0.1:%d/v1" % free_port(), "--fixer-model", "m1")
    status, doc = run(d, {"code": BROKEN, "max_attempts": 2})
    assert status == 200, doc
    assert doc["status"] in ("failed", "degraded"), doc
    assert "unreachable" in json.dumps(doc["attempts"])


def test_a_fixer_past_its_deadline_is_said(make_daemon):
    with FakeLLM(replies={"m1": [{"delay_s": 30, "code": FIXED}]}) as llm:
        d = make_daemon("--fixer-url", llm.url, "--fixer-model", "m1",
                        "--fixer-timeout-ms", "300")
        status, doc = run(d, {"code": BROKEN, "max_attempts": 2})
        assert status == 200, doc
        assert doc["status"] in ("failed", "degraded"), doc
        assert "deadline of 300 ms" in json.dumps(doc["attempts"])


def test_a_request_may_not_name_a_fixer_url_unless_allowed(make_daemon):
    with FakeLLM(replies={"m1": [FIXED]}) as llm:
        d = make_daemon()
        status, doc = run(d, {"code": BROKEN, "fixer": {"url": llm.url, "model": "m1"}})
        assert status == 400, doc
        assert "fixer.url" in doc["error"]["message"]
        assert llm.requests == []


def test_a_request_names_an_allowed_url_and_a_key_file_by_name(make_daemon):
    keys = tempfile.mkdtemp(prefix="citest-fixer-keys-")
    with open(os.path.join(keys, "tenant-a"), "w") as f:
        f.write("sk-tenant-a\n")
    try:
        with FakeLLM(replies={"m1": [FIXED]}) as llm:
            d = make_daemon("--fixer-allowed-urls", llm.url, "--fixer-key-dir", keys)
            status, doc = run(d, {"code": BROKEN, "fixer": {
                "url": llm.url, "model": "m1", "api_key_file": "tenant-a"}})
            assert status == 200 and doc["status"] == "ok", doc
            assert llm.headers[0]["Authorization"] == "Bearer sk-tenant-a"
            for bad in ["../tenant-a", "/etc/passwd", "nope"]:
                status, doc = run(d, {"code": BROKEN, "fixer": {
                    "url": llm.url, "model": "m1", "api_key_file": bad}})
                assert status == 400 and "fixer.api_key_file" in doc["error"]["message"], doc
            status, doc = run(d, {"code": BROKEN, "fixer": {
                "url": "http://127.0.0.1:%d/v1" % free_port(), "model": "m1"}})
            assert status == 400 and "fixer.url" in doc["error"]["message"], doc
    finally:
        for name in os.listdir(keys):
            os.unlink(os.path.join(keys, name))
        os.rmdir(keys)
