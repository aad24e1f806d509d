'use strict';
// A damaged session log through the binding, in each mode: listSessions
// shows it as corrupt, reads reject with CorruptError, verify reports it,
// repair without apply writes nothing and, applied, salvages the intact
// prefix and keeps the original bytes in quarantine. The log is damaged
// while no engine holds the store.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { cairn, tmpWorkspace, stopDaemon, daemonOptions, msg } = require('./helpers');

const COMMITS = 20;
const MSG_BYTES = 5000;

function logPath(ws, sid) {
  return path.join(ws, '.cairn', 'sessions', `s-${sid}.log`);
}

function quarantined(ws) {
  const q = path.join(ws, '.cairn', 'quarantine');
  return fs.existsSync(q) ? fs.readdirSync(q).sort() : [];
}

/**
 * Saves COMMITS commits of one ~5 KB message each to session "bad" and one
 * to "good", closes the store, flips a bit in the middle of "bad"'s log
 * (inside a middle commit, with intact commits after it), and returns the
 * damaged bytes.
 */
async function damage(ws) {
  const c = await cairn.connect({ workspace: ws, embedded: true });
  try {
    for (let i = 0; i < COMMITS; i++) await c.save('bad', { change: { append_messages: [msg(i, MSG_BYTES)] } });
    await c.save('good', { change: { append_messages: [msg(0)] } });
  } finally {
    await c.close();
  }
  const file = logPath(ws, 'bad');
  const data = fs.readFileSync(file);
  assert.ok(data.length > COMMITS * MSG_BYTES, 'the log is smaller than its messages: compacted or not written');
  const at = Math.floor(data.length / 2);
  data[at] ^= 0x10;
  fs.writeFileSync(file, data);
  return data;
}

async function open(t, ws, mode) {
  if (mode === 'embedded') {
    const c = await cairn.connect({ workspace: ws, embedded: true });
    t.after(() => c.close().catch(() => {}));
    return c;
  }
  const c = await cairn.connect(daemonOptions(ws));
  const pid = (await c.status()).daemon.pid;
  t.after(async () => {
    await c.close().catch(() => {});
    await stopDaemon(pid);
  });
  return c;
}

for (const mode of ['embedded', 'daemon']) {
  test(`a corrupt session: list, verify and repair (${mode})`, async (t) => {
    const ws = tmpWorkspace(t);
    const damaged = await damage(ws);
    const file = logPath(ws, 'bad');
    const c = await open(t, ws, mode);
    // Opening the store destroys nothing.
    assert.deepEqual(fs.readFileSync(file), damaged);

    const listed = Object.fromEntries((await c.listSessions()).map((s) => [s.session_id, s]));
    assert.deepEqual(Object.keys(listed).sort(), ['bad', 'good']);
    assert.equal(listed.bad.state, 'corrupt');
    assert.ok(listed.bad.problem);
    assert.equal(listed.good.state, undefined);
    assert.equal(listed.good.problem, undefined);
    await assert.rejects(c.resumeSession('bad'), cairn.CorruptError);
    await assert.rejects(c.messages('bad', { tail: 1 }), cairn.CorruptError);
    assert.equal((await c.messages('good')).total, 1);

    const rep = await c.verify();
    assert.equal(rep.ok, false);
    assert.equal(rep.sessions, 2);
    assert.equal(rep.problems.length, 1, JSON.stringify(rep.problems));
    const p = rep.problems[0];
    assert.deepEqual([p.kind, p.id, p.state], ['session', 'bad', 'corrupt']);
    assert.ok(p.path.endsWith(path.join('.cairn', 'sessions', 's-bad.log')), p.path);
    assert.equal(p.size, damaged.length);
    assert.ok(p.generation > 0 && p.generation < COMMITS, `generation ${p.generation}`);
    assert.ok(Array.isArray(rep.quarantine));

    const before = quarantined(ws);
    const plan = await c.repair('bad');
    assert.equal(plan.applied, false);
    assert.deepEqual([plan.kind, plan.id, plan.state], ['session', 'bad', 'corrupt']);
    assert.ok(plan.generation > 0 && plan.generation < COMMITS);
    assert.ok(plan.lost.length > 0 && plan.lost_bytes > 0);
    assert.equal(plan.kept_bytes + plan.lost_bytes, damaged.length);
    // A plan writes nothing.
    assert.deepEqual(fs.readFileSync(file), damaged);
    assert.deepEqual(quarantined(ws), before);
    await assert.rejects(c.summary('bad'), cairn.CorruptError);

    const done = await c.repair('bad', { apply: true });
    assert.equal(done.applied, true);
    assert.equal(done.generation, plan.generation);
    const gen = done.generation;
    const state = await c.resumeSession('bad');
    assert.equal(state.generation, gen);
    assert.deepEqual(
      state.snapshot.messages,
      Array.from({ length: gen }, (_, i) => msg(i, MSG_BYTES))
    );
    assert.equal(await c.save('bad', { change: { append_messages: [msg(99)] } }), gen + 1);
    const sum = await c.summary('bad');
    assert.equal(sum.message_count, gen + 1);
    assert.equal(sum.state, undefined);

    // The original bytes are in quarantine, whole.
    assert.equal(path.dirname(done.quarantine), path.join(ws, '.cairn', 'quarantine'));
    assert.deepEqual(fs.readFileSync(done.quarantine), damaged);
    const after = await c.verify();
    assert.equal(after.ok, true);
    assert.deepEqual(after.problems, []);
    assert.ok(after.quarantine.includes(done.quarantine));
  });
}

test('repair names one log, and a healthy one has nothing to repair', async (t) => {
  const ws = tmpWorkspace(t);
  const c = await open(t, ws, 'embedded');
  await c.save('s', { change: { append_messages: [msg(0)] } });
  await assert.rejects(c.repair({}), cairn.InvalidArgumentError);
  await assert.rejects(c.repair('s', { workflowId: 'w' }), cairn.InvalidArgumentError);
  await assert.rejects(c.repair('s', { apply: true }), cairn.InvalidArgumentError);
  await assert.rejects(c.repair({ workflowId: 'w' }), cairn.NotFoundError);
  assert.throws(() => c.repair('s', { sessionId: 's' }), TypeError);
  assert.throws(() => c.repair('s', { aply: true }), TypeError);
  assert.equal((await c.verify()).ok, true);
});

test('verify({ secrets: true }) lists where content holds a credential, redacted', async (t) => {
  const ws = tmpWorkspace(t);
  const c = await open(t, ws, 'embedded');
  const tok = 'ghp_4Nq8Lx2Vm9Wz7Kp1Rt3Ys6Bd0Fg5Jh2Ca8Ue4O';
  await c.save('s', { change: { append_messages: ['hi', { role: 'user', content: `token ${tok}` }] } });
  assert.equal((await c.verify()).secrets, undefined);
  const rep = await c.verify({ secrets: true });
  assert.equal(rep.secrets.found, 1);
  const f = rep.secrets.findings[0];
  assert.deepEqual([f.session_id, f.where, f.index, f.rule, f.redacted], ['s', 'message', 1, 'github_token', 'ghp_…']);
  assert.ok(!JSON.stringify(rep).includes(tok));
});
