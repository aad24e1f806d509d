'use strict';
// Shared test helpers: fresh temp workspaces, clients in either mode (and
// MODES, to run a test in both), and daemon teardown (SIGTERM, then wait
// until the process is gone).

const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');
const cairn = require('..');
const wire = require('../checkpoint-wire.js');

const REPO = path.resolve(__dirname, '..', '..', '..');
const DAEMON = process.env.CAIRN_DAEMON || path.join(REPO, 'build', 'cairnd');

function tmpWorkspace(t) {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-'));
  t.after(() => fs.rmSync(ws, { recursive: true, force: true }));
  return ws;
}

const HAVE_PROC = fs.existsSync('/proc/self'); // to tell a zombie by (Linux; not macOS)

// alive is whether pid has not exited yet. A zombie whose threads have
// all exited has: a daemon whose starter was killed is reparented to PID
// 1, which may take a second or more to reap it, and its exit (its locks
// and descriptors given back) is what a test waits for. The main thread of
// a process killed by a signal turns zombie while the others may still be
// closing its descriptors, hence the thread count.
function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return err.code === 'EPERM';
  }
  if (!HAVE_PROC) return true; // no /proc (macOS): alive until reaped
  let status;
  try {
    status = fs.readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch (err) {
    return err.code !== 'ENOENT' && err.code !== 'ESRCH'; // reaped before the open, or before the read
  }
  return !(/^State:\s+Z/m.test(status) && /^Threads:\s+1$/m.test(status));
}

async function stopDaemon(pid) {
  if (!pid || !alive(pid)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch (_) {
    return;
  }
  const deadline = Date.now() + 10000;
  while (alive(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, 'SIGKILL');
      break;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

function daemonOptions(ws, extra = {}) {
  return { workspace: ws, daemon: DAEMON, daemonArgs: ['--idle-timeout=20s'], ...extra };
}

/** An embedded client over a fresh workspace, closed at the end of the test. */
async function embedded(t, extra = {}) {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-'));
  const c = await cairn.connect({ workspace: ws, embedded: true, ...extra });
  t.after(async () => {
    await c.close().catch(() => {});
    fs.rmSync(ws, { recursive: true, force: true });
  });
  return { c, ws };
}

/** A daemon-mode client over a fresh workspace; the daemon is stopped at the end. */
async function daemon(t, extra = {}) {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-'));
  const c = await cairn.connect(daemonOptions(ws, extra));
  const st = await c.status();
  const pid = st.daemon && st.daemon.pid;
  t.after(async () => {
    await c.close().catch(() => {});
    await stopDaemon(pid);
    fs.rmSync(ws, { recursive: true, force: true });
  });
  return { c, ws, pid, status: st };
}

/** Each mode's client opener, by name: run a test body in both modes. */
const MODES = { embedded, daemon };

function msg(i, size = 0) {
  return { role: 'user', content: `message ${i}` + (size ? ' ' + 'x'.repeat(size) : '') };
}

/**
 * Runs a script in a child node with the package's path in CAIRN_PKG;
 * resolves to {code, signal, stdout, stderr, timedOut} (killed after 20 s).
 */
function runChild(script, env = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script], {
      env: { ...process.env, CAIRN_PKG: path.resolve(__dirname, '..'), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, 20000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

/** fn() with CAIRN_NODE_WIRE set to value (undefined: unset) while it runs. */
async function withEnv(value, fn) {
  const old = process.env[wire.ENV];
  if (value === undefined) delete process.env[wire.ENV];
  else process.env[wire.ENV] = value;
  try {
    return await fn();
  } finally {
    if (old === undefined) delete process.env[wire.ENV];
    else process.env[wire.ENV] = old;
  }
}

/**
 * Stops pid with SIGSTOP and returns once every one of its threads is
 * stopped. kill(2) returns before that: the thread the kernel woke for the
 * signal stops the others, which run on until it does, so a daemon on a
 * busy machine can still answer a connection made just after kill
 * returned. Waits in place (a few milliseconds at most) so that callers
 * stay synchronous.
 */
function sigstop(pid, timeoutMs = 30000) {
  process.kill(pid, 'SIGSTOP');
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + timeoutMs;
  while (!allStopped(pid)) {
    if (Date.now() > deadline) throw new Error(`pid ${pid}: not every thread stopped within ${timeoutMs} ms of SIGSTOP`);
    Atomics.wait(nap, 0, 0, 1);
  }
}

/** Whether every thread of pid is stopped by a signal ('T' in /proc/<pid>/task/<tid>/stat). */
function allStopped(pid) {
  try {
    const tids = fs.readdirSync(`/proc/${pid}/task`);
    return (
      tids.length > 0 &&
      tids.every((tid) => {
        const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1');
        return stat[stat.lastIndexOf(')') + 2] === 'T'; // the state follows the command's name
      })
    );
  } catch {
    return false;
  }
}

/** fn()'s result, or its error as [class name, code, message, rc]. */
async function outcome(fn) {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof cairn.CairnError)) throw err;
    return [err.constructor.name, err.code, err.message, err.rc];
  }
}

module.exports = { cairn, REPO, DAEMON, tmpWorkspace, stopDaemon, alive, daemonOptions, embedded, daemon, MODES, msg, runChild, withEnv, outcome, sigstop };
