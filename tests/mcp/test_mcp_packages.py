"""install_packages over MCP (issue 16, item 1), with the SDK's Client,
against the package index fixture of tests/integration/test_packages.py: a
PEP 503 index of hand-made wheels on 127.0.0.1, reached by the sandbox as
the made-up pypi.test through the daemon's hosts file (hosts-only resolver:
no DNS query), during the install window only."""
import pytest

from harness.packages import index_daemon
from integration.test_packages import Index, make_wheel, pip_image  # noqa: F401 (a fixture)
from mcp_lib import SdkClient, texts

ADMIN = "admin-" + "k" * 40


@pytest.fixture(scope="module")
def index():
    fn, data = make_wheel("mcptiny", "2.5", {"mcptiny/__init__.py": "ANSWER = 42\n"})
    ix = Index([("mcptiny", fn, data)])
    yield ix
    ix.stop()


@pytest.fixture(scope="module")
def pd(redis_server, tmpdir_session, pip_image, index):  # noqa: F811
    d = index_daemon(redis_server, tmpdir_session, index, ADMIN, image=pip_image)
    try:
        yield d
    finally:
        d.finish()


def test_install_packages_then_import(pd, index):
    key = pd.key("mcp-pkg")["key"]
    with SdkClient("http://127.0.0.1:%d/mcp" % pd.port, key=key) as c:
        c.ok("connect")
        # Without network a session cannot install (the REST API's rule).
        r = c.call("create_session")
        sid0 = r["structuredContent"]["id"]
        r = c.call("install_packages", session_id=sid0, packages=["mcptiny"])
        assert r["isError"] is True and "network" in texts(r), r
        c.call("delete_session", session_id=sid0)
        r = c.call("create_session", network={"allow": ["other.test:443"]})
        sid = r["structuredContent"]["id"]
        try:
            r = c.call("install_packages", session_id=sid, packages=["mcptiny==2.5"])
            assert not r["isError"], r
            assert "mcptiny==2.5" in texts(r), r
            assert any("/simple/mcptiny" in p for p in index.requests)
            r = c.call("run_code", session_id=sid, code="import mcptiny; mcptiny.ANSWER")
            assert "[result] 42" in texts(r), r
            # A spec pip must never see (an option) is the REST API's 400, as isError.
            r = c.call("install_packages", session_id=sid, packages=["--index-url=http://x.test/"])
            assert r["isError"] is True and "bad_request" in texts(r), r
        finally:
            c.call("delete_session", session_id=sid)
