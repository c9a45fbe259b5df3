"""docs/openapi.yaml lints clean with Redocly's CLI (the pinned
@redocly/cli of this directory, installed by deploy/setup.sh): no error and
no warning but the rules redocly.yaml turns off on purpose, each with its
reason."""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SPEC = os.path.join(ROOT, "docs", "openapi.yaml")
REDOCLY = os.path.join(HERE, "node_modules", ".bin", "redocly")


def lint(path):
    assert os.path.exists(REDOCLY), "no %s: run deploy/setup.sh (npm ci in tests/openapi)" % REDOCLY
    env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_NOTIFICATIONS="true",
               NO_COLOR="1")
    out = subprocess.run([REDOCLY, "lint", "--config", os.path.join(HERE, "redocly.yaml"),
                          "--format=json", path], capture_output=True, text=True, env=env,
                         timeout=120, cwd=HERE)
    try:
        report = json.loads(out.stdout)
    except ValueError:
        raise AssertionError("redocly said no JSON (exit %d):\n%s\n%s" % (
            out.returncode, out.stdout[-2000:], out.stderr[-2000:]))
    return out.returncode, report


def describe(report):
    return "\n".join("%s %s: %s (%s)" % (
        p.get("severity"), p.get("ruleId"), p.get("message"),
        ", ".join(loc.get("pointer", "") for loc in p.get("location", [])))
        for p in report["problems"])


def test_spec_lints_clean():
    rc, report = lint(SPEC)
    assert report["totals"]["errors"] == 0 and report["totals"]["warnings"] == 0, describe(report)
    assert rc == 0


def test_lint_catches_a_broken_spec(tmp_path):
    # The lint is not a no-op: a dangling $ref is reported.
    with open(SPEC) as f:
        text = f.read()
    broken = text.replace("$ref: '#/components/schemas/Session'\n",
                          "$ref: '#/components/schemas/NoSuchSchema'\n", 1)
    assert broken != text
    p = tmp_path / "openapi.yaml"
    p.write_text(broken)
    rc, report = lint(str(p))
    assert rc != 0 and report["totals"]["errors"] >= 1, describe(report)
    assert any(p["ruleId"] == "no-unresolved-refs" for p in report["problems"]), describe(report)
