"""The compose suite's helpers (tests/deploy/): docker-compose projects of the
run's own, found again and removed by their project label even when a test
fails, and the one engine data volume the suite's projects share.

  RUN                  this run's id; every project is ci15-images-<RUN>-<what>
  Project(name, file)  a docker-compose project: .up(**env), .compose(*args),
                       .exec(service, *argv), .down() (down -v, then a check by
                       label that nothing of it is left: containers, networks,
                       volumes)
  EngineVolume         the engine's /var/lib/docker for every project of the
                       run (one after another, never at once): the sandbox
                       image is loaded into it once, by the first engine.
                       Marked external in an override file, so `down -v`
                       keeps it; the suite removes it by its label at the end.
"""
import json
import os
import subprocess
import tempfile
import uuid

from harness import ROOT, wait_for

RUN = uuid.uuid4().hex[:8]
LABEL = "ci15-images.run"
COMPOSE_DIR = os.path.join(ROOT, "deploy", "compose")
IMAGES_DIR = os.environ.get("CITEST_SERVICE_IMAGES", os.path.join(ROOT, "build", "service-images"))


def docker(*args, timeout=120, check=False):
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


class EngineVolume:
    def __init__(self):
        self.name = "ci15-images-%s-engine-data" % RUN
        docker("volume", "create", "--label", "%s=%s" % (LABEL, RUN), self.name, check=True)
        fd, self.override = tempfile.mkstemp(prefix="ci15-images-%s-" % RUN, suffix=".yml")
        with os.fdopen(fd, "w") as f:
            f.write("volumes:\n  engine-data:\n    external: true\n    name: %s\n" % self.name)

    def remove(self):
        vols = docker("volume", "ls", "-q", "--filter", "label=%s=%s" % (LABEL, RUN)).stdout.split()
        if vols:
            docker("volume", "rm", "-f", *vols)
        os.unlink(self.override)


def project_leftovers(project):
    """What docker still holds of a compose project, by its label."""
    sel = "label=com.docker.compose.project=%s" % project
    return {
        "containers": docker("ps", "-aq", "--filter", sel).stdout.split(),
        "networks": docker("network", "ls", "-q", "--filter", sel).stdout.split(),
        "volumes": docker("volume", "ls", "-q", "--filter", sel).stdout.split(),
    }


class Project:
    def __init__(self, what, compose_file, volume):
        self.name = "ci15-images-%s-%s" % (RUN, what)
        self.files = [os.path.join(COMPOSE_DIR, compose_file), volume.override]
        self.env = {"CI_IMAGES_DIR": IMAGES_DIR}

    def compose(self, *args, env=None, timeout=600, check=True):
        full = dict(os.environ)
        full.update(self.env)
        full.update(env or {})
        argv = ["docker-compose", "--ansi", "never", "-p", self.name]
        for f in self.files:
            argv += ["-f", f]
        r = subprocess.run(argv + list(args), capture_output=True, text=True, timeout=timeout, env=full)
        if check and r.returncode != 0:
            raise AssertionError("docker-compose %s: rc %d\n%s\n%s\n%s" % (
                " ".join(args), r.returncode, r.stdout[-3000:], r.stderr[-6000:], self.logs()))
        return r

    def up(self, *services, **env):
        self.env.update(env)
        return self.compose("up", "-d", *services)

    def exec(self, service, *argv, env=None, timeout=120, input=None):  # noqa: A002
        full = dict(os.environ)
        full.update(self.env)
        cmd = ["docker-compose", "--ansi", "never", "-p", self.name]
        for f in self.files:
            cmd += ["-f", f]
        cmd += ["exec", "-T"]
        for k, v in (env or {}).items():
            cmd += ["-e", "%s=%s" % (k, v)]
        cmd += [service, *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full, input=input)

    def container(self, service):
        ids = docker("ps", "-aq", "--filter", "label=com.docker.compose.project=%s" % self.name,
                     "--filter", "label=com.docker.compose.service=%s" % service).stdout.split()
        assert len(ids) == 1, (service, ids)
        return ids[0]

    def inspect(self, service):
        return json.loads(docker("inspect", self.container(service), check=True).stdout)[0]

    def health(self, service):
        st = self.inspect(service)["State"]
        return (st.get("Health") or {}).get("Status"), st["Status"]

    def wait_healthy(self, service, timeout=300):
        def healthy():
            health, status = self.health(service)
            if status in ("exited", "dead"):
                raise AssertionError("%s exited:\n%s" % (service, self.logs(service)))
            return health == "healthy"
        wait_for(healthy, timeout, interval=0.25, what="%s of %s to be healthy" % (service, self.name))

    def logs(self, *services):
        full = dict(os.environ)
        full.update(self.env)
        cmd = ["docker-compose", "--ansi", "never", "-p", self.name]
        for f in self.files:
            cmd += ["-f", f]
        r = subprocess.run(cmd + ["logs", "--no-color", *services], capture_output=True, text=True,
                           timeout=120, env=full)
        return r.stdout[-8000:]

    def sandbox_load_ms(self):
        """The engine's load of the sandbox image tarball, in ms (None: the
        image was in the engine's volume already)."""
        for line in self.logs("engine").splitlines():
            if "ci-engine: loaded " in line and line.endswith(" ms"):
                return int(line.split()[-2])
        return None

    def inner_docker(self, *args):
        """The docker CLI against the project's engine (the sandboxes' one)."""
        return self.exec("engine", "docker", "-H", "unix:///run/ci-engine/docker.sock", *args)

    def down(self):
        """down -v; then nothing of the project may be left (by its label).
        Containers left by a failed down are removed by label, so the
        machine is clean whatever happened, and the check still fails."""
        r = self.compose("down", "-v", "--remove-orphans", "-t", "45", check=False)
        left = project_leftovers(self.name)
        if any(left.values()):
            if left["containers"]:
                docker("rm", "-f", "-v", *left["containers"], timeout=180)
            if left["networks"]:
                docker("network", "rm", *left["networks"])
            if left["volumes"]:
                docker("volume", "rm", "-f", *left["volumes"])
        assert r.returncode == 0, r.stderr[-3000:]
        assert not any(left.values()), left
