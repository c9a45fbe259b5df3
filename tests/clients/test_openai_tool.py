"""The published run_code function tool (clients/openai/run_code.tool.json):
valid JSON Schema, the rules of OpenAI's strict mode, the same as the
Python client's copy; and the reference dispatcher (ci_sandbox.openai_tool)
running tool calls against a live daemon."""
import json
import os

import jsonschema
import pytest

from ci_sandbox import Sandbox, openai_tool

TOOL_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "clients", "openai", "run_code.tool.json")

# What strict mode (Structured Outputs) takes in a schema.
STRICT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "description", "enum",
                   "items", "anyOf", "const", "$defs", "$ref", "title"}


def load():
    with open(TOOL_FILE) as f:
        return json.load(f)


def strict_violations(schema, where="parameters"):
    """Every place schema breaks a strict-mode rule, as text."""
    bad = []
    for key in schema:
        if key not in STRICT_KEYWORDS:
            bad.append("%s: keyword %r is not supported in strict mode" % (where, key))
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "object" in types:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            bad.append("%s: additionalProperties must be false" % where)
        if sorted(schema.get("required", [])) != sorted(props):
            bad.append("%s: every property must be required" % where)
        for name, sub in props.items():
            bad += strict_violations(sub, "%s.%s" % (where, name))
    if "items" in schema:
        bad += strict_violations(schema["items"], where + "[]")
    for n, sub in enumerate(schema.get("anyOf", [])):
        bad += strict_violations(sub, "%s.anyOf[%d]" % (where, n))
    return bad


def test_the_tool_file_is_the_chat_completions_function_format():
    tool = load()
    assert tool["type"] == "function"
    fn = tool["function"]
    assert set(fn) == {"name", "description", "parameters", "strict"}
    assert fn["name"] == "run_code" and fn["strict"] is True and fn["description"]
    assert fn["parameters"]["type"] == "object"
    assert tool == openai_tool.TOOL, "clients/openai/run_code.tool.json differs from openai_tool.TOOL"
    flat = openai_tool.responses_tool()
    assert flat["type"] == "function" and flat["name"] == "run_code" and flat["strict"] is True
    assert flat["parameters"] == fn["parameters"]


def test_the_parameters_are_valid_json_schema_and_obey_strict_mode():
    params = load()["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    jsonschema.Draft7Validator.check_schema(params)
    assert strict_violations(params) == []
    v = jsonschema.Draft202012Validator(params)
    assert v.is_valid({"code": "1+1", "language": None, "timeout_s": None})
    assert v.is_valid({"code": "echo hi", "language": "bash", "timeout_s": 5})
    for bad in ({"code": "1"}, {"code": 1, "language": None, "timeout_s": None},
                {"code": "1", "language": "ruby", "timeout_s": None},
                {"code": "1", "language": None, "timeout_s": None, "extra": 1},
                {"code": "1", "language": None, "timeout_s": "5"}):
        assert not v.is_valid(bad), bad


def test_the_strict_checker_catches_what_it_must():
    """The rules above are real: a schema breaking each one is caught."""
    assert strict_violations({"type": "object", "properties": {"a": {"type": "string"}},
                              "required": [], "additionalProperties": False})
    assert strict_violations({"type": "object", "properties": {"a": {"type": "string"}},
                              "required": ["a"]})
    assert strict_violations({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}},
                              "required": ["a"], "additionalProperties": False})


def test_the_dispatcher_runs_tool_calls_in_a_live_sandbox(url, tenant_key):
    with Sandbox.create(url=url, api_key=tenant_key) as sb:
        text = openai_tool.dispatch(sb, json.dumps({"code": "x = 6\nprint('hi')\nx * 7",
                                                    "language": None, "timeout_s": None}))
        assert text == "stdout:\nhi\n\nresult:\n42"
        # state persists between tool calls
        assert openai_tool.dispatch(sb, {"code": "x", "language": "python", "timeout_s": 10}) == "result:\n6"
        err = openai_tool.dispatch(sb, {"code": "def f():\n    1/0\nf()", "language": None, "timeout_s": None})
        assert err.startswith("error: ZeroDivisionError: division by zero\n") and "<cell-" in err
        assert "stdout:\nb" in openai_tool.dispatch(sb, {"code": "echo b", "language": "bash", "timeout_s": None})
        slow = openai_tool.dispatch(sb, {"code": "import time\ntime.sleep(30)", "language": None, "timeout_s": 1})
        assert "status: timeout" in slow
        fig = openai_tool.dispatch(sb, {"code": "import matplotlib\nmatplotlib.use('Agg')\n"
                                                "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
                                                "plt.savefig('p.png'); plt.show()",
                                        "language": None, "timeout_s": None})
        assert "[image 1: image/png," in fig and "files changed:\ncreated p.png" in fig
        big = openai_tool.dispatch(sb, {"code": "print('y' * 50000)", "language": None, "timeout_s": None},
                                   max_chars=1000)
        assert len(big) < 1100 and "characters cut" in big
        # bad arguments are answered to the model, not raised
        assert openai_tool.dispatch(sb, "{not json").startswith("error: the arguments are not JSON")
        assert "unknown argument" in openai_tool.dispatch(sb, {"code": "1", "rm": True})
        assert "`language`" in openai_tool.dispatch(sb, {"code": "1", "language": "ruby"})
        assert "`timeout_s`" in openai_tool.dispatch(sb, {"code": "1", "timeout_s": 0})
        msg = openai_tool.tool_message(sb, {"id": "call_1", "type": "function",
                                            "function": {"name": "run_code",
                                                         "arguments": '{"code":"2+2","language":null,"timeout_s":null}'}})
        assert msg == {"role": "tool", "tool_call_id": "call_1", "content": "result:\n4"}
        other = openai_tool.tool_message(sb, {"id": "c2", "function": {"name": "rm_rf", "arguments": "{}"}})
        assert other["content"].startswith("error: no tool named 'rm_rf'")
    # a sandbox that ended raises, for the application to handle
    with pytest.raises(Exception) as e:
        openai_tool.dispatch(sb, {"code": "1", "language": None, "timeout_s": None})
    assert e.value.status == 410
