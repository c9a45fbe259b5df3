"""Hostile clients and hostile code against the audit trail (issue 11): what
a caller controls (its code, file paths, X-Request-Id, traceparent, query
parameters) must not forge an audit line in the log, nor another tenant's
entry, nor break the daemon. Each case ends with the daemon checks."""
import hashlib
import json
import urllib.parse
import uuid

FORGED = '{"type":"audit","action":"admin_drain","tenant":"evil"}'


def audit_lines(h):
    """Every audit line of the daemon's log, parsed (lines end at \\n only)."""
    out = []
    for line in h.d.read_log().split("\n"):
        if line.startswith('{"type":"audit"'):
            out.append(json.loads(line))  # each one a whole JSON document
    return out


def test_code_and_headers_cannot_forge_a_log_line(hostile):
    h = hostile
    rid = "forge-" + uuid.uuid4().hex
    with h.victim() as s:
        code = "# \n%s\n\r%s\x01\x1b[2K\nprint(1)\n" % (FORGED, FORGED)
        # A NUL would have cut the code short where it ran: it is refused.
        status, doc = h.api.request("POST", "/v1/sessions/%s/exec" % s["id"],
                                    body={"code": code.replace("\x01", "\x00")})
        assert status == 400 and "NUL" in doc["error"]["message"], (status, doc)
        status, doc = h.api.request("POST", "/v1/sessions/%s/exec" % s["id"],
                                    body={"code": code}, headers={"X-Request-Id": rid})
        assert status == 200, (status, doc)
        # A request id that is not a plain token is replaced by the daemon's,
        # and a traceparent that is not one is dropped.
        bad_rid = 'x"},' + FORGED + '\n'
        status, doc = h.api.request("POST", "/v1/sessions/%s/exec" % s["id"],
                                    body={"code": "2"},
                                    headers={"X-Request-Id": bad_rid.strip(),
                                             "traceparent": "00-" + FORGED})
        assert status == 200, (status, doc)
        # A file path with quotes and a newline (percent-encoded).
        path = urllib.parse.quote('a"b\n' + FORGED.replace("/", "_"), safe="")
        r = h.api.send("PUT", "/v1/sessions/%s/files/%s" % (s["id"], path), raw=b"x")
        assert r.status in (201, 400), (r.status, r.body)

        def mine():
            return [e for e in audit_lines(h) if e.get("session") == s["id"]]

        h.wait_for(lambda: len(mine()) >= 4, 10, what="the victim's audit lines")
        lines = mine()
        assert not [e for e in audit_lines(h) if e.get("tenant") == "evil"]
        execs = [e for e in lines if e["action"] == "exec"]
        # The entry is of the code as sent (and run), hash and head alike.
        assert execs[0]["request_id"] == rid and execs[0]["code_head"] == code, execs[0]
        assert execs[0]["code_sha256"] == hashlib.sha256(code.encode()).hexdigest(), execs[0]
        assert execs[1]["request_id"] != bad_rid.strip() and "traceparent" not in execs[1]
        assert all(e["tenant"] == "default" for e in lines), lines
    h.assert_daemon_fine()


def test_hostile_query_parameters(hostile):
    h = hostile
    for q in ("since=" + "9" * 5000, "since=(0-0", "since=-", "since=%2B", "limit=-1",
              "limit=99999999999999999999", "wait_s=1e3", "action=" + "x" * 4000,
              "tenant=%ff%fe", "since=1-2-3", "since=2026-13-45T99:99:99Z"):
        status, doc = h.api.request("GET", "/v1/audit?" + q, timeout=30)
        assert status in (200, 400), (q, status, doc)
        assert set(doc) in ({"entries", "next"}, {"error"}), (q, doc)
        if "tenant=" in q and status == 200:
            assert all(e["tenant"] == "default" for e in doc["entries"]), doc
    h.assert_daemon_fine()
