'use strict';
// The Node.js side of the truncate/tail scenario (../truncate_tail.json):
// read the tail and the artifacts Python left after its truncate, append,
// put and delete, and check them against the scenario; then truncate and
// append in turn, for Python to read back. Prints "ok".
//
// usage: node truncate_node.js WORKSPACE CAIRND SCENARIO_JSON
//
// The reads go through the client's generic call, so this stage depends on
// the wire methods only.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const cairn = require(path.join(__dirname, '..', '..', 'node'));

async function main() {
  const [workspace, daemon, scenarioPath] = process.argv.slice(2);
  const sc = JSON.parse(fs.readFileSync(scenarioPath, 'utf8'));
  const sid = sc.session_id;
  const initial = [];
  for (let i = 0; i < sc.initial_messages; i++) initial.push({ role: 'user', content: `message ${i}` });
  const all = initial.slice(0, sc.python_truncate_to).concat(sc.python_append);

  const c = await cairn.connect({ workspace, daemon });
  try {
    const page = await c.call('messages', { session_id: sid, tail: sc.tail });
    assert.deepEqual(
      { total: page.total, from: page.from, next: page.next, more: page.more, messages: page.messages },
      { total: all.length, from: all.length - sc.tail, next: all.length, more: false, messages: all.slice(-sc.tail) },
      'node read a tail that differs from what Python wrote',
    );
    // Paged one by one from the start, the messages are the whole list.
    const walked = [];
    for (let from = 0, more = true; more;) {
      const p = await c.call('messages', { session_id: sid, from, limit: 1 });
      walked.push(...p.messages);
      from = p.next;
      more = p.more;
    }
    assert.deepEqual(walked, all, 'node paged through messages that differ from what Python wrote');

    const list = await c.call('artifacts', { session_id: sid });
    assert.deepEqual(list.artifacts.map((a) => [a.id, a.size, a.metadata, a.data]), [['keep', 14, { by: 'python' }, undefined]]);
    const one = await c.call('artifact', { session_id: sid, artifact_id: 'keep' });
    assert.equal(Buffer.from(one.artifact.data, 'base64').toString(), 'v2 from python');

    await c.call('save', {
      session_id: sid,
      change: { truncate_messages: sc.node_truncate_to, append_messages: sc.node_append },
      expect_generation: page.generation,
    });
    process.stdout.write('ok\n');
  } finally {
    await c.close();
  }
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
