"""tests/harness/engines.py: an engine of a test's own (ci/engine:latest),
driven by a daemon on the host through the socket in its host directory; a
session runs in it, not in the host's engine; stop() leaves nothing behind."""
from harness import Daemon, wait_for
from harness.engines import Engine, remove_engines
from deploy_lib import RUN, docker


def test_engine_of_its_own_runs_a_daemons_sessions(redis_server, tmpdir_session, engine_volume):
    run = RUN + "-eng"
    d = None
    try:
        eng = Engine(run, "a", data_volume=engine_volume.name)
        assert eng.docker("image", "inspect", "ci/python:latest").returncode == 0
        print("engines: sandbox image load %s ms (None: already in the volume)" % eng.load_time_ms())
        d = Daemon(redis_server, tmpdir_session, ["--pool-size", "0", *eng.daemon_args("n1")])
        status, s = d.api.request("POST", "/v1/sessions", body={})
        assert status == 201, s
        sid = s["id"]
        status, r = d.api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "y = 2"})
        assert status == 200 and r["status"] == "ok", r
        status, r = d.api.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "y ** 10"})
        assert r["result"] == "1024", r
        # the sandbox is the engine's, not the host's
        assert eng.docker("ps", "-q", "--filter", "label=ci.session=" + sid).stdout.split()
        assert not docker("ps", "-q", "--filter", "label=ci.session=" + sid).stdout.split()
        assert d.api.request("DELETE", "/v1/sessions/%s" % sid)[0] == 204
        wait_for(lambda: not eng.docker("ps", "-aq", "--filter", "label=ci.session=" + sid).stdout.split(),
                 60, interval=0.25, what="the session's container to go")
        d, finished = None, d
        finished.finish()  # before its engine goes
        eng.stop()
        assert not docker("ps", "-aq", "--filter", "label=ci.test.engine=" + run).stdout.split()
        # the shared image store outlives the engine; its own volumes do not
        assert not docker("volume", "ls", "-q", "--filter", "label=ci.test.engine=" + run).stdout.split()
    finally:
        if d is not None:
            d.finish()
        remove_engines(run)
