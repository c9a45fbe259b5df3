"""The Python client (clients/python/ci_sandbox) against a live daemon:
state that persists, streaming callbacks, images, files, the network
allowlist, keepalive, kill and the context manager, the runs workflow, and
each error of the daemon as its typed exception (401, 404, 410 after a
delete, 429 with retry_after, 400, 409, connection failures)."""
import os
import subprocess
import sys
import threading

import pytest

import ci_sandbox
from ci_sandbox import Sandbox
from harness import wait_for
from harness.http import free_port


def test_state_persists_and_the_execution_carries_everything(url, tenant_key):
    with Sandbox.create(url=url, api_key=tenant_key) as sb:
        first = sb.run_code("x = 41\nprint('set')")
        assert first.ok and first.stdout == "set\n" and first.text is None
        ex = sb.run_code("import sys\nprint('out'); print('err', file=sys.stderr)\nx + 1")
        assert ex.status == "ok" and ex.text == "42" and ex.result == "42"
        assert ex.stdout == "out\n" and ex.stderr == "err\n"
        assert ex.error is None and ex.kernel == "preserved"
        assert isinstance(ex.duration_ms, int) and ex.duration == ex.duration_ms / 1000.0
        # output: the daemon's ordered chunks when it sends them
        if "output" in ex.raw:
            assert [(c.stream, c.text) for c in ex.output] == [("stdout", "out\n"), ("stderr", "err\n")]
        bad = sb.run_code("def f():\n    return undefined_name\nf()")
        assert bad.status == "error" and not bad.ok
        assert bad.error.name == "NameError" and "undefined_name" in bad.error.value
        assert isinstance(bad.error.traceback, list) and bad.error.traceback
        assert any("<cell-" in line for line in bad.error.traceback)
        made = sb.run_code("open('made.txt', 'w').write('hi')")
        assert [(f.path, f.change) for f in made.files] == [("made.txt", "created")]
        bash = sb.run_code("echo from-bash", language="bash")
        assert bash.ok and bash.stdout == "from-bash\n"
        slow = sb.run_code("import time\ntime.sleep(30)", timeout_s=1)
        assert slow.status == "timeout" and slow.error.name == "KeyboardInterrupt"
        assert sb.run_code("x").text == "41"  # the kernel survived the timeout


def test_images_are_decoded_png(url, tenant_key):
    with Sandbox.create(url=url, api_key=tenant_key) as sb:
        ex = sb.run_code("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                         "plt.plot([1, 3, 2])\nplt.show()")
        assert ex.ok, ex.error
        assert len(ex.images) == 1 and ex.images[0].startswith(b"\x89PNG\r\n\x1a\n")
        assert any(r.mime == "text/plain" for r in ex.results)


def test_streaming_callbacks_see_output_as_it_comes(url, tenant_key):
    with Sandbox.create(url=url, api_key=tenant_key) as sb:
        seen = []
        gate = os.urandom(8).hex()
        # The cell prints, then waits until the callback has seen that line
        # and written a file into /workspace that the cell reads: proof the
        # callback ran while the code was still running, with no timing.
        code = ("import os, sys, time\nprint('first', flush=True)\n"
                "print('warn', file=sys.stderr, flush=True)\n"
                "deadline = time.time() + 30\n"
                "while not os.path.exists('/workspace/%s') and time.time() < deadline:\n"
                "    time.sleep(0.05)\n"
                "print('gate', os.path.exists('/workspace/%s'))\n"
                "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                "plt.plot([1, 2]); plt.show()\n'done'") % (gate, gate)
        results = []
        other = Sandbox.connect(sb.id, url=url, api_key=tenant_key)

        def on_stdout(text):
            seen.append(("stdout", text))
            if text.startswith("first"):
                other.files.write(gate, b"1")

        ex = sb.run_code(code, on_stdout=on_stdout,
                         on_stderr=lambda text: seen.append(("stderr", text)),
                         on_result=results.append)
        assert ex.ok, ex.error
        assert ex.text == "'done'"
        assert ("stdout", "first\n") in seen and ("stderr", "warn\n") in seen
        assert "gate True\n" in "".join(t for s, t in seen if s == "stdout")
        assert ex.stdout == "first\ngate True\n" and ex.stderr == "warn\n"
        assert [(c.stream, c.text) for c in ex.output][:2] == [("stdout", "first\n"), ("stderr", "warn\n")]
        pngs = [r for r in results if r.mime == "image/png"]
        assert len(pngs) == 1 and pngs[0].data.startswith(b"\x89PNG") and ex.images == [pngs[0].data]
        # A streamed error execution still answers an Execution.
        err = sb.run_code("print('before')\n1/0", on_stdout=lambda t: None)
        assert err.status == "error" and err.error.name == "ZeroDivisionError"


def test_files_round_trip_list_and_remove(url, tenant_key):
    with Sandbox.create(url=url, api_key=tenant_key) as sb:
        blob = os.urandom(300000) + b"\x00\xff"
        assert sb.files.write("data/blob.bin", blob)["size"] == len(blob)
        sb.files.write("data/sub/note.txt", "héllo wörld")
        sb.files.write("odd name #1?.txt", b"odd")
        assert sb.files.read("data/blob.bin") == blob
        assert sb.files.read_text("data/sub/note.txt") == "héllo wörld"
        assert sb.files.read("odd name #1?.txt") == b"odd"
        assert sb.run_code("open('data/sub/note.txt').read()").text == "'héllo wörld'"
        paths = {e["path"]: e["type"] for e in sb.files.list()}
        assert paths["data"] == "dir" and paths["data/blob.bin"] == "file"
        under = {e["path"] for e in sb.files.list("data/sub")}
        assert under == {"data/sub", "data/sub/note.txt"}
        assert sb.files.exists("data/blob.bin") and not sb.files.exists("nope")
        with pytest.raises(ci_sandbox.IsADirectory, match="recursive=True") as e:
            sb.files.remove("data")
        assert e.value.code == "is_a_directory" and isinstance(e.value, ci_sandbox.Conflict)
        assert sb.files.exists("data/sub/note.txt")
        sb.files.remove("data/blob.bin")
        assert not sb.files.exists("data/blob.bin")
        sb.files.remove("data", recursive=True)
        assert sb.files.list("data") == []
        with pytest.raises(ci_sandbox.NotFound) as e:
            sb.files.read("data/blob.bin")
        assert e.value.status == 404 and e.value.code == "not_found"
        with pytest.raises(ci_sandbox.BadPath) as e:
            sb.files.read("../etc/passwd")
        assert e.value.status == 400 and e.value.code == "bad_path"
        assert isinstance(e.value, ci_sandbox.BadRequest) and isinstance(e.value, ci_sandbox.CiError)


def test_network_keepalive_connect_and_kill(url, tenant_key):
    sb = Sandbox.create(url=url, api_key=tenant_key, network_allow=["pkgs.example.test:443"],
                        idle_timeout_s=120, limits={"memory_mb": 256}, metadata={"who": "clients"})
    try:
        assert sb.info["network"]["allow"] == ["pkgs.example.test:443"]
        assert sb.info["limits"]["memory_mb"] == 256 and sb.info["metadata"] == {"who": "clients"}
        info = sb.set_network(["other.example.test:443", "*.suffix.test"])
        assert info["network"]["allow"] == ["other.example.test:443", "*.suffix.test"]
        before = sb.info["expires_at"]
        wait_for(lambda: sb.keepalive()["expires_at"] != before, 10, what="expires_at to slide")
        same = Sandbox.connect(sb.id, url=url, api_key=tenant_key)
        assert same.id == sb.id and same.run_code("1 + 1").text == "2"
        assert sb.id in {s["id"] for s in Sandbox.list(url=url, api_key=tenant_key)}
        assert sb.is_running()
    finally:
        assert sb.kill() is True
    assert sb.kill() is False  # already ended: no error
    assert not sb.is_running()
    # 410 after the delete, as its typed error, with the daemon's message.
    with pytest.raises(ci_sandbox.Expired) as e:
        sb.run_code("1")
    assert e.value.status == 410 and e.value.code == "expired" and "deleted" in e.value.message
    with pytest.raises(ci_sandbox.Expired):
        Sandbox.connect(sb.id, url=url, api_key=tenant_key)


def test_context_manager_kills_on_exit_even_on_an_exception(url, tenant_key):
    with pytest.raises(RuntimeError):
        with Sandbox.create(url=url, api_key=tenant_key) as sb:
            sid = sb.id
            raise RuntimeError("the block failed")
    with pytest.raises(ci_sandbox.Expired):
        Sandbox.connect(sid, url=url, api_key=tenant_key)


def test_env_provides_url_and_key(url, tenant_key, monkeypatch):
    monkeypatch.setenv("CI_SANDBOX_URL", url)
    monkeypatch.setenv("CI_SANDBOX_API_KEY", tenant_key)
    with Sandbox.create() as sb:
        assert sb.run_code("6 * 7").text == "42"
    monkeypatch.setenv("CI_SANDBOX_API_KEY", "0000000000000000.wrong")
    with pytest.raises(ci_sandbox.Unauthorized) as e:
        Sandbox.create()
    assert e.value.status == 401 and e.value.code == "unauthorized"


def test_typed_errors(url, tenant_key, keyed_daemon):
    with pytest.raises(ci_sandbox.Unauthorized):
        Sandbox.create(url=url, api_key=None)
    # the admin key on a tenant's route
    with pytest.raises(ci_sandbox.Forbidden) as e:
        Sandbox.create(url=url, api_key=keyed_daemon.admin_key)
    assert e.value.status == 403
    with pytest.raises(ci_sandbox.NotFound):
        Sandbox.connect("00000000-0000-4000-8000-000000000000", url=url, api_key=tenant_key)
    with pytest.raises(ci_sandbox.BadRequest) as e:
        Sandbox.create(url=url, api_key=tenant_key, idle_timeout_s=0)
    assert e.value.code == "bad_request" and "idle_timeout_s" in e.value.message
    with pytest.raises(ci_sandbox.BadRequest):
        Sandbox.create(url=url, api_key=tenant_key, no_such_field=1)
    # a port nobody listens on
    with pytest.raises(ci_sandbox.ConnectionFailed) as e:
        Sandbox.create(url="http://127.0.0.1:%d" % free_port(), api_key=tenant_key)
    assert e.value.code == "connection" and e.value.status is None
    assert isinstance(e.value, ci_sandbox.CiError)
    with pytest.raises(ci_sandbox.BadRequest):
        Sandbox.create(url="ftp://nowhere.test/")


def test_busy_while_an_execution_runs(url, tenant_key):
    with Sandbox.create(url=url, api_key=tenant_key) as sb:
        started = threading.Event()
        box = {}

        def long_run():
            box["ex"] = sb.run_code("import time\nprint('go', flush=True)\ntime.sleep(20)",
                                    on_stdout=lambda t: started.set())

        th = threading.Thread(target=long_run)
        th.start()
        try:
            assert started.wait(30)
            with pytest.raises(ci_sandbox.Busy) as e:
                sb.run_code("1")
            assert e.value.status == 409 and e.value.code == "busy"
            assert sb.interrupt() is True
        finally:
            th.join(60)
        assert box["ex"].status == "error" and box["ex"].error.name == "KeyboardInterrupt"


def test_quota_429_is_quota_exceeded_with_retry_after(url, keyed_daemon):
    tenant = "clq-" + os.urandom(4).hex()
    key = keyed_daemon.key(tenant, quota={"sessions": 1})["key"]
    with Sandbox.create(url=url, api_key=key):
        with pytest.raises(ci_sandbox.QuotaExceeded) as e:
            Sandbox.create(url=url, api_key=key)
    err = e.value
    assert err.status == 429 and err.code == "quota_exceeded" and err.quota == "sessions"
    assert isinstance(err.retry_after, int) and err.retry_after >= 1
    # The slot came back when the context manager killed the first one.
    with Sandbox.create(url=url, api_key=key) as sb:
        assert sb.run_code("1").ok


def test_run_workflow(url, tenant_key):
    with Sandbox.create(url=url, api_key=tenant_key) as sb:
        run = sb.run("print('ran')\n40 + 2", fixer=None, max_attempts=1)
        assert run.status == "ok" and run.state == "done" and len(run.attempts) == 1
        assert run.result.text == "42" and run.result.stdout == "ran\n"
        failed = sb.run("1/0", fixer=None, max_attempts=1, on_failure=[])
        assert failed.status == "failed" and failed.result.error.name == "ZeroDivisionError"
        # error.cell_line: the line of the submitted code it went through
        assert failed.result.error.cell_line == {"line": 1, "text": "1/0"}
        # retry_hopeless goes in the request (accepted; nothing was hopeless)
        again = sb.run("x = 1\n1/0", fixer=None, max_attempts=1, on_failure=[],
                       retry_hopeless=True)
        assert again.status == "failed" and again.result.error.cell_line["line"] == 2


def test_installs_with_a_pyproject_and_no_dependencies():
    """The package imports from a plain copy (standard library only), and
    pyproject.toml declares no dependencies and Python >= 3.9."""
    import tomllib  # noqa: F401 (3.11+; the suite runs on Debian's python3)
    root = os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python")
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)["project"]
    assert meta["dependencies"] == [] and meta["requires-python"] == ">=3.9"
    # -S: no site packages at all (nor a sitecustomize); what the import adds
    # beyond the standard library must be nothing but ci_sandbox itself.
    script = ("import sys; sys.path.insert(0, %r); before = set(sys.modules)\n"
              "import ci_sandbox, ci_sandbox.openai_tool\n"
              "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] "
              "not in sys.stdlib_module_names and m.split('.')[0] != 'ci_sandbox'))"
              % os.path.abspath(root))
    out = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
