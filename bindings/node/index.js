'use strict';
// cairn — the Node.js binding of libcairn (see ../../capi/cairn.h).
//
// How a call travels: one route. Every method call goes through
// cairn_submit, plain C that copies the request, queues it for a thread the
// Go runtime owns and returns a ticket at once. When the call finishes, its
// ticket is written to the completion pipe (cairn_completion_fd), which is
// wrapped once in a net.Socket so libuv polls it on the event loop (no
// thread pool); cairn_take (plain C) gives the outcome and the Promise
// settles. So the event loop never waits for a call, however long it takes
// (a nextEvent long poll included), and the main thread never enters Go:
// entering Go from it through koffi costs about 100-200 us, because koffi
// switches stacks and Go then re-reads the thread's stack bounds with
// pthread_getattr_np, which on the main thread parses /proc/self/maps.
// The socket is ref()'d only while calls are pending, so an idle client
// does not keep the process alive.
//
// cairn_open and cairn_close run on koffi's thread pool (.async): they are
// not method calls (there is no handle to submit on yet, or none after),
// they are rare, and a daemon start must not block the event loop.
//
// One call may skip all that: a daemon-mode checkpoint, an agent's every
// turn, is sent by the binding itself on a connection of its own to the
// workspace's cairnd when it can be sent exactly as libcairn would send it
// (checkpoint-wire.js); otherwise, and with CAIRN_NODE_WIRE=0, it goes
// through libcairn like every other call.
//
// Only one JavaScript thread per process may use this module: the
// completion pipe is process-wide, and a second reader (a worker_thread
// loading this module too) would steal the first one's tickets.

const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const koffi = require('koffi');
const runHelper = require('./run.js');
const wire = require('./checkpoint-wire.js');

// ---------------------------------------------------------------- errors

/** Base class of every error libcairn reports. */
class CairnError extends Error {
  constructor(code, message, rc) {
    super(message);
    this.name = 'CairnError';
    /** The stable error code, e.g. "not_found". */
    this.code = code;
    /** The C return code (negative), when known. */
    this.rc = rc;
  }
}

// code -> [class name, C return code]
const CODES = [
  ['internal', 'InternalError', -1],
  ['invalid_argument', 'InvalidArgumentError', -2],
  ['not_found', 'NotFoundError', -3],
  ['conflict', 'ConflictError', -4],
  ['schema_unsupported', 'SchemaUnsupportedError', -5],
  ['too_large', 'TooLargeError', -6],
  ['no_checkpoint', 'NoCheckpointError', -7],
  ['not_owner', 'NotOwnerError', -8],
  ['step_identity_changed', 'StepIdentityChangedError', -9],
  ['locked', 'LockedError', -10],
  ['unavailable', 'UnavailableError', -11],
  ['forked', 'ForkedError', -12],
  ['bad_handle', 'BadHandleError', -13],
  ['method_not_found', 'MethodNotFoundError', -14],
  ['bad_request', 'BadRequestError', -15],
  ['bad_ticket', 'BadTicketError', -16],
  ['corrupt', 'CorruptError', -17],
  ['no_space', 'NoSpaceError', -18],
];

const errorClasses = {}; // class name -> class
const classByCode = new Map(); // code -> class
const codeByRc = new Map(); // rc -> code
const rcByCode = new Map(); // code -> rc
for (const [code, name, rc] of CODES) {
  // A named class per code, so stack traces and instanceof read naturally.
  const cls = {
    [name]: class extends CairnError {
      constructor(message, rc2) {
        super(code, message, rc2 === undefined ? rc : rc2);
        this.name = name;
      }
    },
  }[name];
  errorClasses[name] = cls;
  classByCode.set(code, cls);
  codeByRc.set(rc, code);
  rcByCode.set(code, rc);
}

/** Builds the typed error for a code and message. */
function makeError(code, message, rc) {
  const cls = classByCode.get(code);
  if (cls) return new cls(message, rc);
  return new CairnError(code, message, rc);
}

// --------------------------------------------------------------- library

// The native directory an installed package carries for this platform
// (native/linux-x64/ and the like; see scripts/pack.js): libcairn and the
// cairnd it auto-starts, found by libcairn next to itself.
const NATIVE_DIR = path.join(__dirname, 'native', `${process.platform}-${process.arch}`);

function findLibrary() {
  const name = process.platform === 'darwin' ? 'libcairn.dylib' : process.platform === 'win32' ? 'cairn.dll' : 'libcairn.so';
  const env = process.env.CAIRN_LIBRARY;
  if (env) {
    if (!fs.existsSync(env)) throw new CairnError('internal', `CAIRN_LIBRARY=${env}: no such file`);
    return env;
  }
  const dir = process.env.CAIRN_LIB_DIR;
  if (dir) {
    const p = path.join(dir, name);
    if (!fs.existsSync(p)) throw new CairnError('internal', `CAIRN_LIB_DIR=${dir}: no ${name} in it`);
    return p;
  }
  const candidates = [
    path.join(NATIVE_DIR, name),
    path.join(__dirname, name),
    path.join(__dirname, '..', '..', 'build', name),
  ];
  for (const c of candidates) if (fs.existsSync(c)) return c;
  let carried = [];
  try {
    carried = fs.readdirSync(path.join(__dirname, 'native'));
  } catch (_) {
    // not an installed package: the repository's build/ was the last hope
  }
  const platform = `${process.platform}-${process.arch}`;
  const hint = carried.includes(platform)
    ? `the package's native/${platform}/ lacks it: reinstall the package`
    : carried.length
    ? `this package carries native parts for ${carried.join(', ')}, not ${platform}; build one on ${platform} (make dist-node)`
    : 'set CAIRN_LIBRARY or CAIRN_LIB_DIR, install the package built by `make dist-node`, or build it (make lib) in the repository';
  throw new CairnError('internal', `cannot find ${name}: ${hint}; looked in ${candidates.join(', ')}`);
}

let native = null; // the loaded library's functions, once loaded

function load() {
  if (native) return native;
  const libPath = findLibrary();
  const lib = koffi.load(libPath);
  native = {
    path: libPath,
    version: lib.func('const char *cairn_version(void)'),
    open: lib.func('int cairn_open(const char *options_json, _Out_ uint64_t *handle, _Out_ void **err)'),
    close: lib.func('int cairn_close(uint64_t handle, _Out_ void **err)'),
    openHandles: lib.func('int cairn_open_handles(void)'),
    // The out-parameters are slots of one preallocated Buffer (see OUT).
    submit: lib.func('int cairn_submit(uint64_t handle, const char *method, void *request, size_t request_len, void *ticket, void *err)'),
    take: lib.func('int cairn_take(uint64_t ticket, void *response, void *response_len, void *err)'),
    completionFd: lib.func('int cairn_completion_fd(_Out_ int *fd, _Out_ void **err)'),
    free: lib.func('void cairn_free(void *p)'),
  };
  return native;
}

// The out-parameter block of cairn_submit and cairn_take, reused by every
// call (both are synchronous on this thread, so one block is enough):
// [0,8) ticket, [8,16) response pointer, [16,24) response length,
// [24,32) error pointer.
const OUT = Buffer.alloc(32);
const OUT_TICKET = OUT.subarray(0, 8);
const OUT_RESP = OUT.subarray(8, 16);
const OUT_LEN = OUT.subarray(16, 24);
const OUT_ERR = OUT.subarray(24, 32);
const LE = os.endianness() === 'LE';

function readU64(buf, off) {
  // Pointers and lengths fit in 53 bits; read them as Numbers.
  const lo = LE ? buf.readUInt32LE(off) : buf.readUInt32BE(off + 4);
  const hi = LE ? buf.readUInt32LE(off + 4) : buf.readUInt32BE(off);
  return hi * 4294967296 + lo;
}

// Tickets are opaque 64-bit ids (they use the high bits): BigInts.
const readTicket = LE ? (buf, off) => buf.readBigUInt64LE(off) : (buf, off) => buf.readBigUInt64BE(off);

/** Reads the {code, message} JSON error a call left in err and frees it. */
function takeError(n, errPtr, rc) {
  if (errPtr === null) {
    const code = codeByRc.get(rc) || 'internal';
    return makeError(code, `libcairn returned ${rc} without an error text`, rc);
  }
  let text;
  try {
    text = koffi.decode(errPtr, 'char', -1);
  } finally {
    n.free(errPtr);
  }
  let e;
  try {
    e = JSON.parse(text);
  } catch (_) {
    return makeError(codeByRc.get(rc) || 'internal', text, rc);
  }
  return makeError(e.code || codeByRc.get(rc) || 'internal', e.message || '', rc);
}

/**
 * Turns a taken outcome into a JS value or an Error (never throws): the
 * response pointer, response length and error pointer are in OUT.
 */
function harvest(n, rc) {
  if (rc !== 0) return takeError(n, koffi.decode(OUT_ERR, 'void *'), rc);
  const len = readU64(OUT, 16);
  const ptr = koffi.decode(OUT_RESP, 'void *');
  if (ptr === null) return null;
  let text;
  try {
    text = len === 0 ? '' : koffi.decode(ptr, 'char', len);
  } finally {
    n.free(ptr);
  }
  try {
    return text === '' ? null : JSON.parse(text);
  } catch (err) {
    return new CairnError('internal', `libcairn returned bad JSON: ${err.message}`);
  }
}

// ----------------------------------------------------- completion pipe

const pending = new Map(); // ticket (BigInt) -> {resolve, reject}
let pipe = null; // net.Socket over the completion fd
let partial = null; // bytes of an incomplete ticket

function ensurePipe(n) {
  if (pipe) return;
  const fd = [0];
  const errp = [null];
  const rc = n.completionFd(fd, errp);
  if (rc !== 0) throw takeError(n, errp[0], rc);
  pipe = new net.Socket({ fd: fd[0], readable: true, writable: false });
  pipe.on('data', onTickets);
  pipe.on('error', (err) => failAll(new CairnError('internal', `completion pipe: ${err.message}`)));
  pipe.on('end', () => failAll(new CairnError('internal', 'completion pipe closed')));
  pipe.unref();
}

function onTickets(chunk) {
  if (partial) {
    chunk = Buffer.concat([partial, chunk]);
    partial = null;
  }
  const whole = chunk.length - (chunk.length % 8);
  if (whole !== chunk.length) partial = Buffer.from(chunk.subarray(whole));
  const n = native;
  for (let off = 0; off < whole; off += 8) {
    const ticket = readTicket(chunk, off);
    const p = pending.get(ticket);
    if (p === undefined) continue; // not ours (cannot happen with one reader)
    pending.delete(ticket);
    let v;
    try {
      v = harvest(n, n.take(ticket, OUT_RESP, OUT_LEN, OUT_ERR));
    } catch (err) {
      v = err instanceof Error ? err : new Error(String(err));
    }
    if (v instanceof Error) p.reject(v);
    else p.resolve(v);
  }
  if (pending.size === 0) pipe.unref();
}

function failAll(err) {
  for (const p of pending.values()) p.reject(err);
  pending.clear();
  if (pipe) pipe.unref();
}

const EMPTY = Buffer.alloc(0);
const scratch = Buffer.allocUnsafe(64 * 1024);

/**
 * Runs one method through cairn_submit and returns a Promise of its parsed
 * JSON result. `req` is the JSON text of the params (or undefined for
 * none). The completion pipe exists: connect made it.
 */
function invoke(client, method, req) {
  const n = native;
  let buf = EMPTY;
  let len = 0;
  if (req !== undefined) {
    // The request is copied by cairn_submit, so one scratch buffer serves
    // every request that fits.
    if (req.length * 3 <= scratch.length) {
      len = scratch.utf8Write(req, 0);
      buf = scratch;
    } else {
      buf = Buffer.from(req, 'utf8');
      len = buf.length;
    }
  }
  const rc = n.submit(client._handle, method, buf, len, OUT_TICKET, OUT_ERR);
  if (rc !== 0) return Promise.reject(takeError(n, koffi.decode(OUT_ERR, 'void *'), rc));
  const ticket = readTicket(OUT, 0);
  return new Promise((resolve, reject) => {
    pending.set(ticket, { resolve, reject });
    if (pending.size === 1) pipe.ref(); // a pending call keeps the process alive
  });
}

// ----------------------------------------------------------------- client

const CONNECT_OPTIONS = ['workspace', 'embedded', 'daemon', 'autoStart', 'daemonArgs', 'store', 'callTimeoutMs'];

function jsonOrUndefined(o) {
  return o === undefined ? undefined : JSON.stringify(o);
}

function need(v, what) {
  if (typeof v !== 'string' || v === '') throw new TypeError(`${what} must be a non-empty string`);
  return v;
}

const RESUME_OPTIONS = ['messagesTail', 'artifacts', 'traces', 'drift', 'processes'];
const MESSAGES_OPTIONS = ['tail', 'from', 'to', 'sinceGeneration', 'limit', 'maxBytes'];
const REPAIR_OPTIONS = ['sessionId', 'workflowId', 'apply'];
const RUN_EVENTS_OPTIONS = ['sessionId', 'from', 'sinceGeneration', 'limit', 'maxBytes'];

// The wire name of each query option.
const QUERY_FIELDS = {
  tail: 'tail',
  from: 'from',
  to: 'to',
  sinceGeneration: 'since_generation',
  limit: 'limit',
  maxBytes: 'max_bytes',
};

/**
 * Returns options after checking that it names only allowed keys: a
 * misspelt option (or a wire name such as since_generation) would
 * otherwise be dropped silently and widen the read.
 */
function only(options, allowed, what) {
  if (options === null || typeof options !== 'object') throw new TypeError(`${what}: options must be an object`);
  for (const k of Object.keys(options)) {
    if (!allowed.includes(k)) throw new TypeError(`${what}: unknown option ${JSON.stringify(k)} (known: ${allowed.join(', ')})`);
  }
  return options;
}

/** Copies the set query options of q into the params p, by wire name. */
function query(p, q) {
  for (const [k, wire] of Object.entries(QUERY_FIELDS)) {
    if (q[k] !== undefined && q[k] !== null) p[wire] = q[k];
  }
}

/** A JSON.stringify replacer that writes bytes (any Uint8Array) as base64. */
function bytesAsBase64(k, v) {
  // this[k] is the value before its toJSON (a Buffer's gives {type, data}).
  const o = this[k];
  if (o instanceof Uint8Array) return Buffer.from(o.buffer, o.byteOffset, o.byteLength).toString('base64');
  return v;
}

class Client {
  /** @internal use connect() */
  constructor(handle, options) {
    this._handle = handle;
    this._closed = false;
    this.options = options;
    // _wire is daemon mode's own connection for checkpoint
    // (checkpoint-wire.js); null: every call goes through libcairn.
    this._wire = null;
  }

  /** @internal How many checkpoints went by the binding's own connection (tests read it). */
  get _wireSent() {
    return this._wire === null ? 0 : this._wire.sent;
  }

  /** The handle number (for diagnostics). */
  get handle() {
    return this._handle;
  }

  /** Calls any method of the C API with JSON params; resolves to its JSON result. */
  call(method, params) {
    return this._call(need(method, 'method'), params);
  }

  _call(method, params) {
    return invoke(this, method, jsonOrUndefined(params));
  }

  status() {
    return invoke(this, 'status', undefined);
  }

  /** The daemon's hello (daemon mode) or the engine's (embedded mode). */
  hello() {
    return invoke(this, 'hello', undefined);
  }

  /**
   * Saves a whole snapshot or a delta change; resolves to the new
   * generation. Artifact data may be given as bytes (a Buffer or any
   * Uint8Array): it travels as base64, as the wire has it.
   */
  async save(sessionId, { snapshot, change, expectGeneration } = {}) {
    need(sessionId, 'sessionId');
    const p = { session_id: sessionId };
    if (snapshot !== undefined) p.snapshot = snapshot;
    if (change !== undefined) p.change = change;
    if (expectGeneration !== undefined && expectGeneration !== null) p.expect_generation = expectGeneration;
    const r = await invoke(this, 'save', JSON.stringify(p, bytesAsBase64));
    return r.generation;
  }

  /**
   * What a new agent is handed for a session. Without options: the whole
   * session, with workspace drift and process health checks. messagesTail
   * keeps only the last N messages (the result's messages_from says where
   * they start, message_count how many there are); artifacts 'metadata'
   * leaves out their data and 'none' leaves them out; traces 'none' leaves
   * out the traces; drift and processes false skip those checks.
   */
  resumeSession(sessionId, options = {}) {
    const { messagesTail, artifacts, traces, drift, processes } = only(options, RESUME_OPTIONS, 'resumeSession');
    const p = { session_id: need(sessionId, 'sessionId') };
    if (messagesTail !== undefined) p.messages_tail = messagesTail;
    if (artifacts !== undefined) p.artifacts = artifacts;
    if (traces !== undefined) p.traces = traces;
    if (drift !== undefined) p.drift = drift;
    if (processes !== undefined) p.processes = processes;
    return this._call('resumeSession', p);
  }

  /** The session's summary: generation, counts, sizes and times; no content. */
  summary(sessionId) {
    return this._call('summary', { session_id: need(sessionId, 'sessionId') });
  }

  /**
   * A page of the session's messages: [from, to) by index (to 0 or none:
   * to the end), or the last `tail`, or those added after generation
   * `sinceGeneration`. `limit` (count) and `maxBytes` cut the page short,
   * but a page of a non-empty range holds at least one message; while
   * `more`, ask again from `next`.
   */
  messages(sessionId, options = {}) {
    const p = { session_id: need(sessionId, 'sessionId') };
    query(p, only(options, MESSAGES_OPTIONS, 'messages'));
    return this._call('messages', p);
  }

  /** One artifact with its data (base64, as the wire has it; see artifactBytes). */
  artifact(sessionId, artifactId) {
    return this._call('artifact', { session_id: need(sessionId, 'sessionId'), artifact_id: need(artifactId, 'artifactId') });
  }

  /** One artifact's data as a Buffer. */
  async artifactBytes(sessionId, artifactId) {
    const r = await this.artifact(sessionId, artifactId);
    return Buffer.from(r.artifact.data || '', 'base64');
  }

  /** The session's artifacts without their data: ids, kinds, sizes, sha256 and metadata. */
  artifacts(sessionId) {
    return this._call('artifacts', { session_id: need(sessionId, 'sessionId') });
  }

  /**
   * The named artifacts the session holds, with their data (base64), in
   * the order named, all from one generation; ids it does not hold are
   * skipped. At most 1,024 distinct ids; `next` is how many of them the
   * answer covers (ask again from there when it is short of all).
   */
  artifactsByID(sessionId, artifactIds) {
    if (!Array.isArray(artifactIds)) throw new TypeError('artifactsByID: artifactIds must be an array of ids');
    return this._call('artifactsByID', { session_id: need(sessionId, 'sessionId'), artifact_ids: artifactIds });
  }

  /**
   * One run with its latest loop checkpoint (when it has one) and the run
   * that resumed it (resumed_as, when one did). sessionId, when given, must
   * be the session that records the run (else NotOwnerError).
   */
  run(runId, { sessionId } = {}) {
    const p = { run_id: need(runId, 'runId') };
    if (sessionId) p.session_id = sessionId;
    return this._call('run', p);
  }

  /** The session's runs. */
  runs(sessionId) {
    return this._call('runs', { session_id: need(sessionId, 'sessionId') });
  }

  /**
   * A page of a run's events (its traces and kept loop checkpoints, in
   * commit order), from index `from` or those committed after generation
   * `sinceGeneration`, cut short by `limit` and `maxBytes`; while `more`,
   * ask again from `next`.
   */
  runEvents(runId, options = {}) {
    const { sessionId, ...q } = only(options, RUN_EVENTS_OPTIONS, 'runEvents');
    const p = { run_id: need(runId, 'runId') };
    if (sessionId) p.session_id = sessionId;
    query(p, q);
    return this._call('runEvents', p);
  }

  beginRun(sessionId, { runId } = {}) {
    const p = { session_id: need(sessionId, 'sessionId') };
    if (runId) p.run_id = runId;
    return this._call('beginRun', p);
  }

  checkpoint(runId, { turn, newMessages = [], usage = {}, toolCallsCount = 0, state, sessionId } = {}) {
    need(runId, 'runId');
    if (turn === undefined) turn = 0;
    const w = this._wire;
    if (w !== null) {
      // Daemon mode sends it itself when it can (checkpoint-wire.js);
      // null: through libcairn, as before. The path calls the function
      // when it finds out only later (a failed dial or write).
      const r = w.checkpoint([runId, turn, newMessages, usage, toolCallsCount, state, sessionId], () =>
        this._checkpoint(runId, turn, newMessages, usage, toolCallsCount, state, sessionId)
      );
      if (r !== null) return r;
    }
    return this._checkpoint(runId, turn, newMessages, usage, toolCallsCount, state, sessionId);
  }

  _checkpoint(runId, turn, newMessages, usage, toolCallsCount, state, sessionId) {
    // checkpoint-wire.js's encodeCheckpoint mirrors what JSON.stringify
    // makes of p: change both together.
    const p = {
      run_id: runId,
      turn,
      new_messages: newMessages,
      usage,
      tool_calls_count: toolCallsCount,
    };
    if (state !== undefined) p.state = state;
    if (sessionId) p.session_id = sessionId;
    return this._call('checkpoint', p);
  }

  completeRun(runId, status, { usage, toolCallsCount, sessionId } = {}) {
    const p = { run_id: need(runId, 'runId'), status: need(status, 'status') };
    if (usage !== undefined) p.usage = usage;
    if (toolCallsCount !== undefined) p.tool_calls_count = toolCallsCount;
    if (sessionId) p.session_id = sessionId;
    return this._call('completeRun', p);
  }

  /**
   * Starts a run of sessionId for a host's own loop (see run.js): each
   * run.turn() checkpoints a finished tool turn, run.complete() ends it.
   * With resume: true it picks up the session's interrupted run from its
   * last finished turn, counters carried on (a new run when there is none).
   */
  startRun(sessionId, options = {}) {
    return runHelper.startRun(this, sessionId, only(options, ['resume', 'runId'], 'startRun'));
  }

  /**
   * startRun, then fn(run); completes the run when fn returns. When fn
   * throws, the run is left as a crash leaves it, to be resumed.
   */
  withRun(sessionId, options, fn) {
    if (typeof options === 'function') return runHelper.withRun(this, sessionId, {}, options);
    return runHelper.withRun(this, sessionId, only(options || {}, ['resume', 'runId'], 'withRun'), fn);
  }

  resumeRun(runId, { sessionId, newRunId, takeover } = {}) {
    const p = { run_id: need(runId, 'runId') };
    if (sessionId) p.session_id = sessionId;
    if (newRunId) p.new_run_id = newRunId;
    if (takeover) p.takeover = true;
    return this._call('resumeRun', p);
  }

  async beginWorkflow(workflowId, steps, { sessionId } = {}) {
    const p = { workflow_id: need(workflowId, 'workflowId'), steps: steps.map(stepSpec) };
    if (sessionId) p.session_id = sessionId;
    const r = await this._call('beginWorkflow', p);
    return r.completed || [];
  }

  async completeStep(workflowId, stepId, identity, result, { sessionId } = {}) {
    const p = { workflow_id: need(workflowId, 'workflowId'), step_id: need(stepId, 'stepId'), identity };
    if (result !== undefined) p.result = result;
    if (sessionId) p.session_id = sessionId;
    await this._call('completeStep', p);
  }

  async finishWorkflow(workflowId) {
    await this._call('finishWorkflow', { workflow_id: need(workflowId, 'workflowId') });
  }

  /**
   * Runs a resumable workflow: the steps not yet recorded run concurrently,
   * each success is recorded as it lands, and the results come back in spec
   * order (recorded results for steps done by an earlier attempt). If a step
   * fails, the others are awaited and the first failure is thrown; the
   * successes stay recorded, so a rerun does not run them again. The caller
   * calls finishWorkflow when done.
   */
  async parallelResumable(specs, workflowId, { sessionId } = {}) {
    const norm = specs.map((s) => {
      const spec = stepSpec(s);
      if (typeof s.fn !== 'function') throw new TypeError(`step ${spec.step_id}: fn must be a function`);
      return { ...spec, fn: s.fn };
    });
    const completed = await this.beginWorkflow(
      workflowId,
      norm.map((s) => ({ step_id: s.step_id, identity: s.identity })),
      { sessionId }
    );
    const done = new Map(completed.map((r) => [r.step_id, r]));
    const results = new Array(norm.length);
    let failed = false;
    let failure;
    const running = [];
    norm.forEach((s, i) => {
      const rec = done.get(s.step_id);
      if (rec) {
        results[i] = rec.result === undefined ? null : rec.result;
        return;
      }
      running.push(
        (async () => {
          const v = await s.fn();
          await this.completeStep(workflowId, s.step_id, s.identity, v === undefined ? null : v, { sessionId });
          results[i] = v;
        })().catch((err) => {
          if (!failed) {
            failed = true;
            failure = err;
          }
        })
      );
    });
    await Promise.all(running);
    if (failed) throw failure;
    return results;
  }

  async listSessions() {
    const r = await this._call('list', undefined);
    return r.sessions || [];
  }

  async delete(sessionId) {
    await this._call('delete', { session_id: need(sessionId, 'sessionId') });
  }

  fork(sessionId, newId, { atGeneration } = {}) {
    const p = { session_id: need(sessionId, 'sessionId'), new_id: need(newId, 'newId') };
    if (atGeneration) p.at_generation = atGeneration;
    return this._call('fork', p);
  }

  /** Exports a session as its JSON envelope (a plain object). */
  async export(sessionId) {
    const r = await this._call('export', { session_id: need(sessionId, 'sessionId') });
    return r.envelope;
  }

  /**
   * Exports a session into a file: the same envelope as export, written
   * page by page (the writer's memory stays bounded whatever the session's
   * size) and renamed into place when complete. In daemon mode the daemon
   * writes it, with its permissions; a relative path is resolved against
   * this process's working directory.
   */
  exportFile(sessionId, file) {
    return this._call('exportFile', { session_id: need(sessionId, 'sessionId'), path: path.resolve(need(file, 'path')) });
  }

  /** Imports the envelope (or bare session) in a file, as import takes it; a relative path is resolved here. */
  importFile(file) {
    return this._call('importFile', { path: path.resolve(need(file, 'path')) });
  }

  /** Imports an envelope: an object, or its JSON text (a string, or bytes in a Buffer or Uint8Array). */
  import(envelope) {
    let req;
    if (envelope instanceof Uint8Array) envelope = Buffer.from(envelope.buffer, envelope.byteOffset, envelope.byteLength).toString('utf8');
    if (typeof envelope === 'string') req = `{"envelope":${envelope}}`;
    else req = JSON.stringify({ envelope });
    return invoke(this, 'import', req);
  }

  /**
   * Reads and checks every record of every log the store keeps (and the
   * workspace manifests): what it checked, each damaged or unreadable file
   * (problems; ok when none) and the files quarantine holds. With
   * { secrets: true }, also scans every session's content for
   * credential-shaped strings and lists where each is (secrets), redacted;
   * nothing is changed.
   */
  verify(options) {
    return this._call('verify', options && options.secrets ? { secrets: true } : undefined);
  }

  /**
   * Salvages the damaged log of a session (repair('s1', { apply: true })) or
   * of a workflow (repair({ workflowId: 'wf', apply: true })): keeps what
   * can be proven intact and says what it cannot keep (lost). Without
   * apply it writes nothing; with it, the original bytes are kept in the
   * file the answer's quarantine names.
   */
  repair(target, options = {}) {
    if (target !== null && typeof target === 'object') {
      options = target;
      target = undefined;
    }
    let { sessionId, workflowId, apply } = only(options, REPAIR_OPTIONS, 'repair');
    if (target !== undefined && target !== null) {
      if (sessionId !== undefined) throw new TypeError('repair: the session id is given twice');
      sessionId = target;
    }
    const p = {};
    if (sessionId !== undefined && sessionId !== null) p.session_id = need(sessionId, 'sessionId');
    if (workflowId !== undefined && workflowId !== null) p.workflow_id = need(workflowId, 'workflowId');
    if (apply) p.apply = true;
    return this._call('repair', p);
  }

  /**
   * What changed in the workspace after the clock `since` (none: every
   * tracked path, with fresh_instance true). Pass the answer's clock next
   * time.
   */
  changes({ since } = {}) {
    const p = {};
    if (since) p.since = since;
    return this._call('changes', p);
  }

  /** HANDOFF.md rendered from the session's latest generation, and what it lacks. */
  handoff(sessionId) {
    return this._call('handoff', { session_id: need(sessionId, 'sessionId') });
  }

  /**
   * Runs the health check of every process the session records, now, and
   * reports each preview with its process's state. Starts nothing.
   */
  runtimeCheck(sessionId, { timeoutMs } = {}) {
    const p = { session_id: need(sessionId, 'sessionId') };
    if (timeoutMs !== undefined) p.timeout_ms = timeoutMs;
    return this._call('runtime.check', p);
  }

  /**
   * Brings one recorded process back unless its health check passes: in
   * daemon mode the daemon starts it (with its environment), in embedded
   * mode this process does. A failure to come up is the result's outcome
   * "failed", not a rejection.
   */
  runtimeRestart(sessionId, name, { timeoutMs } = {}) {
    const p = { session_id: need(sessionId, 'sessionId'), name: need(name, 'name') };
    if (timeoutMs !== undefined) p.timeout_ms = timeoutMs;
    return this._call('runtime.restart', p);
  }

  /**
   * Subscribes to events (all, or those named in `events`). Resolves once
   * the subscription exists, so events committed after that are delivered.
   */
  async subscribe({ events } = {}) {
    const p = {};
    if (events && events.length) p.events = events;
    const r = await this._call('subscribe', p);
    return new Subscription(this, r.subscription);
  }

  /**
   * Closes the handle. Embedded mode releases the workspace store; daemon
   * mode closes the connection (the daemon keeps running). Pending calls
   * fail, waiting subscriptions end.
   */
  async close() {
    if (this._closed) return;
    this._closed = true;
    if (this._wire !== null) this._wire.close();
    const n = native;
    const errp = [null];
    const rc = await new Promise((resolve, reject) =>
      n.close.async(this._handle, errp, (err, res) => (err ? reject(err) : resolve(res)))
    );
    if (rc !== 0) throw takeError(n, errp[0], rc);
  }
}

function stepSpec(s) {
  const stepId = s.stepId !== undefined ? s.stepId : s.step_id;
  need(stepId, 'stepId');
  if (typeof s.identity !== 'string') throw new TypeError(`step ${stepId}: identity must be a string`);
  return { step_id: stepId, identity: s.identity };
}

/** A live event subscription: an async iterator of {event, data}. */
class Subscription {
  constructor(client, id) {
    this.client = client;
    this.id = id;
    /** Events the library dropped because this subscriber fell behind. */
    this.dropped = 0;
    this.closed = false;
    this.pollMs = 30000;
  }

  /**
   * Waits up to timeoutMs (default 30 s) for the next event. Resolves to
   * the event, or null on timeout; `closed` becomes true when the
   * subscription ended (then null as well).
   */
  async nextEvent({ timeoutMs = 30000 } = {}) {
    if (this.closed) return null;
    let r;
    try {
      r = await this.client._call('nextEvent', { subscription: this.id, timeout_ms: Math.max(1, timeoutMs | 0) });
    } catch (err) {
      // The client was closed before the call reached the library: the
      // subscription is over, as when it is closed while the call waits.
      if (err instanceof CairnError && err.code === 'bad_handle') {
        this.closed = true;
        return null;
      }
      throw err;
    }
    this.dropped = r.dropped || 0;
    if (r.closed) {
      this.closed = true;
      return null;
    }
    return r.event || null;
  }

  async next() {
    for (;;) {
      if (this.closed) return { value: undefined, done: true };
      const ev = await this.nextEvent({ timeoutMs: this.pollMs });
      if (ev) return { value: ev, done: false };
    }
  }

  /** Ends the subscription (breaking out of for-await calls this). */
  async return() {
    await this.close();
    return { value: undefined, done: true };
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.client._call('unsubscribe', { subscription: this.id });
    } catch (err) {
      // Already gone (closed client, or ended by the library): nothing to undo.
      if (!(err instanceof CairnError) || !['not_found', 'bad_handle'].includes(err.code)) throw err;
    }
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/**
 * Opens a client. Daemon mode (the default) talks to the workspace's
 * cairnd, starting it when none runs; `embedded: true` runs the engine in
 * this process and takes the workspace's store lock. `callTimeoutMs`
 * (daemon mode) bounds how long each call waits for the daemon, its
 * request's sending included: past it the call rejects with
 * UnavailableError ("no answer to <method> from cairnd within ...") and
 * its outcome is unknown. 0 to 86400000; default 5 minutes, libcairn's
 * (long enough that only a stopped or stuck daemon reaches it); 0: no
 * bound. It never bounds verify, repair, export, exportFile, import,
 * importFile, fork, runtimeCheck and runtimeRestart, whose work grows with
 * the store or that have a timeout of their own.
 */
async function connect(options = {}) {
  const n = load();
  const o = {};
  const { workspace, embedded, daemon, autoStart, daemonArgs, store, callTimeoutMs } = options;
  for (const k of Object.keys(options)) {
    if (!CONNECT_OPTIONS.includes(k)) {
      throw makeError('invalid_argument', `connect: unknown option ${JSON.stringify(k)}`);
    }
  }
  if (workspace !== undefined) o.workspace = workspace;
  if (embedded !== undefined) o.embedded = !!embedded;
  if (daemon !== undefined) o.daemon = daemon;
  if (autoStart !== undefined) o.auto_start = !!autoStart;
  if (daemonArgs !== undefined) o.daemon_args = daemonArgs;
  if (store !== undefined) o.store = store;
  if (callTimeoutMs !== undefined) {
    if (typeof callTimeoutMs !== 'number' || !Number.isFinite(callTimeoutMs)) {
      throw makeError('invalid_argument', `connect: callTimeoutMs must be a finite number of milliseconds, not ${describe(callTimeoutMs)}`);
    }
    // Whole milliseconds, rounded away from zero: a fraction of a
    // millisecond stays a bound (0 would mean none), and a negative value
    // stays negative for libcairn, which checks the range and names it.
    o.call_timeout_ms = callTimeoutMs < 0 ? Math.floor(callTimeoutMs) : Math.ceil(callTimeoutMs);
  }
  // The environment as it is when the client is made decides its path;
  // a relative workspace is resolved now, as libcairn resolves it.
  const useWire = !embedded && wire.enabled();
  const wireWorkspace = typeof workspace === 'string' && workspace !== '' ? path.resolve(workspace) : null;
  // The completion pipe every call of every client answers on (once per
  // process), before the handle opens, so that a failure leaks no handle.
  ensurePipe(n);
  const h = [0];
  const errp = [null];
  const rc = await new Promise((resolve, reject) =>
    n.open.async(JSON.stringify(o), h, errp, (err, res) => (err ? reject(err) : resolve(res)))
  );
  if (rc !== 0) throw takeError(n, errp[0], rc);
  const c = new Client(h[0], options);
  if (useWire) c._wire = newWire(c, wireWorkspace, o.call_timeout_ms);
  return c;
}

/** v as an error message shows a bad option value. */
function describe(v) {
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'bigint':
      return `${v}n`;
    case 'function':
      return 'a function';
    case 'object':
      return v === null ? 'null' : Array.isArray(v) ? 'an array' : 'an object';
    default:
      return String(v);
  }
}

/**
 * The native checkpoint path of daemon-mode client c (checkpoint-wire.js),
 * dialing the daemon of workspace: the absolute path given, or, when
 * connect found the workspace (null), the one libcairn reports (asked
 * once, when first needed). callTimeoutMs: the bound libcairn was given
 * (undefined: none given, libcairn's default; 0: no bound).
 */
function newWire(c, workspace, callTimeoutMs) {
  let ws = workspace;
  return new wire.Wire({
    callTimeoutMs,
    workspace: async () => {
      if (ws === null && !c._closed) ws = (await c.status()).workspace || null;
      return ws;
    },
    // As takeError makes a daemon's error that libcairn passes on: the
    // code's class and C return code (an unknown code: CairnError, -1).
    errorFor: (code, message) => makeError(code, message, rcByCode.has(code) ? rcByCode.get(code) : -1),
    lost: (message) => makeError('unavailable', message, rcByCode.get('unavailable')),
  });
}

/** The library's version, e.g. "0.1.0". */
function version() {
  return load().version();
}

/** The path of the libcairn this process loaded (loading it if needed). */
function libraryPath() {
  return load().path;
}

/** How many handles are open in this process (for leak checks). */
function openHandles() {
  return load().openHandles();
}

module.exports = {
  connect,
  version,
  libraryPath,
  openHandles,
  Client,
  Subscription,
  AgentRun: runHelper.AgentRun,
  CairnError,
  ...errorClasses,
  errorClassFor: (code) => classByCode.get(code) || CairnError,
  codes: CODES.map(([code]) => code),
};
