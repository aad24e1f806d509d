'use strict';
// The run helper: a host with its own agent loop hands each finished tool
// turn to run.turn() and cairn checkpoints it (the turn's messages, the
// turn number, the running usage and tool-call totals and an optional
// state, in one commit). Nothing is written while a turn is under way, so
// a process killed in the middle of a tool call resumes from the last
// finished turn, never from half of one. A clean exit completes the run
// (completeRun); an error or a crash leaves it running, and
// startRun(sessionId, {resume: true}) picks it up with its counters.

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
  }

  /**
   * Checkpoints one finished turn: its new messages, the usage and tool
   * calls it spent (added to the totals) and, optionally, a state to
   * resume with. Resolves to the turn's number.
   */
  async turn(newMessages = [], { usage, toolCalls, state } = {}) {
    if (this.done) throw new Error(`run ${this.runId} is finished`);
    if (this._busy) throw new Error(`run ${this.runId}: a turn is already being saved; await it first`);
    if (!Array.isArray(newMessages)) throw new TypeError('newMessages must be an array');
    const n = this.turns + 1;
    const nextUsage = addUsage(this.usage, usage);
    const nextCount = this.toolCallsCount + toolCallCount(toolCalls);
    this._busy = true;
    try {
      await this.client.checkpoint(this.runId, {
        turn: n,
        newMessages,
        usage: nextUsage,
        toolCallsCount: nextCount,
        state,
        sessionId: this.sessionId,
      });
    } finally {
      this._busy = false;
    }
    // Only a saved turn counts: a failed checkpoint leaves the totals as
    // the store has them.
    this.turns = n;
    this.usage = nextUsage;
    this.toolCallsCount = nextCount;
    if (state !== undefined) this.state = state;
    return n;
  }

  /** Ends the run (completed unless told otherwise) with its totals. */
  async complete(status = 'completed') {
    if (this.done) return;
    await this.client.completeRun(this.runId, status, {
      usage: this.usage,
      toolCallsCount: this.toolCallsCount,
      sessionId: this.sessionId,
    });
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
