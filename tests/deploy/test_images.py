"""make service-images: what is in the images, and the recipe label that
skips a rebuild when nothing changed (the daemon image's covers both
binaries: a changed binary makes only ci/daemon stale)."""
import os
import shutil
import subprocess

from harness import ROOT
from deploy_lib import RUN, docker

BUILD = os.path.join(ROOT, "images", "service", "build.sh")
DAEMON_BIN = os.path.join(ROOT, "build", "ci-daemon")


def check(*names, env=None):
    full = dict(os.environ)
    full.update(env or {})
    r = subprocess.run([BUILD, "--check", *names], capture_output=True, text=True, timeout=120, env=full)
    return r.returncode, r.stdout.split("\n")


def test_a_changed_binary_makes_only_the_daemon_image_stale(tmp_path):
    rc, out = check()
    assert rc == 0 and out[:4] == ["current daemon", "current engine", "current redis", "current sandbox"], out
    changed = str(tmp_path / "ci-daemon")
    shutil.copy2(DAEMON_BIN, changed)
    with open(changed, "ab") as f:
        f.write(b"\0")
    rc, out = check("daemon", "engine", env={"CI_DAEMON_BIN": changed})
    assert rc == 1 and out[:2] == ["stale daemon", "current engine"], out


def test_the_daemon_image_holds_the_binaries_and_their_libraries_only():
    name = "ci15-images-%s-probe" % RUN
    script = ("ldd /usr/local/bin/ci-daemon /usr/local/bin/ci-ctl | grep -c 'not found' || true; "
              "ls /usr/local/bin; for c in gcc cc make python3 curl wget; do command -v $c; done; true")
    r = docker("run", "--rm", "--name", name, "--network", "none", "--entrypoint", "/bin/sh",
               "ci/daemon:latest", "-c", script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "ci-ctl", "ci-daemon"], r.stdout
    r = docker("run", "--rm", "--name", name, "--network", "none", "ci/daemon:latest", "--version")
    assert r.returncode == 0 and r.stdout.startswith("ci-daemon "), (r.stdout, r.stderr)
