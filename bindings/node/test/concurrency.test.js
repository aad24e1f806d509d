'use strict';
// Many in-flight Promises, parallelResumable, and the event loop staying free.

const test = require('node:test');
const assert = require('node:assert/strict');
const { cairn, embedded, msg } = require('./helpers');

test('200 saves in flight at once, all results checked', async (t) => {
  const { c } = await embedded(t);
  const N = 200;
  const gens = await Promise.all(Array.from({ length: N }, (_, i) => c.save('burst', { change: { append_messages: [msg(i)] } })));
  assert.deepEqual([...gens].sort((a, b) => a - b), Array.from({ length: N }, (_, i) => i + 1));
  const snap = (await c.resumeSession('burst')).snapshot;
  assert.equal(snap.generation, N);
  assert.equal(snap.messages.length, N);
  assert.deepEqual(new Set(snap.messages.map((m) => m.content)), new Set(Array.from({ length: N }, (_, i) => `message ${i}`)));
});

test('mixed concurrent calls over many sessions settle their own Promises', async (t) => {
  const { c } = await embedded(t);
  const S = 20;
  const R = 10;
  const ops = [];
  for (let s = 0; s < S; s++) {
    for (let r = 0; r < R; r++) ops.push(c.save(`s${s}`, { change: { append_messages: [{ s, r }] } }).then((g) => ({ s, g })));
    ops.push(c.status().then((st) => ({ status: st.mode })));
  }
  const out = await Promise.all(ops);
  assert.equal(out.filter((o) => o.status === 'embedded').length, S);
  const list = await c.listSessions();
  assert.equal(list.length, S);
  for (let s = 0; s < S; s++) {
    const got = out.filter((o) => o.s === s).map((o) => o.g).sort((a, b) => a - b);
    assert.deepEqual(got, Array.from({ length: R }, (_, i) => i + 1));
    const snap = (await c.resumeSession(`s${s}`)).snapshot;
    assert.deepEqual(snap.messages.map((m) => m.r).sort((a, b) => a - b), Array.from({ length: R }, (_, i) => i));
  }
  // Errors among many in-flight calls reach the right Promises.
  const res = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => (i % 2 ? c.resumeSession(`missing${i}`) : c.resumeSession('s0'))));
  res.forEach((r, i) => {
    if (i % 2) assert.ok(r.status === 'rejected' && r.reason instanceof cairn.NotFoundError);
    else assert.ok(r.status === 'fulfilled' && r.value.snapshot.session_id === 's0');
  });
});

test('a slow call does not block the event loop', async (t) => {
  const { c } = await embedded(t);
  const sub = await c.subscribe();
  let ticks = 0;
  const iv = setInterval(() => ticks++, 10);
  try {
    const ev = await sub.nextEvent({ timeoutMs: 300 });
    assert.equal(ev, null, 'no event: the call timed out');
  } finally {
    clearInterval(iv);
  }
  // A blocked loop would not have ticked at all while the call waited.
  assert.ok(ticks >= 5, `the interval kept ticking during the call (${ticks} ticks)`);
  await sub.close();
});

test('other calls complete while a long poll is pending', async (t) => {
  const { c } = await embedded(t);
  const sub = await c.subscribe();
  const pendingPoll = sub.nextEvent({ timeoutMs: 20000 });
  for (let i = 0; i < 5; i++) assert.equal((await c.status()).mode, 'embedded');
  const g = await c.save('x', { change: { append_messages: [msg(1)] } });
  const ev = await pendingPoll;
  assert.equal(ev.event, 'session.committed');
  assert.equal(ev.data.generation, g);
  await sub.close();
});

function steps(counts, failing) {
  const mk = (id, value) => ({
    stepId: id,
    identity: `${id}-v1`,
    fn: async () => {
      counts[id] = (counts[id] || 0) + 1;
      await new Promise((r) => setImmediate(r));
      if (failing.has(id)) throw new Error(`step ${id} failed`);
      return value;
    },
  });
  return [mk('a', { a: 1 }), mk('b', 'bee'), mk('c', [3]), mk('d', 4)];
}

test('parallelResumable resumes after a failed step without re-running successes', async (t) => {
  const { c } = await embedded(t);
  await c.save('wfs', { change: { append_messages: [msg(0)] } });
  const counts = {};
  const failing = new Set(['c']);
  await assert.rejects(c.parallelResumable(steps(counts, failing), 'wf', { sessionId: 'wfs' }), /step c failed/);
  assert.deepEqual(counts, { a: 1, b: 1, c: 1, d: 1 }, 'the other steps ran to the end');
  const recorded = await c.beginWorkflow('wf', steps({}, new Set()), { sessionId: 'wfs' });
  assert.deepEqual(recorded.map((r) => r.step_id).sort(), ['a', 'b', 'd']);

  failing.clear();
  const results = await c.parallelResumable(steps(counts, failing), 'wf', { sessionId: 'wfs' });
  assert.deepEqual(results, [{ a: 1 }, 'bee', [3], 4]);
  assert.deepEqual(counts, { a: 1, b: 1, c: 2, d: 1 }, 'only the failed step ran again');

  // Everything recorded: a third run runs nothing and returns the records.
  const again = await c.parallelResumable(steps(counts, failing), 'wf', { sessionId: 'wfs' });
  assert.deepEqual(again, [{ a: 1 }, 'bee', [3], 4]);
  assert.deepEqual(counts, { a: 1, b: 1, c: 2, d: 1 });
  await c.finishWorkflow('wf');
});

test('parallelResumable runs the remaining steps concurrently', async (t) => {
  const { c } = await embedded(t);
  // Each step waits until all of them have started: that only finishes if
  // they run at the same time.
  let started = 0;
  let release;
  const all = new Promise((r) => (release = r));
  const specs = ['p', 'q', 'r'].map((id) => ({
    stepId: id,
    identity: id,
    fn: async () => {
      if (++started === 3) release();
      await all;
      return id.toUpperCase();
    },
  }));
  assert.deepEqual(await c.parallelResumable(specs, 'conc'), ['P', 'Q', 'R']);
});

test('parallelResumable fails closed on a changed identity before running anything', async (t) => {
  const { c } = await embedded(t);
  const counts = {};
  await c.parallelResumable(steps(counts, new Set()), 'wf2');
  assert.deepEqual(counts, { a: 1, b: 1, c: 1, d: 1 });
  const changed = steps(counts, new Set());
  changed[1].identity = 'b-v2';
  changed.push({ stepId: 'e', identity: 'e', fn: () => { counts.e = 1; } });
  await assert.rejects(c.parallelResumable(changed, 'wf2'), cairn.StepIdentityChangedError);
  assert.deepEqual(counts, { a: 1, b: 1, c: 1, d: 1 }, 'nothing ran');
});

test('parallelResumable raises the first failure after waiting for the rest', async (t) => {
  const { c } = await embedded(t);
  let slowDone = false;
  const specs = [
    { stepId: 'fast-fail', identity: '1', fn: async () => { throw new Error('first'); } },
    {
      stepId: 'slow-ok',
      identity: '2',
      fn: async () => {
        for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
        slowDone = true;
        return 'ok';
      },
    },
    {
      stepId: 'late-fail',
      identity: '3',
      fn: async () => {
        for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
        throw new Error('second');
      },
    },
  ];
  await assert.rejects(c.parallelResumable(specs, 'wf3'), /first/);
  assert.equal(slowDone, true);
  const rec = await c.beginWorkflow('wf3', specs);
  assert.deepEqual(rec.map((r) => r.step_id), ['slow-ok']);
});

test('a waiting subscription ends when the client closes (embedded)', async (t) => {
  const { c } = await embedded(t);
  const sub = await c.subscribe();
  const waiting = sub.nextEvent({ timeoutMs: 20000 });
  const later = sub.nextEvent({ timeoutMs: 20000 });
  await c.close();
  assert.equal(await waiting, null);
  assert.equal(await later, null);
  assert.equal(sub.closed, true);
  // Iterating a closed subscription ends at once.
  for await (const _ of sub) assert.fail('no event after close');
});
