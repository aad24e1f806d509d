'use strict';
// connect's callTimeoutMs (libcairn's call_timeout_ms) against a real cairnd
// stopped with SIGSTOP, as capi/calltimeout_test.go does for libcairn: a
// checkpoint on the binding's own connection (checkpoint-wire.js), one
// whose request cannot be written, one that has to dial, and libcairn's
// checkpoint and 16 MiB save each fail with libcairn's no-answer error once
// the bound passes, and every client goes on once the daemon runs again.
// Without callTimeoutMs the own connection's checkpoint fails so at the
// default bound (shortened for the test); with 0 it waits for as long as
// the daemon is stopped.

const test = require('node:test');
const assert = require('node:assert/strict');
const { performance } = require('node:perf_hooks');
const { cairn, daemon, daemonOptions, tmpWorkspace, withEnv, outcome, sigstop } = require('./helpers');
const wire = require('../checkpoint-wire.js');

const BOUNDED = { timeout: 90000 };
const BOUND = 400;
// A call still pending after LIMIT fails the test instead of hanging it.
const LIMIT = 10000;

/** A client made with CAIRN_NODE_WIRE=env (undefined: the path on), closed after the test. */
async function client(t, options, env) {
  const c = await withEnv(env, () => cairn.connect(options));
  t.after(() => c.close().catch(() => {}));
  return c;
}

/** fn()'s outcome and the milliseconds it took; throws when it takes LIMIT. */
async function timed(fn) {
  const t0 = performance.now();
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${LIMIT} ms`)), LIMIT);
  });
  try {
    const got = await Promise.race([outcome(fn), limit]);
    return { got, took: performance.now() - t0 };
  } finally {
    clearTimeout(timer);
  }
}

/** libcairn's error for a call to method that got no answer within BOUND. */
function noAnswer(method) {
  return [
    'UnavailableError',
    'unavailable',
    `protocol: no answer to ${method} from cairnd within 400ms: the outcome is unknown (a request that reached the daemon may still be carried out)`,
    -11,
  ];
}

/** Counts the checkpoints the path hands to libcairn on c (c.handed). */
function spy(c) {
  c.handed = 0;
  const own = Object.getPrototypeOf(c)._checkpoint;
  c._checkpoint = function (...args) {
    this.handed++;
    return own.apply(this, args);
  };
  return c;
}

/** Session sid with one message and a run (made through c); the run id. */
async function session(c, sid) {
  await c.save(sid, { change: { append_messages: [{ role: 'system', content: 'x' }] } });
  return (await c.beginRun(sid)).run_id;
}

const BIG = 'big ' + 'x'.repeat(16 << 20);

test('callTimeoutMs: a stopped daemon fails checkpoints (own connection, its write, its dial; libcairn) and a 16 MiB save in time; after SIGCONT all go on', BOUNDED, async (t) => {
  const opts = { callTimeoutMs: BOUND };
  const { c: nat, ws, pid } = await withEnv(undefined, () => daemon(t, opts));
  const big = await client(t, daemonOptions(ws, opts));
  const fresh = await client(t, daemonOptions(ws, opts));
  const lib = await client(t, daemonOptions(ws, opts), '0');
  assert.ok(nat._wire && big._wire && fresh._wire, 'run the suite without CAIRN_NODE_WIRE=0');
  assert.equal(lib._wire, null);
  const rid = {};
  for (const [c, sid] of [
    [nat, 'nat'],
    [big, 'big'],
    [fresh, 'fresh'],
    [lib, 'lib'],
  ]) {
    rid[sid] = await session(c, sid);
  }
  // nat's and big's own connections are up; fresh has none yet.
  assert.equal((await nat.checkpoint(rid.nat, { turn: 1, newMessages: [{ t: 1 }] })).message_count, 2);
  assert.equal((await big.checkpoint(rid.big, { turn: 1, newMessages: [{ t: 1 }] })).message_count, 2);
  assert.equal((await lib.checkpoint(rid.lib, { turn: 1, newMessages: [{ t: 1 }] })).message_count, 2);
  const natConn = nat._wire._conn;
  const bigConn = big._wire._conn;
  assert.ok(natConn && bigConn);
  assert.equal(fresh._wire._conn, null);
  for (const c of [nat, big, fresh]) spy(c);

  sigstop(pid);
  let stopped = true;
  try {
    // The own connection: the request is written, no answer comes.
    let r = await timed(() => nat.checkpoint(rid.nat, { turn: 2, newMessages: [{ t: 2 }] }));
    assert.deepEqual(r.got, noAnswer('checkpoint'));
    assert.ok(r.took >= BOUND, `gave up after ${r.took} ms`);
    assert.equal(nat._wireSent, 2, 'on the own connection');
    assert.equal(nat.handed, 0, 'never handed to libcairn');
    assert.equal(nat._wire._conn, null);
    assert.ok(natConn.dead, 'the connection is destroyed');

    // A 16 MiB checkpoint on the own connection: its write never ends.
    r = await timed(() => big.checkpoint(rid.big, { turn: 2, newMessages: [{ t: BIG }] }));
    assert.deepEqual(r.got, noAnswer('checkpoint'));
    assert.ok(r.took >= BOUND, `gave up after ${r.took} ms`);
    assert.equal(big._wireSent, 2);
    assert.equal(big.handed, 0, 'an unsent request whose bound passed is not handed to libcairn');
    assert.equal(big._wire._conn, null);
    assert.ok(bigConn.dead);

    // No own connection yet: the bound covers the dial (whose upgrade
    // the stopped daemon does not answer), and nothing is sent.
    r = await timed(() => fresh.checkpoint(rid.fresh, { turn: 1, newMessages: [{ t: 1 }] }));
    assert.deepEqual(r.got, noAnswer('checkpoint'));
    assert.ok(r.took >= BOUND, `gave up after ${r.took} ms`);
    assert.equal(fresh._wireSent, 0);
    assert.equal(fresh.handed, 0);
    assert.equal(fresh._wire._conn, null);

    // libcairn: the same error for its checkpoint, and for a save whose
    // write blocks.
    r = await timed(() => lib.checkpoint(rid.lib, { turn: 2, newMessages: [{ t: 2 }] }));
    assert.deepEqual(r.got, noAnswer('checkpoint'));
    assert.ok(r.took >= BOUND, `gave up after ${r.took} ms`);
    r = await timed(() => lib.save('lib', { change: { append_messages: [{ t: BIG }] } }));
    assert.deepEqual(r.got, noAnswer('save'));
    assert.ok(r.took >= BOUND, `gave up after ${r.took} ms`);
  } finally {
    if (stopped) process.kill(pid, 'SIGCONT');
    stopped = false;
  }

  // Each client reconnects; the path dials new connections of its own.
  // A checkpoint that got no answer may have been carried out (turn 2 of
  // nat and lib): the next one is turn 3 either way.
  const ok = async (p) => {
    const { got } = await timed(() => p);
    assert.ok(!Array.isArray(got), JSON.stringify(got));
    return got;
  };
  await ok(nat.checkpoint(rid.nat, { turn: 3, newMessages: [{ t: 3 }] }));
  assert.equal(nat._wireSent, 3);
  assert.ok(nat._wire._conn !== null && nat._wire._conn !== natConn, 'a new connection');
  assert.equal((await ok(big.checkpoint(rid.big, { turn: 3, newMessages: [{ t: 3 }] }))).message_count, 3);
  assert.equal(big._wireSent, 3);
  assert.equal((await ok(fresh.checkpoint(rid.fresh, { turn: 1, newMessages: [{ t: 1 }] }))).message_count, 2);
  assert.equal(fresh._wireSent, 1);
  for (const c of [nat, big, fresh]) assert.equal(c.handed, 0);
  await ok(lib.checkpoint(rid.lib, { turn: 3, newMessages: [{ t: 3 }] }));
  await ok(lib.save('lib', { change: { append_messages: [{ t: 'after' }] } }));
  // The requests whose writes were cut were dropped by the daemon.
  assert.deepEqual(
    (await lib.messages('big')).messages.map((m) => m.t),
    [undefined, 1, 3]
  );
  const libTs = (await lib.messages('lib')).messages.map((m) => m.t);
  assert.ok(!libTs.includes(BIG), 'the cut save is not stored');
  assert.deepEqual(libTs.slice(-2), [3, 'after']);
});

test('callTimeoutMs: unset, a checkpoint on the own connection fails at the default bound; 0 waits as long as the daemon is stopped', BOUNDED, async (t) => {
  // The clients' Wires take BOUND as their default bound: a client that
  // fell back on it for 0 would fail its checkpoint as the unset one does.
  // libcairn's stays 5 minutes (no call below waits on it).
  const was = wire.defaults.answerTimeoutMs;
  wire.defaults.answerTimeoutMs = BOUND;
  let unset, ws, pid, zero;
  try {
    ({ c: unset, ws, pid } = await withEnv(undefined, () => daemon(t)));
    zero = await client(t, daemonOptions(ws, { callTimeoutMs: 0 }));
  } finally {
    wire.defaults.answerTimeoutMs = was;
  }
  const rid = await session(unset, 'unset');
  const zid = await session(zero, 'zero');
  // Both own connections are up: the checkpoints below are written on them.
  assert.equal((await unset.checkpoint(rid, { turn: 1, newMessages: [{ t: 1 }] })).message_count, 2);
  assert.equal((await zero.checkpoint(zid, { turn: 1, newMessages: [{ t: 1 }] })).message_count, 2);
  assert.ok(unset._wire._conn && zero._wire._conn);
  for (const c of [unset, zero]) spy(c);

  const pending = Symbol('pending');
  let waiting;
  sigstop(pid);
  try {
    const t0 = performance.now();
    waiting = outcome(() => zero.checkpoint(zid, { turn: 2, newMessages: [{ t: 2 }] }));
    const r = await timed(() => unset.checkpoint(rid, { turn: 2, newMessages: [{ t: 2 }] }));
    assert.deepEqual(r.got, noAnswer('checkpoint'));
    assert.ok(r.took >= BOUND, `gave up after ${r.took} ms`);
    assert.equal(unset._wireSent, 2, 'on the own connection');
    assert.equal(unset.handed, 0);
    // Well past the default bound, the checkpoint with 0 still waits.
    const left = 1500 - (performance.now() - t0);
    const got = await Promise.race([waiting, new Promise((r) => setTimeout(r, Math.max(0, left), pending))]);
    assert.equal(got, pending, `a checkpoint with callTimeoutMs 0 gave up on a stopped daemon: ${JSON.stringify(got)}`);
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  // Once the daemon runs again, it gets the checkpoint's own answer.
  const { got } = await timed(() => waiting);
  assert.equal(got.message_count, 3, JSON.stringify(got));
  assert.equal(zero._wireSent, 2, 'on the own connection');
  assert.equal(zero.handed, 0);
});

test('callTimeoutMs is checked at connect', BOUNDED, async (t) => {
  const ws = tmpWorkspace(t);
  const before = cairn.openHandles();
  // Out of range: libcairn's error, naming call_timeout_ms (a negative
  // fraction stays negative).
  for (const v of [-1, -0.5, 86400001]) {
    await assert.rejects(cairn.connect(daemonOptions(ws, { autoStart: false, callTimeoutMs: v })), (err) => {
      assert.ok(err instanceof cairn.InvalidArgumentError, String(err));
      assert.equal(err.code, 'invalid_argument');
      assert.match(err.message, /call_timeout_ms -?\d+ is out of range/);
      return true;
    });
  }
  // Not a finite number: the binding's own InvalidArgumentError.
  for (const v of ['400', NaN, Infinity, null, true, [400]]) {
    await assert.rejects(cairn.connect(daemonOptions(ws, { autoStart: false, callTimeoutMs: v })), (err) => {
      assert.ok(err instanceof cairn.InvalidArgumentError, String(err));
      assert.match(err.message, /^connect: callTimeoutMs must be a finite number of milliseconds/);
      return true;
    });
  }
  // In range (a fraction rounded up); embedded mode ignores it.
  for (const v of [0, 0.5, 86400000]) {
    const c = await cairn.connect({ workspace: ws, embedded: true, callTimeoutMs: v });
    await c.close();
  }
  assert.equal(cairn.openHandles(), before);
});

test('goDuration prints milliseconds as Go\'s time.Duration does', () => {
  const want = {
    1: '1ms',
    400: '400ms',
    999: '999ms',
    1000: '1s',
    1001: '1.001s',
    1500: '1.5s',
    59999: '59.999s',
    60000: '1m0s',
    90250: '1m30.25s',
    300000: '5m0s',
    3600000: '1h0m0s',
    3661500: '1h1m1.5s',
    86400000: '24h0m0s',
  };
  for (const [ms, d] of Object.entries(want)) assert.equal(wire.goDuration(Number(ms)), d, ms);
  assert.equal(
    wire.noAnswerMessage('checkpoint', 300000),
    'protocol: no answer to checkpoint from cairnd within 5m0s: the outcome is unknown (a request that reached the daemon may still be carried out)'
  );
});
