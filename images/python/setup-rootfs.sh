#!/bin/sh
# Finishes the ci/python root filesystem.  Runs INSIDE it as root: build.sh
# runs it with chroot after debootstrap, the Dockerfile with RUN.  The runner
# files must already be in /opt/ci and the package list in /tmp/packages.txt.
set -eu

# Drop what no listed package needs at run time.  Bookworm's python3-scipy
# depends on python3-pythran, a compiler that brings gcc, g++, boost and -dev
# packages (~500 MB); scipy's compiled modules never import it.  Keep the
# closure of packages.txt (/tmp/packages.txt) and the required/important/
# essential base, without pythran, and purge the rest.
python3 - /tmp/packages.txt <<'PRUNE'
import sys
DROP = {"python3-pythran"}
pk, provides = {}, {}
with open("/var/lib/dpkg/status", encoding="utf-8") as f:
    paras = f.read().split("\n\n")
for para in paras:
    fields, key = {}, None
    for line in para.splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += " " + line.strip()
        elif ":" in line:
            key, _, val = line.partition(":")
            fields[key] = val.strip()
    if fields.get("Status", "").endswith(" installed") and "Package" in fields:
        pk[fields["Package"]] = fields
for name, f in pk.items():
    for p in f.get("Provides", "").split(","):
        if p.strip():
            provides.setdefault(p.split()[0].split(":")[0], []).append(name)
def cands(alt):
    n = alt.strip().split()[0].split(":")[0]
    return ([n] if n in pk else []) + provides.get(n, [])
with open(sys.argv[1]) as f:
    roots = [l.split("#")[0].strip() for l in f]
roots = [r for r in roots if r]
missing = [r for r in roots if r not in pk]
if missing:
    sys.exit("packages not installed: %s" % " ".join(missing))
roots += [n for n, f in pk.items() if f.get("Essential") == "yes"
          or f.get("Priority") in ("required", "important")]
keep = set(r for r in roots if r not in DROP)
todo = sorted(keep)
while todo:
    n = todo.pop()
    for field in ("Pre-Depends", "Depends"):
        for clause in pk[n].get(field, "").split(","):
            alts = [c for a in clause.split("|") if a.strip()
                    for c in cands(a) if c not in DROP]
            if alts and not any(a in keep for a in alts):
                keep.add(alts[0])
                todo.append(alts[0])
with open("/tmp/purge.txt", "w") as f:
    f.write("".join(n + "\n" for n in sorted(set(pk) - keep - DROP)))
print("setup-rootfs: purging %s and %d packages nothing else needs"
      % (" ".join(sorted(DROP & set(pk))), len(set(pk) - keep - DROP)))
PRUNE
# --force-depends only for what python3-scipy names but does not use; the
# rest without force, so dpkg itself refuses to remove anything still needed
if dpkg-query -W python3-pythran >/dev/null 2>&1; then
    dpkg --purge --force-depends python3-pythran >/dev/null 2>&1
fi
if [ -s /tmp/purge.txt ]; then
    xargs dpkg --purge </tmp/purge.txt >/dev/null
fi

# the sandbox user (no login, no password). The daemon runs each session
# under a uid of its own, its gid equal to it, from the range
# sandbox-uid-base/-count (default 200000, 4096 uids; see daemon/uid_range.h):
# every uid of that range is named "sandbox" here, so whoami, id and ls -l
# work; a uid outside it still runs, only without a name. uid 1000 stays for
# images run by hand.
SANDBOX_UID_BASE=200000
SANDBOX_UID_COUNT=4096
if ! grep -q '^sandbox:' /etc/passwd; then
    {
        echo 'sandbox:x:1000:1000:ci sandbox:/tmp/home:/usr/sbin/nologin'
        awk -v b=$SANDBOX_UID_BASE -v n=$SANDBOX_UID_COUNT 'BEGIN {
            for (u = b; u < b + n; u++)
                printf "sandbox:x:%d:%d:ci sandbox:/tmp/home:/usr/sbin/nologin\n", u, u }'
    } >>/etc/passwd
    {
        echo 'sandbox:x:1000:'
        awk -v b=$SANDBOX_UID_BASE -v n=$SANDBOX_UID_COUNT 'BEGIN {
            for (u = b; u < b + n; u++) printf "sandbox:x:%d:\n", u }'
    } >>/etc/group
fi
if [ -f /etc/shadow ] && ! grep -q '^sandbox:' /etc/shadow; then
    echo 'sandbox:!:19000::::::' >>/etc/shadow
fi

# /workspace: the session's files (a tmpfs at run time); /run/ci: the
# read-only bind mount holding the daemon's socket; /opt/ci: the runner
mkdir -p /workspace /run/ci /opt/ci
chown 1000:1000 /workspace
chmod 0700 /workspace
chmod 0755 /run/ci /opt/ci

# byte-code for the runner (the root filesystem is read-only at run time)
python3 -m compileall -q /opt/ci

# matplotlib's font cache, copied to MPLCONFIGDIR (/tmp/.mpl) by the
# supervisor, so the first `import matplotlib.pyplot` in a session does not
# spend seconds scanning fonts
rm -rf /opt/ci/mplcache
env MPLCONFIGDIR=/opt/ci/mplcache MPLBACKEND=Agg HOME=/tmp \
    python3 -c 'import matplotlib.pyplot as plt; plt.figure(); plt.close("all")'
ls /opt/ci/mplcache/fontlist-*.json >/dev/null
chmod -R a+rX /opt/ci

# keep the image small: package caches, documentation, translations, logs,
# the test suites inside Python packages
rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old \
       /var/lib/dpkg/*-old /usr/share/man /usr/share/info /usr/share/lintian \
       /usr/share/linda /usr/share/groff /usr/share/bug
find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
find /usr/share/locale -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
find /var/log -type f -delete
# (two are imported by the packages themselves and stay: bottleneck's
# __init__ imports bottleneck.tests.util, numpy 2's numpy.testing
# numpy._core.tests._natype)
find /usr/lib/python3/dist-packages -mindepth 2 -type d -name tests \
    ! -path /usr/lib/python3/dist-packages/bottleneck/tests \
    ! -path /usr/lib/python3/dist-packages/numpy/_core/tests -prune -exec rm -rf {} +
rm -rf /tmp/* /var/tmp/* /root/.cache
