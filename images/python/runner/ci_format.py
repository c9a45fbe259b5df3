"""Jupyter display semantics for the kernel: text/plain and MIME bundles.

text/plain is IPython's pretty printer (IPython.lib.pretty, Debian's
python3-ipython).  Importing the IPython package costs about a second of CPU
and 35 MB (its __init__ pulls in the terminal shell), so pretty.py, which
needs nothing of IPython but two trivial names, is loaded on its own from
IPython's directory, on first use; when the user's code has imported IPython
already, IPython's own module is used (printers registered with
IPython.lib.pretty.for_type then apply).

A bundle follows IPython's DisplayFormatter: _ipython_display_ (the object
displays itself), _repr_mimebundle_, then the _repr_*_ methods looked up as
IPython does (a proxy that claims every attribute, a class, a method that
raises or returns None: skipped).  Values of exactly a builtin scalar type skip
all of it: their repr is what IPython prints.
"""

import base64
import importlib.util
import inspect
import json
import os
import sys
import traceback
import types

_HERE = os.path.dirname(os.path.abspath(__file__))

MAX_WIDTH = 79                 # IPython's PlainTextFormatter defaults
MAX_SEQ_LENGTH = 1000

# (mime, method): the order a bundle's display frames are sent in.
REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
    ("application/pdf", "_repr_pdf_"),
)
_BINARY = frozenset(("image/png", "image/jpeg", "application/pdf"))
# Exactly these types: repr() is IPython's text/plain, and nothing else applies.
_SIMPLE = frozenset((int, float, str, bool, bytes, complex, type(None)))

_loaded = {}


def load_ipython_file(name, rel, edits=()):
    """IPython's module `name` as this process has it, or else its one file
    (`rel`, below the IPython package) run on its own, with `edits`
    (old, new) applied to its text first: the piece of IPython a cell needs,
    without importing the IPython package (a second of start-up)."""
    real = sys.modules.get(name)
    if real is not None:
        return real
    if name in _loaded:
        return _loaded[name]
    spec = importlib.util.find_spec("IPython")      # locates, does not import
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("IPython is not installed")
    path = os.path.join(list(spec.submodule_search_locations)[0], *rel.split("/"))
    with open(path, encoding="utf-8") as f:
        src = f.read()
    for a, b in edits:
        src = src.replace(a, b)
    mod = types.ModuleType("ci_format._" + name.rsplit(".", 1)[1])
    mod.__file__ = path
    exec(compile(src, path, "exec"), mod.__dict__)
    _loaded[name] = mod
    return mod


def _load_pretty():
    return load_ipython_file("IPython.lib.pretty", "lib/pretty.py", (
        ("from IPython.utils.decorators import undoc", "undoc = lambda f: f"),
        ("from IPython.utils.py3compat import PYPY",
         "PYPY = %r" % (sys.implementation.name == "pypy"))))


def plain(obj):
    """text/plain of obj, as IPython shows it."""
    if type(obj) in _SIMPLE:
        return repr(obj)
    try:
        pretty = _load_pretty()
    except (ImportError, OSError, SyntaxError):
        return repr(obj)
    return pretty.pretty(obj, max_width=MAX_WIDTH, max_seq_length=MAX_SEQ_LENGTH)


def _real_method(obj, name):
    # IPython.utils.dir2.get_real_method
    try:
        canary = getattr(obj, "_ipython_canary_method_should_not_exist_", None)
    except Exception:
        return None
    if canary is not None:
        return None
    try:
        m = getattr(obj, name, None)
    except Exception:
        return None
    if inspect.isclass(obj) and not isinstance(m, types.MethodType):
        return None
    return m if callable(m) else None


def _encode(mime, data):
    """bytes of one MIME type's data, or None when it is not usable."""
    if data is None:
        return None
    if isinstance(data, tuple) and len(data) == 2:   # (data, metadata)
        data = data[0]
    if mime in _BINARY:
        if isinstance(data, str):
            try:
                data = base64.b64decode(data, validate=False)
            except ValueError:
                return None
        return bytes(data) if isinstance(data, (bytes, bytearray)) and data else None
    if mime == "application/json" or (mime.endswith("+json") and not isinstance(data, str)):
        if isinstance(data, (bytes, bytearray)):
            data = bytes(data).decode("utf-8", "replace")
        if isinstance(data, str):
            return data.encode()
        return json.dumps(data, default=str).encode()
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8", "backslashreplace")
    return None


def _call(m, name, obj):
    """m(); an exception is printed on stderr and the MIME type skipped, as
    IPython's formatters do (catch_format_error)."""
    try:
        if name == "_repr_mimebundle_":
            return m(include=None, exclude=None)
        return m()
    except Exception as e:
        tb = traceback.TracebackException.from_exception(e)
        tb.stack = traceback.StackSummary.from_list(
            [f for f in tb.stack if os.path.dirname(f.filename) != _HERE])
        sys.stderr.write("".join(tb.format()))
        sys.stderr.write("[ci] %s.%s() raised %s: its output is left out\n"
                         % (type(obj).__name__, name, type(e).__name__))
        return None


def displays_itself(obj):
    """The object's _ipython_display_, when it has one (it calls display())."""
    if type(obj) in _SIMPLE:
        return None
    return _real_method(obj, "_ipython_display_")


def bundle(obj, with_plain=True):
    """[(mime, bytes)] of obj: its rich representations and text/plain.

    with_plain=False leaves text/plain out (the caller has it already).
    """
    out = []
    have = set()
    mb_plain = None
    if type(obj) in _SIMPLE:
        return [("text/plain", repr(obj).encode("utf-8", "backslashreplace"))] \
            if with_plain else []
    mb = _real_method(obj, "_repr_mimebundle_")
    if mb is not None:
        d = _call(mb, "_repr_mimebundle_", obj)
        if isinstance(d, tuple) and len(d) == 2:
            d = d[0]
        if isinstance(d, dict):
            for mime, data in d.items():
                if not isinstance(mime, str):
                    continue
                if mime == "text/plain":
                    mb_plain = _encode(mime, data)
                    continue
                b = _encode(mime, data)
                if b is not None:
                    out.append((mime, b))
                    have.add(mime)
    for mime, name in REPR_METHODS:
        if mime in have:
            continue
        m = _real_method(obj, name)
        if m is None:
            continue
        b = _encode(mime, _call(m, name, obj))
        if b is not None:
            out.append((mime, b))
    if with_plain:
        if mb_plain is None:
            mb_plain = plain(obj).encode("utf-8", "backslashreplace")
        out.insert(0, ("text/plain", mb_plain))
    return out
