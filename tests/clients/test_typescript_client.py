"""The TypeScript client (clients/typescript): compiled with the pinned tsc
(strict), then driven by a node script (typescript_live.mjs) against a live
daemon; and its generated types (src/schema.ts) are what generate.sh makes
of the OpenAPI description, so the client cannot drift from the spec.

The spec is docs/openapi.yaml, or CLIENTS_OPENAPI_SPEC (a path) when given:
on a branch without the spec yet, point it at a copy."""
import os
import shutil
import subprocess

import pytest

from harness.http import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TS = os.path.join(ROOT, "clients", "typescript")
SPEC = os.environ.get("CLIENTS_OPENAPI_SPEC") or os.path.join(ROOT, "docs", "openapi.yaml")

CHECKS = ["state persists", "env gives url and key", "streaming callbacks", "files round-trip",
          "kill and 410", "typed errors", "busy", "run workflow"]


def need_node_modules():
    for tool in ("tsc", "openapi-typescript"):
        path = os.path.join(TS, "node_modules", ".bin", tool)
        assert os.path.exists(path), "%s missing: run deploy/setup.sh (npm ci in clients/typescript)" % path


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The client compiled by tsc (strict, every check on) into a directory of the test's own."""
    need_node_modules()
    out = str(tmp_path_factory.mktemp("ts-client"))
    r = subprocess.run([os.path.join(TS, "node_modules", ".bin", "tsc"), "-p", os.path.join(TS, "tsconfig.json"),
                        "--outDir", out], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(out, "package.json"), "w") as f:
        f.write('{"type": "module"}\n')
    return out


def test_generated_types_are_current_with_the_openapi_spec(tmp_path):
    need_node_modules()
    assert os.path.exists(SPEC), ("no OpenAPI description at %s (set CLIENTS_OPENAPI_SPEC to the spec's path)" % SPEC)
    fresh = str(tmp_path / "schema.ts")
    r = subprocess.run([os.path.join(TS, "generate.sh"), SPEC, fresh], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(fresh) as f:
        want = f.read()
    with open(os.path.join(TS, "src", "schema.ts")) as f:
        have = f.read()
    assert have == want, ("clients/typescript/src/schema.ts is not current with %s: "
                          "run clients/typescript/generate.sh and commit src/schema.ts" % SPEC)


def test_the_client_against_a_live_daemon(compiled, keyed_daemon, tenant_key, url):
    quota_tenant = "clq-ts-" + os.urandom(3).hex()
    quota_key = keyed_daemon.key(quota_tenant, quota={"sessions": 1})["key"]
    env = dict(os.environ, CLIENT_DIR=compiled, CI_SANDBOX_URL=url, CI_SANDBOX_API_KEY=tenant_key,
               QUOTA_KEY=quota_key, DEAD_URL="http://127.0.0.1:%d" % free_port())
    r = subprocess.run([shutil.which("node") or "node", os.path.join(HERE, "typescript_live.mjs")],
                       capture_output=True, text=True, timeout=600, env=env)
    out = r.stdout + r.stderr
    passed = {line[5:] for line in r.stdout.splitlines() if line.startswith("PASS ")}
    assert r.returncode == 0, out
    assert passed == set(CHECKS), out


def test_every_error_code_has_its_python_class():
    """The Python client types every code the spec names and every code the
    daemon has (lib/err.c); the TypeScript map is checked by the compiler."""
    import re

    import yaml

    import ci_sandbox.errors as errors

    with open(SPEC) as f:
        spec_codes = set(yaml.safe_load(f)["components"]["schemas"]["ErrorCode"]["enum"])
    with open(os.path.join(ROOT, "lib", "err.c")) as f:
        daemon_codes = set(re.findall(r'\{"([a-z_]+)", [0-9]{3}\}', f.read()))
    assert len(daemon_codes) >= 14, daemon_codes
    assert spec_codes - set(errors.BY_CODE) == set(), "spec codes without a class in ci_sandbox/errors.py"
    assert daemon_codes - set(errors.BY_CODE) == set(), "lib/err.c codes without a class in ci_sandbox/errors.py"


TLS_SCRIPT = """
import { pathToFileURL } from "node:url";
import { join } from "node:path";
const ci = await import(pathToFileURL(join(process.env.CLIENT_DIR, "index.js")).href);
try {
  const sb = await ci.Sandbox.create({ url: process.env.URL, apiKey: null });
  const ex = await sb.runCode("6 * 7");
  await sb.kill();
  console.log("RESULT " + ex.text);
} catch (e) {
  console.log("ERROR " + e.constructor.name + " " + e.code + " " + e.message);
}
"""


def test_https_with_a_private_ca(compiled, make_daemon, tmp_path):
    """https to a daemon whose certificate a CA file vouches for: node given
    the file (NODE_EXTRA_CA_CERTS) connects; without it the client throws
    ConnectionFailed."""
    import ssl

    from test_python_transport import make_cert

    cert, key = make_cert(str(tmp_path))
    d = make_daemon("--pool-size", "0", "--tls-cert", cert, "--tls-key", key,
                    ssl_context=ssl.create_default_context(cafile=cert), cacert=cert)
    script = tmp_path / "tls.mjs"
    script.write_text(TLS_SCRIPT)
    base = {k: v for k, v in os.environ.items() if k not in ("NODE_EXTRA_CA_CERTS", "CI_SANDBOX_API_KEY")}
    base.update(CLIENT_DIR=compiled, URL="https://127.0.0.1:%d" % d.port)
    node = shutil.which("node") or "node"
    ok = subprocess.run([node, str(script)], env=dict(base, NODE_EXTRA_CA_CERTS=cert),
                        capture_output=True, text=True, timeout=300)
    assert ok.stdout.strip() == "RESULT 42", ok.stdout + ok.stderr
    refused = subprocess.run([node, str(script)], env=base, capture_output=True, text=True, timeout=300)
    assert refused.stdout.startswith("ERROR ConnectionFailed connection"), refused.stdout + refused.stderr
