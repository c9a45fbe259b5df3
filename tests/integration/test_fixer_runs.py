"""The fixer inside runs (POST /v1/sessions/{id}/runs), end to end against
harness.FakeLLM: fixed at attempt 2, the fixer down or past its deadline
(the run says so and goes on), and which fixer a request may name
(--fixer-allowed-urls, --fixer-key-dir)."""
import json
import os
import shutil
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


def _key_dir(files):
    """A --fixer-key-dir of files {"TENANT/NAME": key}; its path."""
    keys = tempfile.mkdtemp(prefix="citest-fixer-keys-")
    for rel, key in files.items():
        os.makedirs(os.path.dirname(os.path.join(keys, rel)), exist_ok=True)
        with open(os.path.join(keys, rel), "w") as f:
            f.write(key + "\n")
    return keys


def test_a_request_names_an_allowed_url_and_a_key_file_by_name(make_daemon):
    # keyless: every caller is the tenant "default", whose keys are default/
    keys = _key_dir({"default/tenant-a": "sk-tenant-a"})
    try:
        with FakeLLM(replies={"m1": [FIXED]}) as llm:
            d = make_daemon("--fixer-allowed-urls", llm.url, "--fixer-key-dir", keys)
            status, doc = run(d, {"code": BROKEN, "fixer": {
                "url": llm.url, "model": "m1", "api_key_file": "tenant-a"}})
            assert status == 200 and doc["status"] == "ok", doc
            assert llm.headers[0]["Authorization"] == "Bearer sk-tenant-a"
            for bad in ["../tenant-a", "/etc/passwd", "nope", "default/tenant-a"]:
                status, doc = run(d, {"code": BROKEN, "fixer": {
                    "url": llm.url, "model": "m1", "api_key_file": bad}})
                assert status == 400 and "fixer.api_key_file" in doc["error"]["message"], doc
            status, doc = run(d, {"code": BROKEN, "fixer": {
                "url": "http://127.0.0.1:%d/v1" % free_port(), "model": "m1"}})
            assert status == 400 and "fixer.url" in doc["error"]["message"], doc
    finally:
        shutil.rmtree(keys)


def test_a_tenant_names_only_its_own_key_files(make_daemon):
    """Issue 28 item 7: tenant b named tenant a's key file and the fixer got
    a's bearer key. Key files are per tenant (DIR/TENANT/NAME) now."""
    keys = _key_dir({"a/openai": "sk-of-tenant-a", "b/openai": "sk-of-tenant-b",
                     "a/only-a": "sk-only-a"})
    try:
        with FakeLLM(replies={"m1": [FIXED, FIXED]}) as llm:
            d = make_daemon("--fixer-allowed-urls", llm.url, "--fixer-key-dir", keys,
                            admin_key="k" * 40)
            a = d.client(d.key("a")["key"])
            b = d.client(d.key("b")["key"])

            def run_as(c, key_file):
                sid = c.create()["id"]
                try:
                    return c.request("POST", "/v1/sessions/%s/runs" % sid, {
                        "code": BROKEN, "fixer": {"url": llm.url, "model": "m1",
                                                  "api_key_file": key_file}}, timeout=120)
                finally:
                    c.delete(sid)
            # b names a's file, by each spelling: refused before any call
            for name in ("only-a", "../a/only-a", "a/only-a"):
                status, doc = run_as(b, name)
                assert status == 400 and "fixer.api_key_file" in doc["error"]["message"], doc
            assert llm.requests == [], "the fixer was called with a key b may not name"
            # the same name is each tenant's own key
            status, doc = run_as(b, "openai")
            assert status == 200 and doc["status"] == "ok", doc
            status, doc = run_as(a, "openai")
            assert status == 200 and doc["status"] == "ok", doc
            got = [h["Authorization"] for h in llm.headers]
            assert got == ["Bearer sk-of-tenant-b", "Bearer sk-of-tenant-a"], got
    finally:
        shutil.rmtree(keys)
