"""`%pip install` (and `!pip install`) through the daemon's install window.

The sandbox has no route to a package index: the daemon opens one, the
session's install window (docs/api.md "Packages"), for the length of one
install.  From a cell that goes (docs/protocol.md "%pip install"):

    kernel -> daemon   {"t":"pip_open","id":EXEC,"specs":[...]}
    daemon -> kernel   {"t":"pip_window","id":EXEC,"ok":true,"window_ms":W,
                        "index":"HOST:PORT","site":DIR,"args":[...]}
                       or {"t":"pip_window","id":EXEC,"ok":false,"code":C,"message":M}
    kernel             python3 -m pip ARGS (the API install's command), its
                       output the cell's stdout, killed when W passes
    kernel -> daemon   {"t":"pip_close","id":EXEC,"rc":RC}

The daemon checks the requirements (no URL, path or option) and the session
(an index configured, network on) as the API does and answers the reason
when it refuses; this raises it as a PipError in the cell.  The window
closes on pip_close, its own timer, the execution's end or the kernel's
death, whichever comes first: the daemon does not rely on this module.

`%pip list`, `show` and `freeze` need no network: pip runs locally with the
install site on its path.
"""

import importlib
import os
import re
import select
import shlex
import subprocess
import sys
import time

import ci_frame
import ci_magics

REPLY_WAIT_S = 10.0            # the daemon answers in the loop turn it reads the frame
MAX_SPECS = 32

# Options a notebook gives `pip install` that change nothing here (the
# daemon's command already has --upgrade, --no-cache-dir, ...): dropped.
# Any other option is refused: the index, the target and what pip may
# fetch are the daemon's.
_HARMLESS = {"-q", "-qq", "-qqq", "--quiet", "-U", "--upgrade", "--user", "--no-cache-dir",
             "--disable-pip-version-check", "--no-warn-script-location", "--no-input",
             "-v", "--verbose", "--progress-bar=off", "--no-color"}
_LOCAL = {"list", "show", "freeze"}
# `pip`, `pip3`, `pip3.11`, a path to one, or `python3 -m pip`.
_PIP = re.compile(r"^(?:.*/)?pip(?:3(?:\.\d+)?)?$")
_PYTHON = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
_SHELL_META = set(";|&<>`$()\n\\*?~{}")


class PipError(Exception):
    """A %pip install the daemon refused, or whose window ended."""


# Shown as `PipError: ...`, not `ci_pip.PipError`.
PipError.__module__ = "builtins"

USAGE = ("%pip install NAME[==VERSION] ...  (requirements only; also %pip list, "
         "%pip show NAME, %pip freeze)")


def _kernel():
    mod = sys.modules.get("kernel")
    return getattr(mod, "current", None)


def _flush(k):
    if k is not None:
        k._flush_std()


def specs_of(args):
    """The requirements of `pip install ARGS`: harmless options dropped,
    any other refused (PipError)."""
    specs = []
    for a in args:
        if a in _HARMLESS:
            continue
        if a.startswith("-"):
            raise PipError("pip install %s: options are not accepted here (the daemon "
                           "chooses the index and the target); give requirements only: "
                           "NAME or NAME==VERSION" % a)
        specs.append(a)
    if not specs:
        raise PipError("pip install: no requirement given; usage: " + USAGE)
    if len(specs) > MAX_SPECS:
        raise PipError("pip install: at most %d requirements at once" % MAX_SPECS)
    return specs


def shell_command(cmd):
    """The pip arguments when cmd (a `!` line) is one plain pip command
    (`pip ...`, `python3 -m pip ...`), else None: anything with shell
    syntax runs in the shell as written."""
    if any(c in _SHELL_META for c in cmd):
        return None
    try:
        argv = shlex.split(cmd)
    except ValueError:
        return None
    if not argv:
        return None
    if _PIP.match(argv[0]):
        return argv[1:]
    if (len(argv) >= 3 and (_PYTHON.match(argv[0]) or argv[0] == sys.executable)
            and argv[1:3] == ["-m", "pip"]):
        return argv[3:]
    return None


# ---------------------------------------------------------------- frames

def _send(k, header):
    with k.lock:
        if k.sock is None or k.broken:
            raise PipError("%pip install: the kernel is not connected to the daemon; "
                           "run the cell again")
        k._send(ci_frame.pack(header))


def _take_early(k, eid):
    for i, (h, body) in enumerate(k.early_frames):
        if h.get("t") == "pip_window" and h.get("id") == eid:
            del k.early_frames[i]
            return h
    return None


def _wait_window(k, eid):
    """The daemon's pip_window for execution eid.  Interrupt frames that
    come meanwhile are dropped (their SIGINT does the work); others are
    kept for the main loop."""
    h = _take_early(k, eid)
    if h is not None:
        return h
    deadline = time.monotonic() + REPLY_WAIT_S
    p = select.poll()
    p.register(k.sock.fileno(), select.POLLIN)
    while True:
        try:
            f = k.dec.next()
        except ci_frame.ProtocolError as e:
            raise PipError("%%pip install: a bad frame from the daemon: %s" % e) from None
        if f is not None:
            h, body = f
            if h.get("t") == "pip_window" and h.get("id") == eid:
                return h
            if h.get("t") != "interrupt":
                k.early_frames.append(f)
            continue
        left = deadline - time.monotonic()
        if left <= 0 or not p.poll(left * 1000):
            raise PipError("%%pip install: the daemon did not answer within %d s (a daemon "
                           "without %%pip support ignores the request: install with POST "
                           "/v1/sessions/{id}/packages)" % REPLY_WAIT_S)
        data = k.sock.recv(262144)
        if not data:
            raise PipError("%pip install: the connection to the daemon was lost")
        k.dec.feed(data)


def _site_env(site):
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    if site:
        path = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = site + (os.pathsep + path if path else "")
    return env


def _run(argv, env, timeout):
    """Runs argv with the cell's fds (stderr onto stdout); returns its exit
    status, or None when timeout passed (it is killed then)."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None
    except BaseException:          # KeyboardInterrupt: the interrupt, or the deadline
        ci_magics.stop_child(p)
        raise


def _use_site(site):
    os.makedirs(site, exist_ok=True)
    if site not in sys.path:
        root = os.environ.get("SANDBOX_WORKSPACE", "/workspace")
        at = sys.path.index(root) + 1 if root in sys.path else len(sys.path)
        sys.path.insert(at, site)


def _refresh(site):
    # The site may hold packages the import system looked for and missed.
    sys.path_importer_cache.pop(site, None)
    importlib.invalidate_caches()


def install(specs, ns=None):
    """One install through the daemon's window; returns pip's exit status
    (a failed pip is its own output and a non-zero status, as in Jupyter)."""
    k = _kernel()
    eid = k.cur_id if k is not None else None
    if eid is None:
        raise PipError("%pip install works in a cell the daemon runs (no execution here)")
    _send(k, {"t": "pip_open", "id": eid, "specs": list(specs)})
    h = _wait_window(k, eid)
    if not h.get("ok"):
        raise PipError("%s (%s)" % (h.get("message") or "the install was refused",
                                    h.get("code") or "refused"))
    args, site = h.get("args"), h.get("site")
    window_ms = h.get("window_ms")
    if (not isinstance(args, list) or not all(isinstance(a, str) for a in args)
            or not isinstance(site, str) or not isinstance(window_ms, int) or window_ms <= 0):
        _send(k, {"t": "pip_close", "id": eid, "rc": -1})
        raise PipError("%pip install: the daemon's answer could not be read")
    rc = None
    try:
        _use_site(site)
        _flush(k)
        rc = _run([sys.executable, "-m", "pip"] + args, _site_env(None), window_ms / 1000.0)
    finally:
        try:
            _send(k, {"t": "pip_close", "id": eid, "rc": -1 if rc is None else rc})
        except PipError:
            pass
        _refresh(site)
    if rc is None:
        raise PipError("timeout: the install window of %d s ended before pip finished; "
                       "egress to %s is closed again (install fewer packages at once, or "
                       "in a cell with a longer timeout_s)"
                       % (max(1, (window_ms + 500) // 1000), h.get("index") or "the index"))
    if ns is not None:
        ns["_exit_code"] = rc
    if rc:
        _note(k, "pip exited with status %d" % rc)
    return rc


def _note(k, msg):
    _flush(k)
    try:
        os.write(2, ("[ci] %s\n" % msg).encode())
    except OSError:
        pass


def local(args, ns=None):
    """`pip list|show|freeze ARGS`, run here (no network), with the install
    site on pip's path."""
    k = _kernel()
    _flush(k)
    site = os.path.join(os.environ.get("SANDBOX_WORKSPACE", "/workspace"), ".ci", "site")
    rc = _run([sys.executable, "-m", "pip"] + list(args), _site_env(site), None)
    if ns is not None:
        ns["_exit_code"] = rc
    return rc


def pip(args, ns=None):
    """`pip ARGS` from %pip or a `!pip` line."""
    if not args:
        raise PipError("usage: " + USAGE)
    sub = args[0]
    if sub == "install":
        return install(specs_of(args[1:]), ns)
    if sub in _LOCAL:
        return local(args, ns)
    raise PipError("pip %s is not available in a cell; usage: %s" % (sub, USAGE))
