'use strict';
// exportFile and importFile, in embedded and daemon mode: the file holds the
// envelope export answers, and importing it brings the session back with
// its run's loop checkpoint.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { cairn, MODES, msg } = require('./helpers');

for (const [mode, open] of Object.entries(MODES)) {
  test(`exportFile and importFile (${mode})`, async (t) => {
    const { c, ws } = await open(t);
    const s = 'to-file';
    const messages = [msg(0), msg(1, 100)];
    await c.save(s, { change: { append_messages: messages, append_artifacts: [{ id: 'a', data: Buffer.from([0, 255, 7]), metadata: { k: 1 } }] } });
    const run = await c.beginRun(s);
    await c.checkpoint(run.run_id, { turn: 1, newMessages: [msg(2)], usage: { total_tokens: 3 }, state: { step: 1 } });
    const before = await c.resumeSession(s);

    const file = path.join(ws, 'out', 'session.json');
    fs.mkdirSync(path.dirname(file));
    const r = await c.exportFile(s, path.relative(process.cwd(), file)); // relative: resolved by the binding
    assert.equal(r.path, file);
    assert.equal(r.generation, before.generation);
    assert.equal(r.bytes, fs.statSync(file).size);
    const env = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.equal(env.session.session_id, s);
    assert.deepEqual(env, await c.export(s));

    await c.delete(s);
    await assert.rejects(c.summary(s), cairn.NotFoundError);
    const imp = await c.importFile(file);
    assert.equal(imp.session_id, s);
    const after = await c.resumeSession(s);
    assert.deepEqual(after.snapshot.messages, before.snapshot.messages);
    assert.deepEqual(after.snapshot.artifacts, before.snapshot.artifacts);
    const one = await c.run(run.run_id);
    assert.equal(one.checkpoint.turn, 1);
    assert.deepEqual(one.checkpoint.state, { step: 1 });

    await assert.rejects(c.importFile(path.join(ws, 'no-such-file.json')), cairn.NotFoundError);
    await assert.rejects(c.exportFile('no-such-session', path.join(ws, 'x.json')), cairn.NotFoundError);
    assert.throws(() => c.exportFile(s, ''), TypeError);
  });
}
