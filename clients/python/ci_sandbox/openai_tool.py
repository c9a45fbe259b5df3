"""run_code as an OpenAI function tool, and a reference dispatcher.

TOOL is the Chat Completions tool (clients/openai/run_code.tool.json holds
the same, published; a test keeps the two equal); responses_tool() is the
Responses API's flat spelling. dispatch() executes a tool call's arguments in
a sandbox and answers the text the model should see next:

    sb = Sandbox.create()
    for call in message.tool_calls:
        messages.append(tool_message(sb, call))

Bad arguments are answered as text (the model can correct itself); a failing
session (Expired, Unavailable, ...) raises its CiError for the application.
"""
import json

from .sandbox import Sandbox  # noqa: F401  (the type dispatch() takes)

NAME = "run_code"

PARAMETERS = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": "The code to run, as one notebook cell. State (variables, imports, "
                           "files in /workspace) persists between calls. The value of the "
                           "last expression is returned; print() output is returned too.",
        },
        "language": {
            "type": ["string", "null"],
            "enum": ["python", "javascript", "bash", None],
            "description": "The language of the code; null means python.",
        },
        "timeout_s": {
            "type": ["integer", "null"],
            "description": "Seconds the code may run (1 to the session's limit, 60 by "
                           "default); null for the session's limit.",
        },
    },
    "required": ["code", "language", "timeout_s"],
    "additionalProperties": False,
}

DESCRIPTION = ("Run code in a persistent, isolated sandbox (a Jupyter-like Python kernel with "
               "numpy, pandas and matplotlib; also javascript and bash) and get back its "
               "output, the last expression's value, errors with their traceback, and the "
               "files it changed under /workspace.")

TOOL = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": DESCRIPTION,
        "strict": True,
        "parameters": PARAMETERS,
    },
}


def responses_tool():
    """The tool in the Responses API's form (name etc. at the top level)."""
    return {"type": "function", "name": NAME, "description": DESCRIPTION, "strict": True,
            "parameters": PARAMETERS}


def _arguments(arguments):
    """The arguments as a dict, or a string saying what is wrong with them."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as e:
            return "error: the arguments are not JSON (%s)" % e
    if not isinstance(arguments, dict):
        return "error: the arguments must be a JSON object"
    unknown = sorted(set(arguments) - set(PARAMETERS["properties"]))
    if unknown:
        return "error: unknown argument(s): %s" % ", ".join(unknown)
    if not isinstance(arguments.get("code"), str):
        return "error: `code` must be a string"
    lang = arguments.get("language")
    if lang not in ("python", "javascript", "bash", None):
        return "error: `language` must be python, javascript, bash or null"
    t = arguments.get("timeout_s")
    if t is not None and (not isinstance(t, int) or isinstance(t, bool) or t < 1):
        return "error: `timeout_s` must be a positive integer or null"
    return arguments


def _clip(text, limit):
    """Keep the head and the tail of text past limit characters."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return "%s\n[... %d characters cut ...]\n%s" % (text[:half], len(text) - 2 * half, text[-half:])


def render(execution, max_chars=20000):
    """An Execution as the text a model reads."""
    parts = []
    if execution.stdout:
        parts.append("stdout:\n" + execution.stdout.rstrip("\n"))
    if execution.stderr:
        parts.append("stderr:\n" + execution.stderr.rstrip("\n"))
    if execution.text is not None:
        parts.append("result:\n" + execution.text)
    if execution.error is not None:
        tb = "\n".join(execution.error.traceback)
        parts.append("error: %s: %s%s" % (execution.error.name, execution.error.value,
                                           "\n" + tb if tb else ""))
    if execution.status in ("timeout", "killed"):
        parts.append("status: %s%s" % (execution.status,
                                       " (%s)" % execution.reason if execution.reason else ""))
    for n, image in enumerate(execution.images, 1):
        parts.append("[image %d: image/png, %d bytes, shown to the user]" % (n, len(image)))
    if execution.files:
        parts.append("files changed:\n" + "\n".join(
            "%s %s" % (f.change, f.path) for f in execution.files))
    if not parts:
        parts.append("(no output)")
    return _clip("\n\n".join(parts), max_chars)


def dispatch(sandbox, arguments, max_chars=20000):
    """Run a run_code call's arguments (a JSON string or a dict) in sandbox
    and return the text for the model."""
    args = _arguments(arguments)
    if isinstance(args, str):
        return args
    execution = sandbox.run_code(args["code"], language=args.get("language"),
                                 timeout_s=args.get("timeout_s"))
    return render(execution, max_chars)


def tool_message(sandbox, tool_call, max_chars=20000):
    """A Chat Completions tool call (a dict, or the SDK's object) -> the
    {"role": "tool", ...} message answering it."""
    if isinstance(tool_call, dict):
        call_id, fn = tool_call.get("id"), tool_call.get("function") or {}
        name, arguments = fn.get("name"), fn.get("arguments")
    else:
        call_id, name, arguments = tool_call.id, tool_call.function.name, tool_call.function.arguments
    if name != NAME:
        content = "error: no tool named %r (this dispatcher runs %s)" % (name, NAME)
    else:
        content = dispatch(sandbox, arguments, max_chars)
    return {"role": "tool", "tool_call_id": call_id, "content": content}
