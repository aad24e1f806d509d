'use strict';
// Daemon mode: auto-start, the methods through the daemon, many in-flight
// Promises, events across clients.

const test = require('node:test');
const assert = require('node:assert/strict');
const { cairn, daemon, daemonOptions, alive, msg } = require('./helpers');

test('auto-starts the daemon and serves every kind of call', async (t) => {
  const { c, ws, pid, status } = await daemon(t);
  assert.equal(status.mode, 'daemon');
  assert.ok(pid > 0 && pid !== process.pid);
  assert.ok(alive(pid));
  assert.equal(require('fs').realpathSync(status.daemon.workspace), require('fs').realpathSync(ws));

  const g = await c.save('d', { change: { append_messages: [msg(1)] } });
  assert.equal(g, 1);
  const run = await c.beginRun('d');
  await c.checkpoint(run.run_id, { turn: 1, newMessages: [msg(2)], usage: { total_tokens: 7 }, toolCallsCount: 2, state: { s: 1 } });
  const rr = await c.resumeRun(run.run_id);
  assert.equal(rr.usage.total_tokens, 7);
  assert.deepEqual(rr.state, { s: 1 });
  await c.completeRun(rr.run_id, 'completed');
  const results = await c.parallelResumable(
    [
      { stepId: 'x', identity: 'x', fn: async () => 1 },
      { stepId: 'y', identity: 'y', fn: async () => 2 },
    ],
    'dwf'
  );
  assert.deepEqual(results, [1, 2]);
  await c.finishWorkflow('dwf');
  const env = await c.export('d');
  await c.fork('d', 'd2');
  await c.delete('d');
  await c.import(env);
  assert.deepEqual((await c.listSessions()).map((s) => s.session_id).sort(), ['d', 'd2']);
  await assert.rejects(c.resumeSession('nope'), cairn.NotFoundError);
  await assert.rejects(c.call('nope'), cairn.MethodNotFoundError);

  // A second client reaches the same daemon and sees the same data.
  const c2 = await cairn.connect(daemonOptions(ws));
  try {
    const st2 = await c2.status();
    assert.equal(st2.daemon.pid, pid);
    assert.equal((await c2.resumeSession('d2')).snapshot.messages.length, 2);
  } finally {
    await c2.close();
  }
  await c.close();
  await assert.rejects(c.status(), cairn.BadHandleError);
});

test('200 saves in flight at once through the daemon', async (t) => {
  const { c } = await daemon(t);
  const N = 200;
  const gens = await Promise.all(Array.from({ length: N }, (_, i) => c.save('burst', { change: { append_messages: [msg(i)] } })));
  assert.deepEqual([...gens].sort((a, b) => a - b), Array.from({ length: N }, (_, i) => i + 1));
  assert.equal((await c.resumeSession('burst')).snapshot.messages.length, N);
});

test('events from another client arrive in commit order', async (t) => {
  const { c, ws } = await daemon(t);
  const sub = await c.subscribe({ events: ['session.committed'] });
  const writer = await cairn.connect(daemonOptions(ws));
  const gens = [];
  try {
    for (let i = 0; i < 10; i++) gens.push(await writer.save('ev', { change: { append_messages: [msg(i)] } }));
  } finally {
    await writer.close();
  }
  const seen = [];
  for await (const ev of sub) {
    seen.push(ev.data.generation);
    if (seen.length === gens.length) break;
  }
  assert.deepEqual(seen, gens);
});

test('a waiting subscription ends when the client closes', async (t) => {
  const { c } = await daemon(t);
  const sub = await c.subscribe();
  const waiting = sub.nextEvent({ timeoutMs: 20000 });
  await new Promise((r) => setImmediate(r));
  await c.close();
  assert.equal(await waiting, null);
  assert.equal(sub.closed, true);
});
