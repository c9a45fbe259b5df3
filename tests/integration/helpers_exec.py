"""Helpers shared by the execution-engine, files, seed and one-shot tests
(issue 3), over the harness's client. Stdlib only; everything goes to the
daemon on loopback."""
import base64
import contextlib
import hashlib
import http.client
import re
import time
import urllib.parse

from harness import Client, wait_for
from harness.http import parse_body

PNG_SIG = b"\x89PNG\r\n\x1a\n"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
MARKER = re.compile(r"\[\.\.\. (\d+) bytes truncated \.\.\.\]")
# Runner files a traceback must never name.
RUNNER_NAMES = ("kernel.py", "supervisor.py", "ci_display", "ci_frame", "/opt/ci")


@contextlib.contextmanager
def new_session(api, **body):
    """A session created with `body`, deleted however the test ends."""
    s = api.create(**body)
    try:
        yield s
    finally:
        api.delete(s["id"])


def error_of(resp):
    """(status, code) of an answer that must have the one error shape."""
    status, doc = resp
    assert isinstance(doc, dict) and set(doc) == {"error"}, (status, doc)
    assert set(doc["error"]) == {"code", "message"} and doc["error"]["message"], doc
    return status, doc["error"]["code"]


def decode_png(b64):
    data = base64.b64decode(b64, validate=True)
    assert data.startswith(PNG_SIG), data[:16]
    return data


def png_size(data):
    """(width, height) from the IHDR chunk of a PNG."""
    assert data.startswith(PNG_SIG) and data[12:16] == b"IHDR", data[:24]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def files_url(sid, path=None):
    """The files route; `path` is put in the URL exactly as given (already
    encoded where the test wants encoding)."""
    if path is None:
        return "/v1/sessions/%s/files" % sid
    return "/v1/sessions/%s/files/%s" % (sid, path)


def quote_path(path):
    return "/".join(urllib.parse.quote(seg, safe="") for seg in path.split("/"))


def raw_request(port, method, url, body=None, headers=None, timeout=120):
    """(status, response, raw bytes) — for answers that are not JSON."""
    r = Client(port, timeout=timeout).send(method, url, raw=body, headers=headers)
    return r.status, r, r.body


def put_bytes(port, sid, path, data, timeout=120):
    status, _, payload = raw_request(port, "PUT", files_url(sid, path), body=data,
                                     headers={"Content-Type": "application/octet-stream"},
                                     timeout=timeout)
    return status, parse_body(payload)


def get_bytes(port, sid, path, timeout=120):
    status, resp, payload = raw_request(port, "GET", files_url(sid, path), timeout=timeout)
    return status, resp, payload


def upload_stream(port, url, chunks, length=None, timeout=120):
    """Send `chunks` (an iterable of bytes) as a PUT body, with Content-Length
    when `length` is given, else chunked. Stops sending as soon as the server
    has answered (an early 413), then reads the answer.
    Returns (status, json doc, bytes sent, seconds)."""
    return Client(port, timeout=timeout).upload("PUT", url, chunks, length=length)


def download_digest(port, url, timeout=120, stall_s=10.0, pace_s=0.0, piece=1 << 20):
    """GET `url`, reading it in pieces of `piece` bytes (sleeping `pace_s`
    after each, to act as a slow client). Returns a dict: status, size,
    sha256 (hex), seconds, blocks (sha256 of every 1 MiB), and stalled
    (True when no byte came for `stall_s` seconds mid-body)."""
    t0 = time.monotonic()
    out = {"status": None, "size": 0, "sha256": None, "seconds": None, "blocks": [],
           "stalled": False}
    with Client(port, timeout=timeout).stream("GET", url) as resp:
        out["status"] = resp.status
        resp.settimeout(stall_s)
        h, blk = hashlib.sha256(), bytearray()
        size = 0
        try:
            while True:
                data = resp.read(piece)
                if not data:
                    break
                h.update(data)
                size += len(data)
                blk += data
                while len(blk) >= 1 << 20:
                    out["blocks"].append(hashlib.sha256(blk[:1 << 20]).hexdigest())
                    del blk[:1 << 20]
                if pace_s:
                    # Deliberate: the pace of a slow client is what the test is
                    # about (the daemon must hold the sandbox back meanwhile).
                    time.sleep(pace_s)
        except (TimeoutError, OSError, http.client.HTTPException) as e:
            out["stalled"] = True
            out["error"] = repr(e)
        if blk:
            out["blocks"].append(hashlib.sha256(blk).hexdigest())
        out.update(size=size, sha256=h.hexdigest(), seconds=time.monotonic() - t0)
        return out


def first_bad_block(got_blocks, gen):
    """Index of the first 1 MiB block of `gen()` whose digest differs."""
    buf, i = bytearray(), 0
    for chunk in gen():
        buf += chunk
        while len(buf) >= 1 << 20:
            if i >= len(got_blocks) or got_blocks[i] != hashlib.sha256(buf[:1 << 20]).hexdigest():
                return i
            del buf[:1 << 20]
            i += 1
    return None


def pattern_chunks(total, chunk=1 << 20, seed=b"ci"):
    """Deterministic, incompressible-looking bytes, generated piece by piece.
    Returns (generator factory, sha256 hex of the whole)."""
    base = hashlib.sha256(seed).digest() * (chunk // 32)

    def gen():
        left, i = total, 0
        while left > 0:
            n = min(chunk, left)
            block = i.to_bytes(8, "big") + base[8:n] if n > 8 else base[:n]
            yield block[:n]
            left -= n
            i += 1

    h = hashlib.sha256()
    for b in gen():
        h.update(b)
    return gen, h.hexdigest()


def exec_raw(api, sid, code, **extra):
    return api.request("POST", "/v1/sessions/%s/exec" % sid, body=dict(code=code, **extra))


def exec_until_ok(api, sid, code, bound=10.0):
    """Run `code`, retrying while the session is busy (a kernel restarting);
    (result, seconds until it answered)."""
    t0 = time.monotonic()

    def answered():
        status, doc = exec_raw(api, sid, code)
        if status == 200:
            return doc
        assert status == 409 and doc["error"]["code"] == "busy", (status, doc)
        return None

    doc = wait_for(answered, bound, what="session %s to take code again (not busy)" % sid)
    return doc, time.monotonic() - t0


def stream_exec(port, sid, code, timeout=60, url=None, **extra):
    """POST a streamed exec and read the NDJSON answer line by line.
    Returns (status, response, [(seconds since the request, event)])."""
    body = dict(code=code, stream=True, **extra)
    with Client(port, timeout=timeout).stream("POST", url or "/v1/sessions/%s/exec" % sid,
                                              body=body) as resp:
        if resp.status != 200:
            return resp.status, resp, parse_body(resp.read())
        return resp.status, resp, list(resp.events())

