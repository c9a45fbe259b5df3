// The persistent Node.js process behind "language": "javascript".
//
// ci_lang.py starts it as `node ci_node_repl.js IN OUT`: each line read from
// fd IN is one cell, {"cell": "<cell-K>", "code": "..."}; the answer is one
// line written to fd OUT, {"status": "ok"|"error", "result": ..., "error":
// ...}. Every cell runs in one vm context, kept for the life of the process,
// so globals (var, function, and top-level let/const/class) persist. The
// result is the script's completion value (the last expression's), formatted
// with util.inspect as the Node REPL shows it; a Promise is awaited first.
// Output goes to fds 1 and 2 (the kernel's capped streams). SIGINT ends the
// running cell (vm breakOnSigint; a pending Promise is abandoned).
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
const { createRequire } = require('module');
const { Console } = require('console');
const { EventEmitter } = require('events');

const IN_FD = Number(process.argv[2]);
const OUT_FD = Number(process.argv[3]);
const RESULT_CAP = 100000;
const TRACE_MAX = 200;
const SELF = __filename;

// The context's globals: what a script in `node` sees besides the
// language's own built-ins (which the context has already).
const sandbox = {};
for (const k of ['console', 'process', 'Buffer', 'setTimeout', 'clearTimeout', 'setInterval',
                 'clearInterval', 'setImmediate', 'clearImmediate', 'queueMicrotask', 'URL',
                 'URLSearchParams', 'TextEncoder', 'TextDecoder', 'AbortController', 'AbortSignal',
                 'EventTarget', 'Event', 'structuredClone', 'atob', 'btoa', 'fetch', 'performance',
                 'Blob', 'BroadcastChannel', 'MessageChannel', 'MessagePort', 'crypto']) {
  if (k in globalThis)
    sandbox[k] = globalThis[k];
}
// Writes to fds 1 and 2 (the kernel's pipes) block, as Python's do: Node
// would otherwise queue what a full pipe does not take, without bound, and
// go on writing it after the cell's answer (when it is discarded).
for (const s of [process.stdout, process.stderr]) {
  if (s._handle && typeof s._handle.setBlocking === 'function')
    s._handle.setBlocking(true);
}
// ... and go straight to the fd with write(2), never through libuv's pipe
// stream: on Node.js 20 (Debian 13) a cell that wrote to the stream and then
// spun (`console.log(1); while (true) {}`) was, more often than not, no
// longer broken by SIGINT (breakOnSigint), and ran to the deadline. The
// cell's console, process.stdout.write and process.stderr.write all come
// here; the streams themselves then hold nothing (drained() below). Not a
// stream.Writable either: its bookkeeping runs on process.nextTick, and an
// interrupted cell (TerminateExecution) could leave it holding every later
// write.
class FdSink extends EventEmitter {
  constructor(fd) {
    super();
    this.fd = fd;
  }

  // write(chunk[, encoding][, cb]), as a stream's; true (nothing queued).
  write(chunk, encoding, cb) {
    if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    let err = null;
    try {
      const data = typeof chunk === 'string' ? Buffer.from(chunk, encoding || 'utf8')
                                             : Buffer.from(chunk.buffer || chunk, chunk.byteOffset, chunk.byteLength);
      let off = 0;
      while (off < data.length) {
        try {
          off += fs.writeSync(this.fd, data, off);
        } catch (e) {
          if (e.code !== 'EAGAIN')
            throw e;
        }
      }
    } catch (e) {
      err = e;   // the kernel's pipe is gone: nothing to report to
    }
    if (typeof cb === 'function')
      cb(err);
    return true;
  }
}
const cellOut = new FdSink(1);
const cellErr = new FdSink(2);
process.stdout.write = cellOut.write.bind(cellOut);
process.stderr.write = cellErr.write.bind(cellErr);
sandbox.console = new Console({ stdout: cellOut, stderr: cellErr });

const replFile = path.join(process.cwd(), '<repl>');
const userModule = { exports: {}, filename: replFile, id: '<repl>', paths: [] };
sandbox.require = createRequire(replFile);   // resolves from the workspace
sandbox.module = userModule;
sandbox.exports = userModule.exports;
sandbox.__filename = replFile;
sandbox.__dirname = process.cwd();
sandbox.global = sandbox;
const context = vm.createContext(sandbox, { name: 'ci' });

let waiting = null;   // the reject of an awaited result, while one is awaited

process.on('SIGINT', () => {
  // Outside vm's own handler (breakOnSigint): between cells, or while a
  // Promise result is awaited.
  if (waiting)
    waiting(interruptError());
});
// A callback of an earlier cell that throws must not end the process.
process.on('uncaughtException', (e) => {
  try { process.stderr.write('Uncaught ' + (e && e.stack ? e.stack : util.inspect(e)) + '\n'); }
  catch (_) { /* nothing left to report to */ }
});
process.on('unhandledRejection', (e) => {
  try { process.stderr.write('Unhandled rejection: ' + (e && e.stack ? e.stack : util.inspect(e)) + '\n'); }
  catch (_) { /* nothing left to report to */ }
});

function interruptError() {
  const e = new Error('Script execution was interrupted by `SIGINT`');
  e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
  return e;
}

// The stack without this script's frames: header lines (the message, a
// SyntaxError's source line and caret) are kept, and frames up to the
// outermost one of a cell (what called the cell is Node's and ours).
function stackLines(stack) {
  const lines = stack.split('\n');
  const isFrame = (l) => /^\s+at /.test(l);
  let last = -1;
  lines.forEach((l, i) => { if (isFrame(l) && l.includes('<cell-')) last = i; });
  return lines.filter((l, i) => !l.includes(SELF) && (!isFrame(l) || (last >= 0 && i <= last)));
}

function errorOf(e) {
  if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED')
    return { ename: 'KeyboardInterrupt', evalue: 'interrupted (SIGINT)',
             traceback: ['KeyboardInterrupt: the execution was interrupted'] };
  let ename, evalue, lines;
  if (e !== null && typeof e === 'object' && typeof e.stack === 'string') {
    ename = String(e.name || (e.constructor && e.constructor.name) || 'Error');
    evalue = String(e.message === undefined ? '' : e.message);
    lines = stackLines(e.stack);
  } else {
    ename = 'Uncaught';
    evalue = util.inspect(e);
    lines = ['Uncaught ' + evalue];
  }
  if (lines.length > TRACE_MAX)
    lines = lines.slice(0, TRACE_MAX / 2).concat(['...'], lines.slice(-TRACE_MAX / 2));
  return { ename, evalue: evalue.slice(0, RESULT_CAP), traceback: lines.map((l) => l.slice(0, 4000)) };
}

function format(v) {
  const s = util.inspect(v, { colors: false });
  return s.length > RESULT_CAP ? s.slice(0, RESULT_CAP) : s;
}

function reply(msg) {
  const data = Buffer.from(JSON.stringify(msg) + '\n');
  let off = 0;
  while (off < data.length) {
    try {
      off += fs.writeSync(OUT_FD, data, off);
    } catch (e) {
      if (e.code === 'EAGAIN')
        continue;
      process.exit(70);   // the kernel is gone
    }
  }
}

// What is still queued on a stream (when its writes could not be made
// blocking) is written before the answer.
function drained(s) {
  return new Promise((resolve) => {
    if (!s.writableLength)
      return resolve();
    s.once('drain', resolve);
  });
}

async function runCell(msg) {
  let value;
  try {
    const script = new vm.Script(String(msg.code), { filename: String(msg.cell) });
    value = script.runInContext(context, { breakOnSigint: true, displayErrors: false });
    if (value !== null && (typeof value === 'object' || typeof value === 'function')
        && typeof value.then === 'function') {
      value = await new Promise((resolve, reject) => {
        waiting = reject;
        value.then(resolve, reject);
      });
    }
  } catch (e) {
    return { status: 'error', result: null, error: errorOf(e) };
  } finally {
    waiting = null;
  }
  if (value === undefined)
    return { status: 'ok', result: null, error: null };
  try {
    return { status: 'ok', result: format(value), error: null };
  } catch (e) {
    return { status: 'error', result: null, error: errorOf(e) };
  }
}

let buf = '';
const queue = [];
let busy = false;

async function pump() {
  if (busy)
    return;
  busy = true;
  while (queue.length) {
    const line = queue.shift();
    let msg;
    try {
      msg = JSON.parse(line);
    } catch (e) {
      reply({ status: 'error', result: null,
              error: { ename: 'ProtocolError', evalue: 'bad request line', traceback: [] } });
      continue;
    }
    const answer = await runCell(msg);
    await drained(process.stdout);
    await drained(process.stderr);
    reply(answer);
  }
  busy = false;
}

const input = fs.createReadStream(null, { fd: IN_FD, encoding: 'utf8', highWaterMark: 1 << 16 });
input.on('data', (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    queue.push(buf.slice(0, i));
    buf = buf.slice(i + 1);
  }
  pump();
});
input.on('end', () => process.exit(0));   // the kernel is gone
input.on('error', () => process.exit(0));
