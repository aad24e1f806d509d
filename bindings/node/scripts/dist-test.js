'use strict';
// The installed npm package works on its own: `make test-dist-node`.
//
//   node scripts/dist-test.js dist/npm/cairn-sessions-*.tgz
//
// Installs the tarball with npm into an empty project in a temp dir (koffi
// comes from the registry, or npm's cache), then runs programs with a clean
// environment (`env -i` with only PATH, holding node, and HOME; no CAIRN_*
// variables), twice: once saving from CommonJS and resuming from an ES
// module, once the other way round. Each time:
//
// 1. connect() on an explicit workspace, with no daemon running, auto-starts
//    the package's own cairnd (checked through /proc/<pid>/exe) from the
//    package's own libcairn, saves a message and checkpoints a run's turn;
// 2. that cairnd is killed with SIGKILL;
// 3. connect() auto-starts it again; resumeSession and resumeRun return
//    what was saved.
//
// Every step has a time limit; daemons started here are killed and the temp
// dir removed whatever happens. Prints "N passed, 0 failed" or fails.

const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');

const STEP_TIMEOUT_MS = 60_000;
const INSTALL_TIMEOUT_MS = 300_000;

const SAVE = {
  cjs: `
const cairn = require('cairn-sessions');
(async () => {
  const c = await cairn.connect({ workspace: process.argv[2] });
  await c.save('s1', { change: { append_messages: [{ role: 'user', content: 'hello from npm' }] } });
  const { run_id } = await c.beginRun('s1', { runId: 'r1' });
  await c.checkpoint(run_id, { turn: 1, newMessages: [{ role: 'assistant', content: 'turn one' }], toolCallsCount: 1 });
  const st = await c.status();
  console.log(JSON.stringify({ pid: st.daemon.pid, lib: cairn.libraryPath(), entry: require.resolve('cairn-sessions') }));
  await c.close();
})().catch((e) => { console.error(e); process.exit(1); });
`,
  mjs: `
import { connect, libraryPath } from 'cairn-sessions';
const c = await connect({ workspace: process.argv[2] });
await c.save('s1', { change: { append_messages: [{ role: 'user', content: 'hello from npm' }] } });
const { run_id } = await c.beginRun('s1', { runId: 'r1' });
await c.checkpoint(run_id, { turn: 1, newMessages: [{ role: 'assistant', content: 'turn one' }], toolCallsCount: 1 });
const st = await c.status();
console.log(JSON.stringify({ pid: st.daemon.pid, lib: libraryPath(), entry: import.meta.resolve('cairn-sessions') }));
await c.close();
`,
};

const RESUME_BODY = `
  const s = await c.resumeSession('s1');
  const r = await c.resumeRun('r1', { newRunId: 'r2' });
  const st = await c.status();
  console.log(JSON.stringify({
    pid: st.daemon.pid,
    lib: LIB(),
    messages: s.snapshot.messages.map((m) => m.content),
    interrupted: s.interrupted_runs.map((x) => x.run_id),
    runTurn: r.turn,
    runMessages: r.messages.map((m) => m.content),
  }));
  await c.close();
`;

const RESUME = {
  cjs: `
const cairn = require('cairn-sessions');
const LIB = cairn.libraryPath;
(async () => {
  const c = await cairn.connect({ workspace: process.argv[2] });
${RESUME_BODY}
})().catch((e) => { console.error(e); process.exit(1); });
`,
  mjs: `
import cairn, { connect } from 'cairn-sessions';
const LIB = cairn.libraryPath;
const c = await connect({ workspace: process.argv[2] });
${RESUME_BODY}
`,
};

/** Whether pid runs; a zombie (killed, not yet reaped) does not. */
function alive(pid) {
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (_) {
    return false;
  }
  return stat.slice(stat.lastIndexOf(')') + 1).trim().split(/\s+/)[0] !== 'Z';
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** The pids of cairnd processes whose command line names dir. */
function daemonsUnder(dir) {
  const pids = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let cmd;
    try {
      cmd = fs.readFileSync(`/proc/${name}/cmdline`, 'latin1');
    } catch (_) {
      continue;
    }
    if (cmd.includes(dir) && cmd.includes('cairnd') && alive(Number(name))) pids.push(Number(name));
  }
  return pids;
}

function main() {
  if (process.argv.length < 3) {
    console.error('usage: node dist-test.js <cairn-sessions-*.tgz>...');
    return 2;
  }
  const tarballs = process.argv.slice(2).map((t) => path.resolve(t));
  const tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-npm-dist-')));
  let passed = 0;

  const check = (cond, what) => {
    if (!cond) throw new Error(what);
    passed++;
    console.log(`ok: ${what}`);
  };

  // Programs run under env -i: PATH holds node (and the system's bin) only.
  const cleanEnv = [`PATH=${path.dirname(process.execPath)}:/usr/bin:/bin`, `HOME=${path.join(tmp, 'home')}`];
  const run = (file, ws, cwd) => {
    const r = spawnSync('env', ['-i', ...cleanEnv, 'node', file, ws], { cwd, encoding: 'utf8', timeout: STEP_TIMEOUT_MS });
    if (r.status !== 0) throw new Error(`node ${path.basename(file)} exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`);
    return JSON.parse(r.stdout);
  };

  try {
    fs.mkdirSync(path.join(tmp, 'home'));
    const proj = path.join(tmp, 'proj');
    fs.mkdirSync(proj);
    fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'cairn-npm-dist-test', version: '1.0.0', private: true }));
    // npm runs with this process's environment (its cache and registry
    // settings): only the programs below need the clean one.
    const inst = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...tarballs], {
      cwd: proj,
      encoding: 'utf8',
      timeout: INSTALL_TIMEOUT_MS,
    });
    if (inst.status !== 0) throw new Error(`npm install exited ${inst.status ?? inst.signal}:\n${inst.stdout}\n${inst.stderr}`);
    const pkg = path.join(proj, 'node_modules', 'cairn-sessions');
    check(fs.existsSync(path.join(proj, 'node_modules', 'koffi', 'package.json')), 'npm installed the dependency koffi');
    const native = path.join(pkg, 'native', `${process.platform}-${process.arch}`);
    const own = path.join(native, 'cairnd');
    let mode = 0;
    try {
      mode = fs.statSync(own).mode;
    } catch (_) {
      // checked just below
    }
    check((mode & 0o111) !== 0, `the installed package holds an executable cairnd (${own})`);

    for (const [saver, resumer] of [
      ['cjs', 'mjs'],
      ['mjs', 'cjs'],
    ]) {
      const ws = path.join(tmp, `ws-${saver}`);
      fs.mkdirSync(ws);
      const saveFile = path.join(proj, `save-${saver}.${saver}`);
      const resumeFile = path.join(proj, `resume-${resumer}.${resumer}`);
      fs.writeFileSync(saveFile, SAVE[saver]);
      fs.writeFileSync(resumeFile, RESUME[resumer]);
      check(daemonsUnder(ws).length === 0, `${saver}: no daemon runs on the workspace yet`);

      const first = run(saveFile, ws, proj);
      const entry = first.entry.startsWith('file:') ? new URL(first.entry).pathname : first.entry;
      check(entry.startsWith(pkg + path.sep), `${saver}: cairn-sessions resolves to the installed package (${entry})`);
      check(fs.realpathSync(first.lib) === fs.realpathSync(path.join(native, 'libcairn.so')), `${saver}: libcairn loaded from the package (${first.lib})`);
      check(fs.realpathSync(`/proc/${first.pid}/exe`) === fs.realpathSync(own), `${saver}: connect() auto-started the package's own cairnd`);
      check(daemonsUnder(ws).includes(first.pid), `${saver}: that daemon serves the workspace`);

      process.kill(first.pid, 'SIGKILL');
      const deadline = Date.now() + STEP_TIMEOUT_MS;
      while (alive(first.pid) && Date.now() < deadline) sleep(20);
      check(!alive(first.pid), `${saver}: the daemon is gone after SIGKILL`);

      const second = run(resumeFile, ws, proj);
      check(second.pid !== first.pid, `${resumer}: connect() auto-started a new cairnd`);
      check(fs.realpathSync(`/proc/${second.pid}/exe`) === fs.realpathSync(own), `${resumer}: the new cairnd is the package's own too`);
      check(fs.realpathSync(second.lib) === fs.realpathSync(path.join(native, 'libcairn.so')), `${resumer}: libcairn loaded from the package`);
      check(second.messages[0] === 'hello from npm', `${resumer}: the saved message survived (${JSON.stringify(second.messages)})`);
      check(second.interrupted.includes('r1'), `${resumer}: the killed run is reported interrupted (${JSON.stringify(second.interrupted)})`);
      check(
        second.runTurn === 1 && second.runMessages.includes('turn one'),
        `${resumer}: resumeRun resumes from the checkpoint (turn ${second.runTurn})`
      );
    }
    console.log(`${passed} passed, 0 failed`);
    return 0;
  } catch (e) {
    console.error(`FAIL: ${e.message}`);
    console.log(`${passed} passed, 1 failed`);
    return 1;
  } finally {
    // Every cairnd started on a workspace here, including one a failed step
    // started, is found by the temp dir in its command line.
    for (const pid of daemonsUnder(tmp)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch (_) {
        // already gone
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

process.exitCode = main();
