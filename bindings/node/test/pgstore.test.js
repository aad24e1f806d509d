'use strict';
// connect({ store }) keeps the sessions in PostgreSQL: two workspaces (two
// "hosts") share them, and a run moves between them only with takeover
// while its host's lease is live. The server is internal/pgtest/pgserve
// (CAIRN_PGSERVE, else `go run`), a real PostgreSQL from the machine's
// binaries; without them the test fails, unless CAIRN_SKIP_PG=1.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const { spawn } = require('child_process');
const { cairn, REPO, daemon, embedded } = require('./helpers');

async function pgserve(t) {
  const cmd = process.env.CAIRN_PGSERVE ? [process.env.CAIRN_PGSERVE] : ['go', 'run', './internal/pgtest/pgserve'];
  const p = spawn(cmd[0], [...cmd.slice(1), 'nodebind'], { cwd: REPO, stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((r) => p.on('exit', r));
  t.after(async () => {
    p.stdin.end();
    await exited;
  });
  const line = await new Promise((resolve) => {
    const rl = readline.createInterface({ input: p.stdout });
    rl.once('line', resolve);
    exited.then(() => resolve(''));
  });
  if (!line) {
    if ((await exited) === 4) t.skip('CAIRN_SKIP_PG=1: no PostgreSQL');
    else assert.fail('pgserve exited without a database');
  }
  return line.trim();
}

test('connect({store}) shares sessions and runs across workspaces', async (t) => {
  const url = await pgserve(t);
  if (!url) return;
  const a = await daemon(t, { store: url });
  await a.c.save('js-s', { change: { append_messages: [{ role: 'user', content: 'hi' }] } });
  const run = await a.c.beginRun('js-s', { runId: 'js-run' });
  await a.c.checkpoint(run.run_id, { turn: 1, newMessages: [{ turn: 1 }], toolCallsCount: 1 });
  assert.ok(!fs.existsSync(path.join(a.ws, '.cairn', 'sessions')), 'sessions went to the file store');

  const b = await embedded(t, { store: url });
  assert.strictEqual((await b.c.messages('js-s')).total, 2);
  await assert.rejects(b.c.resumeRun('js-run', { sessionId: 'js-s' }), cairn.ConflictError);
  const res = await b.c.resumeRun('js-run', { sessionId: 'js-s', takeover: true });
  assert.strictEqual(res.turn, 1);
  await assert.rejects(a.c.checkpoint('js-run', { turn: 2, newMessages: [{ turn: 2 }], toolCallsCount: 2 }), cairn.NotOwnerError);
});
