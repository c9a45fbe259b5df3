"""The drift check itself (tests/harness/openapi_check.py), on answers made
up here: it passes what docs/openapi.yaml documents and names what it does
not (route, status, JSON pointer, why). The integration suite runs it on
every real answer."""
import json

import pytest

from harness.openapi_check import Checker

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def checker():
    return Checker()


def err(code, message="m", **extra):
    return json.dumps({"error": dict(code=code, message=message, **extra)}).encode()


SESSION = {"id": "848544d2-b075-4c0e-a160-a00f8ed60e5b", "tenant": "default", "state": "ready",
           "image": "python", "runtime": "runc", "created_at": "2026-11-30T14:50:43.509Z",
           "last_active_at": "2026-11-30T14:50:43.509Z",
           "expires_at": "2026-11-30T15:00:43.509Z", "idle_timeout_s": 600,
           "max_lifetime_s": 86400,
           "limits": {"memory_mb": 512, "cpus": 1, "pids": 128, "disk_mb": 512,
                      "exec_timeout_s": 60},
           "network": {"allow": []}, "metadata": {}, "workspace": "w", "persist": None,
           "node": "node-a"}


def test_a_documented_answer_passes(checker):
    assert checker.check("GET", "/v1/sessions/%s" % SESSION["id"], 200, JSON,
                         json.dumps(SESSION).encode()) is None
    assert checker.check("GET", "/v1/sessions/", 200, JSON,
                         json.dumps({"sessions": [SESSION]}).encode()) is None
    assert checker.check("DELETE", "/v1/sessions/x", 204, {}, b"") is None
    assert checker.check("GET", "/v1/sessions/x/files/a/b%20c.txt", 200,
                         {"content-type": "application/octet-stream"}, b"\0\1") is None


def test_a_missing_member_is_named_with_its_pointer(checker):
    doc = dict(SESSION, limits={"memory_mb": "512"})
    m = checker.check("GET", "/v1/sessions/x", 200, JSON, json.dumps(doc).encode())
    assert m is not None and m.pointer == "/limits/memory_mb" and "integer" in m.why, m
    assert m.route == "/v1/sessions/{id}" and "GET /v1/sessions/x" in str(m)


def test_an_undocumented_status_is_named(checker):
    m = checker.check("GET", "/healthz", 418, JSON, b"{}")
    assert m is not None and "418 is not documented" in m.why, m


def test_a_wrong_content_type_is_named(checker):
    m = checker.check("GET", "/healthz", 200, {"content-type": "text/plain"}, b"ok")
    assert m is not None and "Content-Type" in m.why, m
    m = checker.check("DELETE", "/v1/sessions/x", 204, JSON, b"{}")
    assert m is not None and "no body" in m.why, m


def test_an_unknown_error_code_is_refused(checker):
    m = checker.check("GET", "/v1/sessions/x", 404, JSON, err("no_such_thing"))
    assert m is not None and m.pointer == "/error/code", m
    assert checker.check("GET", "/v1/sessions/x", 404, JSON, err("not_found")) is None


def test_routes_outside_the_spec(checker):
    assert checker.check("GET", "/nope", 404, JSON, err("not_found")) is None
    m = checker.check("GET", "/nope", 200, JSON, b"{}")
    assert m is not None and "not in the spec" in m.why, m
    assert checker.check("PATCH", "/v1/admin/whatever", 404, JSON, err("not_found")) is None


def test_a_wrong_method_needs_allow_and_405(checker):
    assert checker.check("PUT", "/healthz", 405, dict(JSON, allow="GET"),
                         err("method_not_allowed")) is None
    m = checker.check("PUT", "/healthz", 405, JSON, err("method_not_allowed"))
    assert m is not None and "Allow" in m.why, m
    m = checker.check("PUT", "/healthz", 200, dict(JSON, allow="GET"), b"{}")
    assert m is not None and "405" in m.why, m


def test_ndjson_lines_are_checked(checker):
    check = checker.line_checker("POST", "/v1/sessions/x/exec", 200,
                                 {"content-type": "application/x-ndjson"})
    assert check({"type": "stdout", "text": "a\n"}) is None
    m = check({"type": "stdout", "text": 3})
    assert m is not None and "NDJSON line" in m.why, m
    assert check({"type": "sideways"}) is not None


def test_options_is_204_with_allow_and_head_a_wrong_method(checker):
    allow = {"allow": "GET, POST"}
    assert checker.check("OPTIONS", "/v1/sessions", 204, allow, b"") is None
    assert checker.check("OPTIONS", "/v1/sessions", 204, {}, b"") is not None   # no Allow
    assert checker.check("OPTIONS", "/v1/sessions", 200, allow, b"") is not None
    assert checker.check("OPTIONS", "/v1/sessions", 204, allow, b"x") is not None  # a body
    wrong = dict(JSON, allow="GET, DELETE, PATCH")
    assert checker.check("HEAD", "/v1/sessions/x", 405, wrong, b"") is None
    assert checker.check("HEAD", "/v1/sessions/x", 405, JSON, b"") is not None   # no Allow
    assert checker.check("HEAD", "/v1/sessions/x", 200, JSON, b"") is not None
