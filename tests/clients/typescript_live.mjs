// The TypeScript client (clients/typescript, compiled by tsc into CLIENT_DIR)
// against a live daemon: run by test_typescript_client.py with
//   CLIENT_DIR  the compiled client (index.js)
//   CI_SANDBOX_URL, CI_SANDBOX_API_KEY  the daemon and a tenant's key
//   QUOTA_KEY   a key of a tenant whose sessions quota is 1
//   DEAD_URL    a loopback port nobody listens on
// Prints "PASS name" or "FAIL name: why" per check; exits 1 on any failure.
import assert from "node:assert/strict";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const ci = await import(pathToFileURL(join(process.env.CLIENT_DIR, "index.js")).href);
const { Sandbox } = ci;
const url = process.env.CI_SANDBOX_URL;
const apiKey = process.env.CI_SANDBOX_API_KEY;
let failed = 0;

async function check(name, fn) {
  try {
    await fn();
    console.log(`PASS ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

async function rejects(promise, cls, status, code) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e && e.constructor.name}: ${e && e.message}`);
    assert.ok(e instanceof ci.CiError);
    assert.equal(e.status, status);
    assert.equal(e.code, code);
    return e;
  }
  assert.fail(`expected ${cls.name}`);
}

await check("state persists", async () => {
  const sb = await Sandbox.create({ url, apiKey, idle_timeout_s: 120 });   // the env gives nothing here
  try {
    assert.equal(sb.info.state, "ready");
    const a = await sb.runCode("x = 41\nprint('set')");
    assert.ok(a.ok);
    assert.equal(a.stdout, "set\n");
    const b = await sb.runCode("import sys\nprint('err', file=sys.stderr)\nx + 1");
    assert.equal(b.text, "42");
    assert.equal(b.stderr, "err\n");
    assert.equal(b.kernel, "preserved");
    assert.equal(typeof b.durationMs, "number");
    const bad = await sb.runCode("1/0");
    assert.equal(bad.status, "error");
    assert.equal(bad.error.ename, "ZeroDivisionError");
    assert.ok(bad.error.traceback.length > 0);
    assert.deepEqual(bad.error.cell_line, { line: 1, text: "1/0" });
    const sh = await sb.runCode("echo hi", { language: "bash" });
    assert.equal(sh.stdout, "hi\n");
    const slow = await sb.runCode("import time\ntime.sleep(30)", { timeoutS: 1 });
    assert.equal(slow.status, "timeout");
    assert.equal((await sb.runCode("x")).text, "41");
  } finally {
    await sb.kill();
  }
});

await check("env gives url and key", async () => {
  // CI_SANDBOX_URL and CI_SANDBOX_API_KEY are set for this process
  const sb = await Sandbox.create();
  try {
    assert.equal((await sb.runCode("6 * 7")).text, "42");
  } finally {
    await sb.kill();
  }
});

await check("streaming callbacks", async () => {
  const sb = await Sandbox.create({ url, apiKey });
  const other = await Sandbox.connect(sb.id, { url, apiKey });
  try {
    // The cell waits for a file the onStdout callback writes: the callback
    // ran while the code was running.
    const code = "import os, sys, time\nprint('first', flush=True)\n" +
      "print('warn', file=sys.stderr, flush=True)\n" +
      "deadline = time.time() + 30\n" +
      "while not os.path.exists('/workspace/gate') and time.time() < deadline:\n    time.sleep(0.05)\n" +
      "print('gate', os.path.exists('/workspace/gate'))\n" +
      "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()\n'done'";
    const seen = [];
    const results = [];
    const writes = [];
    const ex = await sb.runCode(code, {
      onStdout: (t) => { seen.push(["stdout", t]); if (t.startsWith("first")) writes.push(other.files.write("gate", "1")); },
      onStderr: (t) => seen.push(["stderr", t]),
      onResult: (r) => results.push(r),
    });
    await Promise.all(writes);
    assert.ok(ex.ok, JSON.stringify(ex.error));
    assert.equal(ex.text, "'done'");
    assert.deepEqual(seen.slice(0, 2), [["stdout", "first\n"], ["stderr", "warn\n"]]);
    assert.ok(seen.some(([s, t]) => s === "stdout" && t.includes("gate True")));
    assert.deepEqual(ex.output.slice(0, 2), [{ stream: "stdout", text: "first\n" }, { stream: "stderr", text: "warn\n" }]);
    const pngs = results.filter((r) => r.mime === "image/png");
    assert.equal(pngs.length, 1);
    assert.deepEqual([...pngs[0].data.slice(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    assert.equal(ex.images.length, 1);
  } finally {
    await sb.kill();
  }
});

await check("files round-trip", async () => {
  const sb = await Sandbox.create({ url, apiKey });
  try {
    const blob = new Uint8Array(200000);
    for (let i = 0; i < blob.length; i++) blob[i] = (i * 7919) & 0xff;
    assert.equal((await sb.files.write("d/blob.bin", blob)).size, blob.length);
    await sb.files.write("d/sub/n.txt", "héllo");
    await sb.files.write("odd #1?.txt", "odd");
    assert.deepEqual(await sb.files.read("d/blob.bin"), blob);
    assert.equal(await sb.files.readText("d/sub/n.txt"), "héllo");
    assert.equal(await sb.files.readText("odd #1?.txt"), "odd");
    assert.equal((await sb.runCode("len(open('d/blob.bin','rb').read())")).text, "200000");
    const all = Object.fromEntries((await sb.files.list()).map((e) => [e.path, e.type]));
    assert.equal(all["d"], "dir");
    assert.deepEqual((await sb.files.list("d/sub")).map((e) => e.path).sort(), ["d/sub", "d/sub/n.txt"]);
    await rejects(sb.files.remove("d"), ci.IsADirectory, null, "is_a_directory");
    await sb.files.remove("d/blob.bin");
    await rejects(sb.files.read("d/blob.bin"), ci.NotFound, 404, "not_found");
    await sb.files.remove("d", { recursive: true });
    assert.deepEqual(await sb.files.list("d"), []);
    // refused by the client (fetch would resolve the ..), before any request
    await rejects(sb.files.read("../etc/passwd"), ci.BadPath, null, "bad_path");
    await rejects(sb.files.write("a/./b", "x"), ci.BadPath, null, "bad_path");
    await rejects(sb.files.read("/etc/passwd"), ci.BadPath, null, "bad_path");
    // a NUL byte reaches the daemon, which refuses it
    await rejects(sb.files.read("a\u0000b"), ci.BadPath, 400, "bad_path");
  } finally {
    await sb.kill();
  }
});

await check("kill and 410", async () => {
  const sb = await Sandbox.create({ url, apiKey, networkAllow: ["pkgs.example.test:443"] });
  assert.deepEqual(sb.info.network.allow, ["pkgs.example.test:443"]);
  assert.deepEqual((await sb.setNetwork(["b.example.test:443"])).network.allow, ["b.example.test:443"]);
  assert.equal((await sb.keepalive()).id, sb.id);
  assert.equal(await sb.kill(), true);
  assert.equal(await sb.kill(), false);
  const e = await rejects(sb.runCode("1"), ci.Expired, 410, "expired");
  assert.match(e.message, /deleted/);
  await rejects(Sandbox.connect(sb.id, { url, apiKey }), ci.Expired, 410, "expired");
});

await check("typed errors", async () => {
  await rejects(Sandbox.create({ url, apiKey: "0000000000000000.wrong" }), ci.Unauthorized, 401, "unauthorized");
  await rejects(Sandbox.create({ url, apiKey: null }), ci.Unauthorized, 401, "unauthorized");
  await rejects(Sandbox.connect("00000000-0000-4000-8000-000000000000", { url, apiKey }), ci.NotFound, 404, "not_found");
  const bad = await rejects(Sandbox.create({ url, apiKey, idle_timeout_s: 0 }), ci.BadRequest, 400, "bad_request");
  assert.match(bad.message, /idle_timeout_s/);
  await rejects(Sandbox.create({ url: process.env.DEAD_URL, apiKey }), ci.ConnectionFailed, null, "connection");
  const q = process.env.QUOTA_KEY;
  const first = await Sandbox.create({ url, apiKey: q });
  try {
    const e = await rejects(Sandbox.create({ url, apiKey: q }), ci.QuotaExceeded, 429, "quota_exceeded");
    assert.equal(e.quota, "sessions");
    assert.ok(e.retryAfter >= 1);
  } finally {
    await first.kill();
  }
});

await check("busy", async () => {
  const sb = await Sandbox.create({ url, apiKey });
  try {
    let started;
    const go = new Promise((r) => { started = r; });
    const long = sb.runCode("import time\nprint('go', flush=True)\ntime.sleep(20)", { onStdout: () => started() });
    await go;
    await rejects(sb.runCode("1"), ci.Busy, 409, "busy");
    assert.equal(await sb.interrupt(), true);
    const ex = await long;
    assert.equal(ex.error.ename, "KeyboardInterrupt");
  } finally {
    await sb.kill();
  }
});

await check("run workflow", async () => {
  const sb = await Sandbox.create({ url, apiKey });
  try {
    const run = await sb.run("40 + 2", { fixer: null, max_attempts: 1 });
    assert.equal(run.status, "ok");
    assert.equal(run.result.result, "42");
    const forced = await sb.run("1/0", { fixer: null, max_attempts: 1, on_failure: [], retry_hopeless: true });
    assert.equal(forced.status, "failed");
  } finally {
    await sb.kill();
  }
});

console.log(`${failed === 0 ? "all passed" : failed + " failed"}`);
process.exit(failed === 0 ? 0 : 1);
