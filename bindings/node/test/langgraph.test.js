'use strict';
// CairnSaver with a real LangGraph.js graph: examples/langgraph_resume.mjs
// (the README's example, checked to be the same text) is SIGKILLed in the
// middle of a step; a new process resumes at that step, does not rerun the
// finished ones, and ends with the state an uninterrupted run gives. And
// fixtures/graph_child.mjs, SIGKILLed with a step half done, resumes in a
// new process with the same state, history and re-run nodes under
// CairnSaver (embedded and through a daemon) as under LangGraph.js's own
// SqliteSaver in the same test.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const readline = require('node:readline');
const { cairn, MODES, DAEMON, daemonOptions, stopDaemon } = require('./helpers');

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
  // One teardown, in order: the daemons the example started are found
  // through their workspaces, so those must still exist.
  const ws = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'cairn-node-'));
  const ref = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'cairn-node-'));
  t.after(async () => {
    await stopWorkspaceDaemon(ws);
    await stopWorkspaceDaemon(ref);
    fs.rmSync(ws, { recursive: true, force: true });
    fs.rmSync(ref, { recursive: true, force: true });
  });

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

const GRAPH_CHILD = path.join(PKG, 'fixtures', 'graph_child.mjs');

// Runs fixtures/graph_child.mjs with a saver over dir: phase "run" is
// SIGKILLed once it prints IN_SLOW (and must die of that); phase "resume"
// must exit 0 and resolves to its JSON line.
function graphChild(kind, dir, phase) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [GRAPH_CHILD, kind, dir, phase], {
      cwd: PKG,
      env: { ...process.env, CAIRN_DAEMON: DAEMON },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines = [];
    let stderr = '';
    p.stderr.on('data', (b) => { stderr += b; });
    const timer = setTimeout(() => p.kill('SIGKILL'), 60000);
    readline.createInterface({ input: p.stdout }).on('line', (l) => {
      lines.push(l);
      if (phase === 'run' && l === 'IN_SLOW') p.kill('SIGKILL');
    });
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      const ok = phase === 'run' ? signal === 'SIGKILL' && lines.join() === 'IN_SLOW' : code === 0 && lines.length > 0;
      if (ok) resolve(phase === 'run' ? null : JSON.parse(lines[lines.length - 1]));
      else reject(new Error(`graph_child ${kind} ${phase} exited (${code}, ${signal}): ${lines.join(' | ')}\n${stderr}`));
    });
  });
}

test('a graph SIGKILLed with a step half done resumes with the state SqliteSaver gives', { timeout: 180000 }, async (t) => {
  const results = {};
  for (const kind of ['sqlite', 'cairn-embedded', 'cairn-daemon']) {
    const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'cairn-node-lg-'));
    t.after(async () => {
      if (kind === 'cairn-daemon') await stopWorkspaceDaemon(dir);
      fs.rmSync(dir, { recursive: true, force: true });
    });
    await graphChild(kind, dir, 'run');
    results[kind] = await graphChild(kind, dir, 'resume');
  }
  const want = results.sqlite;
  // SqliteSaver: the killed step resumes with "fast"'s write kept, so only
  // "slow" runs again, and the run ends as an uninterrupted one does.
  assert.deepEqual(want.before.next, ['slow'], JSON.stringify(want.before));
  assert.deepEqual(want.before.values.log, ['in', 'a', 'fast']);
  assert.deepEqual(want.before.tasks, [{ name: 'fast', result: { log: ['fast'] } }, { name: 'slow', result: null }]);
  assert.deepEqual(want.final, ['in', 'a', 'fast', 'slow', 'join']);
  assert.deepEqual(want.history.map((s) => s.step), [3, 2, 1, 0, -1]);
  assert.deepEqual([...want.exec].sort(), ['a', 'fast', 'join', 'slow', 'slow']);
  for (const r of Object.values(results)) {
    // "fast" and "slow" run in parallel: their order in the log varies.
    r.exec.sort();
  }
  for (const kind of ['cairn-embedded', 'cairn-daemon']) {
    assert.deepEqual(results[kind], want, kind);
  }
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
  // The pointer, the checkpoint, its writes and two blobs: one read by id,
  // nothing listed.
  assert.deepEqual(calls, ['artifactsByID']);

  // A saver that has not seen the thread reads the pointer first, then the
  // checkpoint and its writes, then its blobs.
  const fresh = new CairnSaver({ client: proxy });
  calls.length = 0;
  const again = await fresh.getTuple({ configurable: { thread_id: 't' } });
  assert.deepEqual(again.checkpoint.channel_values, { a: 59, b: 'x' });
  assert.deepEqual(again.pendingWrites, [['task-59', 'a', 59]]);
  assert.deepEqual(calls, ['artifactsByID', 'artifactsByID', 'artifactsByID']);
  // Then it knows them: one read, and one when another saver moved the
  // thread on (its guess is checked, not trusted).
  calls.length = 0;
  await fresh.getTuple({ configurable: { thread_id: 't' } });
  assert.deepEqual(calls, ['artifactsByID']);
  const cp60 = { ...emptyCheckpoint(), id: uuid6(60), channel_values: { a: 60, b: 'x' }, channel_versions: { a: 61, b: 1 } };
  config = await saver.put(config, cp60, { source: 'loop', step: 60, parents: {} }, { a: 61 });
  calls.length = 0;
  const moved = await fresh.getTuple({ configurable: { thread_id: 't' } });
  assert.deepEqual(moved.checkpoint.channel_values, { a: 60, b: 'x' });
  assert.deepEqual(moved.pendingWrites, []);
  assert.ok(calls.length <= 3 && calls.every((m) => m === 'artifactsByID'), calls.join(' '));

  // list(limit: 10): one page of the log's tail, then the ten checkpoints.
  calls.length = 0;
  const steps = [];
  for await (const tup of saver.list({ configurable: { thread_id: 't', checkpoint_ns: '' } }, { limit: 10 })) steps.push(tup.metadata.step);
  assert.deepEqual(steps, Array.from({ length: 10 }, (_, i) => 60 - i));
  assert.equal(calls.filter((m) => m === 'messages').length, 1);
  assert.ok(!calls.includes('artifacts') && !calls.includes('resumeSession'), `list read too much: ${calls.join(' ')}`);
});

test('getTuple and list against a daemon without artifactsByID read one artifact at a time', { timeout: 120000 }, async (t) => {
  const { emptyCheckpoint, uuid6 } = await import('@langchain/langgraph-checkpoint');
  const { CairnSaver } = require('../langgraph.js');
  const { c } = await MODES.embedded(t);
  const { proxy, calls } = recording(c);
  const older = new Proxy(proxy, {
    get(target, prop) {
      if (prop !== 'artifactsByID') return target[prop];
      return async () => {
        calls.push('artifactsByID');
        const err = new Error('method_not_found: artifactsByID');
        err.code = 'method_not_found';
        throw err;
      };
    },
  });
  const saver = new CairnSaver({ client: older });
  let config = { configurable: { thread_id: 't', checkpoint_ns: '' } };
  for (let n = 0; n < 5; n++) {
    const cp = { ...emptyCheckpoint(), id: uuid6(n), channel_values: { a: n, b: 'x' }, channel_versions: { a: n + 1, b: 1 } };
    config = await saver.put(config, cp, { source: 'loop', step: n, parents: {} }, n === 0 ? { a: 1, b: 1 } : { a: n + 1 });
    await saver.putWrites(config, [['a', n]], `task-${n}`);
  }
  const tuple = await saver.getTuple({ configurable: { thread_id: 't' } });
  assert.deepEqual(tuple.checkpoint.channel_values, { a: 4, b: 'x' });
  assert.deepEqual(tuple.pendingWrites, [['task-4', 'a', 4]]);
  const steps = [];
  for await (const tup of saver.list({ configurable: { thread_id: 't', checkpoint_ns: '' } }, { limit: 3 })) steps.push(tup.metadata.step);
  assert.deepEqual(steps, [4, 3, 2]);
  assert.equal(calls.filter((m) => m === 'artifactsByID').length, 1);
  assert.ok(calls.includes('artifact'));
});

test('list sorts by checkpoint id when checkpoints were put out of order', { timeout: 120000 }, async (t) => {
  const { emptyCheckpoint } = await import('@langchain/langgraph-checkpoint');
  const { CairnSaver } = require('../langgraph.js');
  const { c } = await MODES.embedded(t);
  const saver = new CairnSaver({ client: c });
  // uuid6 ids sort by the time they are made; these sort by n.
  const uuid6 = (n) => `1f000000-0000-6000-8000-${String(n).padStart(12, '0')}`;
  // More than a log page (64), in an order far from the ids'.
  const order = Array.from({ length: 150 }, (_, i) => (i * 37) % 150);
  for (const n of order) {
    await saver.put({ configurable: { thread_id: 't', checkpoint_ns: '' } }, { ...emptyCheckpoint(), id: uuid6(n) }, { source: 'loop', step: n, parents: {} }, {});
  }
  const got = [];
  for await (const tup of saver.list({ configurable: { thread_id: 't', checkpoint_ns: '' } })) got.push(tup.metadata.step);
  assert.deepEqual(got, Array.from({ length: 150 }, (_, i) => 149 - i));
  const before = [];
  for await (const tup of saver.list({ configurable: { thread_id: 't' } }, { before: { configurable: { checkpoint_id: uuid6(100) } }, limit: 5 })) {
    before.push(tup.metadata.step);
  }
  assert.deepEqual(before, [99, 98, 97, 96, 95]);
  assert.equal((await saver.getTuple({ configurable: { thread_id: 't' } })).metadata.step, 149);
});

for (const mode of Object.keys(MODES)) {
  test(`a checkpoint put again is one checkpoint, as in MemorySaver (${mode})`, { timeout: 120000 }, async (t) => {
    // A host retrying a put whose outcome it did not learn puts the same
    // checkpoint id again: list gives it once, with the newest put's
    // metadata, in its place among the ids, as MemorySaver (whose put
    // replaces) does. Here the newest and an older one are put again.
    const { emptyCheckpoint, MemorySaver } = await import('@langchain/langgraph-checkpoint');
    const { CairnSaver } = require('../langgraph.js');
    const { c } = await MODES[mode](t);
    const uuid6 = (n) => `1f000000-0000-6000-8000-${String(n).padStart(12, '0')}`;
    const puts = [[0, 1], [1, 1], [2, 1], [2, 2], [1, 2], [3, 1]];
    const got = {};
    for (const [name, saver] of [['cairn', new CairnSaver({ client: c })], ['memory', new MemorySaver()]]) {
      for (const [n, attempt] of puts) {
        await saver.put({ configurable: { thread_id: 't', checkpoint_ns: '' } }, { ...emptyCheckpoint(), id: uuid6(n) }, { source: 'loop', step: n, attempt, parents: {} }, {});
      }
      const list = async (options) => {
        const out = [];
        for await (const tup of saver.list({ configurable: { thread_id: 't' } }, options)) out.push([tup.metadata.step, tup.metadata.attempt]);
        return out;
      };
      got[name] = [await list(), await list({ limit: 2 }), await list({ filter: { attempt: 1 } }), await list({ before: { configurable: { checkpoint_id: uuid6(2) } } })];
    }
    assert.deepEqual(got.cairn, got.memory);
    assert.deepEqual(got.cairn[0], [[3, 1], [2, 2], [1, 2], [0, 1]]);
  });
}

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

test('TypeScript resolves cairn-sessions/langgraph (ESM and CommonJS)', { timeout: 120000 }, (t) => {
  const os = require('node:os');
  const { execFileSync } = require('node:child_process');
  const bin = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-lg-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(PKG, path.join(dir, 'node_modules', 'cairn-sessions'), 'dir');
  // The peer dependency, as a dependent installs it beside the package.
  fs.symlinkSync(path.join(PKG, 'node_modules', '@langchain'), path.join(dir, 'node_modules', '@langchain'), 'dir');
  fs.writeFileSync(
    path.join(dir, 'a.mts'),
    `import { connect, type AgentRun } from 'cairn-sessions';
import { CairnSaver } from 'cairn-sessions/langgraph';
import { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
export async function f(ws: string): Promise<BaseCheckpointSaver> {
  const client = await connect({ workspace: ws });
  const run: AgentRun = await client.startRun('s1', { resume: true });
  await run.turn([{ role: 'user' }], { usage: { input_tokens: 1 }, toolCalls: 2 });
  await run.complete();
  return new CairnSaver({ client, sessionPrefix: 'lg:' });
}
// @ts-expect-error: the client is required
new CairnSaver({});
`
  );
  fs.writeFileSync(
    path.join(dir, 'b.cts'),
    `import lg = require('cairn-sessions/langgraph');
export const p: Promise<lg.CairnSaver> = lg.CairnSaver.connect({ embedded: true });
`
  );
  let out = '';
  try {
    execFileSync(
      process.execPath,
      [bin, '--noEmit', '--strict', '--target', 'es2022', '--lib', 'es2022', '--module', 'node16', '--moduleResolution', 'node16',
        '--types', '', '--skipLibCheck', '--pretty', 'false', path.join(dir, 'a.mts'), path.join(dir, 'b.cts')],
      { cwd: dir, encoding: 'utf8', stdio: 'pipe', timeout: 120000 }
    );
  } catch (err) {
    out = `${err.stdout || ''}${err.stderr || ''}` || String(err);
  }
  assert.strictEqual(out, '', `tsc found errors:\n${out}`);
});
