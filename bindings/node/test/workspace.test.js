'use strict';
// changes, handoff, runtime.check and runtime.restart, in embedded and
// daemon mode, against real files and a real process.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { cairn, MODES, msg } = require('./helpers');

/** Kills the process group a restart started (it leads its own group). */
function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (_) {
    // already gone
  }
}

for (const [mode, open] of Object.entries(MODES)) {
  test(`${mode}: changes reports files added, modified and deleted after a clock`, async (t) => {
    const { c, ws } = await open(t);
    fs.writeFileSync(path.join(ws, 'a.txt'), 'one');
    fs.writeFileSync(path.join(ws, 'gone.txt'), 'x');
    const first = await c.changes();
    assert.equal(first.fresh_instance, true);
    assert.equal(typeof first.clock, 'string');
    assert.ok(first.clock.length > 0);
    assert.deepEqual(first.added.filter((p) => !p.startsWith('.cairn')).sort(), ['a.txt', 'gone.txt']);
    assert.deepEqual(first.modified, []);
    assert.deepEqual(first.deleted, []);

    fs.writeFileSync(path.join(ws, 'a.txt'), 'two, longer');
    fs.writeFileSync(path.join(ws, 'b.txt'), 'new');
    fs.rmSync(path.join(ws, 'gone.txt'));
    const next = await c.changes({ since: first.clock });
    assert.equal(next.fresh_instance, false);
    assert.notEqual(next.clock, first.clock);
    assert.deepEqual(next.added, ['b.txt']);
    assert.deepEqual(next.modified, ['a.txt']);
    assert.deepEqual(next.deleted, ['gone.txt']);

    const none = await c.changes({ since: next.clock });
    assert.deepEqual([none.added, none.modified, none.deleted], [[], [], []]);
    await assert.rejects(c.changes({ since: 'not a clock' }), cairn.InvalidArgumentError);
  });

  test(`${mode}: handoff renders the latest generation and lists what it lacks`, async (t) => {
    const { c } = await open(t);
    await c.save('h', { change: { append_messages: [msg(1)] } });
    const g = await c.save('h', { change: { append_messages: [msg(2)], metadata: { task: 'ship it' } } });
    const h = await c.handoff('h');
    assert.equal(h.session_id, 'h');
    assert.equal(h.generation, g);
    assert.equal(typeof h.markdown, 'string');
    assert.ok(h.markdown.length > 0);
    assert.equal(h.complete, false, 'nothing was recorded for a handoff');
    assert.ok(h.missing.length > 0);
    for (const m of h.missing) {
      assert.equal(typeof m.key, 'string');
      assert.equal(typeof m.message, 'string');
    }
    assert.equal(typeof h.files.tracked, 'boolean');
    await assert.rejects(c.handoff('missing'), cairn.NotFoundError);
    assert.throws(() => c.handoff(''), TypeError);
  });

  test(`${mode}: runtimeCheck, runtimeRestart and resumeSession's processes`, async (t) => {
    const { c, ws } = await open(t);
    // The process proves itself up by creating "ready" in the workspace.
    const ready = path.join(ws, 'ready');
    await c.save('r', {
      change: {
        append_messages: [msg(1)],
        runtime: {
          processes: [{ name: 'web', command: ['sh', '-c', 'touch ready && exec sleep 60'], health_check: { command: ['test', '-f', 'ready'] } }],
          previews: [{ url: 'http://127.0.0.1:9/', process: 'web' }],
        },
      },
    });

    const rs = await c.resumeSession('r');
    assert.equal(rs.processes.length, 1);
    assert.equal(rs.processes[0].name, 'web');
    assert.notEqual(rs.processes[0].state, 'healthy');

    const before = await c.runtimeCheck('r', { timeoutMs: 5000 });
    assert.deepEqual(before.processes.map((p) => p.name), ['web']);
    assert.notEqual(before.processes[0].state, 'healthy');
    assert.deepEqual(before.previews, [{ url: 'http://127.0.0.1:9/', process: 'web', state: before.processes[0].state }]);

    const res = await c.runtimeRestart('r', 'web', { timeoutMs: 20000 });
    if (res.pid) t.after(() => killGroup(res.pid));
    assert.equal(res.outcome, 'started', JSON.stringify(res));
    assert.equal(res.state, 'healthy');
    assert.equal(res.name, 'web');
    assert.ok(res.pid > 0);
    assert.ok(fs.existsSync(ready), 'the process ran in the workspace');
    assert.ok(res.log && res.log.endsWith('.log'), res.log);

    const after = await c.runtimeCheck('r');
    assert.equal(after.processes[0].state, 'healthy');
    assert.equal(after.previews[0].state, 'healthy');
    assert.equal((await c.resumeSession('r')).processes[0].state, 'healthy');
    const again = await c.runtimeRestart('r', 'web');
    assert.equal(again.outcome, 'already_healthy');
    assert.equal(again.pid, undefined, 'nothing was started');

    await assert.rejects(c.runtimeRestart('r', 'nope'), cairn.NotFoundError);
    await assert.rejects(c.runtimeCheck('missing'), cairn.NotFoundError);
    await assert.rejects(c.runtimeCheck('r', { timeoutMs: -1 }), cairn.InvalidArgumentError);
  });
}
