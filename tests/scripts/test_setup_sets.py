"""deploy/setup.sh's two package sets (issue 27): `make run` installs what the
daemon needs to run and to be built (`deploy/setup.sh run`), `make test` adds
the test toolchain and the npm test peers (`deploy/setup.sh test`).

Checked without side effects, fast and without Docker: `--list` (no root, no
network: every command that could install or start something is a stub that
records its call), the package names against apt's and dpkg's local
databases (never the network), `make -n run`, the Makefile's targets, and the
install path's decisions through SETUP_DRY_RUN=1 with stubs that make this
machine look bare.
"""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETUP = os.path.join(ROOT, "deploy", "setup.sh")
MAKEFILE = os.path.join(ROOT, "Makefile")

# What a daemon never uses: none of it may be in the run set.
TEST_ONLY = ["chromium", "nodejs", "npm", "valgrind", "clang", "clang-format",
             "python3-pytest", "python3-pytest-xdist", "libclang-rt-14-dev",
             "prometheus", "zsh", "docker-compose", "redis-sentinel"]

# What the daemon runs or builds with, by the package that ships it: the
# compiler and pkg-config, llhttp's sources, the engine, iptables
# (daemon/network.c), Redis and redis-cli, bwrap and the host's python3 (the
# stateless tier's defaults, daemon/config.c), mkfs.ext4, mount and mountpoint
# (daemon/workspace_disk.c), the CA store libcurl verifies https peers
# against, debootstrap (images/python/build.sh).
DAEMON_NEEDS = ["gcc", "make", "pkg-config", "node-llhttp", "docker.io", "containerd", "runc",
                "iptables", "redis-server", "redis-tools", "bubblewrap", "python3", "e2fsprogs",
                "mount", "util-linux", "ca-certificates", "debootstrap", "debian-archive-keyring"]

# The Makefile's PKGS (pkg-config names) -> the Debian package with the .pc.
PC_TO_DEB = {
    "libevent": "libevent-dev",
    "libevent_openssl": "libevent-dev",
    "openssl": "libssl-dev",
    "libcurl": "libcurl4-openssl-dev",
    "yajl": "libyajl-dev",
    "hiredis": "libhiredis-dev",
    "uuid": "uuid-dev",
}

# The npm test peers' directories (install_npm_test_peers).
NPM_DIRS = ["tests/browser", "tests/s3", "tests/k8s", "clients/typescript", "tests/mcp",
            "tests/openapi"]

# Commands that would install, fetch or start something, or ask who we are.
STUBBED = ["apt-get", "apt", "aptitude", "dpkg", "dpkg-query", "npm", "npx", "node", "docker",
           "dockerd", "systemctl", "service", "update-rc.d", "redis-server", "redis-cli",
           "debootstrap", "chroot", "curl", "wget", "sudo", "id", "mount", "umount"]

DEB_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def run(argv, env=None, timeout=60):
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def listed(which):
    r = run([SETUP, "--list", which])
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return r.stdout.splitlines()


@pytest.fixture
def stubs(tmp_path):
    """A PATH whose first directory holds a stub for each of STUBBED: it
    records its call and fails (`id -u` answers 1000: not root), so that the
    machine looks bare and unprivileged. Returns (env, calls())."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls"
    log.write_text("")
    for name in STUBBED:
        body = '#!/bin/sh\nprintf "%%s\\n" "%s $*" >>"%s"\n' % (name, log)
        if name == "id":
            body += 'echo 1000\nexit 0\n'
        else:
            body += "exit 1\n"
        p = bindir / name
        p.write_text(body)
        p.chmod(0o755)
    env = {"PATH": "%s:/usr/sbin:/usr/bin:/sbin:/bin" % bindir, "HOME": str(tmp_path),
           "LC_ALL": "C"}

    def calls():
        return [line.split(" ", 1)[0] for line in log.read_text().splitlines()]
    return env, calls


def test_list_prints_package_names_only():
    for which in ("run", "test"):
        names = listed(which)
        assert names, which
        bad = [n for n in names if not DEB_NAME.match(n)]
        assert not bad, "%s: not one Debian package name a line: %r" % (which, bad)
        dups = sorted({n for n in names if names.count(n) > 1})
        assert not dups, "%s lists twice: %s" % (which, dups)


def test_run_set_has_no_test_tool():
    run_set = set(listed("run"))
    assert not run_set & set(TEST_ONLY), sorted(run_set & set(TEST_ONLY))
    assert not [n for n in run_set if n.startswith("python3-pytest")]


def test_test_set_is_the_run_set_and_the_toolchain():
    run_set, test_set = listed("run"), listed("test")
    assert test_set[:len(run_set)] == run_set, "test = run + the test extras, run first"
    assert set(TEST_ONLY) <= set(test_set), sorted(set(TEST_ONLY) - set(test_set))


def test_run_set_has_what_the_daemon_needs():
    run_set = set(listed("run"))
    assert set(DAEMON_NEEDS) <= run_set, sorted(set(DAEMON_NEEDS) - run_set)


def test_list_needs_neither_root_nor_network(stubs):
    env, calls = stubs
    for which in ("run", "test"):
        r = run([SETUP, "--list", which], env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == listed(which)
    assert calls() == [], "--list ran %s" % calls()


def test_bad_arguments_are_refused(stubs):
    env, calls = stubs
    for argv in (["bogus"], ["--list"], ["--list", "bogus"], ["run", "test"]):
        r = run([SETUP] + argv, env=env)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert "usage" in r.stderr
        assert r.stdout == ""
    assert calls() == []


def test_every_listed_package_is_known_to_apt():
    """Asked of the local databases only: dpkg's for what is installed,
    apt-cache's lists for the rest (apt-cache never goes to the network)."""
    names = sorted(set(listed("test")))
    known = set()
    r = run(["dpkg-query", "-W", "-f", "${Package}\\n"] + names)
    known.update(r.stdout.split())
    r = run(["apt-cache", "show", "--no-all-versions"] + names)
    known.update(m.group(1) for m in re.finditer(r"^Package: (\S+)$", r.stdout, re.M))
    unknown = [n for n in names if n not in known]
    assert not unknown, "neither dpkg nor apt-cache knows %s" % unknown


def makefile_targets():
    """{target: (prerequisites, recipe lines)} of the Makefile's explicit rules."""
    rules, cur = {}, None
    with open(MAKEFILE) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("\t"):
                if cur is not None:
                    for t in cur:
                        rules[t][1].append(line.strip())
                continue
            m = re.match(r"^([A-Za-z0-9_. -]+):(?!=)\s*(.*)$", line)
            if m and not line.startswith((".PHONY", "#")):
                cur = m.group(1).split()
                for t in cur:
                    rules.setdefault(t, ([], []))[0].extend(m.group(2).split())
            elif not line.startswith("#"):
                cur = None
    return rules


def set_of(rules, target, seen=()):
    """Which set a target's set-up uses: a prerequisite setup-run/setup-test
    (or setup), or a recipe line running deploy/setup.sh SET."""
    prereqs, recipe = rules[target]
    found = set()
    for line in recipe:
        for m in re.finditer(r"deploy/setup\.sh(?:\s+(\w+))?", line):
            found.add(m.group(1) or "test")
    for p in prereqs:
        if p in rules and p not in seen and (p.startswith("setup") or p == "setup"):
            found |= set_of(rules, p, seen + (target,))
    return found


def test_makefile_targets_name_their_set():
    rules = makefile_targets()
    assert set_of(rules, "run") == {"run"}
    for target in ("test", "bench", "bench-scale", "soak", "fidelity", "test-deploy"):
        assert set_of(rules, target) == {"test"}, target
    for target in ("setup-run", "setup-test"):
        assert any("deploy/setup.sh " + target[6:] in line for line in rules[target][1]), target


def test_make_n_run_runs_no_npm_nor_test_tool():
    make = shutil.which("make")
    assert make, "make is in the run set"
    r = run([make, "-n", "run"], timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "deploy/setup.sh run" in out
    assert "npm" not in out.lower()
    run_set = set(listed("run"))
    for name in sorted(set(listed("test")) - run_set):
        hit = re.search(r"(?<![\w.+/-])%s(?![\w.+-])" % re.escape(name), out)
        assert not hit, "make -n run names %s: %r" % (
            name, out[max(0, hit.start() - 80):hit.end() + 80])


def test_build_dependencies_are_in_the_run_set():
    """The Makefile's PKGS, each by the -dev package that ships its .pc
    (checked against dpkg where the .pc is installed), and llhttp's sources."""
    with open(MAKEFILE) as f:
        m = re.search(r"^PKGS\s*:?=\s*(.*)$", f.read(), re.M)
    assert m, "no PKGS in the Makefile"
    pkgs = m.group(1).split()
    assert pkgs
    unmapped = [p for p in pkgs if p not in PC_TO_DEB]
    assert not unmapped, "add the Debian -dev package of %s to PC_TO_DEB (and the run set)" % unmapped
    run_set = set(listed("run"))
    for pc in pkgs:
        assert PC_TO_DEB[pc] in run_set, (pc, PC_TO_DEB[pc])
        r = run(["pkg-config", "--variable=pcfiledir", pc]) if shutil.which("pkg-config") else None
        if r is None or r.returncode != 0:
            continue  # not installed here: the table above is the check
        pcfile = os.path.join(r.stdout.strip(), pc + ".pc")
        owner = run(["dpkg-query", "-S", pcfile])
        if owner.returncode == 0:
            debs = {w.split(":")[0] for w in owner.stdout.split(": ")[0].split(", ")}
            assert debs & run_set, "%s is shipped by %s, not in the run set" % (pcfile, debs)
            assert PC_TO_DEB[pc] in debs, "PC_TO_DEB[%r] is %s, dpkg says %s" % (pc, PC_TO_DEB[pc], debs)
    if os.path.isdir("/usr/share/llhttp"):
        owner = run(["dpkg-query", "-S", "/usr/share/llhttp"])
        if owner.returncode == 0:
            assert "node-llhttp" in owner.stdout


def dry(which, env, **extra):
    e = dict(env, SETUP_DRY_RUN="1", **extra)
    r = run([SETUP] + ([which] if which else []), env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def would_install(out):
    m = re.search(r"^setup: packages: would install (.*)$", out, re.M)
    assert m, out
    return m.group(1).split()


def test_dry_run_of_the_run_set_on_a_bare_machine(stubs):
    env, calls = stubs
    out = dry("run", env)
    assert would_install(out) == listed("run")
    assert "npm" not in out
    for d in NPM_DIRS:
        assert d not in out
    assert "docker: would start dockerd" in out
    assert "redis: would start redis-server" in out
    assert "image: would run images/python/build.sh" in out
    assert set(calls()) <= {"dpkg-query", "docker", "redis-cli"}, calls()


def test_dry_run_of_the_test_set_adds_the_toolchain_and_npm_peers(stubs):
    env, calls = stubs
    out = dry("test", env)
    # npm is on demand: installed by the npm step only when an npm ci is due
    assert would_install(out) == [n for n in listed("test") if n != "npm"]
    for d in NPM_DIRS:
        assert re.search(r"(would run npm ci in %s$|present \(%s\)$)" % (d, d), out, re.M), (d, out)
    assert set(calls()) <= {"dpkg-query", "docker", "redis-cli"}, calls()


def test_no_argument_is_the_test_set(stubs):
    env, _ = stubs
    assert would_install(dry(None, env)) == would_install(dry("test", env))


def test_skip_switches(stubs):
    env, calls = stubs
    out = dry("run", env, SETUP_SKIP_IMAGE="1", SETUP_SKIP_REDIS="1")
    assert "image: skipped (SETUP_SKIP_IMAGE=1)" in out
    assert "redis: skipped (SETUP_SKIP_REDIS=1)" in out
    assert "would run images/python/build.sh" not in out
    assert "redis-cli" not in calls()
