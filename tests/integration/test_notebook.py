"""Issue 14 (part D): Jupyter display semantics and magics, end to end —
text/plain as IPython formats it, MIME bundles (a DataFrame's text/plain and
text/html), display() and IPython.display objects, shell escapes and magics,
against the real daemon, Docker and the sandbox image (built with
python3-ipython: run with CID_IMAGES=python=<that tag> until ci/python:latest
has it)."""
import base64
import json

from helpers_exec import RUNNER_NAMES, decode_png, stream_exec


def data(d):
    return base64.b64decode(d["data"])


def ok(r):
    assert r["status"] == "ok", r
    return r


def test_text_plain_is_ipython_pretty(api, session):
    sid = session["id"]
    assert ok(api.exec(sid, "type(1)"))["result"] == "int"
    r = ok(api.exec(sid, "list(range(30))"))
    assert r["result"].split("\n")[:2] == ["[0,", " 1,"], r["result"]
    assert ok(api.exec(sid, "print(1)"))["result"] is None
    assert ok(api.exec(sid, "2 + 3"))["result"] == "5"


def test_dataframe_answers_plain_and_html(api, session):
    sid = session["id"]
    r = ok(api.exec(sid, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})"))
    assert r["result"] == "   a  b\n0  1  x\n1  2  y"
    assert [(d["mime"], d["result"]) for d in r["display"]] == [("text/html", True)]
    assert b"<table" in data(r["display"][0])
    r = ok(api.exec(sid, "df = pd.DataFrame({'v': [3]})\ndisplay(df)\nprint('after')"))
    assert r["result"] is None and r["stdout"] == "after\n"
    assert [d["mime"] for d in r["display"]] == ["text/plain", "text/html"]
    assert {d["group"] for d in r["display"]} == {0} and not any(d["result"] for d in r["display"])
    assert data(r["display"][0]) == b"   v\n0  3"


def test_ipython_display_objects_and_repr_methods(api, session):
    sid = session["id"]
    r = ok(api.exec(sid,
                    "from IPython.display import HTML, Markdown, Latex, SVG, JSON, display\n"
                    "display(HTML('<b>h</b>'), Markdown('*m*'), Latex('$x$'))\n"
                    "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'), JSON({'k': 1}))\n"))
    rich = [(d["mime"], data(d), d["group"]) for d in r["display"] if d["mime"] != "text/plain"]
    assert [m for m, _, _ in rich] == ["text/html", "text/markdown", "text/latex",
                                       "image/svg+xml", "application/json"]
    assert rich[0][1] == b"<b>h</b>" and json.loads(rich[4][1]) == {"k": 1}
    assert [g for _, _, g in rich] == [0, 1, 2, 3, 4]
    r = ok(api.exec(sid, "class R:\n    def _repr_markdown_(self):\n        return '# T'\n"
                         "    def __repr__(self):\n        return 'R'\nR()"))
    assert r["result"] == "R" and [(d["mime"], data(d)) for d in r["display"]] == \
        [("text/markdown", b"# T")]


def test_figure_is_jupyters_bundle(api, session):
    # As Jupyter's inline backend: one bundle, text/plain and image/png.
    r = ok(api.exec(session["id"], "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"))
    assert [d["mime"] for d in r["display"]] == ["text/plain", "image/png"]
    assert data(r["display"][0]) == b"<Figure size 640x480 with 1 Axes>"
    assert r["display"][0]["group"] == r["display"][1]["group"]
    decode_png(r["display"][1]["data"])


def test_shell_escape_and_exit_status(api, session):
    sid = session["id"]
    r = ok(api.exec(sid, "!echo hi from $HOME; ls /workspace >/dev/null"))
    assert r["stdout"] == "hi from /tmp/home\n"
    r = ok(api.exec(sid, "!sh -c 'exit 4'\n_exit_code"))
    assert r["result"] == "4" and "exit status 4" in r["stderr"]
    r = ok(api.exec(sid, "lines = !printf 'a\\nb\\n'\nlines"))
    assert r["result"] == "['a', 'b']"


def test_magics(api, session):
    sid = session["id"]
    r = ok(api.exec(sid, "%time x = sum(range(10))\nx"))
    assert "Wall time:" in r["stdout"] and r["result"] == "45"
    r = ok(api.exec(sid, "%timeit -n 3 -r 2 x * 2"))
    assert "of 2 runs, 3 loops each" in r["stdout"], r["stdout"]
    r = ok(api.exec(sid, "%%bash\ncd /tmp && echo $(pwd)\n"))
    assert r["stdout"] == "/tmp\n"
    r = ok(api.exec(sid, "%%writefile made.txt\nhello\n"))
    assert r["stdout"] == "Writing made.txt\n"
    assert {"path": "made.txt", "size": 6, "change": "created"} in r["files"]
    r = ok(api.exec(sid, "%env CI_NB=1\n%cd /tmp\nimport os\nos.environ['CI_NB'], os.getcwd()"))
    assert r["result"] == "('1', '/tmp')"
    ok(api.exec(sid, "%cd /workspace"))
    r = ok(api.exec(sid, "%matplotlib inline\nimport matplotlib\nmatplotlib.get_backend()"))
    assert r["result"] == "'module://ci_display'"


def test_pip_magic_is_a_clear_error(api, session):
    # This daemon has no package index (test_pip_magic.py installs).
    r = api.exec(session["id"], "%pip install six")
    assert r["status"] == "error" and r["error"]["ename"] == "PipError", r
    assert "--pip-index-url" in r["error"]["evalue"]
    tb = "\n".join(r["error"]["traceback"])
    for name in RUNNER_NAMES + ("ci_magics", "ci_format", "ci_pip"):
        assert name not in tb, (name, tb)


def test_stream_events_carry_the_bundle(daemon, session):
    status, _, events = stream_exec(daemon.port, session["id"],
                                    "from IPython.display import HTML\n"
                                    "display(HTML('<i>s</i>'))\nHTML('<b>r</b>')")
    assert status == 200, events
    disp = [e for _, e in events if e["type"] == "display"]
    assert [(e["mime"], e["group"], e["result"]) for e in disp] == [
        ("text/plain", 0, False), ("text/html", 0, False), ("text/html", 1, True)]
    last = events[-1][1]
    assert last["type"] == "result" and last["result"] == "<IPython.core.display.HTML object>"
    assert [d["mime"] for d in last["display"]] == ["text/plain", "text/html", "text/html"]
