"""deploy/compose/sidecar.yml: the Kubernetes sidecar pod reproduced. The
agent container shares the pod's network namespace and talks to ci-daemon on
127.0.0.1, then, with the daemon recreated on a unix socket in the shared
volume (the emptyDir), over that; the probes (compose healthchecks running
ci-ctl health) pass; `docker-compose stop` drains: a running execution ends
with its result, and the next daemon adopts the session, variables kept."""
import subprocess
import threading
import time

from harness import wait_for
from deploy_lib import Project

UNIX = "unix:/run/ci/api.sock"


def ctl(p, *args, input=None, timeout=120):  # noqa: A002
    """ci-ctl in the agent container (CICTL_SERVER: the pod's API)."""
    return p.exec("agent", "ci-ctl", *args, input=input, timeout=timeout)


def ok(r):
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r.stdout


def test_sidecar_pod_loopback_unix_socket_probes_and_drain(engine_volume):
    p = Project("sidecar", "sidecar.yml", engine_volume)
    try:
        t0 = time.monotonic()
        p.up()
        p.wait_healthy("daemon")  # the readiness probe, ci-ctl health, passed
        print("sidecar: up -d to healthy %.1f s, sandbox image load %s ms" % (time.monotonic() - t0, p.sandbox_load_ms()))
        # nothing is published: the API is the pod's own
        assert not p.inspect("engine")["NetworkSettings"]["Ports"]
        assert "readyz: ok" in ok(ctl(p, "health"))
        # a session over the pod's loopback
        sid = ok(ctl(p, "create")).strip()
        assert ok(ctl(p, "exec", sid, "x = 6 * 7")) == ""
        assert ok(ctl(p, "exec", sid, "x")).strip() == "42"
        assert ok(ctl(p, "put", sid, "-", "note.txt", input="from the agent\n")).split()[0] == "note.txt"
        assert ok(ctl(p, "get", sid, "note.txt", "-")) == "from the agent\n"

        # drain on stop: an execution running at SIGTERM finishes with its
        # result (drain-timeout-s 30, stop_grace_period 40 s)
        slow = {}

        def run_slow():
            slow["r"] = ctl(p, "exec", sid, "import time\ntime.sleep(4)\n'drained ' + str(x)")
        th = threading.Thread(target=run_slow)
        th.start()
        wait_for(lambda: '"state":"busy"' in ctl(p, "--json", "show", sid).stdout.replace(" ", ""), 30,
                 interval=0.1, what="the slow execution to be running")
        p.compose("stop", "daemon")
        th.join(60)
        assert ok(slow["r"]).strip() == "'drained 42'"
        st = p.inspect("daemon")["State"]
        assert (st["Status"], st["ExitCode"]) == ("exited", 0), st
        log = p.logs("daemon")
        assert "SIGTERM: draining" in log or "draining" in log, log
        assert "sessions keep running for the next daemon to adopt" in log, log

        # the same pod with the API on a unix socket in the shared volume; the
        # new daemon adopts the session, its variables kept
        p.up("daemon", "agent", CI_SIDECAR_LISTEN=UNIX, CI_SIDECAR_SERVER=UNIX)
        p.wait_healthy("daemon")
        assert p.exec("agent", "sh", "-c", "test -S /run/ci/api.sock").returncode == 0
        assert "readyz: ok" in ok(ctl(p, "health"))
        assert ok(ctl(p, "exec", sid, "x + 1")).strip() == "43"
        ok(ctl(p, "rm", sid))
    finally:
        p.down()
