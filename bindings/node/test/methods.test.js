'use strict';
// Every method of the Client, in embedded mode.

const test = require('node:test');
const assert = require('node:assert/strict');
const { cairn, embedded, msg } = require('./helpers');

test('status and version', async (t) => {
  const { c, ws } = await embedded(t);
  const st = await c.status();
  assert.equal(st.mode, 'embedded');
  assert.equal(st.pid, process.pid);
  assert.equal(st.version, cairn.version());
  assert.equal(require('fs').realpathSync(st.workspace), require('fs').realpathSync(ws));
  assert.equal(typeof c.handle, 'number');
});

test('save snapshot and delta, resumeSession, expectGeneration', async (t) => {
  const { c } = await embedded(t);
  const bytes = Buffer.from([0, 1, 2, 254, 255]);
  const g1 = await c.save('s1', {
    snapshot: {
      schema_version: 1,
      session_id: 's1',
      messages: [{ role: 'user', content: 'héllo ✓ 🪨' }],
      metadata: { project: 'cairn' },
      artifacts: [{ id: 'a1', kind: 'blob', media_type: 'application/octet-stream', data: bytes.toString('base64') }],
    },
  });
  assert.equal(g1, 1);
  const g2 = await c.save('s1', { change: { append_messages: [msg(2)] }, expectGeneration: 1 });
  assert.equal(g2, 2);
  const r = await c.resumeSession('s1');
  assert.equal(r.generation, 2);
  assert.equal(r.snapshot.session_id, 's1');
  assert.deepEqual(r.snapshot.messages, [{ role: 'user', content: 'héllo ✓ 🪨' }, msg(2)]);
  assert.deepEqual(r.snapshot.metadata, { project: 'cairn' });
  assert.deepEqual(Buffer.from(r.snapshot.artifacts[0].data, 'base64'), bytes);
  assert.equal(r.snapshot.artifacts[0].size, bytes.length);
  assert.ok(r.drift);
  await assert.rejects(c.save('s1', { change: { append_messages: [msg(3)] }, expectGeneration: 1 }), cairn.ConflictError);
  assert.equal((await c.resumeSession('s1')).generation, 2);
});

test('runs: beginRun, checkpoint, resumeRun, completeRun', async (t) => {
  const { c } = await embedded(t);
  await c.save('s', { change: { append_messages: [msg(0)] } });
  const run = await c.beginRun('s');
  assert.equal(typeof run.run_id, 'string');
  assert.ok(run.generation >= 2);
  const named = await c.beginRun('s', { runId: 'run-named' });
  assert.equal(named.run_id, 'run-named');
  const cp1 = await c.checkpoint(run.run_id, {
    turn: 1,
    newMessages: [msg(1), msg(2)],
    usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15, cost: 0.5 },
    toolCallsCount: 1,
    state: { step: 'one' },
  });
  assert.equal(cp1.message_count, 3);
  const cp2 = await c.checkpoint(run.run_id, {
    turn: 2,
    newMessages: [msg(3)],
    usage: { input_tokens: 20, output_tokens: 10, total_tokens: 30, cost: 1 },
    toolCallsCount: 3,
    state: { step: 'two' },
  });
  assert.equal(cp2.message_count, 4);
  assert.ok(cp2.generation > cp1.generation);

  const rs = await c.resumeSession('s');
  const ir = rs.interrupted_runs.find((x) => x.run_id === run.run_id);
  assert.ok(ir, 'the checkpointed run is listed as interrupted');
  assert.equal(ir.turn, 2);

  const rr = await c.resumeRun(run.run_id, { newRunId: 'run-2' });
  assert.equal(rr.run_id, 'run-2');
  assert.equal(rr.resumed_from, run.run_id);
  assert.equal(rr.session_id, 's');
  assert.equal(rr.turn, 2);
  assert.deepEqual(rr.state, { step: 'two' });
  assert.equal(rr.usage.total_tokens, 30);
  assert.equal(rr.tool_calls_count, 3);
  assert.deepEqual(rr.messages, [msg(0), msg(1), msg(2), msg(3)]);

  const done = await c.completeRun('run-2', 'completed', { usage: { total_tokens: 40 }, toolCallsCount: 4 });
  assert.ok(done.generation > cp2.generation);
  const snap = (await c.resumeSession('s')).snapshot;
  const r2 = snap.runs.find((x) => x.run_id === 'run-2');
  assert.equal(r2.status, 'completed');
  assert.equal(r2.parent_run_id, run.run_id);
  await assert.rejects(c.resumeRun('run-2'), cairn.NoCheckpointError);
});

test('workflows: beginWorkflow, completeStep, finishWorkflow', async (t) => {
  const { c } = await embedded(t);
  const steps = [
    { stepId: 'a', identity: 'ida' },
    { step_id: 'b', identity: 'idb' },
  ];
  assert.deepEqual(await c.beginWorkflow('wf', steps), []);
  await c.completeStep('wf', 'b', 'idb', { out: [1, 2] });
  const done = await c.beginWorkflow('wf', steps);
  assert.equal(done.length, 1);
  assert.equal(done[0].step_id, 'b');
  assert.deepEqual(done[0].result, { out: [1, 2] });
  await c.finishWorkflow('wf');
  assert.deepEqual(await c.beginWorkflow('wf', steps), []);
});

test('listSessions, fork, delete', async (t) => {
  const { c } = await embedded(t);
  await c.save('one', { change: { append_messages: [msg(1)] } });
  await c.save('one', { change: { append_messages: [msg(2)] } });
  await c.save('two', { change: { append_messages: [msg(1)] } });
  let list = await c.listSessions();
  assert.deepEqual(list.map((s) => s.session_id).sort(), ['one', 'two']);
  const one = list.find((s) => s.session_id === 'one');
  assert.equal(one.generation, 2);
  assert.equal(one.message_count, 2);

  const f = await c.fork('one', 'one-at-1', { atGeneration: 1 });
  assert.equal(f.session_id, 'one-at-1');
  assert.deepEqual((await c.resumeSession('one-at-1')).snapshot.messages, [msg(1)]);
  const f2 = await c.fork('one', 'one-copy');
  assert.equal(f2.session_id, 'one-copy');
  assert.deepEqual((await c.resumeSession('one-copy')).snapshot.messages, [msg(1), msg(2)]);

  await c.delete('two');
  list = await c.listSessions();
  assert.deepEqual(list.map((s) => s.session_id).sort(), ['one', 'one-at-1', 'one-copy']);
  await assert.rejects(c.resumeSession('two'), cairn.NotFoundError);
});

test('export and import (object, JSON text, Buffer)', async (t) => {
  const { c } = await embedded(t);
  const messages = [msg(1), { role: 'assistant', content: 'ünïcødé', n: 1.5, nested: { a: [null, true] } }];
  await c.save('exp', { change: { append_messages: messages, metadata: { k: 'v' } } });
  const env = await c.export('exp');
  assert.equal(env.schema_version, 1);
  assert.equal(env.session.session_id, 'exp');
  await c.delete('exp');
  const imp = await c.import(env);
  assert.equal(imp.session_id, 'exp');
  assert.deepEqual((await c.resumeSession('exp')).snapshot.messages, messages);
  await c.delete('exp');
  await c.import(JSON.stringify(env));
  assert.deepEqual((await c.resumeSession('exp')).snapshot.messages, messages);
  await c.delete('exp');
  await c.import(Buffer.from(JSON.stringify(env)));
  assert.deepEqual((await c.resumeSession('exp')).snapshot.metadata, { k: 'v' });
});

test('subscribe delivers events in commit order; break unsubscribes', async (t) => {
  const { c } = await embedded(t);
  const sub = await c.subscribe({ events: ['session.committed'] });
  const gens = [];
  for (let i = 1; i <= 20; i++) gens.push(await c.save('ev', { change: { append_messages: [msg(i)] } }));
  const seen = [];
  for await (const ev of sub) {
    assert.equal(ev.event, 'session.committed');
    assert.equal(ev.data.session_id, 'ev');
    seen.push(ev.data.generation);
    if (seen.length === gens.length) break;
  }
  assert.deepEqual(seen, gens);
  assert.equal(sub.closed, true);
  // Breaking out unsubscribed: the library no longer knows the subscription.
  await assert.rejects(c.call('unsubscribe', { subscription: sub.id }), cairn.NotFoundError);
  const r = await c.call('nextEvent', { subscription: sub.id, timeout_ms: 1 });
  assert.equal(r.closed, true);
});

test('subscribe to every event type of a run', async (t) => {
  const { c } = await embedded(t);
  await c.save('s', { change: { append_messages: [msg(0)] } });
  const sub = await c.subscribe();
  const run = await c.beginRun('s');
  await c.checkpoint(run.run_id, { turn: 1, newMessages: [msg(1)], toolCallsCount: 1 });
  await c.completeRun(run.run_id, 'completed');
  const types = [];
  while (!types.includes('run.completed')) {
    const ev = await sub.nextEvent({ timeoutMs: 5000 });
    assert.ok(ev, 'an event arrives');
    types.push(ev.event);
  }
  assert.ok(types.includes('run.checkpointed'));
  assert.ok(types.indexOf('run.checkpointed') < types.indexOf('run.completed'));
  await sub.close();
  assert.equal(await sub.nextEvent(), null);
});

test('generic call and openHandles', async (t) => {
  const before = cairn.openHandles();
  const { c } = await embedded(t);
  assert.equal(cairn.openHandles(), before + 1);
  const hello = await c.call('hello');
  assert.ok(hello.capabilities.methods.includes('nextEvent'));
  const typed = await c.hello();
  assert.deepEqual(typed.capabilities.methods, hello.capabilities.methods);
  await c.close();
  assert.equal(cairn.openHandles(), before);
  await c.close(); // idempotent
});
