'use strict';
// One Node.js agent process for the benchmark drivers: an agent's turns
// through the Node binding against an already running cairnd.
//
//   node bench/agent/node_agent.js <workspace> <session_id> <turns> <turns_file>
//
// Connects to the workspace's daemon (daemon mode, no auto-start), saves
// the session with one system message appended, begins a run and reads
// turns_file: a JSON array whose element k is turn k+1, {"messages": [...],
// "usage": {...}, "state": {...}}. Prints "ready", waits for one line on
// stdin, then awaits turn i = 1..turns's checkpoint (turn i, the turn's
// messages, usage and state, toolCallsCount i), timing each, and prints one
// JSON line:
//
//   {"start": <wall clock s>, "end": <wall clock s>, "cpu_s": <this
//    process's user+system CPU during the turns>, "median_us": ...,
//    "p99_us": ..., "wire_sent": <checkpoints sent by the binding's own
//    connection (CAIRN_NODE_WIRE=0: none)>, "mono_start": ..., "mono_end":
//    ... (CLOCK_MONOTONIC seconds, as Python's time.monotonic())}
//
// then closes the client and exits 0. Errors go to stderr, exit 1.

const fs = require('fs');
const path = require('path');
const cairn = require(path.join(__dirname, '..', '..', 'bindings', 'node'));

function usage(msg) {
  process.stderr.write(`${msg}\nusage: node bench/agent/node_agent.js <workspace> <session_id> <turns> <turns_file>\n`);
  process.exit(2);
}

/** The q quantile of samples (ns, as BigInt-free Numbers), in microseconds, as agent_bench.py's pct. */
function pct(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] / 1000;
}

/** Resolves once one line (or EOF) arrived on stdin. */
function oneLine() {
  return new Promise((resolve) => {
    let buf = '';
    const done = () => {
      process.stdin.off('data', onData);
      process.stdin.off('end', done);
      process.stdin.pause();
      resolve();
    };
    const onData = (d) => {
      buf += d;
      if (buf.includes('\n')) done();
    };
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', onData);
    process.stdin.on('end', done);
    process.stdin.resume();
  });
}

const wallSeconds = () => (performance.timeOrigin + performance.now()) / 1000;
const monoSeconds = () => Number(process.hrtime.bigint()) / 1e9;

async function main() {
  const [workspace, sessionId, turnsArg, turnsFile] = process.argv.slice(2);
  if (!turnsFile) usage('four arguments are needed');
  const turns = Number(turnsArg);
  if (!Number.isSafeInteger(turns) || turns < 1) usage(`turns must be a positive integer, not ${JSON.stringify(turnsArg)}`);
  const data = JSON.parse(fs.readFileSync(turnsFile, 'utf8'));
  if (!Array.isArray(data) || data.length < turns) usage(`${turnsFile} must be a JSON array of at least ${turns} turns`);

  const c = await cairn.connect({ workspace, autoStart: false });
  await c.save(sessionId, { change: { append_messages: [{ role: 'system', content: 'you are an agent' }] } });
  const { run_id: runId } = await c.beginRun(sessionId);
  const samples = new Float64Array(turns);

  process.stdout.write('ready\n');
  await oneLine();

  const start = wallSeconds();
  const monoStart = monoSeconds();
  const cpu0 = process.cpuUsage();
  for (let i = 1; i <= turns; i++) {
    const t = data[i - 1];
    const t0 = process.hrtime.bigint();
    await c.checkpoint(runId, { turn: i, newMessages: t.messages, usage: t.usage, toolCallsCount: i, state: t.state });
    samples[i - 1] = Number(process.hrtime.bigint() - t0);
  }
  const cpu = process.cpuUsage(cpu0);
  const end = wallSeconds();
  const monoEnd = monoSeconds();
  const sorted = Array.from(samples).sort((a, b) => a - b);
  const out = {
    start,
    end,
    cpu_s: (cpu.user + cpu.system) / 1e6,
    median_us: pct(sorted, 0.5),
    p99_us: pct(sorted, 0.99),
    wire_sent: c._wireSent,
    mono_start: monoStart,
    mono_end: monoEnd,
  };
  process.stdout.write(JSON.stringify(out) + '\n');
  await c.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`node_agent: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  }
);
