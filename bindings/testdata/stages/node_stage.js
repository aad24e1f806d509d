'use strict';
// Stage 2 of the cross-language scenario (../scenario.json), in Node.js:
// import the session Python exported (and was killed after) into another
// workspace, resume it there, check every artifact byte for byte, resume its
// run from the imported checkpoint, checkpoint one more turn and complete
// the run. Prints canonical JSON (sorted keys, no spaces) for the driver to
// compare with ../expected_node.json byte for byte.
//
// usage: node node_stage.js WORKSPACE CAIRND SCENARIO_JSON EXPORT_JSON

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const cairn = require(path.join(__dirname, '..', '..', 'node'));

function canonical(v) {
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}

function pattern(p) {
  const b = Buffer.alloc(p.size);
  for (let i = 0; i < p.size; i++) b[i] = (i * p.mul + p.add) % 256;
  return b;
}

async function main() {
  const [workspace, daemon, scenarioPath, exportPath] = process.argv.slice(2);
  const sc = JSON.parse(fs.readFileSync(scenarioPath, 'utf8'));
  const c = await cairn.connect({ workspace, daemon });
  try {
    const shared = !!process.env.CAIRN_STORE; // one database: nothing to import
    if ((await c.listSessions()).some((s) => s.session_id === sc.session_id) !== shared) throw new Error(shared ? 'the shared store lacks the session' : 'the importing workspace already has the session');
    if (!shared) {
      const imported = await c.import(fs.readFileSync(exportPath, 'utf8'));
      if (imported.session_id !== sc.session_id) throw new Error(`imported ${imported.session_id}`);
    }
    const r = await c.resumeSession(sc.session_id);
    const snap = r.snapshot;
    const artifacts = sc.snapshot.artifacts.map((want) => {
      const got = snap.artifacts.find((a) => a.id === want.id);
      if (!got) throw new Error(`artifact ${want.id} is missing`);
      const bytes = Buffer.from(got.data, 'base64');
      if (!bytes.equals(pattern(want.pattern))) throw new Error(`artifact ${want.id}: bytes differ from what Python saved`);
      const sha = crypto.createHash('sha256').update(bytes).digest('hex');
      if (sha !== got.sha256 || bytes.length !== got.size) throw new Error(`artifact ${want.id}: recorded digest or size is wrong`);
      return { id: got.id, name: got.name, sha256: sha, size: bytes.length };
    });
    const interrupted = r.interrupted_runs.map((ir) => ({
      run_id: ir.run_id, turn: ir.turn, message_count: ir.message_count, usage: ir.usage, tool_calls_count: ir.tool_calls_count,
    }));
    const rr = await c.resumeRun(sc.run_id, { sessionId: sc.session_id, newRunId: sc.new_run_id });
    const t = sc.node_turn;
    await c.checkpoint(rr.run_id, { turn: t.turn, newMessages: t.new_messages, usage: t.usage, toolCallsCount: t.tool_calls_count, state: t.state });
    await c.completeRun(rr.run_id, 'completed', { usage: t.usage, toolCallsCount: t.tool_calls_count });
    const out = {
      session: { messages: snap.messages, metadata: snap.metadata, agent: snap.agent, artifacts, interrupted_runs: interrupted },
      resumed_run: {
        run_id: rr.run_id, resumed_from: rr.resumed_from, turn: rr.turn, usage: rr.usage,
        tool_calls_count: rr.tool_calls_count, state: rr.state, messages: rr.messages,
      },
    };
    process.stdout.write(canonical(out) + '\n');
  } finally {
    await c.close();
  }
}

main().catch((err) => {
  console.error('node stage:', err);
  process.exit(1);
});
