"""Driving MCP clients from pytest: the official TypeScript SDK's Client
(sdk_client.mjs, one JSON command a line) and the MCP Inspector's CLI, both
installed in tests/mcp/node_modules by deploy/setup.sh (npm ci). Every
process started here is stopped by its pid."""
import json
import os
import select
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_MODULES = os.path.join(HERE, "node_modules")
INSPECTOR = os.path.join(NODE_MODULES, ".bin", "mcp-inspector-cli")


def have_peers():
    return os.path.isdir(os.path.join(NODE_MODULES, "@modelcontextprotocol", "sdk"))


class SdkClient:
    """A node process running the SDK's Client against url."""

    def __init__(self, url, key=None, origin=None):
        # Missing peers fail the suite (deploy/setup.sh installs them), never skip it.
        assert have_peers(), "tests/mcp/node_modules has no @modelcontextprotocol/sdk: run make setup"
        env = dict(os.environ)
        env.pop("MCP_KEY", None)
        env.pop("MCP_ORIGIN", None)
        if key:
            env["MCP_KEY"] = key
        if origin:
            env["MCP_ORIGIN"] = origin
        self.proc = subprocess.Popen(["node", os.path.join(HERE, "sdk_client.mjs"), url],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=HERE)
        self._pending = b""

    def cmd(self, op, timeout=200, **fields):
        line = json.dumps(dict(op=op, **fields)) + "\n"
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            assert left > 0, "no answer from the SDK client to %s within %ss" % (op, timeout)
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                assert chunk, "the SDK client exited: %s" % self.proc.stderr.read().decode()
                self._pending += chunk
        answer, self._pending = self._pending.split(b"\n", 1)
        return json.loads(answer)

    def ok(self, op, **fields):
        a = self.cmd(op, **fields)
        assert a["ok"], a
        return a

    def call(self, name, **arguments):
        """tools/call: the CallToolResult."""
        return self.ok("call", name=name, arguments=arguments)["result"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # by its pid (Popen)
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def texts(result):
    """The text items of a CallToolResult, joined."""
    return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


def inspector(url, *args, key=None, timeout=120):
    """The Inspector's CLI: (exit status, stdout, stderr)."""
    assert os.path.exists(INSPECTOR), "%s is not installed: run make setup" % INSPECTOR
    cmd = [INSPECTOR, "--cli", url, "--transport", "http", *args]
    if key:
        cmd += ["--header", "Authorization: Bearer %s" % key]
    # Its callMethod checks for "../package.json" relative to the working
    # directory but imports it relative to its own file: from node_modules
    # (whose parent, tests/mcp, has one) it imports its own package.json.
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=NODE_MODULES)
    return p.returncode, p.stdout, p.stderr
