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

// --- A turn whose checkpoint's outcome is unknown --------------------------

const { daemon, withEnv, sigstop } = require('./helpers');

/** Resolves when run runId's checkpoint has reached turn (10 s at most). */
async function waitTurn(c, runId, turn) {
  const deadline = Date.now() + 10000;
  for (;;) {
    const r = await c.run(runId);
    if (((r.checkpoint || {}).turn || 0) >= turn) return;
    assert.ok(Date.now() < deadline, `run ${runId} never reached turn ${turn}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

for (const [path_, env] of [
  ['own connection', undefined],
  ['libcairn', '0'],
]) {
  test(`run helper (${path_}): a turn of unknown outcome is settled by the next call`, { timeout: 90000 }, async (t) => {
    // A turn whose checkpoint got no answer (a stopped daemon, a call
    // timeout) rejects with UnavailableError. When the daemon carried it
    // out after all, the host's retry of the same turn resolves to its
    // number without saving it twice, and the next turn follows it; when
    // it did not (a request cut before it was whole), the host's next turn
    // takes its number. The totals follow what was committed.
    const { c, pid } = await withEnv(env, () => daemon(t, { callTimeoutMs: 400 }));
    assert.equal(c._wire === null, env === '0', 'the path under test');
    const sent = [];
    const checkpoint = c.checkpoint;
    c.checkpoint = function (runId, o) {
      sent.push(o.turn);
      return checkpoint.call(this, runId, o);
    };
    const m = (t_) => ({ role: 'user', content: `turn ${t_}`, t: t_ });
    let stopped = false;
    const stop = () => {
      sigstop(pid);
      stopped = true;
    };
    const cont = () => {
      process.kill(pid, 'SIGCONT');
      stopped = false;
    };
    try {
      const run = await c.startRun('s');
      assert.equal(await run.turn([m(1)], { usage: { input_tokens: 1 }, toolCalls: 1 }), 1);

      // 2. No answer; the daemon carries it out once it runs again.
      const two = () => run.turn([m(2)], { usage: { input_tokens: 2 }, toolCalls: [{ name: 'a' }], state: { k: 2 } });
      stop();
      await assert.rejects(two(), (err) => {
        assert.ok(err instanceof cairn.UnavailableError, String(err));
        assert.match(err.message, /no answer to checkpoint/);
        return true;
      });
      cont();
      await waitTurn(c, run.runId, 2);
      assert.equal(run.turns, 1, 'not counted before it is settled');

      // 3. The host retries it: counted, not sent again.
      assert.equal(await two(), 2);
      assert.deepEqual(sent, [1, 2]);
      assert.equal(run.turns, 2);
      assert.equal(run.usage.input_tokens, 3);
      assert.equal(run.toolCallsCount, 2);
      assert.deepEqual(run.state, { k: 2 });
      assert.equal(await run.turn([m(3)]), 3);
      assert.deepEqual(sent, [1, 2, 3]);

      // 4. Cut before it was whole: not carried out; the next turn is 4.
      stop();
      await assert.rejects(
        run.turn([{ role: 'user', content: 'x'.repeat(16 << 20), t: 'big' }], { usage: { input_tokens: 9 }, toolCalls: 9 }),
        (err) => {
          assert.ok(err instanceof cairn.UnavailableError, String(err));
          assert.match(err.message, /no answer to checkpoint/);
          return true;
        }
      );
      cont();
      assert.equal(await run.turn([m(4)], { usage: { input_tokens: 4 } }), 4);
      assert.deepEqual(sent, [1, 2, 3, 4, 4]);
      assert.equal(run.usage.input_tokens, 7);
      assert.equal(run.toolCallsCount, 2);
      assert.deepEqual(run.state, { k: 2 });
      const before = (await c.run(run.runId)).checkpoint;
      assert.equal(before.turn, 4);
      assert.equal(before.usage.input_tokens, 7);
      assert.equal(before.tool_calls_count, 2);
      await run.complete();

      const got = await c.run(run.runId);
      assert.equal(got.run.status, 'completed');
      assert.equal(got.run.usage.input_tokens, 7);
      assert.equal(got.run.tool_calls_count, 2);
      assert.deepEqual((await c.messages('s')).messages.map((x) => x.t), [1, 2, 3, 4]);
    } finally {
      if (stopped) process.kill(pid, 'SIGCONT');
    }
  });
}

test('run helper: settling with a stand-in client (not committed, other errors, a failed read)', async () => {
  const calls = [];
  let committed = 0;
  let fail = null;
  let readFails = false;
  const client = {
    async checkpoint(runId, o) {
      calls.push(['checkpoint', o.turn]);
      if (fail) {
        const err = fail;
        fail = null;
        throw err;
      }
      committed = o.turn;
      return {};
    },
    async run() {
      calls.push(['run']);
      if (readFails) throw new cairn.UnavailableError('read failed');
      return { run: {}, checkpoint: committed ? { turn: committed } : null };
    },
    async completeRun(runId, status, o) {
      calls.push(['completeRun', o.toolCallsCount]);
    },
  };
  const { AgentRun } = require('../run.js');
  const run = new AgentRun(client, 's', { runId: 'r' });

  // Another error is an answer: nothing remembered, no read next time.
  fail = new cairn.ConflictError('no');
  await assert.rejects(run.turn([{ a: 1 }]), cairn.ConflictError);
  assert.equal(await run.turn([{ a: 1 }]), 1);
  assert.deepEqual(calls.splice(0), [['checkpoint', 1], ['checkpoint', 1]]);

  // Unknown and not committed: the retry is saved anew as turn 2.
  fail = new cairn.UnavailableError('lost');
  await assert.rejects(run.turn([{ a: 2 }], { toolCalls: 1 }), cairn.UnavailableError);
  assert.equal(await run.turn([{ a: 2 }], { toolCalls: 1 }), 2);
  assert.deepEqual(calls.splice(0), [['checkpoint', 2], ['run'], ['checkpoint', 2]]);

  // Unknown; the read fails: that error, and the turn stays unsettled.
  fail = new cairn.UnavailableError('lost');
  await assert.rejects(run.turn([{ a: 3 }], { state: { b: 1, c: 2 } }), cairn.UnavailableError);
  committed = 3; // it was carried out after all
  readFails = true;
  await assert.rejects(run.turn([{ a: 3 }], { state: { b: 1, c: 2 } }), /read failed/);
  assert.equal(run.turns, 2);
  readFails = false;
  // Deeply equal (keys in another order): the retry, not sent again.
  assert.equal(await run.turn([{ a: 3 }], { state: { c: 2, b: 1 } }), 3);
  assert.deepEqual(calls.splice(0), [['checkpoint', 3], ['run'], ['run']]);

  // complete() settles first: a committed attempt is counted in the totals.
  fail = new cairn.UnavailableError('lost');
  await assert.rejects(run.turn([{ a: 4 }], { toolCalls: 5 }), cairn.UnavailableError);
  committed = 4;
  await run.complete();
  assert.equal(run.turns, 4);
  assert.deepEqual(calls.splice(0), [['checkpoint', 4], ['run'], ['completeRun', 6]]);
});
