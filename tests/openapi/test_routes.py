"""docs/openapi.yaml names exactly the routes of api_routes[] in
daemon/api.c (a route added to the table must be added to the spec, and a
spec path must be served), each with the key the table says it takes."""
import os
import re

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SPEC = os.path.join(ROOT, "docs", "openapi.yaml")
API_C = os.path.join(ROOT, "daemon", "api.c")

ROW = re.compile(r'\{\s*"([A-Z]+|\*)"\s*,\s*"([^"]+)"\s*,\s*(\w+)\s*,\s*(API_AUTH_\w+)\s*\}')


def table_rows(source):
    """(method, spec path, auth) for each row of api_routes[]."""
    start = source.index("const struct api_route api_routes[] = {")
    end = source.index("};", start)
    rows = []
    for method, pattern, _handler, auth in ROW.findall(source[start:end]):
        path = pattern[:-2] if pattern.endswith("/?") else pattern
        path = path.replace("{path...}", "{path}")
        rows.append((method, path, auth))
    return rows


def spec_ops(spec):
    out = {}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method in ("get", "put", "post", "delete", "patch"):
                out[(method.upper(), path)] = op
    return out


def load():
    with open(API_C) as f:
        rows = table_rows(f.read())
    with open(SPEC) as f:
        spec = yaml.safe_load(f)
    return rows, spec


def test_table_parses():
    rows, _ = load()
    # The table is long; a parser that found a handful would pass vacuously.
    assert len(rows) > 40, rows
    assert ("GET", "/v1/sessions/{id}/files/{path}", "API_AUTH_TENANT") in rows


def test_every_route_is_in_the_spec_and_every_spec_path_is_routed():
    rows, spec = load()
    ops = spec_ops(spec)
    routed = {(m, p) for m, p, _ in rows if m != "*"}
    missing = sorted(routed - set(ops))
    # An operation another part of the work adds (x-ci-pending names it) may
    # be in the spec before its route is merged.
    unrouted = sorted(k for k in set(ops) - routed if "x-ci-pending" not in ops[k])
    assert not missing, "routes of api_routes[] missing from docs/openapi.yaml: %s" % missing
    assert not unrouted, "docs/openapi.yaml operations no route serves: %s" % unrouted


def test_the_catch_all_rows_are_described():
    rows, spec = load()
    for method, path, _ in rows:
        if method == "*":
            assert path == "/v1/admin/{...}", "a new catch-all row %s: describe it" % path
            assert "x-ci-admin-fallback" in spec
    assert "x-ci-wrong-method" in spec


def test_security_matches_the_table():
    rows, spec = load()
    ops = spec_ops(spec)
    default = spec.get("security")
    for method, path, auth in rows:
        if method == "*":
            continue
        security = ops[(method, path)].get("security", default)
        schemes = sorted(k for req in security for k in req)
        want = {"API_AUTH_NONE": [], "API_AUTH_ADMIN": ["adminKey"],
                "API_AUTH_TENANT": ["tenantKey"]}[auth]
        assert schemes == want, "%s %s takes %s, the spec says %s" % (method, path, auth, schemes)


def test_every_operation_documents_its_errors():
    _, spec = load()
    for (method, path), op in spec_ops(spec).items():
        if op.get("security", spec["security"]):
            assert "401" in op["responses"] and "403" in op["responses"], (method, path)
