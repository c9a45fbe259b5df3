"""Magics and shell escapes for the kernel, through IPython's input transformer.

The kernel is not an IPython InteractiveShell.  A cell with a line that starts
with `!` or `%` (or `x = !cmd`, `x = %magic`) is rewritten by IPython's own
transformer (IPython.core.inputtransformer2, which needs nothing but the
standard library, so it is loaded from IPython's directory without importing
the IPython package and its second of start-up) into calls on get_ipython():
`system`, `getoutput`, `run_line_magic`, `run_cell_magic`.  get_ipython() (a
builtin in the kernel) answers them with the small shell below.  Plain code is
never transformed: the kernel imports this module and transforms a cell only
when a line of it starts with one (kernel._ESCAPE).

Shell commands run under /bin/bash -c with the kernel's fds 1 and 2 (so their
output is captured like a child process's) and stdin /dev/null; their exit
status is `_exit_code` in the namespace, and a non-zero one is noted on stderr.
An interrupt (the daemon's soft timeout, or POST .../interrupt) reaches the
command and raises KeyboardInterrupt in the cell.
"""

import io as _io
import linecache
import math
import os
import re
import shlex
import signal
import string
import subprocess
import sys
import time
import timeit as _timeit
import types

_SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
PIP_MESSAGE = ("%s is not available in the kernel: install packages with "
               "%%pip install NAME[==VERSION] ... in a cell, or "
               "POST /v1/sessions/{id}/packages {\"pip\": [\"NAME\", ...]} "
               "(ci-ctl install SESSION NAME...); they are importable in this "
               "session right after")

_shell = None


def stop_child(p):
    """The interrupt reached a cell waiting on child p: pass it on (SIGINT,
    as a terminal would), and kill p if it is still there a second later."""
    try:
        p.send_signal(signal.SIGINT)
        p.wait(1.0)
    except (subprocess.TimeoutExpired, OSError):
        pass
    if p.poll() is None:
        p.kill()
    p.wait()


class UsageError(Exception):
    """A magic used wrongly (IPython's name for it)."""


# Shown as `UsageError: ...`, as IPython shows it, not `ci_magics.UsageError`.
UsageError.__module__ = "builtins"


def _load_it2():
    import ci_format
    return ci_format.load_ipython_file("IPython.core.inputtransformer2",
                                       "core/inputtransformer2.py")


def transform(src):
    """The cell with its magics and escapes rewritten into Python."""
    return _load_it2().TransformerManager().transform_cell(src)


# ------------------------------------------------------------------ helpers

def _kernel():
    mod = sys.modules.get("kernel")
    return getattr(mod, "current", None)


def _flush():
    k = _kernel()
    if k is not None:
        k._flush_std()
    else:
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except Exception:
                pass


def _note(msg):
    _flush()
    try:
        os.write(2, ("[ci] %s\n" % msg).encode())
    except OSError:
        pass


def format_time(timespan, precision=3):
    """IPython's _format_time (IPython.core.magics.execution)."""
    if timespan >= 60.0:
        parts = [("d", 60 * 60 * 24), ("h", 60 * 60), ("min", 60), ("s", 1)]
        out = []
        leftover = timespan
        for suffix, length in parts:
            value = int(leftover / length)
            if value > 0:
                leftover = leftover % length
                out.append("%s%s" % (str(value), suffix))
            if leftover < 1:
                break
        return " ".join(out)
    units = ["s", "ms", "\xb5s", "ns"]
    scaling = [1, 1e3, 1e6, 1e9]
    if timespan > 0.0:
        order = min(-int(math.floor(math.log10(timespan)) // 3), 3)
    else:
        order = 3
    return "%.*g %s" % (precision, timespan * scaling[order], units[order])


class TimeitResult:
    """What %timeit -o returns; prints as IPython's does."""

    def __init__(self, loops, repeat, best, worst, all_runs, compile_time, precision):
        self.loops = loops
        self.repeat = repeat
        self.best = best
        self.worst = worst
        self.all_runs = all_runs
        self.compile_time = compile_time
        self._precision = precision
        self.timings = [dt / self.loops for dt in all_runs]

    @property
    def average(self):
        return math.fsum(self.timings) / len(self.timings)

    @property
    def stdev(self):
        mean = self.average
        return (math.fsum([(x - mean) ** 2 for x in self.timings]) / len(self.timings)) ** 0.5

    def __str__(self):
        return ("{mean} \xb1 {std} per loop (mean \xb1 std. dev. of {runs} run{rp}, "
                "{loops:,} loop{lp} each)").format(
            runs=self.repeat, loops=self.loops, lp="" if self.loops == 1 else "s",
            rp="" if self.repeat == 1 else "s",
            mean=format_time(self.average, self._precision),
            std=format_time(self.stdev, self._precision))

    def _repr_pretty_(self, p, cycle):
        p.text("<TimeitResult : " + str(self) + ">")

    def __repr__(self):
        return "<TimeitResult : " + str(self) + ">"


class RichOutput:
    """One display captured by %%capture (IPython.utils.capture.RichOutput)."""

    def __init__(self, data):
        self.data = data
        self.metadata = {}

    def _repr_mimebundle_(self, include=None, exclude=None):
        return dict(self.data)

    def display(self):
        k = _kernel()
        if k is not None:
            k.display_raw(self.data)


class CapturedIO:
    """What `%%capture NAME` stores: .stdout, .stderr, .outputs, show()."""

    def __init__(self, stdout, stderr, outputs):
        self._stdout = stdout
        self._stderr = stderr
        self._outputs = outputs

    def __str__(self):
        return self.stdout

    @property
    def stdout(self):
        return self._stdout.getvalue() if self._stdout is not None else ""

    @property
    def stderr(self):
        return self._stderr.getvalue() if self._stderr is not None else ""

    @property
    def outputs(self):
        return [RichOutput(d) for d in self._outputs]

    def show(self):
        """Write the captured output and display the captured displays again."""
        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)
        for o in self.outputs:
            o.display()

    __call__ = show


class SList(list):
    """The lines of `x = !cmd` (the parts of IPython's SList agents use)."""

    @property
    def s(self):
        return " ".join(self)

    @property
    def n(self):
        return "\n".join(self)

    @property
    def l(self):  # noqa: E743
        return list(self)

    spstr = s
    nlstr = n

    def grep(self, pattern):
        return SList(x for x in self if re.search(pattern, x))


class _Expander(string.Formatter):
    def __init__(self, ns):
        self.ns = ns

    def get_value(self, key, args, kwargs):
        if isinstance(key, str):
            return self.ns[key]
        return super().get_value(key, args, kwargs)

    def get_field(self, field_name, args, kwargs):
        # {expr}: IPython evaluates the braces in the namespace
        return eval(field_name, {}, self.ns), field_name


def _dollar(ns):
    def sub(m):
        name = m.group(1)
        return str(ns[name]) if name in ns else m.group(0)
    return sub


# ------------------------------------------------------------------ shell

class CIShell:
    """What the transformed code calls on get_ipython()."""

    # Libraries that find get_ipython() as a builtin take a `kernel`
    # attribute for "a Jupyter kernel, not a terminal" (pandas then shows 20
    # columns of a wide DataFrame, as in Jupyter, instead of sizing it to a
    # terminal there is not).
    kernel = None

    def __init__(self, ns):
        self.user_ns = ns
        self._oldpwd = None
        self.line_magics = {
            "time": self._time, "timeit": self._timeit, "cd": self._cd, "pwd": self._pwd,
            "env": self._env, "set_env": self._set_env, "matplotlib": self._matplotlib,
            "pip": self._pip, "conda": self._conda, "mamba": self._conda,
            "load_ext": self._noop, "reload_ext": self._noop, "autoreload": self._noop,
            "aimport": self._noop, "config": self._noop, "precision": self._noop,
            "who": self._who, "system": self._system_magic, "sx": self._sx,
        }
        self.cell_magics = {
            "bash": self._bash, "sh": self._sh, "writefile": self._writefile,
            "time": self._time_cell, "timeit": self._timeit_cell,
            "html": self._mime_cell("text/html"), "markdown": self._mime_cell("text/markdown"),
            "latex": self._mime_cell("text/latex"), "svg": self._mime_cell("image/svg+xml"),
            "javascript": self._mime_cell("application/javascript"),
            "js": self._mime_cell("application/javascript"), "capture": self._capture,
        }

    # ---------------------------------------------------------- expansion

    def _ns(self, depth):
        ns = dict(self.user_ns)
        try:
            f = sys._getframe(depth + 1)
            if f.f_locals is not f.f_globals:
                ns.update(f.f_locals)
        except ValueError:
            pass
        return ns

    def var_expand(self, cmd, depth=0):
        """{expr} and $name from the caller's namespace, as IPython does;
        left as written when that fails."""
        ns = self._ns(depth + 1)
        try:
            cmd = _Expander(ns).vformat(cmd, (), {})
        except Exception:
            pass
        return re.sub(r"(?<!\$)\$([A-Za-z_]\w*)", _dollar(ns), cmd).replace("$$", "$")

    # ---------------------------------------------------------- processes

    def _run_shell(self, argv, stdin=None, capture=False):
        """Runs argv; returns (exit status, captured stdout or None)."""
        _flush()
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else None,
                             stdout=subprocess.PIPE if capture else None,
                             stderr=subprocess.STDOUT if capture else None)
        try:
            out, _ = p.communicate(stdin)
        except KeyboardInterrupt:
            stop_child(p)
            raise
        rc = p.returncode
        if rc < 0:
            rc = 128 - rc          # as a shell reports a signal
        self.user_ns["_exit_code"] = rc
        return rc, out

    def system(self, cmd):
        cmd = self.var_expand(cmd, depth=1)
        if "pip" in cmd:
            # `!pip install X`, `!python3 -m pip install X`: the sandbox has
            # no index but through the daemon's window (ci_pip.py).
            import ci_pip
            args = ci_pip.shell_command(cmd)
            if args and (args[0] == "install" or args[0] in ci_pip._LOCAL):
                ci_pip.pip(args, self.user_ns)
                return
        argv = [_SHELL, "-c", cmd]
        k = _kernel()
        if k is not None and sys.stdout is not k.out:     # inside %%capture
            rc, out = self._run_shell(argv, capture=True)
            sys.stdout.write(out.decode("utf-8", "replace"))
        else:
            rc, _ = self._run_shell(argv)
        if rc:
            _note("exit status %d" % rc)

    def getoutput(self, cmd, split=True, depth=0):
        rc, out = self._run_shell([_SHELL, "-c", self.var_expand(cmd, depth=depth + 1)],
                                  capture=True)
        text = out.decode("utf-8", "replace")
        if not split:
            return text
        return SList(text.splitlines())

    # ---------------------------------------------------------- dispatch

    def run_line_magic(self, magic_name, line, _stack_depth=1):
        fn = self.line_magics.get(magic_name)
        if fn is None:
            if magic_name in self.cell_magics:
                raise UsageError("Line magic function `%%%s` not found (But cell magic "
                                 "`%%%%%s` exists, did you mean that instead?)."
                                 % (magic_name, magic_name))
            raise UsageError("Line magic function `%%%s` not found." % magic_name)
        return fn(self.var_expand(line, depth=_stack_depth))

    def run_cell_magic(self, magic_name, line, cell):
        fn = self.cell_magics.get(magic_name)
        if fn is None:
            if magic_name in self.line_magics:
                raise UsageError("Cell magic `%%%%%s` not found (But line magic `%%%s` "
                                 "exists, did you mean that instead?)."
                                 % (magic_name, magic_name))
            raise UsageError("Cell magic `%%%%%s` not found." % magic_name)
        return fn(self.var_expand(line, depth=1), cell)

    def magic(self, arg_s):
        name, _, line = arg_s.lstrip("%").partition(" ")
        return self.run_line_magic(name, line, _stack_depth=2)

    def ev(self, expr):
        return eval(expr, self.user_ns)

    def ex(self, cmd):
        exec(cmd, self.user_ns)

    # ---------------------------------------------------------- line magics

    def _noop(self, line):
        return None

    def _pip(self, line):
        # Through the daemon's install window (ci_pip.py), imported on use.
        import ci_pip
        try:
            args = shlex.split(line)
        except ValueError as e:
            raise UsageError("%%pip: %s" % e) from None
        ci_pip.pip(args, self.user_ns)

    def _conda(self, line):
        raise UsageError(PIP_MESSAGE % "conda")

    def _system_magic(self, line):
        return self.getoutput(line, depth=1)

    _sx = _system_magic

    def _who(self, line):
        names = sorted(k for k, v in self.user_ns.items()
                       if not k.startswith("_") and not isinstance(v, types.ModuleType)
                       and k not in ("In", "Out", "exit", "quit", "get_ipython"))
        print("\t".join(names) if names else "Interactive namespace is empty.")

    def _compile_cell(self, src, name):
        k = _kernel()
        return k.compile_cell(src, name) if k is not None else (
            compile(src, name, "exec"), None)

    def _run_timed(self, src, label):
        code, ecode = self._compile_cell(src, label)
        t0 = time.perf_counter()
        r0 = os.times()
        out = None
        if code is not None:
            exec(code, self.user_ns)
        if ecode is not None:
            out = eval(ecode, self.user_ns)
        wall = time.perf_counter() - t0
        r1 = os.times()
        cu, cs = r1.user - r0.user, r1.system - r0.system
        print("CPU times: user %s, sys: %s, total: %s"
              % (format_time(cu), format_time(cs), format_time(cu + cs)))
        print("Wall time: %s" % format_time(wall))
        return out

    def _time(self, line):
        if not line.strip():
            raise UsageError("%time needs a statement: %time f(x)")
        return self._run_timed(line, "<timed exec>")

    def _time_cell(self, line, cell):
        src = (line + "\n" + cell) if line.strip() else cell
        return self._run_timed(src, "<timed exec>")

    def _timeit_opts(self, line):
        try:
            parts = shlex.split(line, posix=False)
        except ValueError:
            parts = line.split()
        opts = {"n": 0, "r": 7, "p": 3, "q": False, "o": False}
        rest = []
        i = 0
        while i < len(parts):
            a = parts[i]
            if not rest and a in ("-n", "-r", "-p") and i + 1 < len(parts):
                try:
                    opts[a[1]] = int(parts[i + 1])
                except ValueError:
                    raise UsageError("%s needs a number" % a)
                i += 2
                continue
            if not rest and re.fullmatch(r"-[nrp]\d+", a):
                opts[a[1]] = int(a[2:])
            elif not rest and a in ("-q", "-o"):
                opts[a[1]] = True
            else:
                rest.append(a)
            i += 1
        stmt = line
        if rest:                     # the statement as written, after the options
            stmt = line[line.index(rest[0]):]
        else:
            stmt = ""
        return opts, stmt

    def _do_timeit(self, stmt, setup, opts):
        if opts["r"] < 1 or opts["n"] < 0:
            raise UsageError("%timeit: -r must be at least 1 and -n at least 0")
        t0 = time.perf_counter()
        timer = _timeit.Timer(stmt, setup or "pass", timer=time.perf_counter,
                              globals=self.user_ns)
        tc = time.perf_counter() - t0
        number = opts["n"]
        if number == 0:              # as IPython: the first power of 10 that takes 0.2 s
            for index in range(0, 10):
                number = 10 ** index
                if timer.timeit(number) >= 0.2:
                    break
        all_runs = timer.repeat(opts["r"], number)
        best, worst = min(all_runs) / number, max(all_runs) / number
        res = TimeitResult(number, opts["r"], best, worst, all_runs, tc, opts["p"])
        if not opts["q"]:
            if worst > 4 * best and best > 0 and worst > 1e-6:
                print("The slowest run took %0.2f times longer than the fastest. This "
                      "could mean that an intermediate result is being cached."
                      % (worst / best))
            print(res)
        return res if opts["o"] else None

    def _timeit(self, line):
        opts, stmt = self._timeit_opts(line)
        if not stmt.strip():
            raise UsageError("%timeit needs a statement: %timeit f(x)")
        return self._do_timeit(stmt, "pass", opts)

    def _timeit_cell(self, line, cell):
        opts, setup = self._timeit_opts(line)
        return self._do_timeit(cell, setup, opts)

    def _cd(self, line):
        arg = line.strip()
        if arg.startswith(("'", '"')) and arg.endswith(arg[0]) and len(arg) > 1:
            arg = arg[1:-1]
        quiet = False
        if arg.startswith("-q "):
            quiet, arg = True, arg[3:].strip()
        old = os.getcwd()
        if arg == "-":
            if self._oldpwd is None:
                raise UsageError("%cd -: no previous directory")
            target = self._oldpwd
        else:
            target = os.path.expanduser(arg or "~")
        try:
            os.chdir(target)
        except OSError as e:
            raise UsageError("%%cd: %s: %s" % (target, e.strerror)) from None
        self._oldpwd = old
        if not quiet:
            print(os.getcwd())

    def _pwd(self, line):
        return os.getcwd()

    def _env(self, line):
        line = line.strip()
        if not line:
            return dict(os.environ)
        m = re.fullmatch(r"([^=\s]+)\s*[=\s]\s*(.*)", line, re.S)
        if m is None:
            try:
                return os.environ[line]
            except KeyError:
                raise UsageError("Environment does not have key: %s" % line) from None
        name, value = m.group(1), m.group(2)
        if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        os.environ[name] = value
        print("env: %s=%s" % (name, value))

    def _set_env(self, line):
        self._env(line if ("=" in line or " " in line.strip()) else line + "=")

    def _matplotlib(self, line):
        gui = line.strip().split()[0] if line.strip() else "inline"
        if gui not in ("inline", "agg", "notebook", "widget", "ipympl"):
            print("[ci] %%matplotlib %s: only inline figures exist here; figures are "
                  "sent as images/png" % gui)
        mpl = sys.modules.get("matplotlib")
        if mpl is not None and mpl.get_backend() != "module://ci_display":
            try:
                sys.modules["matplotlib.pyplot"].switch_backend("module://ci_display")
            except Exception:
                mpl.use("module://ci_display")

    # ---------------------------------------------------------- cell magics

    def _script(self, argv, line, cell):
        raise_error = "--raise-error" in line.split()
        rc, _ = self._run_shell(argv, stdin=cell.encode())
        if rc:
            if raise_error:
                raise subprocess.CalledProcessError(rc, cell)
            _note("exit status %d" % rc)

    def _bash(self, line, cell):
        self._script(["/bin/bash"], line, cell)

    def _sh(self, line, cell):
        self._script(["/bin/sh"], line, cell)

    def _writefile(self, line, cell):
        args = shlex.split(line)
        append = False
        if args and args[0] in ("-a", "--append"):
            append = True
            args = args[1:]
        if len(args) != 1:
            raise UsageError("%%writefile [-a] FILENAME")
        path = os.path.expanduser(args[0])
        exists = os.path.exists(path)
        if exists:
            print("Appending to %s" % args[0] if append else "Overwriting %s" % args[0])
        else:
            print("Writing %s" % args[0])
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(cell)

    def _mime_cell(self, mime):
        label = {"text/html": "HTML", "text/markdown": "Markdown", "text/latex": "Latex",
                 "image/svg+xml": "SVG", "application/javascript": "Javascript"}[mime]

        def show(line, cell):
            k = _kernel()
            plain = "<IPython.core.display.%s object>" % label
            if k is not None:
                k.display_raw({"text/plain": plain, mime: cell})
            else:
                print(plain)
        return show

    def _capture(self, line, cell):
        """%%capture [--no-stdout] [--no-stderr] [--no-display] [NAME]: the
        cell's prints and displays (figures included) are kept out of the
        output, in NAME (a CapturedIO) when given, as IPython's capture_output
        does (sys.stdout and sys.stderr, not the file descriptors: a child
        process's output is not captured, except through `!cmd`)."""
        args = line.split()
        flags = {a for a in args if a.startswith("-")}
        names = [a for a in args if not a.startswith("-")]
        if flags - {"--no-stdout", "--no-stderr", "--no-display"} or len(names) > 1 \
                or (names and not names[0].isidentifier()):
            raise UsageError("usage: %%capture [--no-stdout] [--no-stderr] [--no-display] "
                             "[NAME]")
        out = None if "--no-stdout" in flags else _io.StringIO()
        err = None if "--no-stderr" in flags else _io.StringIO()
        outputs = []
        k = _kernel()
        _flush()
        saved = sys.stdout, sys.stderr
        prev = k.capturing if k is not None else None
        if out is not None:
            sys.stdout = out
        if err is not None:
            sys.stderr = err
        if k is not None and "--no-display" not in flags:
            k.capturing = outputs
        try:
            if "%" in cell or "!" in cell:     # the cell's own magics and escapes
                cell = transform(cell)
            linecache.cache["<capture>"] = (len(cell), None, cell.splitlines(True), "<capture>")
            code, ecode = self._compile_cell(cell, "<capture>")
            if code is not None:
                exec(code, self.user_ns)
            if ecode is not None:
                value = eval(ecode, self.user_ns)
                if value is not None:
                    self.user_ns["_"] = value
                    if k is not None:
                        k.display(value)
                    else:
                        print(repr(value))
            if k is not None and "matplotlib.pyplot" in sys.modules:
                k.show_figures()       # the cell's figures, as IPython's post_execute
        finally:
            sys.stdout, sys.stderr = saved
            if k is not None:
                k.capturing = prev
        if names:
            self.user_ns[names[0]] = CapturedIO(out, err, outputs)


def get_ipython():
    """The kernel's shell (a builtin in the session, as in IPython)."""
    global _shell
    if _shell is None:
        k = _kernel()
        ns = k.ns if k is not None else sys.modules["__main__"].__dict__
        _shell = CIShell(ns)
    return _shell

