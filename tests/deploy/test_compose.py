"""deploy/compose/docker-compose.yml brought up under a project of the run's
own: the API on a published loopback port with an admin key, a session end
to end, the sandbox hardened inside the inner engine, then down -v and
nothing left of the project."""
import os
import ssl
import subprocess
import time

from harness import Client, free_port, wait_for
from deploy_lib import RUN, Project, docker

ADMIN = "admin-ci15-images-" + RUN + "-" + "k" * 24


def admin_key_file(tmp_path):
    path = tmp_path / "admin.key"
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(ADMIN + "\n")
    return str(path)


def make_cert(tmp_path):
    """A self-signed certificate for 127.0.0.1 (its own CA): (cert, key)."""
    cert, key = str(tmp_path / "tls.pem"), str(tmp_path / "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_compose_service_runs_a_session(tmp_path, engine_volume):
    p = Project("svc", "docker-compose.yml", engine_volume)
    port = free_port()
    cert, key = make_cert(tmp_path)
    tls = ssl.create_default_context(cafile=cert)
    try:
        t0 = time.monotonic()
        p.up(CI_PORT=str(port), CI_ADMIN_KEY_FILE=admin_key_file(tmp_path), CI_TLS_CERT=cert, CI_TLS_KEY=key)
        api = Client(port, ssl_context=tls)

        def ready():
            if p.health("daemon")[1] in ("exited", "restarting", "dead"):
                raise AssertionError("the daemon stopped:\n" + p.logs("daemon"))
            return api.request("GET", "/readyz", timeout=2)[0] == 200
        wait_for(ready, 300, interval=0.25, what="the compose service's /readyz", ignore=(OSError,))
        p.wait_healthy("daemon", timeout=60)  # its healthcheck (ci-ctl health over TLS) passes
        print("compose: up -d to /readyz %.1f s, sandbox image load %s ms" % (time.monotonic() - t0, p.sandbox_load_ms()))
        # API keys are on (the API listens beyond loopback in the engine's
        # namespace): no key, no session
        assert api.request("POST", "/v1/sessions", body={})[0] == 401
        admin = Client(port, api_key=ADMIN, ssl_context=tls)
        status, key = admin.request("POST", "/v1/admin/keys", body={"tenant": "acme"})
        assert status == 201, key
        c = Client(port, api_key=key["key"], ssl_context=tls)
        status, s = c.request("POST", "/v1/sessions", body={"limits": {"memory_mb": 256, "pids": 64}})
        assert status == 201, s
        sid = s["id"]
        status, r = c.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "x = 41"})
        assert status == 200 and r["status"] == "ok", r
        status, r = c.request("POST", "/v1/sessions/%s/exec" % sid, body={"code": "x + 1"})
        assert status == 200 and r["result"] == "42" and r["kernel"] == "preserved", r
        body = b"compose\x00bytes\n" * 100
        status, doc = c.request("PUT", "/v1/sessions/%s/files/data/in.bin" % sid, raw=body)
        assert status == 201 and doc["size"] == len(body), doc
        r = c.send("GET", "/v1/sessions/%s/files/data/in.bin" % sid)
        assert r.status == 200 and r.body == body
        # the sandbox, in the inner engine: no network but loopback, limits
        status, r = c.request("POST", "/v1/sessions/%s/exec" % sid,
                              body={"code": "import os; sorted(os.listdir('/sys/class/net'))"})
        assert r["result"] == "['lo']", r
        ids = p.inner_docker("ps", "-q", "--filter", "label=ci.session=" + sid).stdout.split()
        assert len(ids) == 1, ids
        fmt = ("{{.HostConfig.NetworkMode}} {{.HostConfig.Memory}} {{.HostConfig.PidsLimit}} "
               "{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}}")
        mode, memory, pids, ro, capdrop = p.inner_docker("inspect", "-f", fmt, ids[0]).stdout.split(None, 4)
        assert (mode, int(memory), int(pids), ro) == ("none", 256 << 20, 64, "true")
        assert "ALL" in capdrop
        # the sandbox is the inner engine's, not the host's
        assert not docker("ps", "-q", "--filter", "label=ci.session=" + sid).stdout.split()
        assert c.request("DELETE", "/v1/sessions/%s" % sid)[0] == 204
        wait_for(lambda: not p.inner_docker("ps", "-aq", "--filter", "label=ci.session=" + sid).stdout.split(),
                 60, interval=0.25, what="the session's container to go")
        assert c.request("GET", "/v1/sessions/%s" % sid)[0] == 410
    finally:
        t1 = time.monotonic()
        p.down()
        print("compose: down -v %.1f s" % (time.monotonic() - t1))
