'use strict';
// The native checkpoint path (checkpoint-wire.js) against a real cairnd.
//
// Every test compares the path with libcairn's (a client made with
// CAIRN_NODE_WIRE=0) on the same daemon: results, errors (class, code,
// message), stored contents, and the request bytes themselves, captured on
// the socket by a relaying proxy. Each test starts its own daemon and
// stops it (and removes its temp dirs) at the end.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { cairn, daemon, daemonOptions, stopDaemon, alive, DAEMON, runChild, withEnv, outcome } = require('./helpers');
const wire = require('../checkpoint-wire.js');


// Every test is bounded in time (a call the path lost would wait for its
// 300 s answer timeout).
const BOUNDED = { timeout: 90000 };

/** A daemon-mode client of ws with the path on (whatever the environment says), closed after the test. */
async function natClient(t, options) {
  const c = await withEnv(undefined, () => cairn.connect(options));
  t.after(() => c.close().catch(() => {}));
  assert.notEqual(c._wire, null);
  return c;
}

/** A daemon-mode client of ws without the path (libcairn only), closed after the test. */
async function libClient(t, options) {
  const c = await withEnv('0', () => cairn.connect(options));
  t.after(() => c.close().catch(() => {}));
  assert.equal(c._wire, null);
  return c;
}

/** helpers.daemon with the path on for its client, whatever the environment says. */
function natDaemon(t, extra) {
  return withEnv(undefined, () => daemon(t, extra));
}

/** A daemon with its native client (the one made by helpers.daemon: the path on) and a libcairn-only client. */
async function pair(t, extra = {}) {
  const d = await natDaemon(t, extra);
  assert.notEqual(d.c._wire, null, 'run the suite without CAIRN_NODE_WIRE=0');
  const lib = await libClient(t, daemonOptions(d.ws, extra));
  return { ...d, nat: d.c, lib };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(cond, ms, what) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

// Messages that test the JSON text's every corner: non-ASCII, lone
// surrogates (JSON.stringify writes \udXXX escapes), control characters,
// the line separators JSON allows raw, big and negative numbers, -0, NaN
// and infinities (JSON.stringify writes null, both paths alike), nesting,
// empties, a toJSON inside a message, and a big one.
const ODD_MESSAGES = [
  { role: 'user', content: 'héllo 世界 🎉' },
  { role: 'assistant', content: 'lone \udc80 and \ud800 surrogates' },
  { c: '\x00\x01\x1f\x7f \u2028\u2029 "quoted" back\\slash\n\t' },
  [1, -1, Number.MAX_SAFE_INTEGER, -(2 ** 63), 2 ** 70, 0.1, -0, 1e300, 5e-324, true, false, null, NaN, -Infinity],
  { nested: { a: [{ b: [[], {}] }] }, '': '', u: undefined, f() {}, when: new Date(0) },
  'a bare string',
  12345,
  null,
  { ['k'.repeat(300)]: 'v'.repeat(70000) },
];

// -- a relay that records what each client sends ---------------------------------------

/**
 * A Unix socket that relays every connection to target and records what
 * each client sent. cut, when set, makes it drop the next answer the
 * daemon sends and close that connection both ways (then clears itself).
 */
class Relay {
  constructor(file, target) {
    this.file = file;
    this.target = target;
    this.conns = []; // {chunks, a (client side), b (daemon side)}
    this.cut = false;
    this.server = net.createServer((a) => this.accept(a));
  }

  listen() {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.file, resolve);
    });
  }

  accept(a) {
    const b = net.connect({ path: this.target });
    const rec = { chunks: [], a, b };
    this.conns.push(rec);
    a.on('data', (d) => {
      rec.chunks.push(Buffer.from(d));
      b.write(d);
    });
    b.on('data', (d) => {
      if (this.cut) {
        this.cut = false;
        a.destroy();
        b.destroy();
        return;
      }
      a.write(d);
    });
    a.on('end', () => b.end());
    b.on('end', () => a.end());
    for (const [x, y] of [
      [a, b],
      [b, a],
    ]) {
      x.on('error', () => {});
      x.on('close', () => y.destroy());
    }
  }

  /** The relay's end of the newest connection that is not libcairn's (whose upgrade names Go's HTTP client). */
  native() {
    const cs = this.conns.filter((r) => !Buffer.concat(r.chunks).includes('Go-http-client'));
    return cs[cs.length - 1];
  }

  /** Each connection's client frames, unmasked: [{op, fin, payload}]. */
  frames() {
    return this.conns.map((r) => {
      const s = Buffer.concat(r.chunks);
      let i = s.indexOf('\r\n\r\n') + 4;
      const out = [];
      while (i + 2 <= s.length) {
        const b0 = s[i];
        const b1 = s[i + 1];
        assert.ok(b1 & 0x80, 'a client frame must be masked');
        let n = b1 & 0x7f;
        i += 2;
        if (n === 126) {
          n = s.readUInt16BE(i);
          i += 2;
        } else if (n === 127) {
          n = s.readUInt32BE(i) * 2 ** 32 + s.readUInt32BE(i + 4);
          i += 8;
        }
        const key = s.subarray(i, i + 4);
        i += 4;
        const payload = Buffer.alloc(n);
        for (let j = 0; j < n; j++) payload[j] = s[i + j] ^ key[j & 3];
        i += n;
        out.push({ op: b0 & 0x0f, fin: !!(b0 & 0x80), payload, key: Buffer.from(key) });
      }
      return out;
    });
  }

  /** Each connection's client messages (data frames joined). */
  messages() {
    return this.frames().map((fs_) => {
      const msgs = [];
      let parts = [];
      for (const f of fs_) {
        if (f.op > 2) continue;
        parts.push(f.payload);
        if (f.fin) {
          msgs.push(Buffer.concat(parts));
          parts = [];
        }
      }
      return msgs;
    });
  }

  close() {
    for (const r of this.conns) {
      r.a.destroy();
      r.b.destroy();
    }
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const CHECKPOINT_MARKER = Buffer.from('\x66method\x6acheckpoint\x66params', 'latin1');

/** A checkpoint request's params (the CBOR after its "params" key); null for another message. */
function checkpointParams(msg) {
  const i = msg.indexOf(CHECKPOINT_MARKER);
  return i < 0 ? null : msg.subarray(i + CHECKPOINT_MARKER.length);
}

/**
 * A daemon (srv: its native client), a Relay to it, and front: a
 * workspace whose clients dial the relay (PROTOCOL.md §1: its cairnd.addr
 * names the relay's socket); nat a native client of front. Everything is
 * closed and removed after the test.
 */
async function relayed(t) {
  const d = await natDaemon(t);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-relay-'));
  const front = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-front-'));
  const relay = new Relay(path.join(dir, 'r.sock'), await wire.socketPath(d.ws));
  t.after(async () => {
    await relay.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(front, { recursive: true, force: true });
  });
  await relay.listen();
  fs.mkdirSync(path.join(front, '.cairn'));
  fs.writeFileSync(path.join(front, '.cairn', 'cairnd.addr'), relay.file + '\n');
  const nat = await natClient(t, { workspace: front, autoStart: false });
  return { srv: d.c, relay, front, nat, ws: d.ws, pid: d.pid };
}

/** Session sid with one message and a run (made through c); the run id. */
async function session(c, sid, runId) {
  await c.save(sid, { change: { append_messages: [{ role: 'system', content: 'x' }] } });
  return (await c.beginRun(sid, runId ? { runId } : {})).run_id;
}

// -- the tests ---------------------------------------------------------------------------

test('checkpoint takes the path, and results and stored contents equal libcairn\'s', BOUNDED, async (t) => {
  const { nat, lib } = await pair(t);
  const results = {};
  for (const [c, sid] of [
    [nat, 's-nat'],
    [lib, 's-lib'],
  ]) {
    const rid = await session(c, sid, `r-${sid}`);
    const out = [];
    for (let turn = 1; turn <= 3; turn++) {
      const msgs = turn === 2 ? ODD_MESSAGES : [{ role: 'tool', turn }];
      out.push(
        await c.checkpoint(rid, {
          turn,
          newMessages: msgs,
          usage: { input_tokens: turn, output_tokens: 2, total_tokens: 7, cost: 0.25 * turn + 0.1 },
          toolCallsCount: turn * 3,
          state: { step: turn, s: 'é\udc80' },
        })
      );
    }
    // Defaults, the session id, and states of every JSON kind.
    out.push(await c.checkpoint(rid, { turn: 4, sessionId: sid, state: null }));
    out.push(await c.checkpoint(rid, { turn: 5, newMessages: [], usage: { cost: 3, input_tokens: undefined }, toolCallsCount: 1, state: '' }));
    out.push(await c.checkpoint(rid, { turn: 6, newMessages: [{ g: 1 }], usage: {}, state: 0 }));
    out.push(await c.checkpoint(rid, { turn: 7, newMessages: [{ g: 2 }], state: ['a', { b: 'c' }], sessionId: '' }));
    results[sid] = out;
  }
  assert.equal(nat._wireSent, 7);
  assert.equal(lib._wireSent, 0);
  assert.deepEqual(results['s-nat'], results['s-lib']);
  assert.deepEqual(Object.keys(results['s-nat'][0]), ['generation', 'message_count']);
  // What was stored is the same: the messages, and the runs' checkpoints
  // (turn, usage, counts, state).
  const ma = await lib.call('messages', { session_id: 's-nat' });
  const mb = await lib.call('messages', { session_id: 's-lib' });
  assert.deepEqual(JSON.parse(JSON.stringify(ma).replaceAll('s-nat', 's-lib')), mb);
  assert.equal(ma.messages.length, 1 + 1 + ODD_MESSAGES.length + 1 + 0 + 0 + 1 + 1);
  const strip = (r) => {
    r = JSON.parse(JSON.stringify(r).replaceAll('s-nat', 's-lib'));
    for (const o of [r.run, r.checkpoint]) for (const k of ['started_at', 'created_at', 'updated_at', 'at', 'ended_at']) if (o) delete o[k];
    return r;
  };
  const ra = strip(await lib.run('r-s-nat'));
  const rb = strip(await lib.run('r-s-lib'));
  assert.deepEqual(ra, rb);
  assert.deepEqual(ra.checkpoint.state, ['a', { b: 'c' }]);
  // The odd messages read back as JSON.stringify wrote them.
  assert.deepEqual(ma.messages.slice(2, 2 + ODD_MESSAGES.length), JSON.parse(JSON.stringify(ODD_MESSAGES)));
});

test('the request bytes equal libcairn\'s (captured on the socket)', BOUNDED, async (t) => {
  const { srv, relay, front, nat } = await relayed(t);
  const lib = await libClient(t, { workspace: front, autoStart: false });
  const calls = async (sid) => {
    const rid = await session(srv, sid, 'r' + sid);
    return [
      [rid, {}],
      [rid, { turn: 2, newMessages: ODD_MESSAGES, usage: { input_tokens: 10, output_tokens: 2 ** 40, total_tokens: -3, cost: 1.1 }, toolCallsCount: 2 ** 52, state: { s: ['é', 1.5] }, sessionId: sid }],
      [rid, { turn: 300, newMessages: Array(30).fill({ a: 'b'.repeat(200) }), usage: { cost: 7 }, toolCallsCount: 70000, state: 'state text' }],
      [rid, { turn: 2 ** 33, newMessages: Array.from({ length: 25 }, (_, i) => ({ c: i })), usage: { input_tokens: 2 ** 32, cost: -0 }, toolCallsCount: 24, state: 0, sessionId: '' }],
      [rid, { turn: -5, newMessages: [{ x: 'y'.repeat(70000) }], usage: { cost: 5e-324, total_tokens: -(2 ** 53 - 1) }, toolCallsCount: -1, state: null }],
      [rid, { turn: 6, newMessages: [{ v: NaN, w: [undefined, () => 1] }], usage: { cost: -1e300, output_tokens: 23 }, state: { n: 24, m: 255, o: 65535, p: 65536, q: 2 ** 32 - 1 } }],
    ];
  };
  const made = {};
  for (const [c, sid] of [
    [nat, 's-nat'],
    [lib, 's-lib'],
  ]) {
    made[sid] = await calls(sid);
    // Calls that fail (a negative turn, ...) fail alike: the bytes count.
    for (const [rid, opts] of made[sid]) await outcome(() => c.checkpoint(rid, opts));
  }
  assert.equal(nat._wireSent, made['s-nat'].length);
  const got = relay
    .messages()
    .map((msgs) => msgs.map(checkpointParams).filter((p) => p !== null))
    .filter((ps) => ps.length > 0);
  assert.deepEqual(
    got.map((g) => g.length),
    [made['s-nat'].length, made['s-lib'].length]
  );
  const bySid = {};
  for (const ps of got) bySid[ps[0].includes('rs-nat') ? 's-nat' : 's-lib'] = ps;
  assert.deepEqual(Object.keys(bySid).sort(), ['s-lib', 's-nat']);
  // libcairn's bytes (its Go encoder's) are the path's, call by call, once
  // the ids are the same.
  for (let i = 0; i < made['s-nat'].length; i++) {
    const a = bySid['s-nat'][i];
    const b = bySid['s-lib'][i];
    const swap = (buf) => Buffer.from(buf.toString('latin1').replaceAll('s-nat', 's-lib'), 'latin1');
    assert.ok(swap(a).equals(b), `call ${i}: the params differ:\n${a.toString('hex')}\n${b.toString('hex')}`);
  }
  // Every frame of the path had its own mask key.
  const keys = relay
    .frames()
    .flat()
    .map((f) => f.key.toString('hex'));
  assert.ok(new Set(keys).size >= keys.length - 2, 'mask keys repeat');
});

test('errors equal libcairn\'s, sent by the path or left to libcairn', BOUNDED, async (t) => {
  // A daemon with a small session limit makes the daemon's too_large
  // cheap, and a small message limit libcairn's own.
  const args = ['--idle-timeout=20s', '--max-session-bytes=200000', '--max-message-size=262144'];
  const { nat, lib } = await pair(t, { daemonArgs: args });
  // Each client gets the same history on its own session and runs, so that
  // a call that succeeds leaves both alike.
  const ids = {};
  for (const [c, x] of [
    [nat, 'N'],
    [lib, 'L'],
  ]) {
    await session(c, `s_${x}`);
    await session(c, `t_${x}`);
    const old = await c.beginRun(`s_${x}`, { runId: `old_${x}` });
    await c.checkpoint(old.run_id, { turn: 1, newMessages: [{ m: 1 }] });
    await c.resumeRun(old.run_id, { newRunId: `new_${x}` });
    await c.beginRun(`s_${x}`, { runId: `done_${x}` });
    await c.completeRun(`done_${x}`, 'completed');
    await c.beginRun(`s_${x}`, { runId: `live_${x}` });
    await c.checkpoint(`live_${x}`, { turn: 1, newMessages: [{ m: 1 }] });
    ids[x] = (name) => `${name}_${x}`;
  }
  const big = { x: 'y'.repeat(60000) };
  const cases = [
    // [name, call(c, id), whether the path sends it]
    ['unknown run', (c, id) => c.checkpoint(id('nope'), { turn: 1 }), true],
    ['superseded run', (c, id) => c.checkpoint(id('old'), { turn: 2, newMessages: [{ m: 2 }] }), true],
    ['ended run', (c, id) => c.checkpoint(id('done'), { turn: 1 }), true],
    ['other session', (c, id) => c.checkpoint(id('live'), { turn: 2, sessionId: id('t') }), true],
    ['no such session', (c, id) => c.checkpoint(id('live'), { turn: 2, sessionId: id('nope') }), true],
    ['long run id', (c, id) => c.checkpoint(id('r'.repeat(300)), { turn: 1 }), true],
    ['nul in run id', (c, id) => c.checkpoint(id('a\x00b'), { turn: 1 }), true],
    ['negative turn', (c, id) => c.checkpoint(id('live'), { turn: -1 }), true],
    ['negative count', (c, id) => c.checkpoint(id('live'), { turn: 2, toolCallsCount: -1 }), true],
    ['session limit', (c, id) => c.checkpoint(id('live'), { turn: 2, newMessages: [big, big, big, big] }), true],
    // libcairn decides these before (or instead of) sending:
    ['message limit', (c, id) => c.checkpoint(id('live'), { turn: 2, newMessages: [{ x: 'y'.repeat(300000) }] }), false],
    ['float turn', (c, id) => c.checkpoint(id('live'), { turn: 2.5 }), false],
    ['string turn', (c, id) => c.checkpoint(id('live'), { turn: '2' }), false],
    ['bool turn', (c, id) => c.checkpoint(id('live'), { turn: true }), false],
    ['huge turn', (c, id) => c.checkpoint(id('live'), { turn: 2 ** 64 }), false],
    ['float tokens', (c, id) => c.checkpoint(id('live'), { turn: 2, usage: { input_tokens: 1.5 } }), false],
    ['string tokens', (c, id) => c.checkpoint(id('live'), { turn: 2, usage: { total_tokens: '5' } }), false],
    ['unknown usage key', (c, id) => c.checkpoint(id('live'), { turn: 2, usage: { tokens: 1 } }), false],
    ['usage not an object', (c, id) => c.checkpoint(id('live'), { turn: 2, usage: [1, 2] }), false],
    ['usage a string', (c, id) => c.checkpoint(id('live'), { turn: 2, usage: 'x' }), false],
    ['messages not an array', (c, id) => c.checkpoint(id('live'), { turn: 2, newMessages: { m: 1 } }), false],
    ['run id not valid UTF-16', (c, id) => c.checkpoint(id('r\udc80'), { turn: 1 }), false],
    ['session id not a string', (c, id) => c.checkpoint(id('live'), { turn: 2, sessionId: 7 }), false],
  ];
  for (const [name, call, native] of cases) {
    const before = nat._wireSent;
    let got = await outcome(() => call(nat, ids.N));
    let want = await outcome(() => call(lib, ids.L));
    assert.ok(Array.isArray(got), `${name}: expected an error, got ${JSON.stringify(got)}`);
    got = JSON.parse(JSON.stringify(got).replaceAll('_N', '_L'));
    if (name === 'session limit') {
      // The sizes count time stamps, whose text is as long as their
      // nanoseconds need: they vary by a byte or two.
      [got, want] = [got, want].map(([a, b, m, rc]) => [a, b, m.replace(/holds \d+ live/, 'holds N live').replace(/of \d+ more/, ''), rc]);
    }
    assert.deepEqual(got, want, name);
    assert.equal(nat._wireSent - before, native ? 1 : 0, `${name}: sent by the path`);
  }
  // The connection goes on after every error.
  const before = nat._wireSent;
  const conn = nat._wire._conn;
  assert.equal((await nat.checkpoint(ids.N('live'), { turn: 2, newMessages: [{ m: 2 }] })).message_count, 4);
  assert.equal(nat._wireSent, before + 1);
  assert.equal(nat._wire._conn, conn);
  assert.equal((await lib.checkpoint(ids.L('live'), { turn: 2, newMessages: [{ m: 2 }] })).message_count, 4);
  // Calls libcairn takes and that succeed, succeed alike (a NaN or an
  // infinity where Go wants a number is null in JSON: zero).
  const oddOk = [
    ['NaN cost', (c, id, turn) => c.checkpoint(id('live'), { turn, usage: { cost: NaN } })],
    ['infinite cost', (c, id, turn) => c.checkpoint(id('live'), { turn, usage: { cost: Infinity } })],
    ['null usage', (c, id, turn) => c.checkpoint(id('live'), { turn, usage: null })],
    ['a function as a message', (c, id, turn) => c.checkpoint(id('live'), { turn, newMessages: [() => 1] })],
    ['undefined as a message', (c, id, turn) => c.checkpoint(id('live'), { turn, newMessages: [undefined] })],
    ['a Date as a message', (c, id, turn) => c.checkpoint(id('live'), { turn, newMessages: [new Date(0)] })],
    ['toJSON of the key', (c, id, turn) => c.checkpoint(id('live'), { turn, newMessages: [{ toJSON: (k) => `key ${k}` }], state: { toJSON: (k) => `key ${k}` } })],
    ['a function as the state', (c, id, turn) => c.checkpoint(id('live'), { turn, state: () => 1 })],
  ];
  let turn = 3;
  for (const [name, call] of oddOk) {
    const b = nat._wireSent;
    const got = await outcome(() => call(nat, ids.N, turn));
    const want = await outcome(() => call(lib, ids.L, turn));
    assert.deepEqual(got, want, name);
    assert.equal(nat._wireSent, b, `${name}: left to libcairn`);
    if (!Array.isArray(got)) turn++;
  }
  const [ra, rb] = [await nat.run(ids.N('live')), await lib.run(ids.L('live'))];
  assert.deepEqual(ra.checkpoint.state, rb.checkpoint.state);
  assert.deepEqual(ra.checkpoint.usage, rb.checkpoint.usage);
  // A value JSON.stringify cannot write throws its TypeError synchronously,
  // as before, and is not sent.
  const b = nat._wireSent;
  for (const c of [nat, lib]) {
    assert.throws(() => c.checkpoint('x', { turn: 9, newMessages: [{ n: 1n }] }), TypeError);
    const loop = [];
    loop.push(loop);
    assert.throws(() => c.checkpoint('x', { turn: 9, newMessages: [loop] }), /circular/i);
    assert.throws(() => c.checkpoint('x', { turn: 9, state: { n: 1n } }), TypeError);
    assert.throws(() => c.checkpoint('', { turn: 9 }), TypeError);
  }
  assert.equal(nat._wireSent, b);
  // The words NaN and Infinity in a string are JSON like any other: sent.
  const words = [{ content: 'NaN, Infinity and -Infinity are words here '.repeat(10) }];
  const r = await nat.checkpoint(ids.N('live'), { turn, newMessages: words });
  assert.equal(nat._wireSent, b + 1);
  assert.equal(r.message_count, (await lib.summary(ids.N('s'))).message_count);
});

test('a daemon killed between checkpoints: the next call succeeds, then the path dials the new daemon', BOUNDED, async (t) => {
  const { c, pid } = await natDaemon(t);
  assert.notEqual(c._wire, null);
  const rid = await session(c, 's');
  assert.equal((await c.checkpoint(rid, { turn: 1, newMessages: [{ t: 1 }] })).message_count, 2);
  assert.equal(c._wireSent, 1);
  process.kill(pid, 'SIGKILL');
  await until(() => !alive(pid), 10000, 'the daemon to die');
  // The native connection is dead and no daemon answers: libcairn takes
  // the call and starts a new daemon (PROTOCOL.md section 10: libcairn
  // resends a request whose write failed on a new connection).
  assert.equal((await c.checkpoint(rid, { turn: 2, newMessages: [{ t: 2 }] })).message_count, 3);
  assert.equal(c._wireSent, 1);
  const pid2 = (await c.status()).daemon.pid;
  t.after(() => stopDaemon(pid2));
  assert.notEqual(pid2, pid);
  // Then the path dials the new daemon.
  await sleep(wire.RETRY_GAP_MS + 50);
  assert.equal((await c.checkpoint(rid, { turn: 3, newMessages: [{ t: 3 }] })).message_count, 4);
  assert.equal(c._wireSent, 2);
  assert.deepEqual(
    (await c.messages('s')).messages.map((m) => m.t),
    [undefined, 1, 2, 3]
  );
});

test('a daemon stopped while checkpoints stream: each succeeds or is unavailable, and they go on', BOUNDED, async (t) => {
  const { c, pid } = await natDaemon(t);
  const rid = await session(c, 's');
  const ok = [];
  const lost = [];
  let turn = 0;
  let stop = false;
  const loop = (async () => {
    while (!stop && turn < 100000) {
      turn++;
      try {
        ok.push((await c.checkpoint(rid, { turn, newMessages: [{ t: turn }] })).message_count);
      } catch (err) {
        if (!(err instanceof cairn.UnavailableError)) throw err;
        assert.ok(err.message, 'an UnavailableError without a message');
        lost.push(err.message);
      }
    }
  })();
  await until(() => ok.length >= 20, 10000, '20 checkpoints');
  process.kill(pid, 'SIGTERM');
  await until(() => !alive(pid), 10000, 'the daemon to stop');
  const n = ok.length;
  await until(() => ok.length >= n + 20, 30000, '20 more checkpoints');
  stop = true;
  await loop;
  const pid2 = (await c.status()).daemon.pid;
  t.after(() => stopDaemon(pid2));
  assert.notEqual(pid2, pid);
  // Every acknowledged checkpoint is stored, in order; a lost one may or
  // may not be (its outcome is unknown).
  const stored = (await c.messages('s')).messages.slice(1).map((m) => m.t);
  assert.deepEqual(stored, [...stored].sort((a, b) => a - b));
  assert.ok(ok.length <= stored.length && stored.length <= ok.length + lost.length, `${ok.length} ok, ${lost.length} lost, ${stored.length} stored`);
  assert.ok(c._wireSent > 20);
});

test('a connection lost after the request was sent: unavailable, as libcairn; the next call dials again', BOUNDED, async (t) => {
  const { srv, relay, front, nat } = await relayed(t);
  const lib = await libClient(t, { workspace: front, autoStart: false });
  const errs = {};
  for (const [c, sid] of [
    [nat, 's-nat'],
    [lib, 's-lib'],
  ]) {
    const rid = await session(srv, sid);
    await c.checkpoint(rid, { turn: 1, newMessages: [{ t: 1 }] });
    const conn = c._wire && c._wire._conn;
    relay.cut = true;
    errs[sid] = await outcome(() => c.checkpoint(rid, { turn: 2, newMessages: [{ t: 2 }] }));
    assert.equal(relay.cut, false);
    // The daemon had the request: it committed it.
    assert.deepEqual(
      (await srv.messages(sid)).messages.map((m) => m.t),
      [undefined, 1, 2]
    );
    assert.equal((await c.checkpoint(rid, { turn: 3, newMessages: [{ t: 3 }] })).message_count, 4);
    if (c === nat) assert.ok(nat._wire._conn !== null && nat._wire._conn !== conn, 'a new connection');
  }
  assert.equal(nat._wireSent, 3);
  const [a, b] = [errs['s-nat'], errs['s-lib']];
  assert.ok(Array.isArray(a) && Array.isArray(b), JSON.stringify([a, b]));
  assert.deepEqual([a[0], a[1], a[3]], ['UnavailableError', 'unavailable', -11]);
  assert.deepEqual([b[0], b[1], b[3]], ['UnavailableError', 'unavailable', -11]);
  assert.match(a[2], /^protocol: connection lost: /);
  assert.match(b[2], /^protocol: connection lost: /);
});

test('between calls: a ping is answered, a close frame makes the next call dial again; close() sends one', BOUNDED, async (t) => {
  const { srv, relay, nat } = await relayed(t);
  const rid = await session(srv, 's');
  await nat.checkpoint(rid, { turn: 1, newMessages: [{ t: 1 }] });
  const conn = nat._wire._conn;
  relay.native().a.write(Buffer.from('\x89\x04ping', 'latin1'));
  await until(() => relay.frames().some((fr) => fr.some((f) => f.op === 10 && f.payload.toString() === 'ping')), 5000, 'the pong');
  assert.equal((await nat.checkpoint(rid, { turn: 2, newMessages: [{ t: 2 }] })).message_count, 3);
  assert.equal(nat._wire._conn, conn);
  assert.equal(nat._wireSent, 2);
  // A close frame, the socket left open: the next call redials.
  relay.native().a.write(Buffer.from([0x88, 0x02, 0x03, 0xe9]));
  await until(() => conn.dead !== null, 5000, 'the connection to be marked dead');
  assert.match(conn.dead, /close frame: status = StatusGoingAway/);
  assert.equal((await nat.checkpoint(rid, { turn: 3, newMessages: [{ t: 3 }] })).message_count, 4);
  assert.ok(nat._wire._conn !== conn);
  assert.equal(nat._wireSent, 3);
  // close() sends a close frame (1000) on it.
  const native = relay.native();
  await nat.close();
  const i = relay.conns.indexOf(native);
  await until(() => relay.frames()[i].some((f) => f.op === 8 && f.payload.equals(Buffer.from([0x03, 0xe8]))), 5000, 'the close frame');
});

test('a write that fails goes through libcairn; the next call dials again', BOUNDED, async (t) => {
  const { srv, relay, nat } = await relayed(t);
  const rid = await session(srv, 's');
  await nat.checkpoint(rid, { turn: 1, newMessages: [{ t: 1 }] });
  const conn = nat._wire._conn;
  // The relay closes the native connection; the call is made before the
  // event loop has seen it, so the path writes on a closed socket.
  relay.native().a.destroy();
  const p = nat.checkpoint(rid, { turn: 2, newMessages: [{ t: 2 }] });
  assert.equal((await p).message_count, 3);
  assert.equal(nat._wireSent, 1);
  assert.equal(nat._wire._conn, null);
  assert.ok(conn.dead);
  assert.equal((await nat.checkpoint(rid, { turn: 3, newMessages: [{ t: 3 }] })).message_count, 4);
  assert.equal(nat._wireSent, 2);
  assert.deepEqual(
    (await srv.messages('s')).messages.map((m) => m.t),
    [undefined, 1, 2, 3]
  );
});

test('CAIRN_NODE_WIRE=0 (false, no, off) turns the path off; embedded clients have none', BOUNDED, async (t) => {
  const { c, ws } = await natDaemon(t);
  const rid = await session(c, 's');
  let turn = 0;
  for (const v of ['0', 'false', 'no', 'off', ' OFF ']) {
    const off = await withEnv(v, () => cairn.connect(daemonOptions(ws)));
    try {
      assert.equal(off._wire, null, v);
      assert.equal((await off.checkpoint(rid, { turn: ++turn, newMessages: [{}] })).message_count, turn + 1);
      assert.equal(off._wireSent, 0);
    } finally {
      await off.close();
    }
  }
  for (const v of [undefined, '', '1', 'yes']) {
    const on = await withEnv(v, () => cairn.connect(daemonOptions(ws)));
    try {
      assert.notEqual(on._wire, null, String(v));
      await on.checkpoint(rid, { turn: ++turn, newMessages: [{}] });
      assert.equal(on._wireSent, 1);
    } finally {
      await on.close();
    }
  }
  // The environment when the client is made decides, not later.
  const late = await withEnv(undefined, () => cairn.connect(daemonOptions(ws)));
  try {
    await withEnv('0', async () => {
      await late.checkpoint(rid, { turn: ++turn, newMessages: [{}] });
    });
    assert.equal(late._wireSent, 1);
  } finally {
    await late.close();
  }
  const ews = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-'));
  t.after(() => fs.rmSync(ews, { recursive: true, force: true }));
  const e = await withEnv(undefined, () => cairn.connect({ workspace: ews, embedded: true }));
  try {
    assert.equal(e._wire, null);
    const erid = await session(e, 's');
    assert.equal((await e.checkpoint(erid, { turn: 1, newMessages: [{}] })).message_count, 2);
    assert.equal(e._wireSent, 0);
  } finally {
    await e.close();
  }
});

test('the daemon\'s message limit (hello) is respected: requests near it go through libcairn', BOUNDED, async (t) => {
  const { c } = await natDaemon(t, { daemonArgs: ['--idle-timeout=20s', '--max-message-size=8192'] });
  const rid = await session(c, 's');
  await c.checkpoint(rid, { turn: 1, newMessages: [{ x: 'y'.repeat(1000) }] });
  assert.equal(c._wire._conn.maxSize, 8192);
  assert.equal(c._wireSent, 1);
  // Over the limit: libcairn's too_large, unsent.
  await assert.rejects(c.checkpoint(rid, { turn: 2, newMessages: [{ x: 'y'.repeat(9000) }] }), cairn.TooLargeError);
  assert.equal(c._wireSent, 1);
  // A request 20 bytes under the limit (by the path's ids): libcairn's,
  // which sends it.
  const conn = c._wire._conn;
  const size = (len) => wire.checkpointSize(conn.nextId, wire.encodeCheckpoint(rid, 2, [{ x: 'y'.repeat(len) }], {}, 0, undefined, undefined)).n;
  const len = 8192 - 20 - size(0) - 2; // the string's head grows by 2 bytes past 255 bytes
  assert.equal(size(len), 8192 - 20);
  assert.equal((await c.checkpoint(rid, { turn: 2, newMessages: [{ x: 'y'.repeat(len) }] })).message_count, 3);
  assert.equal(c._wireSent, 1);
  // 64 bytes under it: the path's.
  assert.equal((await c.checkpoint(rid, { turn: 3, newMessages: [{ x: 'y'.repeat(len - 44) }] })).message_count, 4);
  assert.equal(c._wireSent, 2);
  assert.equal(c._wire._conn, conn);
});

test('concurrent checkpoints on one client all succeed', BOUNDED, async (t) => {
  const { c } = await natDaemon(t);
  const N = 16;
  const runs = [];
  for (let i = 0; i < N; i++) runs.push(await session(c, `s${i}`));
  await c.checkpoint(runs[0], { turn: 1, newMessages: [{ i: 0, t: 1 }] }); // the connection is up
  for (let round = 2; round <= 4; round++) {
    const rs = await Promise.all(runs.map((rid, i) => c.checkpoint(rid, { turn: round, newMessages: [{ i, t: round }], usage: { input_tokens: round }, toolCallsCount: round })));
    assert.deepEqual(
      rs.map((r) => r.message_count),
      runs.map((_, i) => (i === 0 ? round + 1 : round))
    );
  }
  // Some went by the path (one per round at least); a call finding another
  // in flight used libcairn.
  assert.ok(c._wireSent >= 4 && c._wireSent < 1 + 3 * N, String(c._wireSent));
  for (let i = 0; i < N; i++) {
    assert.deepEqual(
      (await c.messages(`s${i}`)).messages.slice(1).map((m) => m.t),
      i === 0 ? [1, 2, 3, 4] : [2, 3, 4]
    );
  }
  // Concurrent calls while the connection is being dialed: the first
  // waits for it, the others use libcairn.
  const fresh = await withEnv(undefined, () => cairn.connect(c.options));
  try {
    const rs = await Promise.all(runs.map((rid, i) => fresh.checkpoint(rid, { turn: 5, newMessages: [{ i, t: 5 }] })));
    assert.equal(rs.length, N);
    assert.equal(fresh._wireSent, 1);
  } finally {
    await fresh.close();
  }
});

test('close() closes the connection; later calls fail as libcairn\'s do', BOUNDED, async (t) => {
  const { c, ws } = await natDaemon(t);
  const watcher = await libClient(t, daemonOptions(ws));
  const rid = await session(c, 's');
  const conns = async () => (await watcher.status()).daemon.connections;
  const before = await conns(); // c's libcairn connection and watcher's
  await c.checkpoint(rid, { turn: 1, newMessages: [{}] });
  assert.equal(c._wireSent, 1);
  assert.equal(await conns(), before + 1);
  const conn = c._wire._conn;
  await c.close();
  assert.equal(conn.dead, 'closed');
  await until(async () => (await conns()) === before - 1, 5000, 'the daemon to see both connections closed');
  const a = await outcome(() => c.checkpoint(rid, { turn: 2, newMessages: [{}] }));
  await watcher.close();
  const b = await outcome(() => watcher.checkpoint(rid, { turn: 2, newMessages: [{}] }));
  assert.equal(a[0], 'BadHandleError');
  assert.deepEqual(a.slice(0, 2), b.slice(0, 2));
  assert.equal(c._wireSent, 1);
});

test('the path dials the daemon of a discovered, symlinked or relative workspace', BOUNDED, async (t) => {
  const { c: srv, ws } = await natDaemon(t);
  const rid = await session(srv, 's');
  const sub = path.join(ws, 'deep', 'er');
  fs.mkdirSync(sub, { recursive: true });
  const cwd = process.cwd();
  let found;
  let relative;
  process.chdir(sub);
  try {
    found = await natClient(t, { autoStart: false });
    process.chdir(path.dirname(ws));
    relative = await natClient(t, { workspace: path.basename(ws), autoStart: false });
  } finally {
    process.chdir(cwd);
  }
  const link = path.join(os.tmpdir(), `cairn-link-${process.pid}`);
  fs.symlinkSync(ws, link);
  t.after(() => fs.rmSync(link, { force: true }));
  const linked = await natClient(t, { workspace: link, autoStart: false });
  assert.equal((await found.checkpoint(rid, { turn: 1, newMessages: [{ t: 1 }] })).message_count, 2);
  assert.equal((await linked.checkpoint(rid, { turn: 2, newMessages: [{ t: 2 }] })).message_count, 3);
  // A relative workspace was resolved when the client was made.
  assert.equal((await relative.checkpoint(rid, { turn: 3, newMessages: [{ t: 3 }] })).message_count, 4);
  assert.equal(found._wireSent, 1);
  assert.equal(linked._wireSent, 1);
  assert.equal(relative._wireSent, 1);
});

test('socketPath follows PROTOCOL.md section 1', BOUNDED, async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-sp-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const ws = path.join(tmp, 'w');
  fs.mkdirSync(path.join(ws, '.cairn'), { recursive: true });
  const link = path.join(tmp, 'link');
  fs.symlinkSync(ws, link);
  const real = fs.realpathSync(ws);
  assert.equal(await wire.socketPath(link), path.join(real, '.cairn', 'cairnd.sock'));
  fs.writeFileSync(path.join(ws, '.cairn', 'cairnd.addr'), '/run/x/abc.sock\n');
  assert.equal(await wire.socketPath(ws), '/run/x/abc.sock');
  fs.writeFileSync(path.join(ws, '.cairn', 'cairnd.addr'), 'relative.sock');
  assert.equal(await wire.socketPath(ws), null);
  fs.writeFileSync(path.join(ws, '.cairn', 'cairnd.addr'), '/' + 'x'.repeat(107));
  assert.equal(await wire.socketPath(ws), null);
  fs.writeFileSync(path.join(ws, '.cairn', 'cairnd.addr'), Buffer.from([0x2f, 0xff, 0x0a]));
  assert.equal(await wire.socketPath(ws), null);
  const deep = path.join(tmp, 'd'.repeat(100));
  fs.mkdirSync(path.join(deep, '.cairn'), { recursive: true });
  assert.equal(await wire.socketPath(deep), null); // too long, and no addr file
  assert.equal(await wire.socketPath(path.join(tmp, 'missing')), null);
});

test('the upgrade is verified: a wrong accept, a missing subprotocol or a 503 sends nothing and waits before dialing again', BOUNDED, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-fake-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, '.cairn'));
  const crypto = require('node:crypto');
  const accept = (req, salt = '') => {
    const key = /Sec-WebSocket-Key: (\S+)/i.exec(req)[1];
    return crypto.createHash('sha1').update(key + salt + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  };
  const answers = [
    (req) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(req, 'x')}\r\nSec-WebSocket-Protocol: cairn.v1\r\n\r\n`,
    (req) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(req)}\r\n\r\n`,
    () => 'HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n',
    // The right answer, and then no answer to hello: the dial's 5 s bound.
    (req) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(req)}\r\nSec-WebSocket-Protocol: cairn.v1\r\n\r\n`,
  ];
  let answer = null;
  const seen = [];
  let after = 0; // bytes a client sent after its upgrade request
  const server = net.createServer((s) => {
    let req = '';
    s.on('error', () => {});
    s.on('data', (d) => {
      if (s.answered) after += d.length;
      req += d;
      if (req.includes('\r\n\r\n') && !s.answered) {
        s.answered = true;
        seen.push(req);
        s.write(answer(req));
      }
    });
  });
  await new Promise((r) => server.listen(path.join(dir, '.cairn', 'cairnd.sock'), r));
  t.after(() => new Promise((r) => server.close(r)));
  const lost = (m) => new cairn.UnavailableError(m);
  for (const [i, a] of answers.entries()) {
    answer = a;
    const w = new wire.Wire({ workspace: async () => dir, errorFor: lost, lost });
    seen.length = 0;
    after = 0;
    let libCalls = 0;
    const t0 = Date.now();
    const r = w.checkpoint(['r', 1, [{}], {}, 0, undefined, undefined], async () => ++libCalls);
    assert.notEqual(r, null);
    assert.equal(await r, 1);
    if (i === answers.length - 1) {
      assert.ok(Date.now() - t0 >= 4900, 'the dial waited for hello');
      assert.ok(after > 0, 'hello was sent');
    } else {
      assert.ok(Date.now() - t0 < 4000);
      assert.equal(after, 0, 'nothing was sent after a refused upgrade');
    }
    assert.equal(seen.length, 1);
    assert.match(seen[0], /^GET \/ HTTP\/1\.1\r\n/);
    assert.match(seen[0], /\r\nSec-WebSocket-Protocol: cairn\.v1\r\n/);
    assert.equal(w.sent, 0);
    assert.equal(w._conn, null);
    // Within the retry gap the path does not dial.
    assert.equal(w.checkpoint(['r', 1, [{}], {}, 0, undefined, undefined], async () => 0), null);
    if (i === answers.length - 1) {
      w.close();
      break;
    }
    await sleep(wire.RETRY_GAP_MS + 20);
    const again = w.checkpoint(['r', 1, [{}], {}, 0, undefined, undefined], async () => 2);
    assert.notEqual(again, null);
    assert.equal(await again, 2);
    assert.equal(seen.length, 2);
    w.close();
  }
});


test('an idle client with the connection open lets the process exit; a call in flight keeps it', BOUNDED, async (t) => {
  const { c, ws } = await natDaemon(t);
  const rid = await session(c, 's');
  const env = { WS: ws, RID: rid, DAEMON };
  const r = await runChild(
    `const cairn = require(process.env.CAIRN_PKG);
     (async () => {
       const c = await cairn.connect({ workspace: process.env.WS, autoStart: false });
       await c.checkpoint(process.env.RID, { turn: 1, newMessages: [{ t: 1 }] });
       // Not awaited: the pending call must keep the process alive.
       c.checkpoint(process.env.RID, { turn: 2, newMessages: [{ t: 2 }] }).then((r) =>
         console.log('second', r.message_count, c._wireSent, c._wire._conn.dead === null));
     })();`,
    { ...env, [wire.ENV]: '' }
  );
  assert.equal(r.timedOut, false, `the child exited by itself; stderr: ${r.stderr}`);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'second 3 2 true');
});
