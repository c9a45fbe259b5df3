"""ci_sandbox: a Python client (standard library only) for the ci daemon.

    from ci_sandbox import Sandbox
    with Sandbox.create() as sb:            # CI_SANDBOX_URL, CI_SANDBOX_API_KEY
        sb.run_code("x = 41")
        print(sb.run_code("x + 1").text)    # "42"

See clients/python/README.md."""
from .errors import (BadPath, BadRequest, Busy, CiError, Conflict, ConnectionFailed, Corrupt,
                     Expired, Forbidden, Internal, IsADirectory, MethodNotAllowed, NodeLost, NotFound,
                     PayloadTooLarge, ProtocolError, QuotaExceeded, Timeout, Unauthorized,
                     Unavailable, UnsupportedMediaType)
from .execution import Execution, ExecutionError, FileChange, OutputChunk, Result, Run
from .sandbox import Files, Sandbox

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "Files", "Execution", "ExecutionError", "OutputChunk", "Result", "FileChange",
    "Run", "CiError", "BadRequest", "BadPath", "Unauthorized", "Forbidden", "NotFound",
    "MethodNotAllowed", "UnsupportedMediaType", "Busy", "Conflict", "IsADirectory", "Expired", "NodeLost", "PayloadTooLarge", "Corrupt",
    "QuotaExceeded", "Internal", "Unavailable", "Timeout", "ConnectionFailed", "ProtocolError",
]
