"""The drift check: every answer the daemon gives a test, held against
docs/openapi.yaml, so the description cannot drift from what is served.

  Checker(spec_path)      the spec compiled once: its paths as regexes, and a
                          validator per (path, method, status, media type),
                          built on first use and kept
    .check(method, target, status, headers, body)
                          None when the answer is what the spec says; else a
                          Mismatch (route, status, JSON pointer, why)
    .line_checker(...)    for a streamed NDJSON answer: a function that checks
                          one line against the media type's schema
  enable(checker)         harness.http's Clients report every answer of a
  disable()               ci-daemon (a port Daemon registered) to it
  mismatches()            what was found since the last reset(), also in
                          threads whose exceptions the test never sees

What is checked, for each answer of a registered daemon port:
  - the route: the request's path (query cut, a trailing / tolerated) is a
    spec path, and the method is one of its operations. A method the path
    does not take must get x-ci-wrong-method's answer (405 and Allow); a path that is not a route must get 404
    not_found; an unknown name under /v1/admin/ x-ci-admin-fallback's answers.
  - the status is one the operation documents (or x-ci-any-request's, the
    HTTP layer's own: 431);
  - the Content-Type is one of the status's media types (no body where it
    has none);
  - a JSON body validates against that media type's schema; an NDJSON body
    that a test reads through Stream.events() is checked line by line.

Schemas are inlined (every $ref replaced by what it names) when compiled, so
validation never resolves a reference: it costs tens of microseconds per
answer; the time it takes is counted (counts()) and printed at the end of an
integration run.
"""
import json
import os
import re
import threading
import time

import yaml

# jsonschema is imported by the first Checker (0.2 s): a suite that never
# turns the check on does not pay for it.
jsonschema = None

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPEC_PATH = os.path.join(ROOT, "docs", "openapi.yaml")


METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


class Mismatch:
    """One answer that is not what the spec says."""

    def __init__(self, method, target, route, status, pointer, why):
        self.method, self.target, self.route = method, target, route
        self.status, self.pointer, self.why = status, pointer, why

    def __str__(self):
        where = " at %s" % self.pointer if self.pointer is not None else ""
        return "openapi drift: %s %s (spec route %s) answered %s%s: %s" % (
            self.method, self.target, self.route or "none", self.status, where, self.why)


def _inline(node, spec, seen=()):
    """node with every $ref replaced by a copy of what it names (siblings of
    a $ref kept beside it, under allOf)."""
    if isinstance(node, dict):
        if "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise ValueError("recursive $ref %s: not supported by the drift check" % ref)
            target = spec
            for part in ref.lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            resolved = _inline(target, spec, seen + (ref,))
            rest = {k: _inline(v, spec, seen) for k, v in node.items() if k != "$ref"}
            return {"allOf": [resolved], **rest} if rest else resolved
        return {k: _inline(v, spec, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, spec, seen) for v in node]
    return node


def _template_regex(template):
    """A spec path as a regex: {path} (a file path) spans segments."""
    out, pos = "", 0
    for m in re.finditer(r"\{([^}]+)\}", template):
        out += re.escape(template[pos:m.start()])
        out += "(?:.+)" if m.group(1) == "path" else "(?:[^/]+)"
        pos = m.end()
    out += re.escape(template[pos:])
    return re.compile("^" + out + "/?$")


def _media(content_type):
    return (content_type or "").split(";")[0].strip().lower()


class Checker:
    def __init__(self, spec_path=SPEC_PATH):
        global jsonschema  # pylint: disable=global-statement
        if jsonschema is None:
            import jsonschema as module  # pylint: disable=import-outside-toplevel
            jsonschema = module
        with open(spec_path) as f:
            # libyaml's loader: a tenth of the pure-Python one's time.
            self.spec = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        # Literal paths first, then by fewer parameters: /v1/admin/keys
        # before /v1/admin/keys/{key}.
        routes = []
        for template, item in self.spec["paths"].items():
            ops = {m.upper(): op for m, op in item.items() if m in METHODS}
            routes.append((template.count("{"), template, _template_regex(template), ops))
        routes.sort(key=lambda r: (r[0], -len(r[1])))
        self.routes = [(t, rx, ops) for _, t, rx, ops in routes]
        self.ops = {t: ops for t, _, ops in self.routes}
        self.wrong_method = _inline(self.spec["x-ci-wrong-method"]["response"], self.spec)
        self.admin_fallback = [_inline(r, self.spec)
                               for r in self.spec["x-ci-admin-fallback"]["responses"]]
        self.any_request = {str(k): _inline(v, self.spec)
                            for k, v in self.spec.get("x-ci-any-request", {}).items()}
        self.not_found = _inline(self.spec["components"]["responses"]["NotFound"], self.spec)
        self._validators = {}
        self._lock = threading.Lock()
        self.seen = set()  # (method, path) of the operations answers came from

    # ---- compiling

    def _response(self, template, method, status):
        """The spec's response object for it (inlined, cached), or None."""
        key = ("response", template, method, status)
        with self._lock:
            if key in self._validators:
                return self._validators[key]
        resp = self.ops[template][method]["responses"].get(str(status))
        resp = _inline(resp, self.spec) if resp is not None else None
        with self._lock:
            self._validators[key] = resp
        return resp

    def _validator(self, key, schema):
        with self._lock:
            v = self._validators.get(key)
        if v is None:
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            v = cls(schema)
            with self._lock:
                self._validators[key] = v
        return v

    # ---- checking

    def unexercised(self):
        """The spec's operations no checked answer came from."""
        return sorted((m, t) for t, ops in self.ops.items() for m in ops
                      if (m, t) not in self.seen)

    def match(self, path):
        for template, rx, ops in self.routes:
            if rx.match(path):
                return template, ops
        return None, None

    def check(self, method, target, status, headers, body, streamed=False):
        """None, or a Mismatch. headers have lower-case names; body is bytes
        (None for a streamed answer: its headers only)."""
        path = target.split("?", 1)[0]
        method = method.upper()
        template, ops = self.match(path)

        def bad(why, pointer=None, route=template):
            return Mismatch(method, target, route, status, pointer, why)

        if str(status) in self.any_request:
            return self._check_response(self.any_request[str(status)], ("any", status), bad,
                                        status, headers, body, streamed)
        if template is None:
            if path.startswith("/v1/admin/"):
                for resp in self.admin_fallback:
                    if self._check_response(resp, ("admin", status), bad, status, headers, body,
                                            streamed) is None and status in (401, 403, 404):
                        return None
                return bad("not an admin route; the fallback answers 404 (or 401/403)",
                           route="x-ci-admin-fallback")
            if status != 404:
                return bad("the path is not in the spec (a new route? add it to docs/openapi.yaml)")
            return self._check_response(self.not_found, ("notfound",), bad, status, headers,
                                        body, streamed)
        if method == "OPTIONS" and "OPTIONS" not in ops:
            # x-ci-options: every route path answers 204 with Allow, no body
            if status != 204 or not headers.get("allow"):
                return bad("OPTIONS must answer 204 with an Allow header (x-ci-options)")
            if body:
                return bad("OPTIONS answers no body (x-ci-options)")
            return None
        if method not in ops:
            allow = headers.get("allow")
            if not allow:
                return bad("method %s is not the path's (it takes %s), and the answer has no "
                           "Allow header" % (method, ", ".join(ops)))
            if status != 405:
                return bad("a method the path does not take must answer 405 (x-ci-wrong-method)")
            if method == "HEAD":
                return None             # a HEAD answer has no body to check
            return self._check_response(self.wrong_method, ("wrong",), bad, status, headers,
                                        body, streamed)
        op_method = method
        self.seen.add((op_method, template))
        resp = self._response(template, op_method, status)
        if resp is None:
            return bad("status %s is not documented for %s %s (documented: %s)" % (
                status, op_method, template, ", ".join(sorted(ops[op_method]["responses"]))))
        return self._check_response(resp, (template, op_method, status), bad, status, headers,
                                    body, streamed)

    def _check_response(self, resp, key, bad, status, headers, body, streamed):
        content = resp.get("content") or {}
        for name, h in (resp.get("headers") or {}).items():
            if h.get("required") and name.lower() not in headers:
                return bad("the %s header is required here" % name)
        media = _media(headers.get("content-type"))
        if not content:
            if body:
                return bad("the spec has no body here; the answer has %d bytes (%s)" % (
                    len(body), media or "no Content-Type"))
            return None
        if media not in content:
            if not media and not body and not streamed:
                return bad("no body, where the spec has %s" % ", ".join(content))
            return bad("Content-Type %r is not one of %s" % (media, ", ".join(content)))
        schema = content[media].get("schema")
        if streamed or schema is None or media != "application/json":
            return None
        try:
            doc = json.loads(body)
        except ValueError as e:
            return bad("the body is not JSON: %s" % e)
        v = self._validator(key + (media,), schema)
        err = jsonschema.exceptions.best_match(v.iter_errors(doc))
        if err is None:
            return None
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        return bad(err.message[:400], pointer=pointer)

    def line_checker(self, method, target, status, headers):
        """For a streamed answer: check(line_doc) -> None or a Mismatch, per
        NDJSON line; None when the answer is not NDJSON of a spec route."""
        media = _media(headers.get("content-type"))
        if media != "application/x-ndjson":
            return None
        path = target.split("?", 1)[0]
        template, ops = self.match(path)
        if template is None or method.upper() not in ops:
            return None
        resp = self._response(template, method.upper(), status)
        schema = ((resp or {}).get("content") or {}).get(media, {}).get("schema")
        if schema is None:
            return None
        v = self._validator((template, method.upper(), status, media), schema)

        def check_line(doc):
            err = jsonschema.exceptions.best_match(v.iter_errors(doc))
            if err is None:
                return None
            pointer = "/" + "/".join(str(p) for p in err.absolute_path)
            return Mismatch(method, target, template, status, pointer,
                            "NDJSON line %s: %s" % (json.dumps(doc)[:200], err.message[:300]))
        return check_line


# ---- the switch the harness's HTTP client reads

_state = {"checker": None, "found": [], "checked": 0, "lines": 0, "seconds": 0.0}
_found_lock = threading.Lock()
DAEMON_PORTS = set()


def enable(checker):
    _state["checker"] = checker


def disable():
    _state["checker"] = None


def active():
    return _state["checker"]


def record(mismatch):
    with _found_lock:
        _state["found"].append(mismatch)


def mismatches():
    with _found_lock:
        return list(_state["found"])


def counts():
    """(answers checked, NDJSON lines checked, seconds spent checking) in
    this process."""
    return _state["checked"], _state["lines"], _state["seconds"]


def reset():
    with _found_lock:
        _state["found"].clear()


def observe(client, method, target, status, headers, body, streamed=False):
    """Called by harness.http for every answer. Raises AssertionError on a
    mismatch (and records it, for answers read in threads)."""
    checker = _state["checker"]
    if checker is None or client.unix is not None or client.port not in DAEMON_PORTS:
        return None
    t0 = time.perf_counter()
    try:
        _state["checked"] += 1
        m = checker.check(method, target, status, headers, body, streamed=streamed)
        if m is not None:
            record(m)
            raise AssertionError(str(m))
        if streamed:
            return checker.line_checker(method, target, status, headers)
        return None
    finally:
        _state["seconds"] += time.perf_counter() - t0


def observe_line(line_check, doc):
    t0 = time.perf_counter()
    _state["lines"] += 1
    m = line_check(doc)
    _state["seconds"] += time.perf_counter() - t0
    if m is not None:
        record(m)
        raise AssertionError(str(m))


_shared = {}


def shared_checker():
    """One Checker per process."""
    if "c" not in _shared:
        _shared["c"] = Checker()
    return _shared["c"]


def is_on():
    """The switch: CITEST_OPENAPI=0 turns the check off."""
    return os.environ.get("CITEST_OPENAPI", "1") != "0"

