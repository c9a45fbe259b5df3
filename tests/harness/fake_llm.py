"""FakeLLM: a scripted OpenAI-compatible chat completions server, standing
in for the fixer model (real HTTP on 127.0.0.1, a random port).

    with FakeLLM(replies={"m1": ["print(1)", {"status": 500}]}) as llm:
        ... point the daemon's fixer at llm.url, model "m1" ...
        llm.requests[0]["messages"][1]["content"]   # what the model was asked
        llm.headers[0]["Authorization"]             # and with which headers

`.url` is the API base, http://127.0.0.1:PORT/v1 (clients POST to
.url + "/chat/completions"). Replies are scripted per model name and
consumed in order; the last one repeats. A reply is
  - a str: code, answered as ```python fenced block in the message content;
  - a dict: {"content": "raw message content"}, {"code": "..."} (as a str),
    {"status": 500, "body": "..."} (that status and body; the body defaults
    to an OpenAI-style error), {"close": True} (the connection is dropped
    without an answer), and {"delay_s": 5.0, ...} waits that long before
    doing what the rest says (stop() cuts a wait short).
A model with no script is answered 404 with an OpenAI-style error.
`.requests` lists the JSON bodies received, `.headers` their headers (in the
same order; each looked up by name in any case, h["authorization"]); `.add(model, replies)` adds or replaces a script.
"""
import http.server
import json
import threading

from .wait import wait_for

CHAT_PATH = "/v1/chat/completions"
MAX_BODY = 8 << 20


def _error_body(message, code):
    return json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                 "code": code}})


def _completion(content, model):
    return json.dumps({
        "id": "chatcmpl-fake", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
    })


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner = None
    timeout = 30  # a connection that never sends its request is closed, not held

    def log_message(self, *args):
        pass

    def _send(self, status, body):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(404, _error_body("no such route", "not_found"))

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            self._send(413, _error_body("body too large", "too_large"))
            return
        raw = self.rfile.read(length)
        if self.path != CHAT_PATH:
            self._send(404, _error_body("no such route: " + self.path, "not_found"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, _error_body("body is not JSON", "invalid_json"))
            return
        model = body.get("model") if isinstance(body, dict) else None
        reply = self.owner._record(body, self.headers, model)
        if reply is None:
            self._send(404, _error_body("The model '%s' does not exist" % model,
                                        "model_not_found"))
            return
        if isinstance(reply, str):
            reply = {"code": reply}
        if reply.get("delay_s") and self.owner._stopping.wait(reply["delay_s"]):
            self.close_connection = True
            return
        if reply.get("close"):
            self.close_connection = True
            return
        if "status" in reply:
            self._send(reply["status"], reply.get("body", _error_body(
                "scripted failure", "server_error")))
            return
        if "code" in reply:
            content = "```python\n%s\n```" % reply["code"]
        else:
            content = reply.get("content", "")
        self._send(200, _completion(content, model))


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class FakeLLM:
    def __init__(self, replies=None):
        self._lock = threading.Lock()
        self._scripts = {m: list(r) for m, r in (replies or {}).items()}
        self._next = {}
        self._stopping = threading.Event()
        self.requests = []
        self.headers = []
        handler = type("Handler", (_Handler,), {"owner": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self.port = self._server.server_address[1]
        self.url = "http://127.0.0.1:%d/v1" % self.port
        self._thread = None

    def add(self, model, replies):
        with self._lock:
            self._scripts[model] = list(replies)
            self._next[model] = 0

    def _record(self, body, headers, model):
        """Keep the request; the reply its model's script says next, or None."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            script = self._scripts.get(model) if isinstance(model, str) else None
            if not script:
                return None
            i = self._next.get(model, 0)
            self._next[model] = i + 1
            return script[min(i, len(script) - 1)]

    def wait_requests(self, n, timeout=10):
        """Wait until n requests have come."""
        wait_for(lambda: len(self.requests) >= n, timeout, what="%d fixer requests" % n)

    def start(self):
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stopping.set()
        if self._thread:
            self._server.shutdown()
            self._thread.join(10)
            self._thread = None
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
