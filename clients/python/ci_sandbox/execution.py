"""What an execution returned, as objects (docs/api.md, "The exec result")."""
import base64


class ExecutionError:
    """The exception the code raised: name ("NameError"), value (its message),
    traceback (a list of lines, the cell's own frames) and cell_line, the
    line of the submitted code the error went through ({"line": 6, "text":
    "..."}, also when a library raised it; None when there is none)."""

    __slots__ = ("name", "value", "traceback", "cell_line")

    def __init__(self, name, value, traceback, cell_line=None):
        self.name = name
        self.value = value
        self.traceback = list(traceback or [])
        self.cell_line = cell_line if isinstance(cell_line, dict) else None

    @classmethod
    def from_json(cls, doc):
        if not isinstance(doc, dict):
            return None
        return cls(doc.get("ename", ""), doc.get("evalue", ""), doc.get("traceback") or [],
                   doc.get("cell_line"))

    def __repr__(self):
        return "ExecutionError(%r, %r)" % (self.name, self.value)


class OutputChunk:
    """A piece of output: stream ("stdout" or "stderr") and its text."""

    __slots__ = ("stream", "text")

    def __init__(self, stream, text):
        self.stream = stream
        self.text = text

    def __repr__(self):
        return "OutputChunk(%r, %r)" % (self.stream, self.text)


class Result:
    """One display entry (a MIME type of a Jupyter display bundle).

    mime            "image/png", "text/html", ...
    data            the bytes (base64 decoded; UTF-8 for text types)
    group           entries of one bundle share it
    is_main_result  True for the last expression's other MIME types
    """

    __slots__ = ("mime", "data", "group", "is_main_result")

    def __init__(self, mime, data, group=0, is_main_result=False):
        self.mime = mime
        self.data = data
        self.group = group
        self.is_main_result = is_main_result

    @classmethod
    def from_json(cls, doc):
        try:
            data = base64.b64decode(doc.get("data") or "", validate=False)
        except (ValueError, TypeError):
            data = b""
        return cls(doc.get("mime", ""), data, doc.get("group", 0), bool(doc.get("result")))

    @property
    def text(self):
        """The data as text (for text/* and JSON types)."""
        return self.data.decode("utf-8", "replace")

    def __repr__(self):
        return "Result(%r, %d bytes)" % (self.mime, len(self.data))


class FileChange:
    """A file under /workspace the execution created, modified or deleted."""

    __slots__ = ("path", "size", "change")

    def __init__(self, path, size, change):
        self.path = path
        self.size = size
        self.change = change

    def __repr__(self):
        return "FileChange(%r, %r)" % (self.path, self.change)


class Execution:
    """The outcome of run_code.

    status      "ok", "error", "timeout" or "killed"
    stdout, stderr   the whole output of each stream (capped by the daemon)
    output      [OutputChunk] in the order written, when the daemon reports
                it (its `output` list), or as the chunks streamed; else []
    text        the last expression's text/plain ("82"), or None
    error       ExecutionError, or None
    results     [Result]: every display entry
    images      [bytes]: the PNG images (decoded), in order
    files       [FileChange]
    duration_ms from the request's arrival to the result
    kernel      "preserved" or "restarted"
    reason      for timeout and killed, what happened
    raw         the exec result as the daemon sent it (a dict)
    """

    def __init__(self, doc, streamed_output=None):
        self.raw = doc
        self.status = doc.get("status")
        self.stdout = doc.get("stdout") or ""
        self.stderr = doc.get("stderr") or ""
        self.stdout_truncated = bool(doc.get("stdout_truncated"))
        self.stderr_truncated = bool(doc.get("stderr_truncated"))
        if isinstance(doc.get("output"), list):
            self.output = [OutputChunk(c.get("stream"), c.get("text", ""))
                           for c in doc["output"] if isinstance(c, dict)]
        else:
            self.output = list(streamed_output or [])
        self.output_truncated = bool(doc.get("output_truncated"))
        self.text = doc.get("result")
        self.error = ExecutionError.from_json(doc.get("error"))
        self.results = [Result.from_json(d) for d in doc.get("display") or [] if isinstance(d, dict)]
        self.images = [r.data for r in self.results if r.mime == "image/png"]
        self.files = [FileChange(f.get("path"), f.get("size"), f.get("change"))
                      for f in doc.get("files") or [] if isinstance(f, dict)]
        self.files_truncated = bool(doc.get("files_truncated"))
        self.duration_ms = doc.get("duration_ms")
        self.kernel = doc.get("kernel")
        self.reason = doc.get("reason")

    @property
    def result(self):
        """The last expression's value as text (the E2B spelling of .text)."""
        return self.text

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def duration(self):
        """Seconds, as a float."""
        return None if self.duration_ms is None else self.duration_ms / 1000.0

    def __repr__(self):
        return "Execution(status=%r, result=%r, error=%r)" % (self.status, self.text, self.error)


class Run:
    """The outcome of Sandbox.run (docs/workflow.md): status ("ok", "failed",
    "skipped", "degraded"), state, attempts (dicts), result (the last
    execution, an Execution or None), failure, degraded, raw."""

    def __init__(self, doc):
        self.raw = doc
        self.id = doc.get("id")
        self.status = doc.get("status")
        self.state = doc.get("state")
        self.attempts = doc.get("attempts") or []
        self.result = Execution(doc["result"]) if isinstance(doc.get("result"), dict) else None
        self.failure = doc.get("failure")
        self.degraded = doc.get("degraded")

    def __repr__(self):
        return "Run(status=%r, attempts=%d)" % (self.status, len(self.attempts))
