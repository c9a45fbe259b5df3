# The variables code of snapshots (docs/protocol.md, "Workspace snapshots").
#
# The daemon sends this text to the session's kernel as an ordinary
# execution, followed by one line: `__ci_vars_save()` before a snapshot's
# tar is made, `__ci_vars_load()` after a restore.  It runs in the user's
# namespace (the kernel's __main__), so it must leave no name behind: the
# only globals it defines start with `__ci_vars`/`__CI_VARS` and the call
# removes them all, whatever happens.  The call's value is None, so `_` is
# not set.  The last thing it prints is one line, "\x1eCI-VARS " + JSON,
# that the daemon takes as the answer.
#
# The work is done by functions whose globals are only the builtins: the
# session may well have rebound `list`, `type`, `open` or `str` in its
# namespace, which is where this text runs.  The two entry points use no
# builtin name at all.
#
# /workspace/.ci/vars.pkl (the snapshot carries it) is a pickle of
#     {"format": 1, "vars": {name: pickle bytes}, "modules": {name: module name}}
# each variable pickled on its own (protocol 4), so one that cannot be
# pickled, or unpickled, costs only itself.

__CI_VARS_CAP = 256 << 20


def __ci_vars_do_save(g, cap):
    import io
    import json
    import os
    import pickle
    import sys
    import types

    root = os.environ.get("SANDBOX_WORKSPACE") or "/workspace"
    skip_names = {"In", "Out", "exit", "quit", "get_ipython"}
    saved, modules, skipped = [], {}, []
    blobs = {}
    total = 0
    over = False

    class Defined(Exception):
        pass

    class Over(Exception):
        pass

    class Pickler(pickle.Pickler):
        # A function, class or instance of a class defined in the session
        # pickles by reference to __main__, and would not unpickle in
        # another kernel: refused here, where the name is known.
        def reducer_override(self, obj):
            if isinstance(obj, type) or isinstance(obj, types.FunctionType):
                if getattr(obj, "__module__", None) == "__main__":
                    raise Defined("%s defined in the session"
                                  % ("class" if isinstance(obj, type) else "function"))
            elif getattr(type(obj), "__module__", None) == "__main__":
                raise Defined("an instance of a class defined in the session")
            return NotImplemented

    class Capped(io.BytesIO):
        # Stops a pickle as soon as it passes what is left of the cap,
        # so a huge value is never built whole in memory.
        def __init__(self, left):
            super().__init__()
            self.left = left

        def write(self, b):
            n = super().write(b)
            if self.tell() > self.left:
                raise Over()
            return n

    for name, value in list(g.items()):
        if not isinstance(name, str) or name.startswith("_") or name in skip_names:
            continue
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
            continue
        if over:
            skipped.append({"name": name, "reason": "over the 256 MiB variables cap"})
            continue
        buf = Capped(cap - total)
        try:
            Pickler(buf, protocol=4).dump(value)
        except Over:
            over = True
            skipped.append({"name": name, "reason": "over the 256 MiB variables cap"})
            continue
        except Defined as e:
            skipped.append({"name": name, "reason": str(e)})
            continue
        except Exception as e:     # unpicklable, or its __reduce__ failed
            reason = "%s: %s" % (type(e).__name__, e)
            skipped.append({"name": name, "reason": reason[:200]})
            continue
        blobs[name] = buf.getvalue()
        total += len(blobs[name])
        saved.append(name)

    d = os.path.join(root, ".ci")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "vars.pkl")
    tmp = os.path.join(d, ".vars.pkl.tmp-%d" % os.getpid())
    try:
        with open(tmp, "wb") as f:
            pickle.dump({"format": 1, "vars": blobs, "modules": modules}, f, protocol=4)
            size = f.tell()
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    del blobs
    answer = {"saved": saved, "modules": modules, "skipped": skipped[:100], "bytes": size}
    try:
        sys.stdout.flush()
    except Exception:
        pass
    line = ("\x1eCI-VARS " + json.dumps(answer, ensure_ascii=True) + "\n").encode()
    while line:                    # fd 1: the kernel captures output there
        line = line[os.write(1, line):]


def __ci_vars_do_load(g):
    import importlib
    import json
    import os
    import pickle
    import sys

    root = os.environ.get("SANDBOX_WORKSPACE") or "/workspace"
    path = os.path.join(root, ".ci", "vars.pkl")
    loaded, modules, skipped = [], {}, []

    # The site directory of installed packages may not have existed when
    # the kernel started: forget what the import system cached about it.
    site = os.path.join(root, ".ci", "site")
    for k in list(sys.path_importer_cache):
        if isinstance(k, str) and (k == site or k.startswith(site + os.sep)):
            del sys.path_importer_cache[k]
    importlib.invalidate_caches()

    class Outer(pickle.Unpickler):
        # The outer dict holds only strings, bytes and dicts.
        def find_class(self, module, name):
            raise pickle.UnpicklingError("vars.pkl refers to %s.%s" % (module, name))

    data = None
    try:
        with open(path, "rb") as f:
            data = Outer(f).load()
    except FileNotFoundError:
        pass
    except Exception as e:
        skipped.append({"name": "vars.pkl", "reason": ("%s: %s" % (type(e).__name__, e))[:200]})
    if data is not None and not (isinstance(data, dict) and data.get("format") == 1
                                 and isinstance(data.get("vars"), dict)
                                 and isinstance(data.get("modules"), dict)):
        skipped.append({"name": "vars.pkl", "reason": "not a variables file of format 1"})
        data = None
    if data is not None:
        def ok(name):
            return isinstance(name, str) and name.isidentifier() and not name.startswith("_")

        for name, mod in data["modules"].items():
            if not ok(name) or not isinstance(mod, str):
                continue
            try:
                g[name] = importlib.import_module(mod)
                modules[name] = mod
            except BaseException as e:
                if isinstance(e, KeyboardInterrupt):
                    raise
                skipped.append({"name": name,
                                "reason": ("%s: %s" % (type(e).__name__, e))[:200]})
        for name, blob in data["vars"].items():
            if not ok(name) or not isinstance(blob, bytes):
                continue
            try:
                g[name] = pickle.loads(blob)
                loaded.append(name)
            except BaseException as e:
                if isinstance(e, KeyboardInterrupt):
                    raise
                skipped.append({"name": name,
                                "reason": ("%s: %s" % (type(e).__name__, e))[:200]})
        del data
    try:
        os.unlink(path)
    except OSError:
        pass
    answer = {"loaded": loaded, "modules": modules, "skipped": skipped[:100]}
    try:
        sys.stdout.flush()
    except Exception:
        pass
    line = ("\x1eCI-VARS " + json.dumps(answer, ensure_ascii=True) + "\n").encode()
    while line:                    # fd 1: the kernel captures output there
        line = line[os.write(1, line):]


__ci_vars_do_save = __ci_vars_do_save.__class__(
    __ci_vars_do_save.__code__, {"__builtins__": __builtins__, "__name__": "__ci_vars__"})
__ci_vars_do_load = __ci_vars_do_load.__class__(
    __ci_vars_do_load.__code__, {"__builtins__": __builtins__, "__name__": "__ci_vars__"})
__CI_VARS_NAMES = ("__ci_vars_save", "__ci_vars_load", "__ci_vars_do_save",
                   "__ci_vars_do_load", "__CI_VARS_CAP", "__CI_VARS_NAMES")


def __ci_vars_save():
    g = __ci_vars_save.__globals__
    try:
        __ci_vars_do_save(g, g.get("__CI_VARS_CAP", 256 << 20))
    finally:
        for n in g.get("__CI_VARS_NAMES", ()):
            g.pop(n, None)


def __ci_vars_load():
    g = __ci_vars_load.__globals__
    try:
        __ci_vars_do_load(g)
    finally:
        for n in g.get("__CI_VARS_NAMES", ()):
            g.pop(n, None)
