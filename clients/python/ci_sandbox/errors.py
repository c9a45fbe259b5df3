"""Typed errors: every answer of the daemon that is not a success becomes a
CiError, or the subclass named after its error code (docs/api.md, "Errors"),
so callers can write `except ci_sandbox.Expired:` instead of reading codes.
Failures to reach the daemon at all are ConnectionFailed (code "connection",
status None), so one `except CiError` covers everything the client raises."""


class CiError(Exception):
    """An error of the ci API.

    code      the error code of the daemon's answer ("not_found", "busy", ...),
              or "connection" when the daemon could not be reached
    status    the HTTP status (None for a connection failure)
    message   the daemon's message, in words
    body      the whole error object as the daemon sent it (a dict; it may
              carry more, such as "quota")
    """

    def __init__(self, message, code="internal", status=None, body=None, headers=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.body = body or {}
        self.headers = headers or {}

    def __str__(self):
        where = " (%s %s)" % (self.status, self.code) if self.status else " (%s)" % self.code
        return self.message + where


class BadRequest(CiError):
    """400 bad_request: a malformed or out-of-bounds request."""


class BadPath(BadRequest):
    """400 bad_path: an absolute path, a `..` component, a NUL byte, a symlink."""


class Unauthorized(CiError):
    """401: no API key, or one that is not valid."""


class Forbidden(CiError):
    """403: a valid key on the other kind of route (tenant vs admin)."""


class NotFound(CiError):
    """404: no such session (or route, file, key)."""


class MethodNotAllowed(CiError):
    """405: the route does not take this method."""


class UnsupportedMediaType(CiError):
    """415: a JSON body sent without Content-Type: application/json."""


class Busy(CiError):
    """409 busy: an execution is already running, or the session is starting."""


class Conflict(CiError):
    """409 conflict: a review that is already decided."""


class IsADirectory(Conflict):
    """409 is_a_directory: deleting a directory without recursive=True."""


class Expired(CiError):
    """410 expired: the session ended; the message says when and why."""


class NodeLost(Expired):
    """410 node_lost: the session's node stopped heartbeating; it is gone."""


class PayloadTooLarge(CiError):
    """413: the body (or the file) is larger than the daemon accepts."""


class Corrupt(CiError):
    """422: a snapshot that fails its checks."""


class QuotaExceeded(CiError):
    """429: over one of the tenant's quotas.

    quota        the quota's name ("sessions", "requests_per_second", ...)
    retry_after  seconds to wait before trying again (from Retry-After)
    """

    @property
    def quota(self):
        return self.body.get("quota")

    @property
    def retry_after(self):
        return _retry_after(self.headers)


class Internal(CiError):
    """500: a bug in the daemon; the message says where."""


class Unavailable(CiError):
    """503: Redis or Docker unreachable, the daemon draining, ... (Retry-After)."""

    @property
    def retry_after(self):
        return _retry_after(self.headers)


class Timeout(CiError):
    """504 timeout: a package install's window ended before pip finished; also
    raised (code "timeout", status None) when the daemon does not answer within
    the client's own deadline."""


class ConnectionFailed(CiError):
    """The daemon could not be reached, or the connection broke mid-answer."""


class ProtocolError(CiError):
    """The daemon answered something this client cannot read (not JSON, a
    stream that ended without its result)."""


def _retry_after(headers):
    value = (headers or {}).get("retry-after")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


BY_CODE = {
    "bad_request": BadRequest,
    "bad_path": BadPath,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "unsupported_media_type": UnsupportedMediaType,
    "busy": Busy,
    "conflict": Conflict,
    "is_a_directory": IsADirectory,
    "expired": Expired,
    "node_lost": NodeLost,
    "payload_too_large": PayloadTooLarge,
    "corrupt": Corrupt,
    "quota_exceeded": QuotaExceeded,
    "internal": Internal,
    "unavailable": Unavailable,
    "timeout": Timeout,
}

# An answer whose body is not the error shape (a proxy's page, say) is still
# typed by its status.
BY_STATUS = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    409: Busy, 410: Expired, 413: PayloadTooLarge, 415: UnsupportedMediaType, 422: Corrupt,
    429: QuotaExceeded, 500: Internal, 503: Unavailable, 504: Timeout,
}


def from_error_object(err, status=None, headers=None):
    """The typed error for an error object {"code", "message", ...}."""
    code = err.get("code") if isinstance(err.get("code"), str) else "internal"
    message = err.get("message") if isinstance(err.get("message"), str) else code
    cls = BY_CODE.get(code) or BY_STATUS.get(status, CiError)
    return cls(message, code=code, status=status, body=err, headers=headers)


def from_response(status, headers, body):
    """The typed error for a non-2xx answer (headers with lower-case names)."""
    import json  # local: errors.py stays importable on its own

    err = None
    try:
        doc = json.loads(body) if body else None
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            err = doc["error"]
    except ValueError:
        pass
    if err is not None:
        return from_error_object(err, status, headers)
    text = body[:200].decode("utf-8", "replace") if body else ""
    cls = BY_STATUS.get(status, CiError)
    code = next((c for c, k in BY_CODE.items() if k is cls), "internal")
    return cls("HTTP %d: %s" % (status, text or "no body"), code=code, status=status,
               headers=headers)
