"""The stateless tier's runner (daemon/stateless.c embeds it, runs it with
/usr/bin/python3 -I -S -c inside bubblewrap).

fd 3: the code (a memfd, read once); fd 4: where the done header goes, one
JSON object in the shape of the kernel's done frame (images/python/runner/
kernel.py): status, result (repr of the last expression), error {ename,
evalue, traceback} with the runner's own frames stripped, files [].  The cell
is named "<cell-1>" like the kernel's first cell, so tracebacks read alike.
Stdlib only: -S means no site-packages, -I no environment or user paths.
"""

import ast
import json
import linecache
import os
import sys
import traceback

RESULT_CAP = 100_000
DONE_CAP = 1 << 20
_THIS_FILE = (lambda: 0).__code__.co_filename
_PID = os.getpid()


def _strip(te, seen):
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        frames = [f for f in te.stack if f.filename != _THIS_FILE]
        if len(frames) != len(te.stack):
            te.stack = traceback.StackSummary.from_list(frames)
        for sub in getattr(te, "exceptions", None) or ():
            _strip(sub, seen)
        _strip(te.__cause__, seen)
        te = te.__context__


def _error(e):
    try:
        evalue = str(e)
    except BaseException:
        evalue = "<exception str() failed>"
    try:
        te = traceback.TracebackException(type(e), e, e.__traceback__, compact=True)
        _strip(te, set())
        lines = [s[:-1] if s.endswith("\n") else s for s in te.format()]
    except BaseException:
        lines = ["%s: %s" % (type(e).__name__, evalue)]
    if len(lines) > 200:
        lines = lines[:100] + ["... %d lines omitted ..." % (len(lines) - 200)] + lines[-100:]
    return {"ename": type(e).__name__, "evalue": evalue[:RESULT_CAP],
            "traceback": [s[:4000] for s in lines]}


def _run(src, fname, ns):
    try:
        tree = compile(src, fname, "exec", ast.PyCF_ONLY_AST, True)
        last = None
        body = tree.body
        if body and isinstance(body[-1], ast.Expr):
            last = ast.Expression(body.pop().value)
        code = compile(tree, fname, "exec", 0, True) if body else None
        ecode = compile(last, fname, "eval", 0, True) if last is not None else None
    except BaseException as e:
        return "error", None, _error(e)
    value = None
    try:
        if code is not None:
            exec(code, ns)
        if ecode is not None:
            value = eval(ecode, ns)
    except SystemExit as e:
        if e.code is None or e.code == 0:
            return "ok", None, None
        return "error", None, _error(e)
    except BaseException as e:
        return "error", None, _error(e)
    if value is None:
        return "ok", None, None
    try:
        r = repr(value)
    except BaseException as e:
        return "error", None, _error(e)
    return "ok", r[:RESULT_CAP], None


def _done(hdr):
    data = json.dumps(hdr).encode()
    if len(data) > DONE_CAP:
        err = hdr.get("error")
        if err:
            hdr["error"] = {"ename": err["ename"], "evalue": err["evalue"][:1000],
                            "traceback": err["traceback"][-20:]}
        if hdr.get("result"):
            hdr["result"] = hdr["result"][:10000]
        data = json.dumps(hdr).encode()
    return data


def main():
    chunks = []
    while True:
        b = os.read(3, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(3)
    os.set_inheritable(4, False)       # children of the code never hold it
    src = b"".join(chunks).decode("utf-8", "replace")
    for f in (sys.stdout, sys.stderr):
        f.reconfigure(encoding="utf-8", errors="backslashreplace")
    fname = "<cell-1>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    main_mod = type(sys)("__main__")
    sys.modules["__main__"] = main_mod
    sys.argv = [""]
    status, result, error = _run(src, fname, main_mod.__dict__)
    if os.getpid() != _PID:            # a fork of the code ran off the end
        os._exit(0 if status == "ok" else 1)
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    data = _done({"t": "done", "status": status, "result": result, "error": error,
                  "files": [], "files_truncated": False})
    view = memoryview(data)
    while view:
        n = os.write(4, view)
        view = view[n:]
    os._exit(0)


main()
