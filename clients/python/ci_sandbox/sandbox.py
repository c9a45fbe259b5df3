"""Sandbox: one ci session (a container with a persistent Python kernel),
with E2B-like calls. The daemon's address and key come from the arguments
or, when left out, from CI_SANDBOX_URL and CI_SANDBOX_API_KEY."""
import os
import urllib.parse

from . import errors
from .execution import Execution, OutputChunk, Result, Run
from .transport import Transport

DEFAULT_URL = "http://127.0.0.1:8080"


def _transport(url, api_key, ca_file, timeout):
    url = url or os.environ.get("CI_SANDBOX_URL") or DEFAULT_URL
    if api_key is None:
        api_key = os.environ.get("CI_SANDBOX_API_KEY") or None
    if ca_file is None:
        ca_file = os.environ.get("CI_SANDBOX_CA_FILE") or None
    return Transport(url, api_key=api_key, ca_file=ca_file, timeout=timeout)


def _quote_path(path):
    """A /workspace-relative path for the URL, encoded one segment at a time
    (the daemon decodes each and refuses `..`, absolute paths, NUL)."""
    if not isinstance(path, str) or not path:
        raise errors.BadPath("a file path must be a non-empty string", code="bad_path")
    return "/".join(urllib.parse.quote(seg, safe="") for seg in path.split("/"))


class Files:
    """The session's /workspace (sb.files). Paths are relative to it."""

    def __init__(self, sandbox):
        self._sb = sandbox

    def write(self, path, data):
        """Write bytes (or a str, as UTF-8) to path; parent directories are
        made. Returns {"path", "size"}."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("files.write: data must be bytes or str")
        return self._sb._t.call("PUT", self._sb._path("/files/" + _quote_path(path)), bytes(data))

    def read(self, path):
        """The bytes of the file at path (NotFound when there is none)."""
        return self._sb._t.call("GET", self._sb._path("/files/" + _quote_path(path)), raw=True)

    def read_text(self, path, encoding="utf-8"):
        return self.read(path).decode(encoding)

    def list(self, path=""):
        """The entries under path ("" for all of /workspace): dicts with path,
        size, mtime and type ("file", "dir", "symlink"), and the entry of path
        itself when it is a file."""
        doc = self._sb._t.call("GET", self._sb._path("/files"))
        entries = doc.get("files") or []
        prefix = path.strip("/")
        if not prefix:
            return entries
        return [e for e in entries
                if e.get("path") == prefix or str(e.get("path", "")).startswith(prefix + "/")]

    def exists(self, path):
        prefix = path.strip("/")
        return any(e.get("path") == prefix for e in self.list(prefix))

    def remove(self, path, recursive=False):
        """Delete a file; a directory only with recursive=True (then with
        everything in it). Without it a directory raises IsADirectory: the
        client asks first (status None), since a daemon from before
        `?recursive=1` would delete the whole tree, and a newer daemon
        refuses it itself (409) when the path became a directory since."""
        url = self._sb._path("/files/" + _quote_path(path))
        if recursive:
            self._sb._t.call("DELETE", url + "?recursive=1")
            return
        target = path.strip("/")
        for e in self.list(target):
            if e.get("path") == target and e.get("type") == "dir":
                raise errors.IsADirectory("%s is a directory: pass recursive=True to remove it "
                                          "with everything in it" % target, code="is_a_directory")
        self._sb._t.call("DELETE", url)


class Sandbox:
    """A live session. Make one with Sandbox.create() or Sandbox.connect(id);
    `with Sandbox.create() as sb:` kills it when the block ends."""

    def __init__(self, transport, info):
        self._t = transport
        self.info = info
        self.id = info["id"]
        self.files = Files(self)

    # ------------------------------------------------------------ making

    @classmethod
    def create(cls, url=None, api_key=None, image=None, limits=None, network_allow=None,
               idle_timeout_s=None, max_lifetime_s=None, env=None, metadata=None,
               runtime=None, ca_file=None, timeout=None, **fields):
        """Create a session and wait until it is usable.

        url             http://HOST:PORT, https://HOST:PORT or unix:/path.sock
                        (default CI_SANDBOX_URL, else http://127.0.0.1:8080)
        api_key         a tenant's key (default CI_SANDBOX_API_KEY)
        ca_file         a PEM CA file for https (default CI_SANDBOX_CA_FILE,
                        else the system's CAs)
        timeout         the client's own per-call deadline in seconds (300)
        image, limits ({"memory_mb", "cpus", "pids", "disk_mb",
        "exec_timeout_s"}), network_allow (["host:port", "*.suffix"]),
        idle_timeout_s, max_lifetime_s, env, metadata, runtime, and any other
        field of POST /v1/sessions (restore=, workspace=, persist=) as keywords.
        """
        t = _transport(url, api_key, ca_file, timeout)
        body = dict(fields)
        for name, value in (("image", image), ("limits", limits), ("idle_timeout_s", idle_timeout_s),
                            ("max_lifetime_s", max_lifetime_s), ("env", env),
                            ("metadata", metadata), ("runtime", runtime)):
            if value is not None:
                body[name] = value
        if network_allow is not None:
            body["network"] = {"allow": list(network_allow)}
        return cls(t, t.call("POST", "/v1/sessions", body))

    @classmethod
    def connect(cls, sandbox_id, url=None, api_key=None, ca_file=None, timeout=None):
        """Attach to an existing session (NotFound, Expired when it is not live)."""
        t = _transport(url, api_key, ca_file, timeout)
        return cls(t, t.call("GET", "/v1/sessions/" + urllib.parse.quote(sandbox_id, safe="")))

    @classmethod
    def list(cls, url=None, api_key=None, ca_file=None, timeout=None):
        """The caller's live sessions (dicts, as GET /v1/sessions answers)."""
        t = _transport(url, api_key, ca_file, timeout)
        return t.call("GET", "/v1/sessions").get("sessions", [])

    def _path(self, rest=""):
        return "/v1/sessions/" + urllib.parse.quote(self.id, safe="") + rest

    # ------------------------------------------------------------ running

    def run_code(self, code, language=None, timeout_s=None, on_stdout=None, on_stderr=None,
                 on_result=None):
        """Run code in the session's kernel (state persists between calls)
        and return its Execution. Whatever the code did (an exception, a
        timeout) is in the Execution; a CiError is raised only when the
        request itself fails (Busy, Expired, NotFound, ...).

        language   "python" (default), "javascript" or "bash"
        timeout_s  the execution's deadline (default: the session's)
        on_stdout, on_stderr   called with each piece of text as it is written
        on_result  called with each display Result (a figure, a DataFrame's
                   HTML) as it is produced
        With any callback the daemon's streaming exec is used.
        """
        body = {"code": code}
        if language is not None:
            body["language"] = language
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        if not (on_stdout or on_stderr or on_result):
            return Execution(self._t.call("POST", self._path("/exec"), body))
        body["stream"] = True
        chunks = []
        for event in self._t.lines("POST", self._path("/exec"), body):
            kind = event.get("type")
            if kind in ("stdout", "stderr"):
                text = event.get("text", "")
                chunks.append(OutputChunk(kind, text))
                cb = on_stdout if kind == "stdout" else on_stderr
                if cb:
                    cb(text)
            elif kind == "display":
                if on_result:
                    on_result(Result.from_json(event))
            elif kind == "result":
                return Execution(event, streamed_output=chunks)
            elif kind == "error":
                err = event.get("error") if isinstance(event.get("error"), dict) else {}
                raise errors.from_error_object(err)
        raise errors.ProtocolError("the exec stream ended without its result", code="protocol")

    def run(self, code, goal=None, max_attempts=None, timeout_s=None, fixer=False,
            on_failure=None, retry_hopeless=None):
        """The fix-and-retry workflow (POST .../runs, docs/workflow.md): run
        code, repair it on an error (rules, then the fixer model) and retry.
        fixer: False leaves the daemon's default, None is rules only, or a
        dict {"url", "model", "api_key_file"}. retry_hopeless=True repairs
        even a failure the tenant's failure memory knows is hopeless (the
        run's failure.reason says when it was skipped as one). Returns a Run."""
        body = {"code": code}
        for name, value in (("goal", goal), ("max_attempts", max_attempts),
                            ("timeout_s", timeout_s), ("on_failure", on_failure),
                            ("retry_hopeless", retry_hopeless)):
            if value is not None:
                body[name] = value
        if fixer is not False:
            body["fixer"] = fixer
        return Run(self._t.call("POST", self._path("/runs"), body))

    def interrupt(self):
        """Ctrl-C for the running execution; True when something was running."""
        return bool(self._t.call("POST", self._path("/interrupt")).get("interrupted"))

    # ------------------------------------------------------------ the session

    def refresh(self):
        """Read the session again (state, expires_at, ...) into .info."""
        self.info = self._t.call("GET", self._path())
        return self.info

    def is_running(self):
        """True while the session is live (False once it ended or is gone)."""
        try:
            self.refresh()
            return True
        except (errors.NotFound, errors.Expired):
            return False

    def set_network(self, allow):
        """Replace the egress allowlist (a session created with network access)."""
        self.info = self._t.call("PATCH", self._path(), {"network": {"allow": list(allow)}})
        return self.info

    def keepalive(self):
        """Slide the idle clock; returns the session (its new expires_at)."""
        self.info = self._t.call("POST", self._path("/keepalive"))
        return self.info

    def kill(self):
        """End the session. True when this call ended it, False when it had
        ended already (or never was)."""
        try:
            self._t.call("DELETE", self._path())
            return True
        except (errors.NotFound, errors.Expired):
            return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.kill()
        except errors.CiError:
            if exc[0] is None:
                raise
        return False

    def __repr__(self):
        return "Sandbox(%r)" % self.id
