'use strict';
// The two routes a call can take (the lane thread and cairn_submit with the
// completion pipe), their hand-offs, and big calls.

const test = require('node:test');
const assert = require('node:assert/strict');
const { cairn, embedded, msg } = require('./helpers');

test('detached lane call and submit route side by side', async (t) => {
  // spinUs 0: every lane call is detached at once and settles by message.
  const { c } = await embedded(t, { spinUs: 0 });
  for (let round = 0; round < 20; round++) {
    const save = c.save('s', { change: { append_messages: [msg(round)] } }); // takes the lane
    const st = c.status(); // the lane is busy: goes through cairn_submit
    const list = c.listSessions();
    const [g, s, l] = await Promise.all([save, st, list]);
    assert.equal(g, round + 1);
    assert.equal(s.mode, 'embedded');
    assert.ok(Array.isArray(l));
  }
  assert.equal((await c.resumeSession('s')).snapshot.messages.length, 20);
});

test('lane: false sends every call through cairn_submit', async (t) => {
  for (const spinUs of [0, 100]) {
    const { c } = await embedded(t, { lane: false, spinUs });
    assert.equal((await c.status()).mode, 'embedded');
    const gens = await Promise.all(Array.from({ length: 50 }, (_, i) => c.save('s', { change: { append_messages: [msg(i)] } })));
    assert.deepEqual([...gens].sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => i + 1));
    await assert.rejects(c.resumeSession('missing'), cairn.NotFoundError);
  }
});

test('a request too big for the lane buffer', async (t) => {
  const { c } = await embedded(t);
  const big = { role: 'tool', content: 'é'.repeat(1 << 20) }; // 2 MB of UTF-8
  const g = await c.save('big', { change: { append_messages: [big] } });
  assert.equal(g, 1);
  const r = await c.resumeSession('big');
  assert.deepEqual(r.snapshot.messages, [big]);
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
