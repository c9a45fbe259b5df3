"""deploy/systemd/ci-daemon.service (issue 15, item 1): systemd accepts it,
it says every sandboxing directive docs/deploy.md claims, its limits match
what the daemon does (the drain, the descriptor budget), and the daemon
really serves inside its capability bounding set with no_new_privs.

systemd is not PID 1 on the machines the tests run on (no systemd-run), so
the namespace directives (ProtectSystem=, PrivateTmp=, ...) are checked by
`systemd-analyze verify` and `security --offline`, not by running the unit;
the capability set and NoNewPrivileges are checked for real, with setpriv.
"""
import os
import re
import shutil
import subprocess

import pytest

from harness.daemon import DAEMON_BIN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNIT = os.path.join(ROOT, "deploy", "systemd", "ci-daemon.service")
DROP_IN = os.path.join(ROOT, "deploy", "systemd", "loop-workspaces.conf")
INSTALLED_BIN = "/usr/local/bin/ci-daemon"

needs_systemd_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                           reason="systemd-analyze is not installed")


def directives(text):
    """[(key, value)] of a unit's assignments, in order (comments out)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;[" or "=" not in line:
            continue
        k, _, v = line.partition("=")
        out.append((k.strip(), v.strip()))
    return out


def last(pairs, key):
    vals = [v for k, v in pairs if k == key]
    assert vals, "the unit has no %s=" % key
    return vals[-1]


def unit_copy(tmp_path, text, name="ci-daemon.service"):
    """The unit with ExecStart on the built binary (verify checks that the
    program exists), in a directory of the test's own."""
    assert INSTALLED_BIN in text
    path = tmp_path / name
    path.write_text(text.replace(INSTALLED_BIN, os.path.abspath(DAEMON_BIN)))
    return str(path)


def verify(path):
    return subprocess.run(["systemd-analyze", "verify", "--man=no", path],
                          capture_output=True, text=True, timeout=60)


@needs_systemd_analyze
def test_unit_passes_systemd_analyze_verify(tmp_path):
    r = verify(unit_copy(tmp_path, open(UNIT).read()))
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr


@needs_systemd_analyze
def test_unit_with_the_loop_workspaces_drop_in_verifies(tmp_path):
    """The drop-in's assignments, appended, are what systemd would merge."""
    text = open(UNIT).read() + "\n" + open(DROP_IN).read()
    r = verify(unit_copy(tmp_path, text))
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    pairs = directives(text)
    assert last(pairs, "ProtectSystem") == "no" and last(pairs, "PrivateTmp") == "no"
    caps = set()
    for k, v in pairs:
        caps |= set(v.split()) if k == "CapabilityBoundingSet" else set()
    assert caps == CAPS | {"CAP_SYS_ADMIN", "CAP_SYS_PTRACE"}, caps
    assert last(pairs, "NoNewPrivileges") == "yes"  # what needs no namespace stays


@needs_systemd_analyze
def test_verify_rejects_a_broken_unit(tmp_path):
    """The check above can fail: a misspelt directive and a bad value."""
    text = open(UNIT).read().replace("ProtectHome=yes", "ProtectHome=sometimes")
    text = text.replace("NoNewPrivileges=yes", "NoNewPrivilege=yes")
    r = verify(unit_copy(tmp_path, text))
    # verify still exits 0 on both ("ignoring"): hence the clean stderr above
    assert "Unknown key 'NoNewPrivilege'" in r.stderr and "sometimes" in r.stderr, r.stderr


CLAIMED = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "RestrictRealtime": "yes",
    "RestrictSUIDSGID": "yes",
    "SystemCallArchitectures": "native",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    "RestrictNamespaces": "~time",
    "DevicePolicy": "closed",
    "StateDirectory": "ci",
    "RuntimeDirectory": "ci",
    "KillSignal": "SIGTERM",
    "KillMode": "mixed",
    "Restart": "on-failure",
    "ExecReload": "/bin/kill -HUP $MAINPID",
    "UMask": "0077",
    "Type": "exec",
}

# What the daemon really uses (docs/deploy.md says why each one).
CAPS = {"CAP_CHOWN", "CAP_FOWNER", "CAP_KILL", "CAP_SETUID", "CAP_SETGID", "CAP_NET_ADMIN"}


def test_unit_says_every_directive_it_claims():
    pairs = directives(open(UNIT).read())
    wrong = {k: (dict(pairs).get(k), v) for k, v in CLAIMED.items() if dict(pairs).get(k) != v}
    assert not wrong, "directives missing or different (have, want): %s" % wrong
    assert set(last(pairs, "CapabilityBoundingSet").split()) == CAPS
    assert last(pairs, "AmbientCapabilities") == ""
    assert "docker.service" in last(pairs, "After") and "redis-server.service" in last(pairs, "After")
    assert "docker.service" in last(pairs, "Wants") and "redis-server.service" in last(pairs, "Wants")
    assert last(pairs, "ExecStart").endswith("--config /etc/ci/ci-daemon.conf")
    assert int(last(pairs, "StartLimitBurst")) >= 1 and last(pairs, "StartLimitIntervalSec")
    assert {"/dev/loop-control rw", "block-loop rw"} <= {v for k, v in pairs if k == "DeviceAllow"}
    assert last(pairs, "ProtectSystem") == "strict" and "-/run/xtables.lock" in last(pairs, "ReadWritePaths")


def seconds(v):
    m = re.fullmatch(r"(\d+)(s|min)?", v)
    assert m, v
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def example_value(key):
    text = open(os.path.join(ROOT, "deploy", "ci-daemon.conf.example")).read()
    return re.search(r"^%s = (.*)$" % re.escape(key), text, re.M).group(1)


def test_stop_timeout_covers_the_drain_and_the_shutdown():
    """SIGTERM: executions get drain-timeout-s, then the shutdown at most
    SHUTDOWN_LIMIT_S (main.c). A shorter TimeoutStopSec would SIGKILL a
    daemon that is still releasing its pool."""
    main_c = open(os.path.join(ROOT, "daemon", "main.c")).read()
    limit = int(re.search(r"#define SHUTDOWN_LIMIT_S (\d+)", main_c).group(1))
    drain = int(example_value("drain-timeout-s"))
    stop = seconds(last(directives(open(UNIT).read()), "TimeoutStopSec"))
    assert stop >= drain + limit + 5, (stop, drain, limit)


def test_nofile_limit_covers_the_descriptor_budget():
    """max-sessions sessions with network, each with its IPC descriptors and
    all of its egress tunnels, plus every API connection (and the probes'
    reserve past max-connections) and the reserve."""
    fdh = open(os.path.join(ROOT, "daemon", "fdbudget.h")).read()
    per_session = int(re.search(r"#define FDBUDGET_SESSION_FDS (\d+)", fdh).group(1))
    egress_c = open(os.path.join(ROOT, "daemon", "egress.c")).read()
    tunnels = int(re.search(r"#define MAX_CONNS_PER_SESSION (\d+)", egress_c).group(1))
    need = (int(example_value("max-sessions")) * (per_session + 2 * tunnels)
            + int(example_value("max-connections")) + int(example_value("http-reserved-conns"))
            + int(example_value("fd-reserve")))
    need += need // 16  # the budget's margin for API connections (fdbudget_margin)
    have = int(last(directives(open(UNIT).read()), "LimitNOFILE"))
    assert have >= need, (have, need)


@needs_systemd_analyze
def test_security_exposure_stays_ok(tmp_path):
    """systemd's own score of the sandboxing (0 best, 10 none): 4.6 when
    written; a change that drops directives shows here."""
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                        unit_copy(tmp_path, open(UNIT).read())],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for ci-daemon.service: ([\d.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 5.0, r.stdout


# The unit's mount namespace, made by hand (util-linux unshare and mount, as
# root) in the process that then execs setpriv and the daemon, so the
# harness's pid stays the daemon's: private propagation, every mount
# read-only (ProtectSystem=strict) but /proc, /sys and /dev, an empty /tmp
# (PrivateTmp), empty /home and /root (ProtectHome), and, moved into the new
# /tmp, the state dir writable (StateDirectory; the harness's is under /tmp)
# and the test's own files readable (as /etc/ci would be).
MOUNT_NS_SH = r"""set -e
state=; prev=
for a in "$@"; do [ "$prev" = --state-dir ] && state=$a; prev=$a; done
mount --make-rprivate /
stash=/dev/ci-deploy-test-$$
mkdir -p $stash/state $stash/files
mount --bind "$state" $stash/state
mount --bind "$FILES" $stash/files
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p "$state" "$FILES"
mount --move $stash/state "$state"
mount --move $stash/files "$FILES"
rmdir $stash/state $stash/files $stash
mount -t tmpfs tmpfs /home
mount -t tmpfs tmpfs /root
awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r m; do
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*|/tmp|/home|/root) continue ;; esac
  [ "$m" = "$state" ] && continue
  mount -o remount,bind,ro "$m" 2>/dev/null || true
done
mount -o remount,bind,ro "$FILES"
"""


def setpriv_wrapper(tmp_path, caps, mounts=False):
    """An executable that runs the daemon as the unit would, as far as a
    process can without systemd: root, the unit's bounding set (so its
    permitted and effective sets are that), no_new_privs; with mounts, in
    the unit's mount namespace (MOUNT_NS_SH)."""
    bset = "-all," + ",".join("+" + c[4:].lower() for c in sorted(caps))
    files = tmp_path / "files"
    files.mkdir(exist_ok=True)
    binary = os.path.abspath(DAEMON_BIN)
    if mounts:
        # The namespace hides /tmp, /home and /root, where a checkout may
        # well be (CI clones into /tmp): the daemon runs from FILES instead.
        shutil.copy2(binary, files / "ci-daemon")
        binary = str(files / "ci-daemon")
    setpriv = "setpriv --no-new-privs --inh-caps=-all --bounding-set=%s -- %s \"$@\"" % (
        bset, binary)
    if mounts:
        (tmp_path / "mount-ns.sh").write_text(MOUNT_NS_SH + "exec " + setpriv + "\n")
        script = ("#!/bin/sh\nFILES=%s exec unshare --mount -- sh %s/mount-ns.sh \"$@\"\n"
                  % (files, tmp_path))
    else:
        script = "#!/bin/sh\nexec %s\n" % setpriv
    path = tmp_path / "ci-daemon-setpriv"
    path.write_text(script)
    path.chmod(0o755)
    return str(path)


def cap_mask(caps):
    """The CapBnd bit mask of capability names (from linux/capability.h)."""
    numbers = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3,
               "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_NET_ADMIN": 12,
               "CAP_NET_RAW": 13, "CAP_SYS_ADMIN": 21, "CAP_SYS_PTRACE": 19}
    return sum(1 << numbers[c] for c in caps)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv")
@pytest.mark.parametrize("mounts", [False, True], ids=["capabilities", "and-private-mounts"])
def test_daemon_serves_within_the_units_capabilities(make_daemon, tmp_path, mounts):
    """A session without network (with a snapshot and its restore), and one
    with an allowlist (the sandbox network, its iptables chain, the egress
    proxy), created, run and deleted by a daemon that has only the unit's
    capabilities; and again in the unit's read-only, private mount
    namespace, where the daemon must notice that the engine does not see its
    mounts and keep workspaces on tmpfs."""
    from harness.servers import HttpServer
    caps = set(last(directives(open(UNIT).read()), "CapabilityBoundingSet").split())
    http = HttpServer(b"reached through the proxy\n")
    (tmp_path / "files").mkdir(exist_ok=True)
    hosts = tmp_path / "files" / "hosts"
    hosts.write_text("127.0.0.1 allowed.test\n")
    try:
        d = make_daemon("--pool-size", "0", "--egress-resolver", "hosts-only",
                        "--egress-hosts-file", str(hosts),
                        "--egress-trusted", "127.0.0.1:%d" % http.port,
                        binary=setpriv_wrapper(tmp_path, caps, mounts))
        status = open("/proc/%d/status" % d.proc.pid).read()
        assert re.search(r"^NoNewPrivs:\s+1$", status, re.M), status
        bnd = int(re.search(r"^CapBnd:\s+([0-9a-f]+)$", status, re.M).group(1), 16)
        eff = int(re.search(r"^CapEff:\s+([0-9a-f]+)$", status, re.M).group(1), 16)
        assert bnd == cap_mask(caps) and eff == bnd, (hex(bnd), hex(eff))
        # The stateless tier's start check: a bubblewrap run as a host uid
        # of its own (SETUID, SETGID, and the namespaces bwrap makes).
        d.wait_log("stateless tier: available", timeout=20)
        other_ns = os.readlink("/proc/%d/ns/mnt" % d.proc.pid) != os.readlink("/proc/self/ns/mnt")
        assert other_ns == mounts
        if mounts:
            d.wait_log("the engine does not share this daemon's mount namespace")
            assert "Read-only file system" not in d.read_log()
        s = d.api.create()
        restored = None
        try:
            r = d.api.exec(s["id"], "open('/workspace/kept.txt', 'w').write('kept')\n"
                                    "print(6 * 7)")
            assert r["status"] == "ok" and r["stdout"] == "42\n", r
            # a snapshot to the dir: store under state-dir, and a restore
            st, snap = d.api.request("POST", "/v1/sessions/%s/snapshots" % s["id"], timeout=300)
            assert st == 201 and snap["state"] == "stored", (st, snap)
            st, restored = d.api.request("POST", "/v1/sessions", body={"restore": snap["id"]},
                                         timeout=300)
            assert st == 201, (st, restored)
            r = d.api.exec(restored["id"], "print(open('/workspace/kept.txt').read())")
            assert r["stdout"] == "kept\n", r
        finally:
            assert d.api.delete(s["id"]) in (200, 204)
            if restored and "id" in restored:
                assert d.api.delete(restored["id"]) in (200, 204)
        s = d.api.create(network={"allow": ["allowed.test:%d" % http.port]})
        try:
            r = d.api.exec(s["id"], "import urllib.request\nprint(urllib.request.urlopen("
                                    "'http://allowed.test:%d/', timeout=10).read().decode())"
                           % http.port)
            assert r["status"] == "ok" and "reached through the proxy" in r["stdout"], r
        finally:
            assert d.api.delete(s["id"]) in (200, 204)
    finally:
        http.stop()
