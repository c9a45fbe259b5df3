"""Issue 11: a hostile client cannot break or forge the daemon's log lines.

What a client controls reaches the access line (its path, its User-Agent) and
error lines. Raw control bytes in a head are refused by the HTTP parser (400,
no access line); what it lets through (quotes, backslashes, braces, tabs,
bytes that are not UTF-8, percent-encoded CR/LF, key=value look-alikes) must
come out as one value of one line, in both formats."""
import json
import re

import pytest

from harness.http import raw_exchange, status_of

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")
FORGED_STAMP = "2020-01-01T00:00:00.000Z"

# (head bytes after the request line, whether the server takes the request)
HOSTILE_HEADS = [
    (b'User-Agent: q"}\n{"msg":"forged","level":"error"}\r\n', False),  # raw LF: refused
    (b'User-Agent: a\rforged\r\n', False),                              # bare CR: refused
    (b'User-Agent: a\x00b\r\n', False),                                 # NUL: refused
    (b'User-Agent: a\x01\x1b[31mforged\r\n', False),                    # controls: refused
    (b'User-Agent: q"}{"msg":"forged","level":"error"} \\"\r\n', True),
    (b'User-Agent: x status=200 request_id=forged tenant=forged\r\n', True),
    (b'User-Agent: tab\there \xff\xfe\xc3\xa9 end\r\n', True),
    (b'X-Request-Id: forged\tid\r\ntraceparent: 00-forged\r\n', True),  # refused values: ours kept
]
HOSTILE_PATHS = [
    (b"/nope%0d%0a" + FORGED_STAMP.encode() + b"%20error%20forged", True),
    (b"/nope\r\n" + FORGED_STAMP.encode() + b" error forged", False),
    (b"/v1/sessions/%22%7D%7B%22forged%22:1%7D/exec", True),
]


def send_hostile(d):
    taken = 0
    for head, ok in HOSTILE_HEADS:
        req = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + head + b"Connection: close\r\n\r\n"
        st = status_of(raw_exchange(d.port, req))
        assert (st == 200) == ok, (head, st)
        taken += ok
    for path, ok in HOSTILE_PATHS:
        req = b"GET " + path + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        st = status_of(raw_exchange(d.port, req))
        assert (st in (404, 405)) == ok, (path, st)
        taken += ok
    assert d.api.send("GET", "/healthz", headers={"X-Request-Id": "obs-end-mark"}).status == 200
    return taken + 1


def text_fields(line):
    """key=value pairs of a text line, values quoted or bare, as log.c writes them."""
    out = {}
    for m in re.finditer(r' ([a-z_]+)=("(?:[^"\\]|\\.)*"|[^ ]*)', line):
        out.setdefault(m.group(1), m.group(2))
    return out


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_hostile_paths_and_headers_cannot_forge_log_lines(make_daemon, fmt):
    d = make_daemon("--log-format", fmt)
    mark = d.log_mark()
    taken = send_hostile(d)
    d.wait_log("obs-end-mark", since=mark)
    lines = [x for x in d.log_since(mark).splitlines() if x]
    access = []
    for line in lines:
        if fmt == "json":
            doc = json.loads(line)            # one whole object per line
            assert set(doc) >= {"ts", "level", "msg"}, line
            assert not doc["ts"].startswith("2020") and doc.get("level") != "error", line
            if doc["msg"] == "access" and doc["route"] in ("/healthz", "other",
                                                           "/v1/sessions/{id}/exec"):
                access.append(doc)
        else:
            if line.startswith("{"):      # an audit line (log_raw_line): JSON of its own
                doc = json.loads(line)
                assert isinstance(doc, dict) and "forged" not in line, line
                continue
            assert STAMP.match(line) and not line.startswith(FORGED_STAMP), line
            assert " error " not in line[:32], line
            if " info  access " in line:
                access.append(text_fields(line))
    hostile = [a for a in access if a.get("route") != "/readyz"]
    assert len(hostile) == taken, (taken, lines)
    for a in hostile:
        # The forged key=value look-alikes stay inside their one value.
        assert "forged" not in (a.get("request_id") or ""), a
        assert "forged" not in (a.get("tenant") or ""), a
        assert a.get("status") in (200, 404, "200", "404"), a
    if fmt == "json":
        uas = {a.get("user_agent") for a in hostile}
        assert 'q"}{"msg":"forged","level":"error"} \\"' in uas  # kept, as one string
        assert "tab\there \ufffd\ufffd\u00e9 end" in uas          # not UTF-8: replaced
        paths = {a["path"] for a in hostile}
        assert "/nope%0d%0a" + FORGED_STAMP + "%20error%20forged" in paths
    else:
        uas = {a.get("user_agent") for a in hostile}
        assert '"x status=200 request_id=forged tenant=forged"' in uas
        assert '"q\\"}{\\"msg\\":\\"forged\\",\\"level\\":\\"error\\"} \\\\\\""' in uas
        assert "tab\\x09here" in " ".join(u or "" for u in uas)
