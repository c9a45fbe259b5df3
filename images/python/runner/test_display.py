"""Jupyter display semantics and magics of the kernel (ci_format, ci_magics).

Run like test_runner.py (whose Sandbox plays the daemon):
    /usr/bin/python3 -m pytest images/python/runner/test_display.py -q
"""

import json
import os

import pytest

from test_runner import PNG_MAGIC, has_matplotlib, sandbox, valid_png


def has(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


@pytest.fixture(scope="module")
def k():
    with sandbox("cidisp-") as s:
        yield s


def frames(r, t="display"):
    return [h for h, _ in r["frames"] if h["t"] == t]


def ok(r):
    assert r["status"] == "ok", r["error"]
    return r


# ------------------------------------------------------------- text/plain

def test_plain_is_ipython_pretty(k):
    assert ok(k.exec("type(1)"))["result"] == "int"
    assert k.exec("int.__add__")["result"] == "<slot wrapper '__add__' of 'int' objects>"
    r = ok(k.exec("list(range(40))"))
    lines = r["result"].split("\n")
    assert len(lines) == 40 and lines[0] == "[0," and lines[-1] == " 39]"
    r = ok(k.exec("{'b': 1, 'a': 2}"))
    assert r["result"] == "{'b': 1, 'a': 2}"     # insertion order, as IPython 8
    r = ok(k.exec("import collections\ncollections.OrderedDict(a=1)"))
    assert r["result"] == "OrderedDict([('a', 1)])"
    r = ok(k.exec("list(range(2000))"))           # max_seq_length 1000, as IPython
    assert r["result"].rstrip().endswith("...]")
    assert ok(k.exec("1 + 1"))["result"] == "2"
    assert ok(k.exec("'x'"))["result"] == "'x'"
    assert r["display"] == []


def test_plain_repr_pretty_and_bad_repr(k):
    r = ok(k.exec("class A:\n    def _repr_pretty_(self, p, cycle):\n        p.text('pretty A')\nA()"))
    assert r["result"] == "pretty A"
    r = k.exec("class B:\n    def __repr__(self):\n        raise ValueError('no')\nB()")
    assert r["status"] == "error" and r["error"]["ename"] == "ValueError"
    assert not any("ci_format.py" in s for s in r["error"]["traceback"])


def test_value_bound_to_underscore(k):
    ok(k.exec("[1, 2]"))
    assert ok(k.exec("_"))["result"] == "[1, 2]"


# ------------------------------------------------------------- bundles

REPRS = {
    "text/html": ("_repr_html_", "'<b>x</b>'", b"<b>x</b>"),
    "text/markdown": ("_repr_markdown_", "'# T'", b"# T"),
    "text/latex": ("_repr_latex_", "r'$\\alpha$'", b"$\\alpha$"),
    "image/svg+xml": ("_repr_svg_", "'<svg/>'", b"<svg/>"),
    "application/json": ("_repr_json_", "{'a': [1, 2]}", None),
    "image/png": ("_repr_png_", "b'\\x89PNG\\r\\n\\x1a\\nfake'", PNG_MAGIC + b"fake"),
    "image/jpeg": ("_repr_jpeg_", "b'\\xff\\xd8jpeg'", b"\xff\xd8jpeg"),
}


@pytest.mark.parametrize("mime", sorted(REPRS))
def test_repr_method_as_result_and_display(k, mime):
    meth, ret, want = REPRS[mime]
    k.exec("class R:\n    def %s(self):\n        return %s\n"
           "    def __repr__(self):\n        return 'R!'\n" % (meth, ret))
    r = ok(k.exec("R()"))                       # last expression: execute_result
    assert r["result"] == "R!"
    assert [m for m, _ in r["display"]] == [mime]
    h = frames(r)[0]
    assert h["result"] is True and h["group"] == 0
    body = r["display"][0][1]
    if want is None:
        assert json.loads(body) == {"a": [1, 2]}
    else:
        assert body == want
    r = ok(k.exec("display(R())\nprint('after')"))   # display(): text/plain too
    assert r["display"][0] == ("text/plain", b"R!") and r["display"][1][0] == mime
    assert all("result" not in h for h in frames(r))
    kinds = [h["t"] for h, _ in r["frames"]]
    assert kinds[:3] == ["display", "display", "stream"]


def test_repr_returning_none_or_raising_is_skipped_or_error(k):
    r = ok(k.exec("class N:\n    def _repr_html_(self):\n        return None\nN()"))
    assert r["display"] == [] and r["result"].startswith("<__main__.N at 0x")
    # as IPython: a rich repr that raises is printed and left out, the cell is ok
    r = ok(k.exec("class E:\n    def _repr_html_(self):\n        raise KeyError('k')\n"
                  "    def __repr__(self):\n        return 'E'\nE()"))
    assert r["result"] == "E" and r["display"] == []
    err = r["stderr"].decode()
    assert "KeyError: 'k'" in err and "E._repr_html_() raised KeyError" in err
    assert "ci_format.py" not in err


def test_mimebundle_and_data_metadata_tuple(k):
    r = ok(k.exec(
        "class M:\n"
        "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
        "        return {'text/plain': 'plain M', 'application/vnd.x+json': {'v': 1}}, {}\n"
        "    def _repr_html_(self):\n"
        "        return ('<i>M</i>', {'isolated': True})\n"
        "M()"))
    assert r["result"] == "plain M"
    assert dict(r["display"]) == {"application/vnd.x+json": b'{"v": 1}', "text/html": b"<i>M</i>"}


def test_proxy_claiming_every_attribute_is_plain(k):
    r = ok(k.exec(
        "class P:\n"
        "    def __getattr__(self, name):\n"
        "        return lambda *a, **kw: '<b>lie</b>'\n"
        "    def __repr__(self):\n        return 'P'\n"
        "P()"))
    assert r["result"] == "P" and r["display"] == []


def test_class_with_repr_methods_is_plain(k):
    k.exec("class H:\n    def _repr_html_(self):\n        return '<b>h</b>'\n")
    r = ok(k.exec("H"))
    assert r["result"] == "__main__.H" and r["display"] == []


def test_ipython_display_method(k):
    r = ok(k.exec("class D:\n    def _ipython_display_(self):\n        print('shown')\nD()"))
    assert r["result"] is None and r["stdout"] == b"shown\n"


def test_display_many_and_raw(k):
    r = ok(k.exec("display(1, 'a', [1])\ndisplay({'text/plain': 'p', 'text/html': '<p>'}, raw=True)"))
    assert r["display"] == [("text/plain", b"1"), ("text/plain", b"'a'"),
                            ("text/plain", b"[1]"), ("text/plain", b"p"),
                            ("text/html", b"<p>")]
    assert [h["group"] for h in frames(r)] == [0, 1, 2, 3, 3]


def test_display_limit_counts_frames_and_keeps_bundles_whole(k):
    k.exec("class W:\n    def _repr_html_(self):\n        return '<w>'\n")
    r = ok(k.exec("for i in range(25):\n    display(W())\n"))
    assert len(r["display"]) == 40               # 20 bundles of two, never one half
    assert [m for m, _ in r["display"]][-2:] == ["text/plain", "text/html"]
    assert r["stderr"].count(b"display limit") == 1


def test_display_limit_counts_bytes(k):
    # 1 MiB each may pass one by one; 20 MiB in all per execution (the
    # daemon's bound on what one execution holds).
    r = ok(k.exec("for i in range(25):\n    display({'text/plain': 'x' * (1000 << 10)}, raw=True)\n"))
    assert len(r["display"]) == 20
    assert r["stderr"].count(b"display limit") == 1


def test_display_too_big_is_a_note(k):
    r = ok(k.exec("class Big:\n    def _repr_html_(self):\n        return 'x' * (2 << 20)\n"
                  "    def __repr__(self):\n        return 'Big'\nBig()"))
    assert r["result"] == "Big" and r["display"] == []
    assert b"exceeds the 1 MiB display limit" in r["stderr"]


@pytest.mark.skipif(not has("pandas"), reason="pandas not installed")
def test_dataframe_plain_and_html(k):
    r = ok(k.exec("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\ndf"))
    assert r["result"] == "   a  b\n0  1  x\n1  2  y"
    assert [m for m, _ in r["display"]] == ["text/html"]
    html = r["display"][0][1].decode()
    assert "<table" in html and "dataframe" in html
    r = ok(k.exec("display(df)"))
    assert [m for m, _ in r["display"]] == ["text/plain", "text/html"]
    # pandas takes the kernel for Jupyter's, not a terminal: 20 columns
    assert ok(k.exec("pd.get_option('display.max_columns')"))["result"] == "20"
    r = ok(k.exec("df['a']"))                     # a Series: text/plain only
    assert r["result"].startswith("0    1\n1    2") and r["display"] == []


@pytest.mark.skipif(not has("IPython"), reason="IPython not installed")
def test_ipython_display_objects(k):
    r = ok(k.exec(
        "from IPython.display import display, HTML, Markdown, Latex, SVG, JSON, Image\n"
        "display(HTML('<b>h</b>'))\n"
        "display(Markdown('*m*'))\n"
        "display(Latex('$x$'))\n"
        "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'))\n"
        "display(JSON({'k': 1}))\n"
        "display(Image(data=b'\\x89PNG\\r\\n\\x1a\\nfake', format='png'))\n"))
    got = [(m, d) for m, d in r["display"] if m != "text/plain"]
    assert [m for m, _ in got] == ["text/html", "text/markdown", "text/latex",
                                   "image/svg+xml", "application/json", "image/png"]
    assert got[0][1] == b"<b>h</b>" and got[1][1] == b"*m*"
    assert json.loads(got[4][1]) == {"k": 1} and got[5][1] == PNG_MAGIC + b"fake"
    plains = [d for m, d in r["display"] if m == "text/plain"]
    assert plains[0] == b"<IPython.core.display.HTML object>"
    r = ok(k.exec("HTML('<i>last</i>')"))
    assert r["result"] == "<IPython.core.display.HTML object>"
    assert r["display"] == [("text/html", b"<i>last</i>")]
    r = ok(k.exec("from IPython.display import publish_display_data, clear_output\n"
                  "publish_display_data({'text/plain': 'pp', 'text/markdown': '**b**'})\n"
                  "clear_output()"))
    assert r["display"] == [("text/plain", b"pp"), ("text/markdown", b"**b**")]


@pytest.mark.skipif(not has_matplotlib(), reason="matplotlib not installed")
def test_figure_as_last_expression_is_sent_once(k):
    r = ok(k.exec("import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2])\nfig"))
    assert r["result"].startswith("<Figure size")
    assert len(r["display"]) == 1 and valid_png(r["display"][0][1])
    assert frames(r)[0].get("result") is True


@pytest.mark.skipif(not has_matplotlib(), reason="matplotlib not installed")
def test_figure_display_is_jupyters_bundle(k):
    # Jupyter's inline backend displays a figure as one bundle: its
    # text/plain (the figure's repr) and its image/png; so do plt.show(),
    # display(fig), fig.show() and a figure left open at the end of the cell.
    for code in ("plt.plot([1]); plt.show()", "fig = plt.figure(); plt.plot([1]); display(fig)",
                 "fig = plt.figure(); plt.plot([1]); fig.show()", "plt.plot([1]); None"):
        r = ok(k.exec("import matplotlib.pyplot as plt\n" + code))
        assert [m for m, _ in r["display"]] == ["text/plain", "image/png"], code
        assert r["display"][0][1] == b"<Figure size 640x480 with 1 Axes>", code
        assert valid_png(r["display"][1][1]), code
        g = [h["group"] for h in frames(r)]
        assert g[0] == g[1] and not any(h.get("result") for h in frames(r)), code
    r = ok(k.exec("fig, axs = plt.subplots(1, 2, figsize=(5, 3)); plt.show()"))
    assert r["display"][0][1] == b"<Figure size 500x300 with 2 Axes>"


@pytest.mark.skipif(not has_matplotlib(), reason="matplotlib not installed")
def test_empty_figure_is_text_only(k):
    # A cell that failed between plt.figure() and the first plot: Jupyter
    # shows the figure's text/plain and no image (IPython's print_figure
    # draws nothing for a figure without axes).
    r = k.exec("import matplotlib.pyplot as plt\nplt.figure(figsize=(5, 5))\nplt.imshow(nope)")
    assert r["status"] == "error" and r["error"]["ename"] == "NameError"
    assert r["display"] == [("text/plain", b"<Figure size 500x500 with 0 Axes>")]
    r = ok(k.exec("plt.get_fignums()"))
    assert r["result"] == "[]"
    r = ok(k.exec("fig = plt.figure()\nfig"))              # as the last expression
    assert r["result"] == "<Figure size 640x480 with 0 Axes>" and r["display"] == []


# ------------------------------------------------------------- magics

def test_plain_code_is_not_transformed(k):
    # '%' and '!' in plain code (formatting, !=, strings) run as Python
    r = ok(k.exec("x = 7 % 3\ny = x != 2\ns = '%d!' % x\n"
                  "t = '''\n%not a magic\n!not a shell\n'''\n(x, y, s, t)"))
    assert r["result"] == "(1, True, '1!', '\\n%not a magic\\n!not a shell\\n')"


def test_shell_escape(k):
    r = ok(k.exec("!echo hello; echo err >&2"))
    assert r["stdout"] == b"hello\n" and r["stderr"] == b"err\n"
    assert ok(k.exec("_exit_code"))["result"] == "0"
    r = ok(k.exec("print('a')\n!false\nprint('b')"))
    assert r["stdout"] == b"a\nb\n" and b"exit status 1" in r["stderr"]
    assert ok(k.exec("_exit_code"))["result"] == "1"
    r = ok(k.exec("n = 3\nfor i in range(2):\n    !echo {i} $n {n * 2}\n"))
    assert r["stdout"] == b"0 3 6\n1 3 6\n"


def test_shell_escape_output_captured_into_a_variable(k):
    r = ok(k.exec("files = !printf 'a\\nb\\n'\nfiles, files.n, files.s"))
    assert r["result"] == "(['a', 'b'], 'a\\nb', 'a b')"
    r = ok(k.exec("out = %sx echo hi\nout"))
    assert r["result"] == "['hi']"


def test_shell_escape_interrupted(sb_fresh):
    import signal
    import time
    sb = sb_fresh
    eid = sb.nid()
    sb.kern.send({"t": "exec", "id": eid}, b"!sleep 30\nprint('not reached')")
    pid = sb.kern.hello["pid"]
    time.sleep(0.3)          # the exec is on its way; the kernel runs the shell
    os.kill(pid, signal.SIGINT)
    while True:
        h, _ = sb.kern.recv(10)
        if h["t"] == "done":
            break
    assert h["status"] == "error" and h["error"]["ename"] == "KeyboardInterrupt"


def test_time_magic(k):
    r = ok(k.exec("%time v = sum(range(1000))\nv"))
    out = r["stdout"].decode()
    assert out.startswith("CPU times: user ") and "\nWall time: " in out
    assert r["result"] == "499500"
    r = ok(k.exec("%time 6 * 7"))
    assert r["result"] == "42"
    r = ok(k.exec("%%time\nw = 5\nw + 1"))
    assert r["result"] == "6" and b"Wall time" in r["stdout"]


def test_timeit_magic(k):
    r = ok(k.exec("%timeit -n 10 -r 3 sum(range(100))"))
    out = r["stdout"].decode()
    assert " per loop (mean \xb1 std. dev. of 3 runs, 10 loops each)" in out, out
    r = ok(k.exec("res = %timeit -o -q -n 5 -r 2 x = 1\nres.loops, res.repeat, len(res.timings)"))
    assert r["result"] == "(5, 2, 2)" and r["stdout"] == b""
    r = ok(k.exec("%%timeit -n 2 -r 1 base = 10\nbase * 2"))
    assert "of 1 run, 2 loops each" in r["stdout"].decode()


def test_cd_pwd_magics(k):
    d = os.path.join(k.ws, "sub")
    os.makedirs(d, exist_ok=True)
    r = ok(k.exec("%cd sub"))
    assert r["stdout"].decode().strip() == d
    assert ok(k.exec("%pwd"))["result"] == repr(d)
    assert ok(k.exec("import os; os.getcwd()"))["result"] == repr(d)
    ok(k.exec("%cd -"))
    assert ok(k.exec("os.getcwd()"))["result"] == repr(k.ws)
    r = k.exec("%cd /nonexistent-dir")
    assert r["status"] == "error" and r["error"]["ename"] == "UsageError"


def test_env_magic(k):
    r = ok(k.exec("%env CI_T=one two"))
    assert r["stdout"] == b"env: CI_T=one two\n"
    assert ok(k.exec("%env CI_T"))["result"] == "'one two'"
    assert ok(k.exec("import os; os.environ['CI_T']"))["result"] == "'one two'"
    r = ok(k.exec("e = %env\ntype(e).__name__, e['CI_T']"))
    assert r["result"] == "('dict', 'one two')"
    r = ok(k.exec("!echo $CI_T"))
    assert r["stdout"] == b"one two\n"


def test_bash_cell_magic(k):
    r = ok(k.exec("%%bash\ncd /\nX=5\necho $X $(pwd)\necho oops >&2\nexit 3\n"))
    assert r["stdout"] == b"5 /\n" and r["stderr"] == b"oops\n[ci] exit status 3\n"
    r = k.exec("%%bash --raise-error\nexit 2\n")
    assert r["status"] == "error" and r["error"]["ename"] == "CalledProcessError"
    r = ok(k.exec("%%sh\necho from sh"))
    assert r["stdout"] == b"from sh\n"


def test_writefile_cell_magic(k):
    r = ok(k.exec("%%writefile notes.txt\nline 1\nline 2\n"))
    assert r["stdout"] == b"Writing notes.txt\n"
    assert open(os.path.join(k.ws, "notes.txt")).read() == "line 1\nline 2\n"
    assert {"path": "notes.txt", "size": 14, "change": "created"} in r["files"]
    r = ok(k.exec("%%writefile -a notes.txt\nline 3\n"))
    assert r["stdout"] == b"Appending to notes.txt\n"
    r = ok(k.exec("%%writefile notes.txt\nnew\n"))
    assert r["stdout"] == b"Overwriting notes.txt\n"
    assert open(os.path.join(k.ws, "notes.txt")).read() == "new\n"


def test_matplotlib_inline_and_noop_magics(k):
    r = ok(k.exec("%matplotlib inline\n%load_ext autoreload\n%autoreload 2\n"
                  "%config InlineBackend.figure_format = 'retina'\n1"))
    assert r["result"] == "1" and r["stdout"] == b"" and r["stderr"] == b""


def test_conda_magic_names_pip_and_the_packages_endpoint(k):
    # %pip itself goes through the install window (test_pip.py).
    r = k.exec("%conda install requests")
    assert r["status"] == "error" and r["error"]["ename"] == "UsageError"
    assert "%pip install NAME" in r["error"]["evalue"]
    assert "POST /v1/sessions/{id}/packages" in r["error"]["evalue"]
    assert not any("ci_magics" in s for s in r["error"]["traceback"]), r["error"]
    assert r["error"]["traceback"][-1].startswith("UsageError: conda is not available")


def test_unknown_magic_is_usage_error(k):
    r = k.exec("%nosuchmagic x")
    assert r["status"] == "error" and r["error"]["ename"] == "UsageError"
    assert r["error"]["evalue"] == "Line magic function `%nosuchmagic` not found."
    r = k.exec("%%nosuchcell\nx")
    assert r["error"]["evalue"] == "Cell magic `%%nosuchcell` not found."


def test_html_cell_magic(k):
    r = ok(k.exec("%%html\n<b>cell</b>\n"))
    assert r["display"] == [("text/plain", b"<IPython.core.display.HTML object>"),
                            ("text/html", b"<b>cell</b>\n")]


def test_get_ipython_shim(k):
    r = ok(k.exec("ip = get_ipython()\nip.run_line_magic('env', 'CI_U=1')\n"
                  "ip.getoutput('echo $CI_U'), type(ip).__name__"))
    assert r["result"] == "(['1'], 'CIShell')"
    r = ok(k.exec("get_ipython().run_cell_magic('bash', '', 'echo cm')"))
    assert r["stdout"].endswith(b"cm\n")


def test_magic_error_line_numbers(k):
    r = k.exec("!true\nx = 1\n1 / 0\n")
    assert r["status"] == "error"
    tb = r["error"]["traceback"]   # one line per entry: the frame, then its source
    assert any("line 3" in s and tb[i + 1].strip() == "1 / 0"
               for i, s in enumerate(tb[:-1])), r["error"]


@pytest.fixture
def sb_fresh():
    with sandbox("cidisp-") as s:
        yield s


# ------------------------------------------------------------- %%capture

def test_capture_cell_magic(k):
    # IPython's %%capture: prints, displays and the last value kept out of the
    # output, into a CapturedIO when a name is given; show() puts them back.
    r = ok(k.exec("%%capture cap\nimport sys\nprint('out')\nprint('err', file=sys.stderr)\n"
                  "display({'a': 1})\n!echo shell\n41 + 1"))
    assert r["stdout"] == b"" and r["stderr"] == b"" and r["display"] == [] and r["result"] is None
    r = ok(k.exec("(cap.stdout, cap.stderr, [o.data for o in cap.outputs],\n"
                  " str(cap) == cap.stdout)"))
    assert r["result"] == ("('out\\nshell\\n',\n 'err\\n',\n [{'text/plain': \"{'a': 1}\"}, "
                           "{'text/plain': '42'}],\n True)")
    r = ok(k.exec("cap.show()"))
    assert r["stdout"] == b"out\nshell\n" and r["stderr"] == b"err\n"
    assert r["display"] == [("text/plain", b"{'a': 1}"), ("text/plain", b"42")]
    r = ok(k.exec("%%capture --no-stdout --no-display\nprint('shown')\ndisplay(7)"))
    assert r["stdout"] == b"shown\n" and r["display"] == [("text/plain", b"7")]
    r = k.exec("%%capture --bogus\n1")
    assert r["status"] == "error" and r["error"]["ename"] == "UsageError"
    r = k.exec("%%capture\nprint('before')\n1/0")          # an error still fails the cell
    assert r["status"] == "error" and r["error"]["ename"] == "ZeroDivisionError"
    assert r["stdout"] == b""
    assert ok(k.exec("print('after')"))["stdout"] == b"after\n"   # streams restored


@pytest.mark.skipif(not has_matplotlib(), reason="matplotlib not installed")
def test_capture_keeps_figures_out(k):
    r = ok(k.exec("%%capture c\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])"))
    assert r["display"] == []
    # the last value ([<Line2D ...>]), then the figure, as IPython's order
    r = ok(k.exec("[sorted(o.data) for o in c.outputs]"))
    assert r["result"] == "[['text/plain'], ['image/png', 'text/plain']]"


# ------------------------------------------------------------- fast path

def test_plain_code_loads_no_ipython():
    # print(1) and builtin scalars never load the display or magics modules
    # nor IPython; a figure's text/plain loads ci_format (IPython's pretty.py
    # on its own), still not the IPython package and its second of start-up.
    probe = ("import sys\nprint(sorted(m for m in sys.modules "
             "if m.split('.')[0] in ('IPython', 'ci_format', 'ci_magics')))")
    with sandbox("cifast-") as s:
        assert ok(s.exec("print(1)"))["stdout"] == b"1\n"
        assert ok(s.exec("x = 41\nx + 1"))["result"] == "42"
        assert ok(s.exec(probe))["stdout"] == b"[]\n"
        if has_matplotlib():
            r = ok(s.exec("import matplotlib.pyplot as plt\nplt.plot([1]); plt.show()"))
            assert [m for m, _ in r["display"]] == ["text/plain", "image/png"]
            assert ok(s.exec(probe))["stdout"] == b"['ci_format']\n"
