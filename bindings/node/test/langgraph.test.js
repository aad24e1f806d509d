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
const { cairn, daemonOptions, stopDaemon, tmpWorkspace } = require('./helpers');

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
