'use strict';
// CairnSaver with a real LangGraph.js graph: examples/langgraph_resume.mjs
// (the README's example, checked to be the same text) is SIGKILLed in the
// middle of a step; a new process resumes at that step, does not rerun the
// finished ones, and ends with the state an uninterrupted run gives.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const readline = require('node:readline');
const { cairn, MODES, daemonOptions, stopDaemon, tmpWorkspace } = require('./helpers');

const PKG = path.resolve(__dirname, '..');
const EXAMPLE = path.join(PKG, 'examples', 'langgraph_resume.mjs');

// Runs the example; SIGKILLs it once it prints `killAt`. Resolves to its lines.
function example(ws, { stepMs, killAt }) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [EXAMPLE, ws], {
      cwd: PKG,
      env: { ...process.env, STEP_MS: String(stepMs) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines = [];
    const timer = setTimeout(() => p.kill('SIGKILL'), 60000);
    readline.createInterface({ input: p.stdout }).on('line', (l) => {
      lines.push(l);
      if (killAt && l === killAt) p.kill('SIGKILL');
    });
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (killAt ? signal === 'SIGKILL' && lines.includes(killAt) : code === 0) resolve(lines);
      else reject(new Error(`example exited (${code}, ${signal}): ${lines.join(' | ')}`));
    });
  });
}

async function stopWorkspaceDaemon(ws) {
  const c = await cairn.connect(daemonOptions(ws, { autoStart: false })).catch(() => null);
  if (!c) return;
  const st = await c.status();
  await c.close();
  await stopDaemon(st.daemon && st.daemon.pid);
}

test('README shows examples/langgraph_resume.mjs as it is', () => {
  const readme = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
  assert.ok(readme.includes(fs.readFileSync(EXAMPLE, 'utf8')), 'README.md lacks the text of examples/langgraph_resume.mjs');
});

test('a graph SIGKILLed mid-step resumes in a new process with the uninterrupted state', { timeout: 120000 }, async (t) => {
  const ws = tmpWorkspace(t);
  const ref = tmpWorkspace(t);
  t.after(() => stopWorkspaceDaemon(ws));
  t.after(() => stopWorkspaceDaemon(ref));

  // Each step takes 3 s: plan finishes, and code is killed as it starts.
  const first = await example(ws, { stepMs: 3000, killAt: 'step code: working' });
  assert.deepEqual(first, ['step plan: working', 'step code: working']);
  const second = await example(ws, { stepMs: 0 });
  assert.equal(second[0], 'resuming at code');
  assert.ok(!second.includes('step plan: working'), `plan ran again: ${second.join(' | ')}`);
  const want = await example(ref, { stepMs: 0 });
  assert.equal(second[second.length - 1], want[want.length - 1]);
  assert.deepEqual(JSON.parse(want[want.length - 1]), ['start', 'plan (after 1 entries)', 'code (after 2 entries)', 'test (after 3 entries)']);
});

// A client that records the method of every call it passes on.
function recording(client) {
  const calls = [];
  const proxy = new Proxy(client, {
    get(target, prop) {
      const v = target[prop];
      if (typeof v !== 'function') return v;
      return (...args) => {
        calls.push(prop === 'call' ? args[0] : prop);
        return v.apply(target, args);
      };
    },
  });
  return { proxy, calls };
}

test('getTuple reads a few artifacts by id, however long the thread', { timeout: 120000 }, async (t) => {
  const { emptyCheckpoint, uuid6 } = await import('@langchain/langgraph-checkpoint');
  const { CairnSaver } = require('../langgraph.js');
  const { c } = await MODES.embedded(t);
  const { proxy, calls } = recording(c);
  const saver = new CairnSaver({ client: proxy });
  let config = { configurable: { thread_id: 't', checkpoint_ns: '' } };
  for (let n = 0; n < 60; n++) {
    const cp = { ...emptyCheckpoint(), id: uuid6(n), channel_values: { a: n, b: 'x' }, channel_versions: { a: n + 1, b: 1 } };
    config = await saver.put(config, cp, { source: 'loop', step: n, parents: {} }, n === 0 ? { a: 1, b: 1 } : { a: n + 1 });
    await saver.putWrites(config, [['a', n]], `task-${n}`);
  }
  calls.length = 0;
  const tuple = await saver.getTuple({ configurable: { thread_id: 't' } });
  assert.deepEqual(tuple.checkpoint.channel_values, { a: 59, b: 'x' });
  assert.deepEqual(tuple.pendingWrites, [['task-59', 'a', 59]]);
  // The pointer, the checkpoint, its writes and two blobs: by id, nothing listed.
  assert.deepEqual([...new Set(calls)], ['artifact']);
  assert.equal(calls.length, 5);
});

test('putWrites from two savers at once keeps every write (compare-and-swap)', { timeout: 120000 }, async (t) => {
  const { emptyCheckpoint, uuid6 } = await import('@langchain/langgraph-checkpoint');
  const { CairnSaver } = require('../langgraph.js');
  const { c } = await MODES.daemon(t);
  // Two savers do not queue behind each other: their saves race in cairn.
  const s1 = new CairnSaver({ client: c });
  const s2 = new CairnSaver({ client: c });
  const config = await s1.put({ configurable: { thread_id: 't', checkpoint_ns: '' } }, { ...emptyCheckpoint(), id: uuid6(0) }, { source: 'loop', step: 0, parents: {} }, {});
  await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? s1 : s2).putWrites(config, [['ch', i]], `task-${i}`)));
  const tuple = await s1.getTuple(config);
  assert.deepEqual(
    tuple.pendingWrites.map((w) => w[2]).sort((a, b) => a - b),
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
  );
});
