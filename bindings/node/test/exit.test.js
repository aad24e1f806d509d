'use strict';
// The process exits by itself: no handle of the binding keeps the event
// loop alive once the client is closed (or even while it is open but idle).

const test = require('node:test');
const assert = require('node:assert/strict');
const { tmpWorkspace, stopDaemon, DAEMON, runChild } = require('./helpers');

const EMBEDDED = `
const cairn = require(process.env.CAIRN_PKG);
(async () => {
  const c = await cairn.connect({ workspace: process.env.WS, embedded: true });
  await c.status();
  await Promise.all(Array.from({ length: 20 }, (_, i) => c.save('s', { change: { append_messages: [i] } })));
  const sub = await c.subscribe();
  await sub.nextEvent({ timeoutMs: 50 });
  await sub.close();
  await c.close();
  console.log('done', cairn.openHandles());
})();
`;

test('embedded: the process exits by itself after close', async (t) => {
  const ws = tmpWorkspace(t);
  const r = await runChild(EMBEDDED, { WS: ws });
  assert.equal(r.timedOut, false, `the child exited by itself; stderr: ${r.stderr}`);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'done 0');
});

test('embedded: an open but idle client does not keep the process alive', async (t) => {
  const ws = tmpWorkspace(t);
  const r = await runChild(
    `const cairn = require(process.env.CAIRN_PKG);
     cairn.connect({ workspace: process.env.WS, embedded: true })
       .then((c) => c.save('s', { change: { append_messages: [1] } }))
       .then((g) => console.log('saved', g));`,
    { WS: ws }
  );
  assert.equal(r.timedOut, false, r.stderr);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'saved 1');
});

test('the process exits by itself after connect and close with no call', async (t) => {
  const ws = tmpWorkspace(t);
  const r = await runChild(
    `const cairn = require(process.env.CAIRN_PKG);
     (async () => {
       const o = { workspace: process.env.WS, embedded: true };
       const c = await cairn.connect(o);
       await c.close();
       const c2 = await cairn.connect(o);
       await c2.status();
       await Promise.all([c2.save('s', { change: { append_messages: [1] } }), c2.listSessions()]);
       await c2.close();
       console.log('done');
     })();`,
    { WS: ws }
  );
  assert.equal(r.timedOut, false, r.stderr);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'done');
});

test('a pending call keeps the process alive until it settles', async (t) => {
  const ws = tmpWorkspace(t);
  // Nothing but the pending long poll is left on the event loop: were the
  // completion pipe not ref()'d while a call is pending, the process would
  // exit before the event arrives and print nothing.
  const r = await runChild(
    `const cairn = require(process.env.CAIRN_PKG);
     (async () => {
       const c = await cairn.connect({ workspace: process.env.WS, embedded: true });
       const sub = await c.subscribe();
       sub.nextEvent({ timeoutMs: 300 }).then(async (ev) => {
         console.log('settled', ev);
         await c.close();
       });
     })();`,
    { WS: ws }
  );
  assert.equal(r.timedOut, false, r.stderr);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'settled null');
});

test('daemon mode: the process exits by itself after close', async (t) => {
  const ws = tmpWorkspace(t);
  const r = await runChild(
    `const cairn = require(process.env.CAIRN_PKG);
     (async () => {
       const c = await cairn.connect({ workspace: process.env.WS, daemon: process.env.DAEMON, daemonArgs: ['--idle-timeout=20s'] });
       const st = await c.status();
       await Promise.all(Array.from({ length: 20 }, (_, i) => c.save('s', { change: { append_messages: [i] } })));
       await c.close();
       console.log(st.daemon.pid);
     })();`,
    { WS: ws, DAEMON }
  );
  const pid = parseInt(r.stdout.trim(), 10);
  t.after(() => stopDaemon(pid));
  assert.equal(r.timedOut, false, r.stderr);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(pid > 0);
});
