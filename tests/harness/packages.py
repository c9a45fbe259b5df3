"""A daemon whose sandboxes reach a package index this test runs: the
index's made-up name (pypi.test, and other.test for a session's own
allowlist) in a hosts file of its own, the resolver in hosts-only mode, the
index's loopback port trusted. The install tests, the %pip tests and their
hostile cases all start theirs here."""
import os
import uuid

from .daemon import Daemon


def index_daemon(redis, tmp, index, admin_key, image=None, pip=True, extra=()):
    """index: a server with .port. pip: --pip-index-url points at it (and
    installs may take 60 s); image: the python profile's tag."""
    hosts = os.path.join(tmp, "index-hosts-%s" % uuid.uuid4().hex[:8])
    with open(hosts, "w") as f:
        f.write("127.0.0.1 pypi.test other.test\n")
    args = ["--pool-size", "0",
            "--egress-resolver", "hosts-only",
            "--egress-hosts-file", hosts,
            "--egress-trusted", "127.0.0.1:%d" % index.port,
            "--kill-grace-ms", "1000"]
    if image:
        args += ["--images", "python=%s" % image]
    if pip:
        args += ["--pip-index-url", "http://pypi.test:%d/simple/" % index.port,
                 "--install-max-timeout-s", "60"]
    return Daemon(redis, tmp, tuple(args) + tuple(extra), admin_key=admin_key)
