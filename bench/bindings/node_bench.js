#!/usr/bin/env node
'use strict';
// Node.js binding benchmark: median and p99 latency of a no-op `status` and
// of a 1 KB delta save (one ~1 KB message appended), each call awaited in
// turn, in embedded and daemon modes, each over a fresh temp workspace.
// Prints one JSON line per (mode, op):
//   {"lang":"node","mode":"embedded","op":"status","median_us":..,"p99_us":..}
//
// Environment: CAIRN_BENCH_N (status iterations, default 20000),
// CAIRN_BENCH_SAVES (saves, default 2000), CAIRN_DAEMON (default
// <repo>/build/cairnd), CAIRN_LIBRARY (default: found by the binding).

const fs = require('fs');
const os = require('os');
const path = require('path');

const REPO = path.resolve(__dirname, '..', '..');
const cairn = require(path.join(REPO, 'bindings', 'node'));

const N = parseInt(process.env.CAIRN_BENCH_N || '20000', 10);
const SAVES = parseInt(process.env.CAIRN_BENCH_SAVES || '2000', 10);
const DAEMON = process.env.CAIRN_DAEMON || path.join(REPO, 'build', 'cairnd');

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

async function measure(n, fn) {
  const warm = Math.min(500, Math.max(10, n >> 4));
  for (let i = 0; i < warm; i++) await fn(i);
  const xs = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await fn(i);
    xs[i] = Number(process.hrtime.bigint() - t) / 1000;
  }
  xs.sort();
  return { median_us: +pct(xs, 0.5).toFixed(2), p99_us: +pct(xs, 0.99).toFixed(2) };
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

async function stopDaemon(pid) {
  if (!pid || !alive(pid)) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 10000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  if (alive(pid)) process.kill(pid, 'SIGKILL');
}

// One ~1 KB message: 1024 bytes of JSON.
const content = 'x'.repeat(1024 - JSON.stringify({ role: 'user', content: '', i: 0 }).length - 4);

async function run(mode) {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-bench-'));
  let pid = 0;
  let c;
  try {
    const opts = mode === 'embedded' ? { workspace: ws, embedded: true } : { workspace: ws, daemon: DAEMON, daemonArgs: ['--idle-timeout=60s'] };
    c = await cairn.connect(opts);
    const st = await c.status();
    if (st.daemon) pid = st.daemon.pid;
    const out = [];
    const s = await measure(N, () => c.status());
    out.push({ lang: 'node', mode, op: 'status', ...s });
    const sv = await measure(SAVES, (i) => c.save('bench', { change: { append_messages: [{ role: 'user', content, i }] } }));
    out.push({ lang: 'node', mode, op: 'save_1kb', ...sv });
    for (const o of out) console.log(JSON.stringify(o));
  } finally {
    if (c) await c.close().catch(() => {});
    await stopDaemon(pid);
    fs.rmSync(ws, { recursive: true, force: true });
  }
}

(async () => {
  const modes = (process.env.CAIRN_BENCH_MODES || 'embedded,daemon').split(',');
  for (const m of modes) await run(m);
})().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
