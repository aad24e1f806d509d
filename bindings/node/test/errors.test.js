'use strict';
// Every error class: provoked where the library can be made to report it,
// and the code -> class mapping for all of them.

const test = require('node:test');
const assert = require('node:assert/strict');
const { cairn, embedded, daemon, tmpWorkspace, msg } = require('./helpers');

/** Asserts that p rejects with cls and the given code, and a message. */
async function rejectsWith(p, cls, code) {
  await assert.rejects(p, (err) => {
    assert.ok(err instanceof cls, `${err && err.name} is a ${cls.name}: ${err && err.message}`);
    assert.ok(err instanceof cairn.CairnError);
    assert.ok(err instanceof Error);
    assert.equal(err.code, code);
    assert.equal(err.name, cls.name);
    assert.equal(typeof err.message, 'string');
    assert.ok(err.message.length > 0, 'the message is kept');
    assert.ok(err.rc < 0);
    return true;
  });
}

test('every code maps to its own class', () => {
  const expected = {
    internal: 'InternalError',
    invalid_argument: 'InvalidArgumentError',
    not_found: 'NotFoundError',
    conflict: 'ConflictError',
    schema_unsupported: 'SchemaUnsupportedError',
    too_large: 'TooLargeError',
    no_checkpoint: 'NoCheckpointError',
    not_owner: 'NotOwnerError',
    step_identity_changed: 'StepIdentityChangedError',
    locked: 'LockedError',
    unavailable: 'UnavailableError',
    forked: 'ForkedError',
    bad_handle: 'BadHandleError',
    method_not_found: 'MethodNotFoundError',
    bad_request: 'BadRequestError',
    bad_ticket: 'BadTicketError',
    corrupt: 'CorruptError',
    no_space: 'NoSpaceError',
  };
  assert.deepEqual([...cairn.codes].sort(), Object.keys(expected).sort());
  const seen = new Set();
  for (const [code, name] of Object.entries(expected)) {
    const cls = cairn[name];
    assert.equal(typeof cls, 'function', name);
    assert.equal(cairn.errorClassFor(code), cls);
    assert.ok(!seen.has(cls));
    seen.add(cls);
    const e = new cls('boom');
    assert.ok(e instanceof cairn.CairnError);
    assert.equal(e.code, code);
    assert.equal(e.message, 'boom');
    assert.equal(e.name, name);
  }
  assert.equal(cairn.errorClassFor('some_future_code'), cairn.CairnError);
  // The return codes of cairn.h, appended, never renumbered.
  assert.equal(new cairn.CorruptError('m').rc, -17);
  assert.equal(new cairn.NoSpaceError('m').rc, -18);
});

test('not_found', async (t) => {
  const { c } = await embedded(t);
  await rejectsWith(c.resumeSession('missing'), cairn.NotFoundError, 'not_found');
  await rejectsWith(c.delete('missing'), cairn.NotFoundError, 'not_found');
  await rejectsWith(c.export('missing'), cairn.NotFoundError, 'not_found');
});

test('conflict', async (t) => {
  const { c } = await embedded(t);
  await c.save('s', { change: { append_messages: [msg(1)] } });
  await c.save('s', { change: { append_messages: [msg(2)] } });
  await rejectsWith(c.save('s', { change: { append_messages: [msg(3)] }, expectGeneration: 1 }), cairn.ConflictError, 'conflict');
  await c.save('t', { change: { append_messages: [msg(1)] } });
  await rejectsWith(c.fork('s', 't'), cairn.ConflictError, 'conflict');
});

test('schema_unsupported', async (t) => {
  const { c } = await embedded(t);
  await rejectsWith(
    c.save('s', { snapshot: { schema_version: 99, session_id: 's', messages: [] } }),
    cairn.SchemaUnsupportedError,
    'schema_unsupported'
  );
  await rejectsWith(c.save('s', { change: { schema_version: 99, append_messages: [msg(1)] } }), cairn.SchemaUnsupportedError, 'schema_unsupported');
  await rejectsWith(c.resumeSession('s'), cairn.NotFoundError, 'not_found'); // nothing written
});

test('invalid_argument', async (t) => {
  const { c } = await embedded(t);
  await rejectsWith(c.save('bad\u0000id', { change: { append_messages: [msg(1)] } }), cairn.InvalidArgumentError, 'invalid_argument');
  await rejectsWith(c.save('s', {}), cairn.InvalidArgumentError, 'invalid_argument');
  await rejectsWith(c.call('status', { unknown_field: 1 }), cairn.InvalidArgumentError, 'invalid_argument');
  await rejectsWith(c.subscribe({ events: ['no.such.event'] }), cairn.InvalidArgumentError, 'invalid_argument');
  await rejectsWith(c.import('{"envelope": not json'), cairn.InvalidArgumentError, 'invalid_argument');
  await rejectsWith(cairn.connect({ workspace: '/nonexistent/dir/for/cairn', embedded: true }), cairn.InvalidArgumentError, 'invalid_argument');
  await rejectsWith(cairn.connect({ bogusOption: 1 }), cairn.InvalidArgumentError, 'invalid_argument');
  // The options of the removed fast lane are unknown now.
  await rejectsWith(cairn.connect({ embedded: true, spinUs: 100 }), cairn.InvalidArgumentError, 'invalid_argument');
});

test('no_checkpoint and not_owner', async (t) => {
  const { c } = await embedded(t);
  await c.save('a', { change: { append_messages: [msg(1)] } });
  await c.save('b', { change: { append_messages: [msg(1)] } });
  await rejectsWith(c.resumeRun('no-such-run'), cairn.NoCheckpointError, 'no_checkpoint');
  const run = await c.beginRun('a');
  await rejectsWith(c.resumeRun(run.run_id), cairn.NoCheckpointError, 'no_checkpoint'); // never checkpointed
  await c.checkpoint(run.run_id, { turn: 1, newMessages: [msg(2)] });
  await rejectsWith(c.resumeRun(run.run_id, { sessionId: 'b' }), cairn.NotOwnerError, 'not_owner');
  await c.completeRun(run.run_id, 'completed');
  await rejectsWith(c.resumeRun(run.run_id), cairn.NoCheckpointError, 'no_checkpoint');
});

test('step_identity_changed', async (t) => {
  const { c } = await embedded(t);
  await c.beginWorkflow('wf', [{ stepId: 'a', identity: 'v1' }]);
  await c.completeStep('wf', 'a', 'v1', 1);
  await rejectsWith(c.beginWorkflow('wf', [{ stepId: 'a', identity: 'v2' }]), cairn.StepIdentityChangedError, 'step_identity_changed');
});

test('method_not_found', async (t) => {
  const { c } = await embedded(t);
  await rejectsWith(c.call('noSuchMethod', {}), cairn.MethodNotFoundError, 'method_not_found');
});

test('bad_handle after close', async (t) => {
  const { c } = await embedded(t);
  await c.close();
  await rejectsWith(c.status(), cairn.BadHandleError, 'bad_handle');
  await rejectsWith(c.save('s', { change: { append_messages: [msg(1)] } }), cairn.BadHandleError, 'bad_handle');
});

test('locked: embedded open where a daemon already serves', async (t) => {
  const { ws } = await daemon(t);
  await rejectsWith(cairn.connect({ workspace: ws, embedded: true }), cairn.LockedError, 'locked');
});

test('locked: a second embedded open of one workspace', async (t) => {
  const { ws } = await embedded(t);
  await rejectsWith(cairn.connect({ workspace: ws, embedded: true }), cairn.LockedError, 'locked');
});

test('unavailable: no daemon and autoStart false', async (t) => {
  const ws = tmpWorkspace(t);
  await rejectsWith(cairn.connect({ workspace: ws, autoStart: false }), cairn.UnavailableError, 'unavailable');
});
