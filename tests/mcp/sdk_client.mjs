// The official MCP TypeScript SDK's client, driven by tests/mcp/test_mcp_sdk.py.
//
// usage: node sdk_client.mjs URL   (env MCP_KEY: a Bearer key; MCP_ORIGIN: an
// Origin header to send). Reads one JSON command per line on stdin and
// writes one JSON answer per line on stdout:
//   {"op":"connect"}                      -> {"ok":true,"server":{...},"protocol":"..."}
//   {"op":"list"}                         -> {"ok":true,"tools":[...]}
//   {"op":"call","name":N,"arguments":A}  -> {"ok":true,"result":{...}}
//   {"op":"ping"}                         -> {"ok":true}
// A thrown error is {"ok":false,"error":"...","code":...}. End of stdin closes.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.argv[2]);
const headers = {};
if (process.env.MCP_KEY) headers.Authorization = `Bearer ${process.env.MCP_KEY}`;
if (process.env.MCP_ORIGIN) headers.Origin = process.env.MCP_ORIGIN;

const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
const client = new Client({ name: "ci-mcp-test", version: "1.0.0" });
const timeout = 180000; // an install or a run with retries takes a while

async function handle(cmd) {
  switch (cmd.op) {
    case "connect":
      await client.connect(transport);
      return { server: client.getServerVersion(), protocol: transport.protocolVersion ?? null,
               capabilities: client.getServerCapabilities() };
    case "list":
      return { tools: (await client.listTools()).tools };
    case "call":
      return { result: await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} },
                                             undefined, { timeout }) };
    case "ping":
      await client.ping();
      return {};
    default:
      throw new Error(`unknown op ${cmd.op}`);
  }
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = { ok: true, ...(await handle(JSON.parse(line))) };
  } catch (e) {
    answer = { ok: false, error: String(e && e.message ? e.message : e), code: e?.code ?? null };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
await client.close().catch(() => {});
