'use strict';
// The run helper: a host with its own agent loop hands each finished tool
// turn to run.turn() and cairn checkpoints it (the turn's messages, the
// turn number, the running usage and tool-call totals and an optional
// state, in one commit). Nothing is written while a turn is under way, so
// a process killed in the middle of a tool call resumes from the last
// finished turn, never from half of one. A clean exit completes the run
// (completeRun); an error or a crash leaves it running, and
// startRun(sessionId, {resume: true}) picks it up with its counters.
//
// A turn whose checkpoint fails with UnavailableError (code 'unavailable':
// a lost connection, a call timeout: the outcome is unknown) is settled by
// the next call: turn() (or complete()) first reads the run to learn
// whether that checkpoint was committed. If it was, the helper counts it;
// a turn() with the same arguments is then the host retrying it and
// resolves to its number without saving it twice, and any other turn() is
// the next one. If it was not, the turn is saved anew. So a host may retry
// a failed turn, or go on, and the run holds each turn once.

const ZERO_USAGE = Object.freeze({ input_tokens: 0, output_tokens: 0, total_tokens: 0, cost: 0 });

function addUsage(total, delta) {
  if (!delta) return total;
  const out = { ...total };
  for (const k of Object.keys(ZERO_USAGE)) {
    if (delta[k] !== undefined && delta[k] !== null) out[k] = (out[k] || 0) + delta[k];
  }
  return out;
}

function toolCallCount(toolCalls) {
  if (toolCalls === undefined || toolCalls === null) return 0;
  if (Array.isArray(toolCalls)) return toolCalls.length;
  if (Number.isInteger(toolCalls) && toolCalls >= 0) return toolCalls;
  throw new TypeError('toolCalls must be a count or an array of tool calls');
}

// JSON with object keys sorted, so that two deeply equal values (keys in
// any order) give the same text; undefined stays undefined.
function canonical(value) {
  return JSON.stringify(value, (_k, v) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const out = {};
    for (const k of Object.keys(v).sort()) out[k] = v[k];
    return out;
  });
}

// A turn's arguments as one canonical text, to tell a retry of the same
// turn (an absent argument stays absent, apart from a null one).
function turnArgs(newMessages, usage, toolCalls, state) {
  return canonical({ newMessages, usage, toolCalls, state });
}

/**
 * AgentRun is one agent run of a session, checkpointed turn by turn. Make one
 * with client.startRun() or client.withRun().
 */
class AgentRun {
  /** @internal */
  constructor(client, sessionId, init) {
    this.client = client;
    /** The session the run writes to. */
    this.sessionId = sessionId;
    /** The run's id (a resumed run gets a new one; resumedFrom names the old). */
    this.runId = init.runId;
    /** The run this one resumed, or null. */
    this.resumedFrom = init.resumedFrom || null;
    /** Whether this run picked up an interrupted one. */
    this.resumed = !!init.resumedFrom;
    /** The last finished turn (0 before the first). */
    this.turns = init.turns || 0;
    /** Usage totals over the run line, resumed runs included. */
    this.usage = { ...ZERO_USAGE, ...(init.usage || {}) };
    /** Tool calls over the run line, resumed runs included. */
    this.toolCallsCount = init.toolCallsCount || 0;
    /** The state saved with the last finished turn, if any. */
    this.state = init.state;
    /** On resume: the session's messages up to the last finished turn. */
    this.messages = init.messages || [];
    this.done = false;
    this._busy = false;
    // The last turn when its checkpoint's outcome is unknown (it failed
    // with 'unavailable'): {turn, usage, toolCallsCount, state, args}, args
    // being the arguments the host passed (turnArgs); else null.
    this._unsure = null;
  }

  /**
   * Checkpoints one finished turn: its new messages, the usage and tool
   * calls it spent (added to the totals) and, optionally, a state to
   * resume with. Resolves to the turn's number.
   *
   * When the previous turn's checkpoint failed with code 'unavailable'
   * (its outcome unknown), this first reads the run to settle it: if it
   * was committed it is counted, and a call with the same arguments (the
   * host retrying it) resolves to its number without saving it again.
   */
  async turn(newMessages = [], { usage, toolCalls, state } = {}) {
    if (this.done) throw new Error(`run ${this.runId} is finished`);
    if (this._busy) throw new Error(`run ${this.runId}: a turn is already being saved; await it first`);
    if (!Array.isArray(newMessages)) throw new TypeError('newMessages must be an array');
    const calls = toolCallCount(toolCalls);
    this._busy = true;
    try {
      const attempt = await this._settle();
      if (attempt !== null && attempt.args === turnArgs(newMessages, usage, toolCalls, state)) {
        return this.turns; // the host retrying the turn that was committed
      }
      const n = this.turns + 1;
      const nextUsage = addUsage(this.usage, usage);
      const nextCount = this.toolCallsCount + calls;
      try {
        await this.client.checkpoint(this.runId, {
          turn: n,
          newMessages,
          usage: nextUsage,
          toolCallsCount: nextCount,
          state,
          sessionId: this.sessionId,
        });
      } catch (err) {
        // Only 'unavailable' leaves the outcome unknown: any other error
        // is an answer (nothing was saved).
        if (err && err.code === 'unavailable') {
          this._unsure = {
            turn: n,
            usage: nextUsage,
            toolCallsCount: nextCount,
            state,
            args: turnArgs(newMessages, usage, toolCalls, state),
          };
        }
        throw err;
      }
      // Only a saved turn counts: a failed checkpoint leaves the totals as
      // the store has them.
      this.turns = n;
      this.usage = nextUsage;
      this.toolCallsCount = nextCount;
      if (state !== undefined) this.state = state;
      return n;
    } finally {
      this._busy = false;
    }
  }

  /**
   * Settles the turn whose checkpoint's outcome is unknown, if any: reads
   * the run and, when its checkpoint has reached that turn (it was
   * committed), counts it and returns it; null otherwise. Throws what
   * reading the run throws (the turn then stays unsettled).
   * @internal
   */
  async _settle() {
    const u = this._unsure;
    if (u === null) return null;
    const r = await this.client.run(this.runId, { sessionId: this.sessionId });
    this._unsure = null;
    const cp = (r && r.checkpoint) || {};
    if ((cp.turn || 0) < u.turn) return null;
    this.turns = u.turn;
    this.usage = u.usage;
    this.toolCallsCount = u.toolCallsCount;
    if (u.state !== undefined) this.state = u.state;
    return u;
  }

  /**
   * Ends the run (completed unless told otherwise) with its totals, after
   * settling a turn whose outcome is unknown.
   */
  async complete(status = 'completed') {
    if (this.done) return;
    if (this._busy) throw new Error(`run ${this.runId}: a turn is already being saved; await it first`);
    this._busy = true;
    try {
      await this._settle();
      await this.client.completeRun(this.runId, status, {
        usage: this.usage,
        toolCallsCount: this.toolCallsCount,
        sessionId: this.sessionId,
      });
    } finally {
      this._busy = false;
    }
    this.done = true;
  }

  /** Ends the run as failed: it can no longer be resumed. */
  fail() {
    return this.complete('failed');
  }
}

// Creates the session when it does not exist: beginRun needs one. A racing
// creator wins (expectGeneration 0); its session is as good.
async function ensureSession(client, sessionId) {
  try {
    await client.summary(sessionId);
    return;
  } catch (err) {
    if (err.code !== 'not_found') throw err;
  }
  try {
    await client.save(sessionId, { snapshot: { messages: [] }, expectGeneration: 0 });
  } catch (err) {
    if (err.code !== 'conflict') throw err;
  }
}

/**
 * Starts a run of sessionId, or with resume: true picks up the session's
 * interrupted run (the latest, when there are several) from its last
 * finished turn, starting a new run when there is none.
 */
async function startRun(client, sessionId, { resume = false, runId } = {}) {
  if (typeof sessionId !== 'string' || sessionId === '') throw new TypeError('sessionId must be a non-empty string');
  if (resume) {
    let interrupted = [];
    try {
      const r = await client.resumeSession(sessionId, {
        messagesTail: 0,
        artifacts: 'none',
        traces: 'none',
        drift: false,
        processes: false,
      });
      interrupted = r.interrupted_runs || [];
    } catch (err) {
      if (err.code !== 'not_found') throw err;
    }
    if (interrupted.length > 0) {
      const last = interrupted[interrupted.length - 1];
      const r = await client.resumeRun(last.run_id, { sessionId, newRunId: runId });
      return new AgentRun(client, sessionId, {
        runId: r.run_id,
        resumedFrom: r.resumed_from,
        turns: r.turn,
        usage: r.usage,
        toolCallsCount: r.tool_calls_count,
        state: r.state,
        messages: r.messages,
      });
    }
  }
  await ensureSession(client, sessionId);
  const r = await client.beginRun(sessionId, { runId });
  return new AgentRun(client, sessionId, { runId: r.run_id });
}

/**
 * Runs fn(run) and completes the run when fn returns; when fn throws the
 * run is left as a crash leaves it, to be resumed.
 */
async function withRun(client, sessionId, options, fn) {
  if (typeof options === 'function') {
    fn = options;
    options = {};
  }
  const run = await startRun(client, sessionId, options);
  const out = await fn(run);
  await run.complete();
  return out;
}

module.exports = { AgentRun, startRun, withRun };
