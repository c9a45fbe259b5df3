"""ci-ctl's newcomer fixes (issue 16) against the real daemon: id prefixes,
ls -q / -o, rm of an ended session, create --max-lifetime, allow, rmfile -r
(and the API's 409 is_a_directory), files PATH, wide-character tables.

The recursive-delete cases need an image whose supervisor knows the
recursive flag: run with CID_IMAGES=python=ci/python:ctl until it is merged.
"""
import json
import unicodedata
from urllib.parse import quote

from helpers_exec import error_of, files_url, put_bytes


def columns(text):
    """Terminal columns of text, the way a terminal shows it."""
    w = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        w += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return w


def made(daemon, *args):
    r = daemon.ctl("create", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_id_prefix_unique_ambiguous_and_none(daemon):
    sids = []
    try:
        # Random ids share a first digit within 17 sessions (pigeonhole);
        # usually within a handful.
        while True:
            sids.append(made(daemon))
            firsts = [s[0] for s in sids]
            shared = [c for c in set(firsts) if firsts.count(c) > 1]
            if shared:
                break
            assert len(sids) <= 16
        listed = daemon.ctl("ls", "-q").stdout.split()
        sid = sids[0]
        # The shortest prefix of sid that no other listed id starts with.
        n = next(n for n in range(1, 37)
                 if [i for i in listed if i.startswith(sid[:n])] == [sid])
        r = daemon.ctl("show", sid[:n])
        assert r.returncode == 0 and "id:" in r.stdout and sid in r.stdout, r.stdout + r.stderr
        r = daemon.ctl("exec", sid[:n], "print(6*7)")
        assert r.returncode == 0 and r.stdout == "42\n", r.stderr

        r = daemon.ctl("show", shared[0])
        assert r.returncode == 2, r.stdout + r.stderr
        assert "ambiguous" in r.stderr
        for s in sids:
            if s[0] == shared[0]:
                assert s in r.stderr, r.stderr  # every candidate is named

        r = daemon.ctl("show", "zzzz")  # no session has it: the server's 404
        assert r.returncode == 5 and "not_found" in r.stderr, r.stderr
    finally:
        for s in sids:
            daemon.api.delete(s)


def test_ls_quiet_and_output_formats(daemon):
    a, b = made(daemon), made(daemon, "--allow", "one.test:443")
    try:
        r = daemon.ctl("ls", "-q")
        assert r.returncode == 0, r.stderr
        ids = r.stdout.split()
        assert a in ids and b in ids and ids == sorted(ids)
        assert all(len(i) == 36 for i in ids)  # ids only, no header

        r = daemon.ctl("ls", "-o", "name")
        assert r.returncode == 0
        names = r.stdout.split()
        assert "session/" + a in names and names == sorted(names)

        r = daemon.ctl("ls", "-o", "json")
        doc = json.loads(r.stdout)
        assert {a, b} <= {s["id"] for s in doc["sessions"]}

        r = daemon.ctl("ls", "-o", "wide")
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["ID", "STATE", "IMAGE", "RUNTIME", "TENANT", "CREATED",
                                    "ACTIVE", "EXPIRES", "ALLOW"]
        row = next(ln for ln in lines if ln.startswith(b))
        assert "one.test:443" in row

        r = daemon.ctl("ls", "-o", "yaml")
        assert r.returncode == 2 and "want json, wide or name" in r.stderr

        r = daemon.ctl("show", "-o", "name", a)
        assert r.returncode == 0 and r.stdout == "session/%s\n" % a
        r = daemon.ctl("show", "-o", "json", a)
        assert json.loads(r.stdout)["id"] == a
    finally:
        daemon.api.delete(a)
        daemon.api.delete(b)


def test_rm_of_an_ended_session_exits_zero_with_a_note(daemon):
    sid = made(daemon)
    r = daemon.ctl("rm", sid)
    assert r.returncode == 0 and r.stdout == sid + "\n", r.stderr
    r = daemon.ctl("rm", sid)
    assert r.returncode == 0, r.stderr
    assert r.stdout == sid + "\n" and "already ended" in r.stderr, r.stderr
    r = daemon.ctl("rm", "--strict", sid)
    assert r.returncode == 5 and "expired" in r.stderr, r.stderr
    # A session that never was is still an error.
    r = daemon.ctl("rm", "00000000-0000-4000-8000-000000000000")
    assert r.returncode == 5 and "not_found" in r.stderr


def test_create_max_lifetime(daemon):
    sid = made(daemon, "--max-lifetime", "321")
    try:
        doc = json.loads(daemon.ctl("--json", "show", sid).stdout)
        assert doc["max_lifetime_s"] == 321, doc
    finally:
        daemon.api.delete(sid)
    r = daemon.ctl("create", "--max-lifetime", "0")
    assert r.returncode == 2 and "--max-lifetime" in r.stderr


def test_allow_replaces_and_clears_the_allowlist(daemon):
    sid = made(daemon, "--allow", "first.test:443")
    plain = made(daemon)
    try:
        r = daemon.ctl("allow", sid, "second.test:443", "third.test:8080")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "%s allow: second.test:443 third.test:8080\n" % sid, r.stdout
        doc = json.loads(daemon.ctl("--json", "show", sid).stdout)
        assert doc["network"]["allow"] == ["second.test:443", "third.test:8080"], doc
        r = daemon.ctl("allow", "--clear", sid)
        assert r.returncode == 0 and r.stdout == "%s allow: none\n" % sid, r.stdout + r.stderr
        doc = json.loads(daemon.ctl("--json", "show", sid).stdout)
        assert doc["network"]["allow"] == [], doc
        r = daemon.ctl("allow", sid)
        assert r.returncode == 2
        r = daemon.ctl("allow", plain, "x.test:443")  # made without network
        assert r.returncode == 5 and "bad_request" in r.stderr, r.stderr
    finally:
        daemon.api.delete(sid)
        daemon.api.delete(plain)


def test_directory_delete_needs_recursive(daemon, api, session):
    sid = session["id"]
    for p in ("dir/a.txt", "dir/sub/b.txt", "x.txt", "y.txt"):
        assert put_bytes(daemon.port, sid, p, b"1")[0] == 201

    # The API: a directory is 409 is_a_directory and stays.
    assert error_of(api.request("DELETE", files_url(sid, "dir"))) == (409, "is_a_directory")
    assert error_of(api.request("DELETE", files_url(sid, "dir") + "?recursive=yes")) == \
        (400, "bad_request")
    assert error_of(api.request("DELETE", files_url(sid, "dir") + "?recursive=0")) == \
        (409, "is_a_directory")
    r = daemon.ctl("files", sid, "dir")
    assert r.returncode == 0 and "dir/sub/b.txt" in r.stdout, r.stderr

    # ci-ctl: the same refusal, with a hint; several paths in one call.
    r = daemon.ctl("rmfile", sid, "dir")
    assert r.returncode == 5 and "is_a_directory" in r.stderr and "rmfile -r" in r.stderr
    r = daemon.ctl("rmfile", sid, "x.txt", "dir/a.txt", "nope.txt", "y.txt")
    assert r.returncode == 5 and "not_found" in r.stderr, r.stderr
    assert r.stdout.split() == ["x.txt", "dir/a.txt", "y.txt"]  # the others still went
    listed = daemon.ctl("--json", "files", sid).stdout
    paths = {f["path"] for f in json.loads(listed)["files"]}
    assert "x.txt" not in paths and "y.txt" not in paths and "dir/sub/b.txt" in paths

    r = daemon.ctl("rmfile", "-r", sid, "dir")
    assert r.returncode == 0 and r.stdout == "dir\n", r.stderr
    paths = {f["path"] for f in json.loads(daemon.ctl("--json", "files", sid).stdout)["files"]}
    assert not any(p == "dir" or p.startswith("dir/") for p in paths), paths
    # And the API's own recursive delete of a directory.
    assert put_bytes(daemon.port, sid, "t/u.txt", b"1")[0] == 201
    assert api.request("DELETE", files_url(sid, "t") + "?recursive=1")[0] == 204
    assert error_of(api.request("GET", files_url(sid, "t/u.txt"))) == (404, "not_found")


def test_files_sub_path_sorted_and_aligned_for_wide_names(daemon, session):
    sid = session["id"]
    for p in ("data/数据.csv", "data/b.csv", "data/データ.txt", "other/z.txt", "a.txt"):
        assert put_bytes(daemon.port, sid, quote(p), b"12345")[0] == 201
    r = daemon.ctl("files", sid, "data/")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[0] == "PATH"
    paths = [ln.split()[0] for ln in lines[1:]]
    assert paths == sorted(paths) == ["data", "data/b.csv", "data/データ.txt", "data/数据.csv"]
    # The SIZE column starts at the same terminal column on every line.
    starts = set()
    for ln in lines:
        first = ln.split()[0]
        rest = ln[len(first):]
        starts.add(columns(first) + len(rest) - len(rest.lstrip(" ")))
    assert len(starts) == 1, (starts, lines)

    r = daemon.ctl("files", "-o", "name", sid, "data")
    assert r.stdout.splitlines() == paths, r.stdout

    r = daemon.ctl("files", sid, "nothing-here")
    assert r.returncode == 5 and "nothing at nothing-here" in r.stderr
    r = daemon.ctl("files", sid)
    assert "other/z.txt" in r.stdout and "a.txt" in r.stdout


def test_get_recursive_downloads_a_tree(daemon, session, tmp_path):
    sid = session["id"]
    want = {"out/a.txt": b"alpha", "out/deep/er/b.bin": bytes(range(256)),
            "out/数据.csv": b"x,y\n"}
    for p, data in want.items():
        assert put_bytes(daemon.port, sid, quote(p), data)[0] == 201
    assert put_bytes(daemon.port, sid, "outside.txt", b"no")[0] == 201
    r = daemon.ctl("exec", sid, "import os; os.makedirs('/workspace/out/empty')")
    assert r.returncode == 0, r.stderr
    dest = tmp_path / "copy"
    r = daemon.ctl("get", "-r", sid, "out", str(dest))
    assert r.returncode == 0, r.stderr
    for p, data in want.items():
        assert (dest / p[len("out/"):]).read_bytes() == data
    assert (dest / "empty").is_dir()
    assert not (tmp_path / "outside.txt").exists() and not (dest / "outside.txt").exists()
    assert len(r.stdout.splitlines()) == 3  # one line per file

    r = daemon.ctl("get", "-r", sid, "out", "-")
    assert r.returncode == 2
    r = daemon.ctl("get", "-r", sid, "missing", str(tmp_path / "m"))
    assert r.returncode == 5 and not (tmp_path / "m").exists()


def test_exec_interactive_keeps_state_on_a_terminal(daemon, session):
    """exec -i on a pty: lines and blocks are executions in one session."""
    import os
    import pty
    import select
    import time

    from harness import CTL_BIN

    sid = session["id"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: ci-ctl on the pty's terminal
        os.execv(CTL_BIN, [CTL_BIN, "--server", "http://127.0.0.1:%d" % daemon.port,
                           "exec", "-i", sid[:12]])
    seen = b""

    def until(marker, count=1, bound_s=60):
        nonlocal seen
        deadline = time.monotonic() + bound_s
        while seen.count(marker) < count:
            left = deadline - time.monotonic()
            assert left > 0, seen.decode(errors="replace")
            if select.select([fd], [], [], left)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    chunk = b""
                assert chunk, seen.decode(errors="replace")
                seen += chunk

    try:
        until(b">>> ")
        os.write(fd, b"x = 20\n")
        until(b">>> ", 2)
        os.write(fd, b"def double(n):\n")
        until(b"... ")
        os.write(fd, b"    return n * 2\n\n")
        until(b">>> ", 3)
        os.write(fd, b"print('got', double(x) + 2)\n")
        until(b"got 42")
        os.write(fd, b"1/0\n")
        until(b"ZeroDivisionError")
        os.write(fd, b"print('still', x)\n")
        until(b"still 20")
        os.write(fd, b"\x04")  # Ctrl-D
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    r = daemon.ctl("exec", "-i", sid, "print(1)")
    assert r.returncode == 2


REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
BASH_COMPLETION = REPO / "cli" / "completion" / "ci-ctl.bash"
ZSH_COMPLETION = REPO / "cli" / "completion" / "_ci-ctl"
# Completes the last of its arguments the way bash would, printing COMPREPLY.
COMPLETE_DRIVER = r'''
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_ci_ctl
printf '%s\n' "${COMPREPLY[@]}"
'''


def complete(daemon, *words):
    import os
    import subprocess

    from harness import CTL_BIN

    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(CTL_BIN)) + ":" +
               os.environ.get("PATH", "/usr/bin:/bin"))
    r = subprocess.run(["bash", "-c", COMPLETE_DRIVER, "driver", str(BASH_COMPLETION),
                        os.path.basename(CTL_BIN), "--server",
                        "http://127.0.0.1:%d" % daemon.port] + list(words),
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_bash_completion_commands_options_and_session_ids(daemon, session):
    sid = session["id"]
    got = complete(daemon, "rm")  # a command name being typed
    assert "rm" in got and "rmfile" in got and "show" not in got
    assert set(complete(daemon, "")) >= {"create", "ls", "allow", "version", "help"}
    assert complete(daemon, "rmfile", "--re") == ["--recursive"]
    assert complete(daemon, "ls", "-o", "") == ["json", "wide", "name"]
    ids = complete(daemon, "show", sid[:8])
    assert ids == [sid], ids
    assert sid in complete(daemon, "exec", "--timeout", "5", "")
    assert complete(daemon, "exec", sid, "") == []  # the code: nothing to offer


def test_zsh_completion_parses():
    import shutil
    import subprocess

    assert shutil.which("zsh"), "zsh is in deploy/setup.sh's packages"
    r = subprocess.run(["zsh", "-n", str(ZSH_COMPLETION)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["bash", "-n", str(BASH_COMPLETION)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr


def test_man_page_is_current():
    import subprocess

    from harness import CTL_BIN

    r = subprocess.run([str(REPO / "cli" / "gen-man.py"), CTL_BIN], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    committed = (REPO / "docs" / "ci-ctl.1").read_text(encoding="utf-8")
    assert r.stdout == committed, "docs/ci-ctl.1 is stale: run `make man`"
    assert ".SS allow" in committed and "\\-\\-max\\-lifetime" in committed


def test_version_prints_client_and_server(daemon):
    r = daemon.ctl("version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("client: ci-ctl ") and lines[1].startswith("server: ci-daemon ")
    doc = json.loads(daemon.ctl("--json", "version").stdout)
    assert doc["client"]["version"] and doc["server"]["version"]


def test_run_once_is_one_execution_in_a_fresh_session(daemon, tmp_path):
    before = set(daemon.ctl("ls", "-q").stdout.split())
    job = tmp_path / "job.py"
    job.write_text("import os\nprint('pid', os.getpid() > 0)\n6 * 7\n")
    r = daemon.ctl("run", "--once", "-f", str(job))
    assert r.returncode == 0 and r.stdout == "pid True\n42\n", r.stdout + r.stderr
    r = daemon.ctl("run", "--once", "-", input="1/0\n")
    assert r.returncode == 1 and "ZeroDivisionError" in r.stderr
    doc = json.loads(daemon.ctl("--json", "run", "--once", "print(1)").stdout)
    assert doc["status"] == "ok" and doc["stdout"] == "1\n", doc
    assert daemon.ctl("run", "--once", "--max-attempts", "2", "1").returncode == 2
    # The one-shot sessions are gone before the answers came.
    assert set(daemon.ctl("ls", "-q").stdout.split()) <= before
