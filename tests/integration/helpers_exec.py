"""Helpers shared by the execution-engine, files, seed and one-shot tests
(issue 3). Stdlib only; everything goes to the daemon on loopback."""
import base64
import contextlib
import hashlib
import http.client
import json
import re
import select
import subprocess
import time
import urllib.parse

from conftest import CTL_BIN

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


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def files_url(sid, path=None):
    """The files route; `path` is put in the URL exactly as given (already
    encoded where the test wants encoding)."""
    if path is None:
        return "/v1/sessions/%s/files" % sid
    return "/v1/sessions/%s/files/%s" % (sid, path)


def quote_path(path):
    return "/".join(urllib.parse.quote(seg, safe="") for seg in path.split("/"))


def raw_request(port, method, url, body=None, headers=None, timeout=120):
    """(status, headers, raw bytes) — for answers that are not JSON."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, url, body=body, headers=dict(headers or {}))
        resp = conn.getresponse()
        return resp.status, resp, resp.read()
    finally:
        conn.close()


def as_json(payload):
    try:
        return json.loads(payload) if payload else None
    except ValueError:
        return payload


def put_bytes(port, sid, path, data, timeout=120):
    status, _, payload = raw_request(port, "PUT", files_url(sid, path), body=data,
                                     headers={"Content-Type": "application/octet-stream"},
                                     timeout=timeout)
    return status, as_json(payload)


def get_bytes(port, sid, path, timeout=120):
    status, resp, payload = raw_request(port, "GET", files_url(sid, path), timeout=timeout)
    return status, resp, payload


def upload_stream(port, url, chunks, length=None, timeout=120):
    """Send `chunks` (an iterable of bytes) as a PUT body, with Content-Length
    when `length` is given, else chunked. Stops sending as soon as the server
    has answered (an early 413), then reads the answer.
    Returns (status, json doc, bytes sent, seconds)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest("PUT", url)
        conn.putheader("Content-Type", "application/octet-stream")
        if length is None:
            conn.putheader("Transfer-Encoding", "chunked")
        else:
            conn.putheader("Content-Length", str(length))
        conn.endheaders()
        sock = conn.sock
        sent = 0

        def answered():
            r, _, _ = select.select([sock], [], [], 0)
            return bool(r)

        def send_all(buf):
            view = memoryview(buf)
            while view:
                r, w, _ = select.select([sock], [sock], [], timeout)
                if r:
                    return False           # the server answered early
                if not w:
                    raise AssertionError("upload stalled for %ss" % timeout)
                n = sock.send(view)
                view = view[n:]
            return True

        try:
            for chunk in chunks:
                if answered():
                    break
                frame = chunk if length is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk)
                if not send_all(frame):
                    break
                sent += len(chunk)
            else:
                if length is None:
                    send_all(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass                           # answered early and closed: read the answer
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, as_json(payload), sent, time.monotonic() - t0
    finally:
        conn.close()


def download_digest(port, url, timeout=120, stall_s=10.0, pace_s=0.0, piece=1 << 20):
    """GET `url`, reading it in pieces of `piece` bytes (sleeping `pace_s`
    after each, to act as a slow client). Returns a dict: status, size,
    sha256 (hex), seconds, blocks (sha256 of every 1 MiB), and stalled
    (True when no byte came for `stall_s` seconds mid-body)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    out = {"status": None, "size": 0, "sha256": None, "seconds": None, "blocks": [],
           "stalled": False}
    try:
        conn.request("GET", url)
        resp = conn.getresponse()
        out["status"] = resp.status
        conn.sock.settimeout(stall_s)
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
                    time.sleep(pace_s)
        except (TimeoutError, OSError, http.client.HTTPException) as e:
            out["stalled"] = True
            out["error"] = repr(e)
        if blk:
            out["blocks"].append(hashlib.sha256(blk).hexdigest())
        out.update(size=size, sha256=h.hexdigest(), seconds=time.monotonic() - t0)
        return out
    finally:
        conn.close()


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
    while True:
        status, doc = exec_raw(api, sid, code)
        if status == 200:
            return doc, time.monotonic() - t0
        assert status == 409 and doc["error"]["code"] == "busy", (status, doc)
        if time.monotonic() - t0 > bound:
            raise AssertionError("session still busy after %.1fs" % bound)
        time.sleep(0.02)


def stream_exec(port, sid, code, timeout=60, url=None, **extra):
    """POST a streamed exec and read the NDJSON answer line by line.
    Returns (status, response, [(seconds since the request, event)])."""
    body = json.dumps(dict(code=code, stream=True, **extra)).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        t0 = time.monotonic()
        conn.request("POST", url or "/v1/sessions/%s/exec" % sid, body=body,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, resp, as_json(resp.read())
        events = []
        while True:
            line = resp.readline()
            if not line:
                break
            events.append((time.monotonic() - t0, json.loads(line)))
        return resp.status, resp, events
    finally:
        conn.close()


def ctl(daemon, *args, input=None, text=True, timeout=120):
    return subprocess.run([CTL_BIN, "--server", "http://127.0.0.1:%d" % daemon.port, *args],
                          capture_output=True, text=text, input=input, timeout=timeout)
