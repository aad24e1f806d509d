'use strict';
// The run helper (run.js) against real processes: a host loop in a child
// process is SIGKILLed between two turns, then in the middle of a tool
// call, and each new process resumes from the last finished turn with the
// usage and tool-call counters carried on; the session ends up with each
// turn's messages exactly once and the run line completed.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const readline = require('node:readline');
const { cairn, MODES, daemonOptions } = require('./helpers');

const CHILD = path.join(__dirname, '..', 'fixtures', 'run_child.js');

// Runs the child until it prints the event `until` (then SIGKILLs it) or
// exits; resolves to the events it printed.
function child(opts, session, turns, stop, until) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CHILD, JSON.stringify(opts), session, String(turns), stop], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const events = [];
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`child timed out; events: ${JSON.stringify(events)}`));
    }, 60000);
    readline.createInterface({ input: p.stdout }).on('line', (line) => {
      const e = JSON.parse(line);
      events.push(e);
      if (until && until(e)) p.kill('SIGKILL');
    });
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (until && signal !== 'SIGKILL') reject(new Error(`child exited (${code}) before it was killed: ${JSON.stringify(events)}`));
      else if (!until && code !== 0) reject(new Error(`child failed (${code}): ${JSON.stringify(events)}`));
      else resolve(events);
    });
  });
}

for (const [mode, open] of Object.entries(MODES)) {
  test(`run helper (${mode}): killed between turns and mid tool call, resumed with counters`, { timeout: 120000 }, async (t) => {
    const { c, ws } = await open(t);
    const opts = mode === 'embedded' ? { workspace: ws, embedded: true } : daemonOptions(ws);
    if (mode === 'embedded') await c.close(); // the child takes the workspace

    // 1. Killed after turn 2 is saved, before turn 3 starts.
    const a = await child(opts, 's1', 5, 'between:2', (e) => e.event === 'turn' && e.turn === 2);
    assert.equal(a[0].resumed, false);
    assert.equal(a[0].turns, 0);

    // 2. Resumed at turn 2; finishes turn 3, killed inside turn 4's tool call.
    const b = await child(opts, 's1', 5, 'tool:4', (e) => e.event === 'tool' && e.turn === 4);
    assert.equal(b[0].resumed, true);
    assert.equal(b[0].resumedFrom, a[0].runId);
    assert.equal(b[0].turns, 2);
    assert.deepEqual(b[0].state, { step: 2 });
    assert.equal(b[0].toolCallsCount, 2);
    assert.equal(b[0].usage.input_tokens, 20);
    assert.equal(b[0].usage.total_tokens, 30);
    assert.equal(b[0].messages, 4);

    // 3. Resumed at turn 3 (turn 4's tool call left nothing); runs to the end.
    const d = await child(opts, 's1', 5, 'none', null);
    assert.equal(d[0].resumed, true);
    assert.equal(d[0].resumedFrom, b[0].runId);
    assert.equal(d[0].turns, 3);
    assert.equal(d[0].toolCallsCount, 3);
    assert.equal(d[0].usage.output_tokens, 15);
    assert.equal(d[0].messages, 6);
    const done = d[d.length - 1];
    assert.equal(done.event, 'done');
    assert.equal(done.turns, 5);
    assert.equal(done.toolCallsCount, 5);
    assert.equal(done.usage.input_tokens, 50);

    // What the store holds: every turn's messages once, the line completed.
    const c2 = mode === 'embedded' ? await cairn.connect(opts) : c;
    if (c2 !== c) t.after(() => c2.close());
    const msgs = (await c2.messages('s1')).messages.map((m) => m.content);
    const want = [];
    for (let n = 1; n <= 5; n++) want.push(`call tool ${n}`, `result ${n}`);
    assert.deepEqual(msgs, want);
    const rec = await c2.run(done.runId, { sessionId: 's1' });
    assert.equal(rec.run.status, 'completed');
    assert.equal(rec.run.tool_calls_count, 5);
    assert.equal(rec.run.usage.input_tokens, 50);
    const again = await c2.resumeSession('s1', { messagesTail: 0, artifacts: 'none', traces: 'none', drift: false, processes: false });
    assert.deepEqual(again.interrupted_runs || [], []);
  });
}

test('run helper: withRun completes on return and leaves the run resumable on throw', async (t) => {
  const { c } = await MODES.embedded(t);
  const out = await c.withRun('w1', async (run) => {
    await run.turn([{ role: 'user', content: 'hi' }], { usage: { input_tokens: 3 }, toolCalls: [{ name: 'x' }] });
    return run.runId;
  });
  assert.equal((await c.run(out, { sessionId: 'w1' })).run.status, 'completed');
  await assert.rejects(
    c.withRun('w2', async (run) => {
      await run.turn([{ role: 'user', content: 'one' }]);
      throw new Error('boom');
    }),
    /boom/
  );
  const run = await c.startRun('w2', { resume: true });
  assert.equal(run.resumed, true);
  assert.equal(run.turns, 1);
  await run.complete();
  // Nothing to resume now: a fresh run.
  const fresh = await c.startRun('w2', { resume: true });
  assert.equal(fresh.resumed, false);
  assert.equal(fresh.turns, 0);
  await fresh.complete();
});
