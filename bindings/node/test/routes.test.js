'use strict';
// The one route every call takes: cairn_submit, the ticket on the
// completion pipe, cairn_take. Out-of-order completion, big requests, and
// the event loop left free.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { cairn, embedded, msg } = require('./helpers');

test('the binding has one route: no worker thread, no spin options', () => {
  const dir = path.resolve(__dirname, '..');
  assert.equal(fs.existsSync(path.join(dir, 'lane.js')), false);
  const src = fs.readFileSync(path.join(dir, 'index.js'), 'utf8');
  assert.doesNotMatch(src, /worker_threads|Atomics\.|sched_yield|cairn_call\b/);
});

test('calls that finish out of order settle their own Promises', async (t) => {
  const { c } = await embedded(t);
  const sub = await c.subscribe({ events: ['session.committed'] });
  // The long poll is submitted first and finishes last: after the save
  // behind it, whose commit it reports.
  const poll = sub.nextEvent({ timeoutMs: 20000 });
  for (let round = 0; round < 20; round++) {
    const [g, s, l] = await Promise.all([c.save('s', { change: { append_messages: [msg(round)] } }), c.status(), c.listSessions()]);
    assert.equal(g, round + 1);
    assert.equal(s.mode, 'embedded');
    assert.ok(Array.isArray(l));
  }
  const ev = await poll;
  assert.equal(ev.event, 'session.committed');
  assert.equal(ev.data.generation, 1);
  assert.equal((await c.resumeSession('s')).snapshot.messages.length, 20);
  await sub.close();
});

test('a request larger than the scratch buffer', async (t) => {
  const { c } = await embedded(t);
  const big = { role: 'tool', content: 'é'.repeat(1 << 20) }; // 2 MB of UTF-8
  const small = msg(1);
  // A big request and small ones in flight together: the scratch buffer the
  // small ones share must not corrupt the big one, nor the reverse.
  const [g, g2] = await Promise.all([c.save('big', { change: { append_messages: [big] } }), c.save('small', { change: { append_messages: [small] } })]);
  assert.equal(g, 1);
  assert.equal(g2, 1);
  assert.deepEqual((await c.resumeSession('big')).snapshot.messages, [big]);
  assert.deepEqual((await c.resumeSession('small')).snapshot.messages, [small]);
});

test('too_large: a commit over the store limit, without blocking the event loop', async (t) => {
  const { c } = await embedded(t);
  let ticks = 0;
  const iv = setInterval(() => ticks++, 5);
  try {
    await assert.rejects(c.save('huge', { change: { append_messages: ['x'.repeat(65 << 20)] } }), (err) => {
      assert.ok(err instanceof cairn.TooLargeError, err.message);
      assert.equal(err.code, 'too_large');
      return true;
    });
  } finally {
    clearInterval(iv);
  }
  assert.ok(ticks > 0, 'the event loop ran while the store worked');
  await assert.rejects(c.resumeSession('huge'), cairn.NotFoundError); // nothing written
});
