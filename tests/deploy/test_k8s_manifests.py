"""deploy/k8s (issue 15, item 4): every manifest validates offline against
the Kubernetes schemas (tests/k8s/validate.mjs, pinned kubernetes-models),
every kustomization resolves, and the two shapes hold what the daemon needs
(the facts docs/deploy.md explains): the state dir at the same path in the
daemon and the engine, the engine's socket shared, the pid namespace the
runner check needs, the drain within the grace period, and configs whose
every key is an option of the daemon.

No cluster here: `kubectl kustomize` (when kubectl is installed) renders
each shape offline, and the render is validated too.
"""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from harness.daemon import DAEMON_BIN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(ROOT, "deploy", "k8s")
VALIDATE = os.path.join(ROOT, "tests", "k8s", "validate.mjs")
SHAPES = ["sidecar", "service", "service/external-redis"]

pytestmark = pytest.mark.skipif(
    not os.path.isdir(os.path.join(ROOT, "tests", "k8s", "node_modules", "kubernetes-models")),
    reason="tests/k8s/node_modules missing: run deploy/setup.sh (npm ci in tests/k8s)")


def validate(*args, stdin=None):
    r = subprocess.run(["node", VALIDATE, *args], input=stdin, capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    m = re.search(r"k8s manifests: (\d+) passed, (\d+) failed", r.stdout)
    assert m, r.stdout + r.stderr
    return r.returncode, int(m.group(1)), int(m.group(2)), r.stdout


def test_every_manifest_validates():
    rc, passed, failed, out = validate()
    assert rc == 0 and failed == 0 and passed >= 15, out


POD = """apiVersion: v1
kind: Pod
metadata:
  name: broken
spec:
  containers:
    - name: c
      image: ci/daemon:latest
"""

BROKEN = {
    "a port as a string": (POD + "      ports:\n        - containerPort: \"8080\"\n",
                           "containerPort must be integer"),
    "a container without its name": (POD.replace("    - name: c\n      image", "    - image"),
                                     "must have required property name"),
    "a kind that does not exist": (POD.replace("kind: Pod", "kind: Pood"), "unknown kind v1 Pood"),
    "a key given twice": (POD.replace("  name: broken\n", "  name: broken\n  name: again\n"),
                          "Map keys must be unique"),
    "a DaemonSet without a selector": ("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n"
                                       "  name: d\nspec:\n  template:\n    spec:\n"
                                       "      containers: []\n",
                                       "must have required property selector"),
    "a probe port of a wrong type": (POD + "      livenessProbe:\n        httpGet:\n"
                                     "          path: /healthz\n          port: [8080]\n",
                                     "port"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_manifest_fails(case):
    text, why = BROKEN[case]
    rc, passed, failed, out = validate("-", stdin=text)
    assert rc == 1 and failed == 1 and why in out, out
    rc, _, _, out = validate("-", stdin=POD)
    assert rc == 0, out  # the same document, unbroken, passes


def test_a_kustomization_with_a_missing_file_fails(tmp_path):
    (tmp_path / "pod.yaml").write_text(POD)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - pod.yaml\n  - gone.yaml\n")
    rc, passed, failed, out = validate(str(tmp_path))
    assert rc == 1 and "resources gone.yaml does not exist" in out, out
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - pod.yaml\n")
    assert validate(str(tmp_path))[0] == 0


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_renders_and_validates(shape):
    r = subprocess.run(["kubectl", "kustomize", os.path.join(K8S, shape)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rc, passed, failed, out = validate("-", stdin=r.stdout)
    assert rc == 0 and passed >= 2, out


def docs(*parts):
    out = []
    for root, _, files in os.walk(os.path.join(K8S, *parts)):
        for f in sorted(files):
            if f.endswith(".yaml") and f != "kustomization.yaml":
                out += [d for d in yaml.safe_load_all(open(os.path.join(root, f))) if d]
    return out


def find(all_docs, kind, name):
    for d in all_docs:
        if d["kind"] == kind and d["metadata"]["name"] == name:
            return d
    raise AssertionError("no %s %s" % (kind, name))


def conf(cm):
    """key -> value of the ci-daemon.conf in a ConfigMap."""
    out = {}
    for line in cm["data"]["ci-daemon.conf"].splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def daemon_keys():
    out = subprocess.run([DAEMON_BIN, "--help"], capture_output=True, text=True, timeout=30)
    return set(re.findall(r"^  --([a-z0-9-]+)", out.stdout, re.M))


def mounts(container, spec):
    """mountPath -> the volume's source (emptyDir name, hostPath path, ...)."""
    vols = {v["name"]: v for v in spec["volumes"]}
    out = {}
    for m in container.get("volumeMounts", []):
        v = vols[m["name"]]
        out[m["mountPath"]] = ("hostPath", v["hostPath"]["path"]) if "hostPath" in v else (
            "volume", m["name"])
    return out


def container(spec, name):
    return next(c for c in spec["containers"] if c["name"] == name)


@pytest.mark.parametrize("name", ["ci-sidecar-config", "ci-daemon-config"])
def test_configmap_keys_are_daemon_options(name):
    cm = find(docs(), "ConfigMap", name)
    known = daemon_keys()
    unknown = set(conf(cm)) - known
    assert not unknown, "keys ci-daemon does not have: %s" % sorted(unknown)


def test_sidecar_pod_shares_what_the_daemon_needs():
    all_docs = docs("sidecar")
    dep = find(all_docs, "Deployment", "agent")
    spec = dep["spec"]["template"]["spec"]
    cfg = conf(find(all_docs, "ConfigMap", "ci-sidecar-config"))
    daemon, engine = container(spec, "ci-daemon"), container(spec, "engine")
    dm, em = mounts(daemon, spec), mounts(engine, spec)
    # the state dir: one emptyDir at the same path in both
    assert dm[cfg["state-dir"]] == em[cfg["state-dir"]]
    # the engine's socket: the daemon's docker= is in a directory the engine
    # serves on (--host) and both mount
    sock_dir = os.path.dirname(cfg["docker"])
    assert dm[sock_dir] == em[sock_dir]
    assert "--host=unix://%s" % cfg["docker"] in engine["args"]
    # the API on a unix socket in a directory the agent shares
    assert cfg["listen"].startswith("unix:")
    api_dir = os.path.dirname(cfg["listen"][5:])
    assert mounts(container(spec, "agent"), spec)[api_dir] == dm[api_dir]
    # the runner check needs to see the engine's processes
    assert spec["shareProcessNamespace"] is True
    # probes and the drain speak to the socket the daemon listens on
    for probe in ("livenessProbe", "readinessProbe"):
        assert cfg["listen"] in " ".join(daemon[probe]["exec"]["command"])
    pre = " ".join(daemon["lifecycle"]["preStop"]["exec"]["command"])
    assert "drain" in pre and cfg["listen"] in pre
    # the engine's security context: the environment fact of issue 15
    sc = engine["securityContext"]
    assert sc["capabilities"] == {"add": ["ALL"], "drop": ["SYS_RESOURCE"]}
    assert sc["seccompProfile"]["type"] == "Unconfined"
    assert sc["appArmorProfile"]["type"] == "Unconfined"
    assert not sc.get("privileged", False)
    # the grace period covers the drain and the shutdown (main.c)
    assert spec["terminationGracePeriodSeconds"] >= int(cfg["drain-timeout-s"]) + 20 + 5
    # requests on every container
    assert all(c["resources"]["requests"] for c in spec["containers"])


def test_service_daemonset_holds_what_the_daemon_needs():
    all_docs = docs("service", "base")
    ds = find(all_docs, "DaemonSet", "ci-daemon")
    spec = ds["spec"]["template"]["spec"]
    cfg = conf(find(all_docs, "ConfigMap", "ci-daemon-config"))
    daemon = container(spec, "ci-daemon")
    dm = mounts(daemon, spec)
    # the state dir: a host path at the same path in the pod
    assert dm[cfg["state-dir"]] == ("hostPath", cfg["state-dir"])
    assert dm[cfg["docker"]] == ("hostPath", cfg["docker"])
    # the egress proxy and the firewall chain: the node's network namespace;
    # the runner check: the node's pids
    assert spec["hostNetwork"] is True and spec["hostPID"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    # sandbox nodes only
    taint = spec["tolerations"][0]
    assert spec["nodeSelector"] == {taint["key"]: taint["value"]}
    # a non-loopback listener: keys and TLS, each file mounted
    assert cfg["admin-key-file"] and cfg["tls-cert"] and cfg["tls-key"]
    for key in ("admin-key-file", "tls-cert", "tls-key", "cluster-secret-file", "peer-ca-file"):
        assert os.path.dirname(cfg[key]) in dm, key
    env = {e["name"]: e for e in daemon["env"]}
    assert env["CID_NODE"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert "CID_REDIS" in env and "CID_ADVERTISE_URL" in env
    assert spec["terminationGracePeriodSeconds"] >= int(cfg["drain-timeout-s"]) + 20 + 5
    # the node-level settings: an init container running node-setup.sh
    assert spec["initContainers"][0]["command"][-1].endswith("node-setup.sh")
    # and the rest of the shape
    kinds = {d["kind"] for d in all_docs}
    assert {"Namespace", "Service", "PodDisruptionBudget", "ConfigMap", "Secret"} <= kinds
    assert "StatefulSet" in {d["kind"] for d in docs("service")}  # Redis, not in external-redis
    ext = yaml.safe_load(open(os.path.join(K8S, "service", "external-redis", "kustomization.yaml")))
    assert ext["resources"] == ["../base"]


@pytest.mark.parametrize("name", ["ci-sidecar-config", "ci-daemon-config"])
def test_configmap_config_runs_a_daemon(make_daemon, tmp_path, name):
    """The ConfigMap's ci-daemon.conf, loaded by a real daemon that serves a
    session with it. Flags (which beat the file) put it on this machine: the
    harness's listener, Redis, prefix and state dir, the host's engine, and
    no key, certificate or secret files (the pod's Secrets are not here)."""
    cm = find(docs(), "ConfigMap", name)
    path = tmp_path / "ci-daemon.conf"
    path.write_text(cm["data"]["ci-daemon.conf"])
    d = make_daemon("--config", str(path), "--docker", "/var/run/docker.sock",
                    "--tls-cert", "", "--tls-key", "", "--admin-key-file", "",
                    "--cluster-secret-file", "", "--peer-ca-file", "", "--pool-size", "0")
    s = d.api.create()
    try:
        assert d.api.exec(s["id"], "print('from %s')" % name)["stdout"] == "from %s\n" % name
    finally:
        d.api.delete(s["id"])
    log = d.read_log()
    assert "workspace: /workspace is a tmpfs" in log  # the file's backend
    # the file's log-format = json (the harness sets no format)
    assert all(ln.startswith("{") for ln in log.splitlines() if ln.strip()), log[:500]


def test_sidecar_probes_and_prestop_work_on_a_real_daemon(redis_server, tmp_path):
    """The sidecar's probe and preStop commands, taken from deployment.yaml
    as they are (only /run/ci moved to a directory of the test's own), run
    against a real daemon listening on a unix socket: readiness and liveness
    pass; the preStop drain returns only once the daemon has exited (by
    itself, status 0, after "drain requested": kubelet's SIGTERM would come
    next, and a second stop signal cuts a drain short), and leaves the
    marker the engine's preStop waits for."""
    import uuid

    from harness.daemon import CTL_BIN, remove_state_dir
    from harness.procfs import stop_process
    from harness.wait import wait_for

    spec = find(docs("sidecar"), "Deployment", "agent")["spec"]["template"]["spec"]
    daemon, engine = container(spec, "ci-daemon"), container(spec, "engine")
    api_dir = tmp_path / "run-ci"
    api_dir.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ci-ctl").symlink_to(os.path.abspath(CTL_BIN))
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]))

    def run(cmd, timeout=30):
        cmd = [c.replace("/run/ci/", "%s/" % api_dir) for c in cmd]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)

    run_id = uuid.uuid4().hex[:10]
    prefix = "citest-%s:" % run_id
    state = tempfile_dir()
    log_path = tmp_path / "daemon.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([DAEMON_BIN, "--listen", "unix:%s/ci.sock" % api_dir,
                                 "--redis", redis_server.url, "--state-dir", state,
                                 "--key-prefix", prefix, "--node", "citest-" + run_id,
                                 "--pool-size", "0"], stdout=log, stderr=subprocess.STDOUT)
    try:
        ready = daemon["readinessProbe"]["exec"]["command"]
        wait_for(lambda: run(ready).returncode == 0, 30, what="the readiness probe")
        assert run(daemon["livenessProbe"]["exec"]["command"]).returncode == 0
        assert run(daemon["startupProbe"]["exec"]["command"]).returncode == 0
        pre = run(daemon["lifecycle"]["preStop"]["exec"]["command"], timeout=120)
        assert pre.returncode == 0, pre.stderr
        assert proc.poll() == 0, proc.poll()  # gone before preStop returned
        assert (api_dir / "drained").exists()
        text = log_path.read_text()
        assert "drain requested through the API" in text and "exiting now" not in text, text
        # the engine's preStop returns at once now; the liveness probe fails
        assert run(engine["lifecycle"]["preStop"]["exec"]["command"], timeout=10).returncode == 0
        assert run(daemon["livenessProbe"]["exec"]["command"]).returncode != 0
    finally:
        stop_process(proc, timeout=30)
        remove_state_dir(state)
        for k in redis_server.cli("--scan", "--pattern", prefix + "*").split():
            redis_server.cli("DEL", k)


def tempfile_dir():
    """A state dir short enough for the daemon (60 bytes)."""
    import tempfile
    return tempfile.mkdtemp(prefix="cit-", dir="/tmp")
