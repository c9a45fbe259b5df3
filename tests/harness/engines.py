"""Docker engines of a test's own: a ci/engine:latest container (make
service-images) per engine, so that several daemons under test can each
drive an engine of their own (the cluster's tests: three daemons, three
engines), instead of all sharing the host's.

  Engine(run_id, name, shared_dir=None)
      starts the container (docker run -d, labelled ci.test.engine=<run_id>
      and named ci-engine-<run_id>-<name>) and waits until its dockerd
      answers on `engine.socket`, a unix socket in a host directory of its
      own (`engine.socket_dir`), and the sandbox image is loaded from
      build/service-images/python.tar (the entrypoint loads it when missing;
      the tarball is `images/service/build.sh sandbox`'s). Its
      /var/lib/docker is a volume of its own (ci-engine-<run_id>-<name>-data),
      or `data_volume=NAME`, an existing one that is kept (a warm image store
      shared by engines started one after another, never at once).
  engine.daemon_args(node="d")
      the ci-daemon flags that drive this engine from a daemon on the host:
      --docker engine.socket, --state-dir `engine.shared_dir`/NODE (a host
      directory bind-mounted into the engine at the same path, because the
      engine bind-mounts each session's directory by the daemon's path),
      --workspace-backend tmpfs (the engine cannot see a loop mount the
      daemon makes in its own mount namespace). Pass them as a Daemon's
      extra_args; a later --state-dir wins over the harness's own.
  engine.docker(*args)   the docker CLI against this engine (CompletedProcess)
  engine.stop()          removes the container, its socket directory and its
                         own data volume (a shared data_volume is kept)
  remove_engines(run_id) removes every container and volume a run made, found
                         by its label: the finally of a test or a fixture

What an engine does not give a daemon on the host: the sandbox network of
sessions with an allowlist lives in the engine's network namespace, where a
host daemon's egress proxy cannot listen; sessions without network (the
default) are what a host daemon runs on it. A daemon that needs the
allowlist too runs in the engine's namespace (the compose files do that).

The container runs with what Docker in Docker needs here (no --privileged:
the host engine's bounding set lacks CAP_SYS_RESOURCE): every other
capability, seccomp and AppArmor unconfined, every device, the host's
/sys/fs/cgroup writable.
"""
import os
import shutil
import subprocess
import tempfile

from .daemon import ROOT
from .wait import wait_for

ENGINE_IMAGE = os.environ.get("CITEST_ENGINE_IMAGE", "ci/engine:latest")
IMAGES_DIR = os.environ.get("CITEST_SERVICE_IMAGES", os.path.join(ROOT, "build", "service-images"))
LABEL = "ci.test.engine"

DIND_FLAGS = ["--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
              "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
              "--device-cgroup-rule", "a *:* rwm", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"]


def _docker(*args, timeout=120, check=False):
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


class Engine:
    """One started engine (the constructor returns once it is ready)."""

    def __init__(self, run_id, name, shared_dir=None, data_volume=None, start_timeout=300):
        self.run_id = run_id
        self.name = "ci-engine-%s-%s" % (run_id, name)
        self.socket_dir = tempfile.mkdtemp(prefix="ci-engine-%s-" % name, dir="/tmp")
        self.socket = os.path.join(self.socket_dir, "docker.sock")
        self.shared_dir = shared_dir or tempfile.mkdtemp(prefix="ci-engine-state-", dir="/tmp")
        self._own_shared = shared_dir is None
        self._own_volume = data_volume is None
        self.data_volume = data_volume or self.name + "-data"
        self.container = None
        if not os.path.isfile(os.path.join(IMAGES_DIR, "python.tar.meta")):
            raise AssertionError("no sandbox tarball in %s: run make service-images" % IMAGES_DIR)
        try:
            if self._own_volume:
                _docker("volume", "create", "--label", "%s=%s" % (LABEL, run_id), self.data_volume, check=True)
            out = _docker("run", "-d", "--name", self.name, "--label", "%s=%s" % (LABEL, run_id),
                          *DIND_FLAGS,
                          "-v", "%s:/var/lib/docker" % self.data_volume,
                          "-v", "%s:/run/ci-engine" % self.socket_dir,
                          "-v", "%s:%s" % (self.shared_dir, self.shared_dir),
                          "-v", "%s:/images:ro" % IMAGES_DIR,
                          "--network", "none", ENGINE_IMAGE, check=True)
            self.container = out.stdout.strip()
            wait_for(self.ready, start_timeout, interval=0.2, what="engine %s to be ready" % self.name)
        except BaseException:
            self.stop()
            raise

    def ready(self):
        st = _docker("inspect", "-f", "{{.State.Running}}", self.container)
        if st.stdout.strip() != "true":
            raise AssertionError("engine %s exited:\n%s" % (self.name, self.logs()))
        return os.path.exists(os.path.join(self.socket_dir, "ready")) and \
            self.docker("version", "--format", "{{.Server.Version}}").returncode == 0

    def docker(self, *args, timeout=120):
        return subprocess.run(["docker", "-H", "unix://" + self.socket, *args], capture_output=True,
                              text=True, timeout=timeout)

    def logs(self):
        return _docker("logs", self.container or self.name).stderr[-6000:]

    def load_time_ms(self):
        """How long the entrypoint took to load the sandbox image (None: it
        was present already)."""
        for line in self.logs().splitlines():
            if line.startswith("ci-engine: loaded ") and line.endswith(" ms"):
                return int(line.split()[-2])
        return None

    def daemon_args(self, node="d"):
        state = os.path.join(self.shared_dir, node)
        os.makedirs(state, exist_ok=True)
        return ["--docker", self.socket, "--state-dir", state, "--workspace-backend", "tmpfs"]

    def stop(self):
        if self.container or _docker("inspect", self.name).returncode == 0:
            _docker("rm", "-f", "-v", self.container or self.name, timeout=180)
        self.container = None
        if self._own_volume:
            _docker("volume", "rm", "-f", self.data_volume)
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        if self._own_shared:
            subprocess.run(["rm", "-rf", self.shared_dir])


def remove_engines(run_id):
    """Every container and volume labelled with this run's id, removed."""
    sel = "label=%s=%s" % (LABEL, run_id)
    ids = _docker("ps", "-aq", "--filter", sel).stdout.split()
    if ids:
        _docker("rm", "-f", "-v", *ids, timeout=180)
    vols = _docker("volume", "ls", "-q", "--filter", sel).stdout.split()
    if vols:
        _docker("volume", "rm", "-f", *vols)
