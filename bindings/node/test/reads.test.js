'use strict';
// The targeted reads (summary, messages, artifact, artifacts, run, runs,
// runEvents, resumeSession's options) and the delta edits (truncate_messages,
// delete_artifacts, put_artifacts, artifact metadata), in embedded and in
// daemon mode against the real libcairn. Every read is checked against the
// same slice of a whole resumeSession.

const test = require('node:test');
const assert = require('node:assert/strict');
const { cairn, MODES, msg } = require('./helpers');

const T0 = '2024-01-02T03:04:05Z';

function trace(seq, runId, data) {
  return { seq, time: T0, type: 'tool_call', run_id: runId, data };
}

/** The artifact without its data, as the metadata-only reads give it. */
function withoutData(a) {
  const { data, ...rest } = a;
  return rest;
}

function bytesOf(m) {
  return Buffer.byteLength(JSON.stringify(m));
}

/** Every page of a paged read, from `first` on, until the range is done. */
async function walk(read, first = {}) {
  const pages = [];
  let opts = first;
  for (let guard = 0; guard < 10000; guard++) {
    const p = await read(opts);
    pages.push(p);
    if (!p.more) return pages;
    assert.ok(p.next > p.from, `page at ${p.from} advances`);
    opts = { ...opts, from: p.next };
    delete opts.tail;
    delete opts.sinceGeneration;
    if (first.tail !== undefined || first.sinceGeneration !== undefined) opts.to = p.total;
  }
  throw new Error('paging does not end');
}

for (const [mode, open] of Object.entries(MODES)) {
  test(`targeted reads and delta edits (${mode})`, async (t) => {
    const { c } = await open(t);

    await t.test('each read returns its slice of resumeSession', async () => {
      const s = 'slices';
      const messages = Array.from({ length: 12 }, (_, i) => msg(i, i * 7));
      const blob = Buffer.from([0, 1, 2, 250, 255]);
      await c.save(s, {
        change: {
          append_messages: messages.slice(0, 8),
          append_artifacts: [
            { id: 'art-1', kind: 'blob', media_type: 'application/octet-stream', data: blob, metadata: { source: 'test', n: [1, 2] } },
            { id: 'art-2', kind: 'text', name: 'notes.txt', data: Buffer.from('notes ✓') },
          ],
          metadata: { project: 'cairn' },
        },
      });
      const run = await c.beginRun(s, { runId: 'slices-run' });
      await c.checkpoint(run.run_id, { turn: 1, newMessages: messages.slice(8, 10), usage: { total_tokens: 9 }, toolCallsCount: 1, state: { step: 1 } });
      await c.save(s, { change: { append_traces: [trace(1, run.run_id, { tool: 'ls' }), trace(2, '', { note: 'no run' })] } });
      await c.checkpoint(run.run_id, { turn: 2, newMessages: messages.slice(10), usage: { total_tokens: 20 }, toolCallsCount: 2, state: { step: 2 } });

      const full = await c.resumeSession(s);
      const snap = full.snapshot;
      assert.deepEqual(snap.messages, messages);
      assert.equal(full.message_count, messages.length);
      assert.equal(full.messages_from, 0);

      const sum = await c.summary(s);
      assert.equal(sum.session_id, s);
      assert.equal(sum.generation, full.generation);
      assert.equal(sum.message_count, messages.length);
      assert.equal(sum.artifact_count, snap.artifacts.length);
      assert.equal(sum.trace_count, snap.traces.length);
      assert.ok(sum.live_bytes > 0);
      assert.deepEqual(sum, (await c.listSessions()).find((x) => x.session_id === s));

      const all = await c.messages(s);
      assert.deepEqual(all, {
        session_id: s,
        generation: full.generation,
        total: messages.length,
        from: 0,
        next: messages.length,
        more: false,
        messages: snap.messages,
      });
      const tail = await c.messages(s, { tail: 3 });
      assert.deepEqual(tail.messages, snap.messages.slice(-3));
      assert.equal(tail.from, messages.length - 3);
      assert.equal(tail.more, false);
      const mid = await c.messages(s, { from: 2, to: 5 });
      assert.deepEqual(mid.messages, snap.messages.slice(2, 5));
      assert.deepEqual([mid.from, mid.next, mid.more], [2, 5, false]);
      assert.deepEqual((await c.messages(s, { tail: 100 })).messages, snap.messages);

      for (const a of snap.artifacts) {
        const one = await c.artifact(s, a.id);
        assert.equal(one.generation, full.generation);
        assert.deepEqual(one.artifact, a);
      }
      assert.deepEqual(await c.artifactBytes(s, 'art-1'), blob);
      assert.equal((await c.artifactBytes(s, 'art-2')).toString(), 'notes ✓');
      const meta = await c.artifacts(s);
      assert.equal(meta.generation, full.generation);
      assert.deepEqual(meta.artifacts, snap.artifacts.map(withoutData));
      assert.deepEqual(meta.artifacts[0].metadata, { source: 'test', n: [1, 2] });
      assert.equal(meta.artifacts[0].size, blob.length);

      const runs = await c.runs(s);
      assert.deepEqual(runs.runs, snap.runs);
      const one = await c.run(run.run_id, { sessionId: s });
      assert.equal(one.session_id, s);
      assert.deepEqual(one.run, snap.runs.find((r) => r.run_id === run.run_id));
      const ir = full.interrupted_runs.find((r) => r.run_id === run.run_id);
      assert.equal(one.checkpoint.turn, ir.turn);
      assert.equal(one.checkpoint.message_count, ir.message_count);
      assert.deepEqual(one.checkpoint.state, { step: 2 });

      const ev = await c.runEvents(run.run_id, { sessionId: s });
      assert.deepEqual(
        ev.events.filter((e) => e.kind === 'trace').map((e) => e.trace),
        snap.traces.filter((x) => x.run_id === run.run_id)
      );

      const cut = await c.resumeSession(s, { messagesTail: 4 });
      assert.deepEqual(cut.snapshot.messages, snap.messages.slice(-4));
      assert.equal(cut.messages_from, messages.length - 4);
      assert.equal(cut.message_count, messages.length);
      assert.deepEqual(cut.snapshot.artifacts, snap.artifacts);
    });

    await t.test('tail after truncate and replace', async () => {
      const s = 'truncate';
      const m = Array.from({ length: 10 }, (_, i) => msg(i));
      await c.save(s, { change: { append_messages: m } });
      await c.save(s, { change: { truncate_messages: 6 } });
      let tail = await c.messages(s, { tail: 3 });
      assert.deepEqual(tail.messages, m.slice(3, 6));
      assert.equal(tail.total, 6);
      assert.equal((await c.summary(s)).message_count, 6);

      // Truncate to i and append: the messages from i on are replaced (compaction).
      const x = { role: 'system', content: 'summary of 4 and 5' };
      const y = msg(99);
      await c.save(s, { change: { truncate_messages: 4, append_messages: [x, y] } });
      tail = await c.messages(s, { tail: 3 });
      assert.deepEqual(tail.messages, [m[3], x, y]);
      assert.deepEqual((await c.messages(s)).messages, (await c.resumeSession(s)).snapshot.messages);
      assert.deepEqual((await c.messages(s)).messages, [...m.slice(0, 4), x, y]);

      await c.save(s, { change: { truncate_messages: 0 } });
      tail = await c.messages(s, { tail: 3 });
      assert.deepEqual([tail.messages, tail.total, tail.more], [[], 0, false]);

      const gen = (await c.summary(s)).generation;
      await assert.rejects(c.save(s, { change: { truncate_messages: 1 } }), cairn.InvalidArgumentError);
      assert.equal((await c.summary(s)).generation, gen);
    });

    await t.test('sinceGeneration', async () => {
      const s = 'since';
      const g1 = await c.save(s, { change: { append_messages: [msg(0), msg(1)] } });
      const g2 = await c.save(s, { change: { append_messages: [msg(2)] } });
      const g3 = await c.save(s, { change: { append_messages: [msg(3), msg(4)] } });
      let r = await c.messages(s, { sinceGeneration: g1 });
      assert.deepEqual(r.messages, [msg(2), msg(3), msg(4)]);
      assert.equal(r.from, 2);
      r = await c.messages(s, { sinceGeneration: g2 });
      assert.deepEqual([r.messages, r.from], [[msg(3), msg(4)], 3]);
      r = await c.messages(s, { sinceGeneration: g3 });
      assert.deepEqual([r.messages, r.from, r.next, r.more], [[], 5, 5, false]);
      // A metadata-only commit adds no message.
      const g4 = await c.save(s, { change: { metadata: { k: 'v' } } });
      assert.deepEqual((await c.messages(s, { sinceGeneration: g3 })).messages, []);
      // Replaced messages count as added by the replacing generation.
      await c.save(s, { change: { truncate_messages: 3, append_messages: [msg(30)] } });
      r = await c.messages(s, { sinceGeneration: g4 });
      assert.deepEqual([r.messages, r.from, r.total], [[msg(30)], 3, 4]);
      await assert.rejects(c.messages(s, { sinceGeneration: g1, from: 1 }), cairn.InvalidArgumentError);
      await assert.rejects(c.messages(s, { tail: 1, from: 1 }), cairn.InvalidArgumentError);
    });

    await t.test('paging with limit and maxBytes walks the whole list', async () => {
      const s = 'paging';
      const m = Array.from({ length: 40 }, (_, i) => msg(i, (i * 37) % 120));
      for (let i = 0; i < m.length; i += 10) await c.save(s, { change: { append_messages: m.slice(i, i + 10) } });
      const read = (o) => c.messages(s, o);
      const cases = [
        { first: { limit: 7 }, want: m },
        { first: { maxBytes: 300 }, want: m },
        { first: { limit: 3, maxBytes: 150 }, want: m },
        { first: { maxBytes: 1 }, want: m },
        { first: { from: 5, to: 20, limit: 4 }, want: m.slice(5, 20) },
        { first: { tail: 10, limit: 4 }, want: m.slice(30) },
      ];
      for (const { first, want } of cases) {
        const pages = await walk(read, first);
        assert.deepEqual(pages.flatMap((p) => p.messages), want, JSON.stringify(first));
        assert.ok(pages.length > 1, `${JSON.stringify(first)} takes more than one page`);
        for (const p of pages) {
          assert.ok(p.messages.length >= 1);
          assert.equal(p.next, p.from + p.messages.length);
          if (first.limit) assert.ok(p.messages.length <= first.limit);
          if (first.maxBytes && p.messages.length > 1) {
            assert.ok(p.messages.reduce((n, x) => n + bytesOf(x), 0) <= first.maxBytes, `page at ${p.from} within ${first.maxBytes} bytes`);
          }
        }
      }
      assert.equal((await walk(read, { maxBytes: 1 })).length, m.length);
      await assert.rejects(c.messages(s, { limit: -1 }), cairn.InvalidArgumentError);
      assert.throws(() => c.messages(s, { since_generation: 1 }), TypeError);
    });

    await t.test('artifacts: put, replace, delete, metadata; appending an existing id is refused', async () => {
      const s = 'artifacts';
      const id = 'artifact-dup-7';
      const v1 = Buffer.from('version one');
      await c.save(s, { change: { append_artifacts: [{ id, kind: 'blob', data: v1, metadata: { v: 1 } }] } });
      let one = await c.artifact(s, id);
      assert.deepEqual(Buffer.from(one.artifact.data, 'base64'), v1);
      assert.deepEqual(one.artifact.metadata, { v: 1 });
      assert.equal(one.artifact.size, v1.length);

      const gen = (await c.summary(s)).generation;
      await assert.rejects(c.save(s, { change: { append_artifacts: [{ id, data: Buffer.from('again') }] } }), (err) => {
        assert.ok(err instanceof cairn.ConflictError, `${err.name}: ${err.message}`);
        assert.equal(err.code, 'conflict');
        assert.ok(err.message.includes(id), `the error names the id: ${err.message}`);
        return true;
      });
      assert.equal((await c.summary(s)).generation, gen);
      assert.deepEqual(await c.artifactBytes(s, id), v1);

      // put replaces by id; the data may be any Uint8Array, a view into a larger buffer too.
      const backing = new Uint8Array([9, 9, 1, 2, 3, 4, 9]);
      const v2 = backing.subarray(2, 6);
      await c.save(s, { change: { put_artifacts: [{ id, kind: 'blob', data: v2, metadata: { v: 2, tags: ['x'] } }] } });
      assert.deepEqual(await c.artifactBytes(s, id), Buffer.from([1, 2, 3, 4]));
      let list = await c.artifacts(s);
      assert.deepEqual(list.artifacts.map((a) => [a.id, a.size, a.metadata]), [[id, 4, { v: 2, tags: ['x'] }]]);
      assert.ok(list.artifacts.every((a) => a.data === undefined));

      // put adds a new id.
      await c.save(s, { change: { put_artifacts: [{ id: 'other', data: Buffer.from('o') }] } });
      list = await c.artifacts(s);
      assert.deepEqual(list.artifacts.map((a) => a.id).sort(), [id, 'other']);
      assert.deepEqual(list.artifacts, (await c.resumeSession(s)).snapshot.artifacts.map(withoutData));

      await c.save(s, { change: { delete_artifacts: [id] } });
      await assert.rejects(c.artifact(s, id), cairn.NotFoundError);
      list = await c.artifacts(s);
      assert.deepEqual(list.artifacts.map((a) => a.id), ['other']);
      assert.equal((await c.summary(s)).artifact_count, 1);
      await assert.rejects(c.save(s, { change: { delete_artifacts: [id] } }), cairn.NotFoundError);

      // Deleted, the id may be appended again.
      await c.save(s, { change: { append_artifacts: [{ id, data: Buffer.from('three') }] } });
      assert.equal((await c.artifactBytes(s, id)).toString(), 'three');
      assert.deepEqual((await c.resumeSession(s)).snapshot.artifacts.map((a) => a.id).sort(), [id, 'other']);
    });

    await t.test('run, runs and runEvents after beginRun and checkpoints', async () => {
      const s = 'runs';
      await c.save(s, { change: { append_messages: [msg(0)] } });
      const r1 = (await c.beginRun(s, { runId: 'run-a' })).run_id;
      const cp1 = await c.checkpoint(r1, { turn: 1, newMessages: [msg(1)], usage: { total_tokens: 5 }, toolCallsCount: 1, state: { step: 1 } });
      await c.save(s, { change: { append_traces: [trace(1, r1, { tool: 'grep' }), trace(2, 'elsewhere', {})] } });
      const cp2 = await c.checkpoint(r1, { turn: 2, newMessages: [msg(2)], usage: { total_tokens: 9 }, toolCallsCount: 2, state: { step: 2 } });
      const r2 = (await c.beginRun(s, { runId: 'run-b' })).run_id;

      const snap = (await c.resumeSession(s)).snapshot;
      const runs = await c.runs(s);
      assert.deepEqual(runs.runs.map((r) => r.run_id), [r1, r2]);
      assert.deepEqual(runs.runs, snap.runs);

      const a = await c.run(r1);
      assert.equal(a.session_id, s);
      assert.equal(a.run.status, 'running');
      assert.equal(a.checkpoint.turn, 2);
      assert.equal(a.checkpoint.message_count, cp2.message_count);
      assert.deepEqual(a.checkpoint.state, { step: 2 });
      assert.equal(a.resumed_as, undefined);
      const b = await c.run(r2, { sessionId: s });
      assert.equal(b.checkpoint, undefined);
      await assert.rejects(c.run('no-such-run'), cairn.NotFoundError);
      await c.save('runs-elsewhere', { change: { append_messages: [msg(0)] } });
      await assert.rejects(c.run(r1, { sessionId: 'runs-elsewhere' }), cairn.NotOwnerError);

      const ev = await c.runEvents(r1);
      assert.equal(ev.run_id, r1);
      assert.equal(ev.total, 3);
      assert.deepEqual(ev.events.map((e) => e.kind), ['checkpoint', 'trace', 'checkpoint']);
      assert.deepEqual(ev.events.map((e) => e.checkpoint && e.checkpoint.turn), [1, undefined, 2]);
      assert.deepEqual(ev.events[1].trace, snap.traces.find((x) => x.run_id === r1));
      assert.equal(ev.events[0].generation, cp1.generation);
      assert.equal(ev.events[2].generation, cp2.generation);
      const paged = await walk((o) => c.runEvents(r1, { sessionId: s, ...o }), { limit: 1 });
      assert.equal(paged.length, 3);
      assert.deepEqual(paged.flatMap((p) => p.events), ev.events);
      const since = await c.runEvents(r1, { sinceGeneration: cp1.generation });
      assert.deepEqual(since.events, ev.events.slice(1));
      assert.equal(since.from, 1);
      assert.deepEqual((await c.runEvents(r2)).events, []);

      const rr = await c.resumeRun(r1, { newRunId: 'run-c' });
      assert.equal((await c.run(r1)).resumed_as, rr.run_id);
      assert.deepEqual((await c.runs(s)).runs.map((r) => r.run_id), [r1, r2, 'run-c']);
      assert.equal((await c.run('run-c')).run.parent_run_id, r1);
    });

    await t.test('resumeSession options', async () => {
      const s = 'resume-options';
      const m = Array.from({ length: 5 }, (_, i) => msg(i));
      await c.save(s, {
        change: {
          append_messages: m,
          append_artifacts: [{ id: 'a', kind: 'blob', data: Buffer.from('bytes'), metadata: { k: 'v' } }],
          append_traces: [trace(1, '', { x: 1 })],
        },
      });
      const full = await c.resumeSession(s);
      assert.deepEqual(await c.resumeSession(s, {}), full);
      assert.equal(full.snapshot.artifacts[0].data, Buffer.from('bytes').toString('base64'));
      assert.equal(full.snapshot.traces.length, 1);

      const tail = await c.resumeSession(s, { messagesTail: 2 });
      assert.deepEqual(tail.snapshot.messages, m.slice(3));
      assert.deepEqual([tail.messages_from, tail.message_count], [3, 5]);

      const meta = await c.resumeSession(s, { artifacts: 'metadata' });
      assert.deepEqual(meta.snapshot.artifacts, full.snapshot.artifacts.map(withoutData));
      assert.deepEqual(meta.snapshot.artifacts, (await c.artifacts(s)).artifacts);
      assert.deepEqual(meta.snapshot.messages, m);

      const none = await c.resumeSession(s, { artifacts: 'none', traces: 'none' });
      assert.deepEqual(none.snapshot.artifacts || [], []);
      assert.deepEqual(none.snapshot.traces || [], []);
      assert.deepEqual(none.snapshot.messages, m);

      const quick = await c.resumeSession(s, { drift: false, processes: false });
      assert.equal(quick.drift.tracked, false);
      assert.deepEqual(quick.processes, []);
      assert.deepEqual(quick.snapshot, full.snapshot);

      await assert.rejects(c.resumeSession(s, { artifacts: 'some' }), cairn.InvalidArgumentError);
      assert.throws(() => c.resumeSession(s, { messages_tail: 1 }), TypeError);
    });
  });
}
